"""The ``pytest-gemm`` command: look at baselines, compare a saved run with them, record or prune them,
draw a saved run, merge saved runs.

No GPU is needed for any of it: runs are read from pytest-benchmark JSON files (``--benchmark-json``
or ``--benchmark-save``) written by a timed run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import __version__
from .baselines.store import (
    BaselineAccessError,
    BaselineError,
    BaselineFile,
    baseline_path,
    baseline_paths,
    gpu_slug,
    load,
    merge,
)
from .baselines.update import KernelCases, record, root_problem, write
from .judge.gate import judge
from .options import add_cli_arguments
from .records.case_record import METRICS, CaseRecord, GateResult
from .records.verdicts import GateVerdict, Sanity
from .report.regression import aligned, interval_cell
from .report.run_data import RunData, RunFileError, read_run, run_json
from .report.tables import format_time
from .specs.spec import KernelFileError

__all__ = ["main"]


class CliError(Exception):
    """A problem with the command's input; printed and exit status 2."""


def _run(path: Path) -> RunData:
    """A saved run (:func:`read_run`), its problems as the command's errors."""
    try:
        return read_run(path)
    except RunFileError as exc:
        raise CliError(str(exc)) from None


def _timed_run(path: Path) -> tuple[RunData, str]:
    """A saved run with timed cases, and the GPU they were timed on."""
    data = _run(path)
    if not data.records:
        raise CliError(f"{path}: holds no pytest-gemm cases (was it written by a timed pytest --gemm-kernels run?)")
    if not data.gpu.get("name") and not any(r.gpu for r in data.records):
        raise CliError(f"{path}: does not say which GPU it was measured on")
    return data, data.gpu_name


# -- show ----------------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.files] or baseline_paths(Path(args.baselines))
    if not paths:
        raise CliError(f"no baseline files in {args.baselines}/")
    for path in paths:
        baseline = load(path)
        if baseline is None:
            raise CliError(f"{path}: no such file")
        print(f"{path}: {baseline.gpu}, {len(baseline.entries)} entries")
        rows = [["case", "ratio to cuBLAS [95%]", "median time", "TFLOP/s", "n", "recorded"]]
        for key, e in sorted(baseline.entries.items()):
            rows.append(
                [
                    key,
                    interval_cell("ratio", e["ratio"], e["ratio_ci"]),
                    format_time(e["median_s"]),
                    f"{e['tflops']:.2f}",
                    str(e["samples"]),
                    str((e.get("recorded") or {}).get("date", "")),
                ]
            )
        print("\n".join(aligned(rows, {2, 3, 4})))
    return 0


def _by_gpu(data: RunData) -> dict[str, list[CaseRecord]]:
    """The run's timed cases by the GPU model they were timed on."""
    groups: dict[str, list[CaseRecord]] = {}
    for rec in data.records:
        groups.setdefault(rec.gpu or data.gpu_name, []).append(rec)
    return dict(sorted(groups.items()))


# -- compare -------------------------------------------------------------------------------------
def _gate(
    run: str,
    gpu: str,
    records: list[CaseRecord],
    path: Path,
    baseline: BaselineFile | None,
    metric: str,
    threshold: float,
) -> tuple[dict[str, GateResult], Counter[GateVerdict]]:
    """Judge ``records`` against ``baseline`` (None: no file, every case new) and print the asv-style table."""
    value, interval, label = METRICS[metric]
    missing = ", no such file: every case is new" if baseline is None else ""
    print(f"{run} against {path} ({gpu}{missing}); {label}, threshold {100 * threshold:g}% (or the kernel's own)")
    table = [["", "before", "after", "change", "case"]]
    counts: Counter[GateVerdict] = Counter()
    results = {}
    for row in sorted(records, key=lambda r: r.test):
        entry = baseline.get(row.test) if baseline is not None else None
        result = judge(row, entry, metric=metric, threshold=threshold)
        results[row.test] = dataclasses.replace(result, baseline_file=str(path), baseline_file_missing=baseline is None)
        counts[result.verdict] += 1
        table.append(
            [
                result.verdict.mark,
                interval_cell(metric, entry[value], entry[interval]) if entry else "-",
                interval_cell(metric, getattr(row, value), getattr(row, interval)),
                f"{100 * result.change:+.1f}%" if result.change is not None else "",
                row.test + ("  (source changed)" if any("source" in n for n in result.notes) else ""),
            ]
        )
    print("\n".join(aligned(table, {1, 2, 3})))
    print("marks: " + ", ".join(f"{v.mark} {v}" for v in GateVerdict if v.mark.strip()) + ", blank: same")
    print(", ".join(f"{counts.get(v, 0)} {v}" for v in GateVerdict))
    return results, counts


def cmd_compare(args: argparse.Namespace) -> int:
    run = Path(args.run)
    data, _ = _timed_run(run)
    groups = _by_gpu(data)
    if args.baseline and len(groups) > 1:
        raise CliError(f"{run}: holds cases of {len(groups)} GPU models ({', '.join(groups)}); name no baseline file")
    regressed = 0
    for name, records in groups.items():
        path = Path(args.baseline) if args.baseline else baseline_path(Path(args.baselines), name)
        baseline = load(path, gpu=name)
        if baseline is None:
            raise CliError(f"{path}: no such baseline file for {name}")
        _, counts = _gate(str(run), name, records, path, baseline, args.gate_metric, args.threshold)
        regressed += counts[GateVerdict.REGRESSED]
    return 1 if regressed else 0


# -- update --------------------------------------------------------------------------------------
def _record(data: RunData, run: str, folder: Path, whole_files: Mapping[str, bool] | None, root: Path) -> None:
    """Record the run's good timed cases as each GPU model's baselines; with ``whole_files``, also remove
    the entries of gone cases of those kernel files (found under ``root``)."""
    for name, records in _by_gpu(data).items():
        good = [r for r in records if r.verdict == Sanity.OK]
        path = baseline_path(folder, name)
        try:
            changes, notes = record(path, name, good, data.facts(name), __version__, whole_files=whole_files, root=root)
        except BaselineAccessError as exc:
            raise CliError(
                f"{exc}; nothing changed; the run stays in {run}: run this again once that is fixed"
            ) from None
        never = "; entries are never removed here" if whole_files is None else ""
        print(f"{path}: {changes.summary() if changes else 'unchanged'} (from {run}{never})")
        for kind, keys in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
            for key in keys:
                print(f"  {kind}: {key}")
        for note in notes:
            print(f"  note: {note}")


def cmd_update(args: argparse.Namespace) -> int:
    data, _ = _timed_run(Path(args.source))
    _record(data, args.source, Path(args.baselines), None, Path("."))
    return 0


# -- prune ---------------------------------------------------------------------------------------
def cmd_prune(args: argparse.Namespace) -> int:
    root, folder = Path(args.root), Path(args.baselines)
    paths = baseline_paths(folder)
    if not paths:
        raise CliError(f"no baseline files in {folder}/ (looked in {folder.resolve()}{', a file' * folder.is_file()})")
    baselines = [b for b in map(load, paths) if b is not None]
    refused = [f"{b.path}: {problem}" for b in baselines if (problem := root_problem(b, root))]
    if refused:
        raise CliError("\n".join(refused))
    cases = KernelCases(root)
    for baseline in baselines:
        total, gone, unreadable = len(baseline.entries), [], {}
        for key, entry in sorted(baseline.entries.items()):
            try:
                why = cases.gone_reason(key, entry)
            except KernelFileError as exc:
                unreadable.setdefault(entry["file"], [exc, 0])[1] += 1
                continue
            if why:
                gone.append((key, why))
        for file, (exc, count) in sorted(unreadable.items()):
            print(f"  kept {count} entries of {file}: cannot read it ({exc}); fix it, then prune again")
        for key, why in gone:
            print(f"  {'would remove' if args.dry_run else 'removed'} {key}: {why}")
        if gone and not args.dry_run:
            merge(baseline, {}, [key for key, _ in gone])
            try:
                write(baseline)
            except BaselineAccessError as exc:
                raise CliError(f"{exc}; nothing removed from it") from None
        print(f"{baseline.path}: {len(gone)} of {total} entries stale")
    return 0


# -- plot ----------------------------------------------------------------------------------------
def cmd_plot(args: argparse.Namespace) -> int:
    from .report.folder import write_report
    from .report.pictures import one_shape

    data = _run(Path(args.run))
    shape = None
    if args.size:
        try:
            shape = one_shape(args.size)
        except ValueError as exc:
            raise CliError(f"--size: {exc}") from None
        if shape not in {r.shape for r in data.records}:
            shapes = ", ".join(sorted({r.shape for r in data.records}))
            raise CliError(f"--size: the run has no timed case of shape {shape} (it has {shapes or 'none'})")
    source = ""
    if data.records and not any(r.gate for r in data.records):  # a run saved without verdicts: judge it now
        path = baseline_path(Path(args.baselines), data.gpu_name)
        baseline = load(path, gpu=data.gpu_name)
        if baseline is not None:
            data.records = [
                r.with_gate(judge(r, baseline.get(r.test), metric=args.gate_metric, threshold=args.threshold))
                for r in data.records
            ]
            source = f"gate verdicts computed by pytest-gemm plot against {path}"
            data.notes.append(source)
    report = write_report(data, Path(args.out), shape, source)
    print(f"{report.folder / 'index.html'}: {len(report.charts)} chart(s), {len(report.heatmaps)} error map(s)")
    for path in report.files:
        print(f"  {path}")
    return 0


# -- merge ---------------------------------------------------------------------------------------
def _write(path: Path, text: str, *, step_summary: bool = False) -> None:
    """Write a file (and append it to $GITHUB_STEP_SUMMARY when asked and set); a failure is the command's error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if step_summary and os.environ.get("GITHUB_STEP_SUMMARY"):
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as handle:
                handle.write(text)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc}") from None


def cmd_merge(args: argparse.Namespace) -> int:
    from .report import merge as m
    from .report.markdown import markdown

    runs, command = [(name, _run(Path(name))) for name in args.runs], " ".join(["pytest-gemm merge", *args.runs])
    try:
        merged = m.merge_runs(runs, allow_mismatch=args.allow_mismatch, command=command)
    except m.MergeError as exc:
        raise CliError(str(exc)) from None
    for warning in merged.warnings:
        print(f"pytest-gemm: warning: {warning}", file=sys.stderr)
    data, out, folder = merged.data, Path(args.out), Path(args.baselines)
    twice = f"; {merged.duplicates} given twice alike, kept once" if merged.duplicates else ""
    print(f"{out}: {len(runs)} run(s) merged: {len(data.tests)} tests, {len(data.records)} timed cases{twice}")
    source = ""
    if args.update_baselines:
        root = Path(args.root)
        whole = {file: True for file in m.prunable_files(data) if (root / file).is_file()}
        for file in sorted(set(m.prunable_files(data)) - set(whole)):
            print(f"  note: {file} is not under {root.resolve()}: entries of its gone cases are kept (--root DIR)")
        m.regate(data, {r.test: None for r in data.records})
        _write(out, json.dumps(run_json(data), indent=1) + "\n")  # first: it keeps the run if baselines cannot
        _record(data, str(out), folder, whole, root)
    else:
        metric = args.gate_metric or data.settings.get("gate-metric") or "ratio"
        threshold = args.threshold if args.threshold is not None else data.settings.get("threshold", 0.05)
        gates: dict[str, GateResult | None] = {}
        for name, records in _by_gpu(data).items():
            path = baseline_path(folder, name)
            gates.update(_gate(str(out), name, records, path, load(path, gpu=name), metric, threshold)[0])
        m.regate(data, gates)
        source = f"gate verdicts computed by pytest-gemm merge against {folder}/"
        _write(out, json.dumps(run_json(data), indent=1) + "\n")
    if args.summary:
        _write(Path(args.summary), "## pytest-gemm\n\n" + markdown(m.summary_lines(data)), step_summary=True)
        print(f"pytest-gemm summary: {args.summary}")
    if args.report:
        from .report.folder import write_report

        parts = m.by_gpu(data)
        for name, part in parts.items():
            try:
                report = write_report(part, Path(args.report) / (gpu_slug(name) * (len(parts) > 1)), None, source)
            except (ImportError, OSError) as exc:
                raise CliError(f"cannot write the report in {args.report}: {exc}") from None
            print(f"{report.folder / 'index.html'}: {len(report.charts)} chart(s), {len(report.heatmaps)} error map(s)")
    for line in m.plan_lines(runs, data, args.target_wall):
        print(line)
    failed = m.failed_tests(data)
    if failed:
        print(f"{len(failed)} test(s) failed: {', '.join(failed[:10])}{' ...' * (len(failed) > 10)}")
    return 1 if failed else 0


def _merge_parser(sub: argparse._SubParsersAction) -> None:
    merge = sub.add_parser(
        "merge",
        help="combine saved runs (the shards of one suite, or several machines) into one saved run; gate it per GPU "
        "model, or record it as baselines (docs/scaling.md)",
    )
    add_cli_arguments(merge)  # its own copies: --threshold and --gate-metric default to the runs' own here
    merge.set_defaults(func=cmd_merge, threshold=None, gate_metric=None)
    merge.add_argument("runs", nargs="+", metavar="RUN.json", help="saved runs (--benchmark-json, a report's run.json)")
    merge.add_argument("--out", required=True, metavar="MERGED.json", help="the merged run to write")
    merge.add_argument("--summary", metavar="PATH", help="write the markdown summary (also to $GITHUB_STEP_SUMMARY)")
    merge.add_argument("--report", metavar="DIR", help="draw the pictures and index.html (one folder per GPU model)")
    for flag, text in (
        ("--update-baselines", "record the merged cases as each GPU model's baselines instead of gating them"),
        ("--allow-mismatch", "merge runs of different pytest-gemm versions, settings or kernel sources (warns)"),
    ):
        merge.add_argument(flag, action="store_true", help=text)
    merge.add_argument("--root", default=".", help="where the kernel files are, to prune gone cases (default: .)")
    merge.add_argument("--target-wall", type=float, default=600.0, metavar="S", help="plan: seconds per shard (600)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-gemm", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pytest-gemm {__version__}")
    shared = argparse.ArgumentParser(add_help=False)  # the options the plugin has too, with its defaults
    add_cli_arguments(shared)
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", parents=[shared], help="print baseline files as tables")
    show.add_argument("files", nargs="*", help="baseline files (default: every file in the baseline folder)")
    show.set_defaults(func=cmd_show)
    compare = sub.add_parser(
        "compare", parents=[shared], help="compare a saved run with its GPU's baselines; exit 1 on a regression"
    )
    compare.add_argument("run", help="a pytest-benchmark JSON file of a timed run")
    compare.add_argument("baseline", nargs="?", help="the baseline file (default: the one for the run's GPU)")
    compare.set_defaults(func=cmd_compare)
    update = sub.add_parser(
        "update", parents=[shared], help="record a saved run as its GPU's baselines (no GPU needed)"
    )
    update.add_argument("--from", dest="source", required=True, help="a pytest-benchmark JSON file of a timed run")
    update.set_defaults(func=cmd_update)
    prune = sub.add_parser("prune", parents=[shared], help="remove entries whose kernel file or case no longer exists")
    prune.add_argument("--root", default=".", help="the directory kernel paths are relative to (default: .)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    prune.set_defaults(func=cmd_prune)
    plot = sub.add_parser(
        "plot", parents=[shared], help="draw a saved run's pictures and index.html (no GPU needed; see docs/reports.md)"
    )
    plot.add_argument("run", help="a pytest-benchmark JSON file of a pytest-gemm run, or a report's run.json")
    plot.add_argument("--out", required=True, help="the report folder to write")
    plot.add_argument(
        "--size", help="the shape of the %% of cuBLAS chart, e.g. 4096 or 384x640x512 (default: the largest)"
    )
    plot.set_defaults(func=cmd_plot)
    _merge_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()
        return status
    except (CliError, BaselineError) as exc:
        print(f"pytest-gemm: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`pytest-gemm show | head -1`): stop quietly, as on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
