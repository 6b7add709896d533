"""The ``pytest-gemm`` command: look at baselines, compare a saved run with them, record or prune them.

No GPU is needed for any of it: runs are read from pytest-benchmark JSON files (``--benchmark-json``
or ``--benchmark-save``) written by a timed run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .baselines.store import BaselineAccessError, BaselineError, BaselineFile, baseline_paths, gpu_slug, load, merge
from .baselines.update import gone_reason, record, root_problem, write
from .judge.gate import judge
from .options import add_cli_arguments
from .records.case_record import METRICS, CaseRecord
from .records.plain import PlainError
from .records.verdicts import GateVerdict, Sanity
from .report.tables import format_time
from .specs.spec import KernelFileError

__all__ = ["main"]


class CliError(Exception):
    """A problem with the command's input; printed and exit status 2."""


def _run_rows(path: Path) -> tuple[dict[str, Any], list[CaseRecord]]:
    """The GPU facts and the case records of a saved pytest-benchmark JSON run."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        benchmarks = data["benchmarks"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{path}: not a pytest-benchmark JSON file ({exc})") from None
    rows = []
    for bench in benchmarks:
        gemm = (bench.get("extra_info") or {}).get("gemm") if isinstance(bench, dict) else None
        if isinstance(gemm, dict):
            try:
                rows.append(CaseRecord.from_dict(gemm))
            except PlainError as exc:
                raise CliError(f"{path}: benchmark {bench.get('name')!r} is not a pytest-gemm case ({exc})") from None
    if not rows:
        raise CliError(f"{path}: holds no pytest-gemm cases (was it written by a timed pytest --gemm-kernels run?)")
    return data.get("machine_info", {}).get("gpu") or {}, rows


def _gpu_name(gpu: dict[str, Any], rows: list[CaseRecord], path: Path) -> str:
    name = gpu.get("name") or next((r.gpu for r in rows if r.gpu), None)
    if not name:
        raise CliError(f"{path}: does not say which GPU it was measured on")
    return name


def _load(path: Path, gpu: str | None = None) -> BaselineFile | None:
    try:
        return load(path, gpu=gpu)
    except BaselineError as exc:
        raise CliError(str(exc)) from None


def _interval(kind: str, value: float, interval: Any) -> str:
    if kind == "time":
        return f"{format_time(value)} [{format_time(interval[0])}, {format_time(interval[1])}]"
    return f"{value:.4g} [{interval[0]:.4g}, {interval[1]:.4g}]"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


# -- show ----------------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.files] or baseline_paths(Path(args.baselines))
    if not paths:
        raise CliError(f"no baseline files in {args.baselines}/")
    for path in paths:
        baseline = _load(path)
        if baseline is None:
            raise CliError(f"{path}: no such file")
        print(f"{path}: {baseline.gpu}, {len(baseline.entries)} entries")
        rows = [["case", "ratio to cuBLAS [95%]", "median time", "TFLOP/s", "n", "recorded"]]
        for key, e in sorted(baseline.entries.items()):
            rows.append(
                [
                    key,
                    _interval("ratio", e["ratio"], e["ratio_ci"]),
                    format_time(e["median_s"]),
                    f"{e['tflops']:.2f}",
                    str(e["samples"]),
                    str((e.get("recorded") or {}).get("date", "")),
                ]
            )
        print("\n".join(_table(rows, {2, 3, 4})))
    return 0


# -- compare -------------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    run = Path(args.run)
    gpu, rows = _run_rows(run)
    name = _gpu_name(gpu, rows, run)
    path = Path(args.baseline) if args.baseline else Path(args.baselines) / f"{gpu_slug(name)}.json"
    baseline = _load(path, gpu=name)
    if baseline is None:
        raise CliError(f"{path}: no such baseline file for {name}")
    metric = args.gate_metric
    label = METRICS[metric][2]
    print(f"{run} against {path} ({name}); {label}, threshold {100 * args.threshold:g}% (or the kernel's own)")
    value, interval, _ = METRICS[metric]
    table = [["", "before", "after", "change", "case"]]
    counts: dict[GateVerdict, int] = {}
    for row in sorted(rows, key=lambda r: r.test):
        entry = baseline.get(row.test)
        result = judge(row, entry, metric=metric, threshold=row.regression_threshold or args.threshold)
        counts[result.verdict] = counts.get(result.verdict, 0) + 1
        table.append(
            [
                result.verdict.mark,
                _interval(metric, entry[value], entry[interval]) if entry else "-",
                _interval(metric, getattr(row, value), getattr(row, interval)),
                f"{100 * result.change:+.1f}%" if result.change is not None else "",
                row.test + ("  (source changed)" if any("source" in n for n in result.notes) else ""),
            ]
        )
    print("\n".join(_table(table, {1, 2, 3})))
    print("marks: " + ", ".join(f"{v.mark} {v}" for v in GateVerdict if v.mark.strip()) + ", blank: same")
    print(", ".join(f"{counts.get(v, 0)} {v}" for v in GateVerdict))
    return 1 if counts.get(GateVerdict.REGRESSED) else 0


# -- update --------------------------------------------------------------------------------------
def cmd_update(args: argparse.Namespace) -> int:
    run = Path(args.source)
    gpu, rows = _run_rows(run)
    name = _gpu_name(gpu, rows, run)
    good = [r for r in rows if r.verdict == Sanity.OK]
    path = Path(args.baselines) / f"{gpu_slug(name)}.json"
    try:
        changes, notes = record(path, name, good, gpu, __version__)
    except BaselineAccessError as exc:
        raise CliError(f"{exc}; nothing changed; the run stays in {run}: run this again once that is fixed") from None
    except BaselineError as exc:
        raise CliError(str(exc)) from None
    print(f"{path}: {changes.summary() if changes else 'unchanged'} (from {run}; entries are never removed here)")
    for kind, keys in (("added", changes.added), ("changed", changes.changed)):
        for key in keys:
            print(f"  {kind}: {key}")
    for note in notes:
        print(f"  note: {note}")
    return 0


# -- prune ---------------------------------------------------------------------------------------
def cmd_prune(args: argparse.Namespace) -> int:
    root, folder = Path(args.root), Path(args.baselines)
    paths = baseline_paths(folder)
    if not paths:
        raise CliError(f"no baseline files in {folder}/ (looked in {folder.resolve()}{', a file' * folder.is_file()})")
    baselines = [b for b in map(_load, paths) if b is not None]
    refused = [f"{b.path}: {problem}" for b in baselines if (problem := root_problem(b, root))]
    if refused:
        raise CliError("\n".join(refused))
    for baseline in baselines:
        total, gone, unreadable = len(baseline.entries), [], {}
        for key, entry in sorted(baseline.entries.items()):
            try:
                why = gone_reason(key, entry, root)
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
def _threshold(record: CaseRecord, args: argparse.Namespace) -> float:
    return record.regression_threshold or args.threshold


def cmd_plot(args: argparse.Namespace) -> int:
    from .report.folder import write_report
    from .report.pictures import one_shape
    from .report.run_data import RunFileError, read_run

    try:
        data = read_run(Path(args.run))
    except RunFileError as exc:
        raise CliError(str(exc)) from None
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
        path = Path(args.baselines) / f"{gpu_slug(data.gpu_name)}.json"
        baseline = _load(path, gpu=data.gpu_name)
        if baseline is not None:
            data.records = [
                r.with_gate(judge(r, baseline.get(r.test), metric=args.gate_metric, threshold=_threshold(r, args)))
                for r in data.records
            ]
            source = f"gate verdicts computed by pytest-gemm plot against {path}"
            data.notes.append(source)
    report = write_report(data, Path(args.out), shape, source)
    print(f"{report.folder / 'index.html'}: {len(report.charts)} chart(s), {len(report.heatmaps)} error map(s)")
    for path in report.files:
        print(f"  {path}")
    return 0


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
