"""Look at baseline files, compare saved runs with them, record or prune them, and draw or merge saved runs.

The ``pytest-gemm`` command (``merge`` in ``merge.py``); the first line is its ``--help`` description. Each
subcommand takes only the options it uses. No GPU is needed for any of it: runs are read from pytest-benchmark
JSON files (``--benchmark-json`` or ``--benchmark-save``) written by a timed run, or from a report's ``run.json``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import __version__
from ..baselines.store import BaselineAccessError, BaselineError, baseline_path, baseline_paths, load
from ..baselines.update import KernelCases, remove, root_problem
from ..judge.gate import GatePolicy, gated_cases, judge
from ..records.verdicts import GateVerdict
from ..report.outputs import claim_report_folder
from ..report.regression import aligned, interval_cell
from ..report.tables import format_time
from ..specs.spec import KernelFileError
from .common import (
    FORCE_HELP,
    GATE,
    CliError,
    add_cli_arguments,
    by_gpu,
    gate_table,
    read_saved,
    record_saved_run,
    switch,
    timed_run,
)
from .merge import add_merge_parser

__all__ = ["main"]


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


# -- compare -------------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    run = Path(args.run)
    data, _ = timed_run(run)
    groups = by_gpu(data)
    if args.baseline and len(groups) > 1:
        raise CliError(f"{run}: holds cases of {len(groups)} GPU models ({', '.join(groups)}); name no baseline file")
    regressed = 0
    for name, records in groups.items():
        path = Path(args.baseline) if args.baseline else baseline_path(Path(args.baselines), name)
        baseline = load(path, gpu=name)
        if baseline is None:
            raise CliError(f"{path}: no such baseline file for {name}")
        _, counts = gate_table(str(run), name, records, path, baseline, args.gate_metric, args.threshold)
        regressed += counts[GateVerdict.REGRESSED]
    return 1 if regressed else 0


# -- update --------------------------------------------------------------------------------------
def cmd_update(args: argparse.Namespace) -> int:
    data, _ = timed_run(Path(args.source))
    record_saved_run(data, args.source, Path(args.baselines), None, Path("."), force=args.force)
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
            try:  # read again under the file's lock: what another process recorded meanwhile is kept
                remove(baseline.path, [key for key, _ in gone])
            except BaselineAccessError as exc:
                raise CliError(f"{exc}; nothing removed from it") from None
        print(f"{baseline.path}: {len(gone)} of {total} entries stale")
    return 0


# -- plot ----------------------------------------------------------------------------------------
def cmd_plot(args: argparse.Namespace) -> int:
    from ..report.folder import write_report
    from ..report.pictures import one_shape

    data = read_saved(Path(args.run))
    shape = None
    if args.size:
        try:
            shape = one_shape(args.size)
        except ValueError as exc:
            raise CliError(f"--size: {exc}") from None
        if shape not in {r.shape for r in data.records}:
            shapes = ", ".join(sorted({str(r.shape) for r in data.records}))
            raise CliError(f"--size: the run has no timed case of shape {shape} (it has {shapes or 'none'})")
    source = ""
    if data.records and not any(r.gate for r in data.records):  # a run saved without verdicts: judge it now
        path = baseline_path(Path(args.baselines), data.gpu_name)
        baseline = load(path, gpu=data.gpu_name)
        if baseline is not None:
            policy = GatePolicy.of_saved(data.settings)
            metric, threshold, cases = args.gate_metric, args.threshold, gated_cases(data.records)
            data.with_timing(
                [
                    r.with_gate(
                        judge(r, baseline.get(r.test), metric=metric, threshold=threshold, policy=policy, cases=cases)
                    )
                    for r in data.records
                ]
            )
            source = f"gate verdicts computed by pytest-gemm plot against {path}"
            data.notes.append(source)
    out = Path(args.out)
    problem = claim_report_folder(out, overwrite=args.overwrite_report, switch=switch("overwrite-report"))
    if problem:
        raise CliError(f"--out: {problem}")
    try:
        report = write_report(data, out, shape, source, source=Path(args.run), processes=os.cpu_count() or 1)
    except (ImportError, OSError) as exc:
        raise CliError(f"cannot write the report in {out}: {exc}") from None
    print(f"{report.folder / 'index.html'}: {len(report.charts)} chart(s), {len(report.heatmaps)} error map(s)")
    for path in report.files:
        print(f"  {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-gemm", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pytest-gemm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print baseline files as tables")
    add_cli_arguments(show, ["baselines"])  # the options it shares with the plugin, with the plugin's defaults
    show.add_argument("files", nargs="*", help="baseline files (default: every file in the baseline folder)")
    show.set_defaults(func=cmd_show)
    compare = sub.add_parser("compare", help="compare a saved run with its GPU's baselines; exit 1 on a regression")
    add_cli_arguments(compare, GATE)
    compare.add_argument("run", help="a pytest-benchmark JSON file of a timed run")
    compare.add_argument("baseline", nargs="?", help="the baseline file (default: the one for the run's GPU)")
    compare.set_defaults(func=cmd_compare)
    update = sub.add_parser("update", help="record a saved run as its GPU's baselines (no GPU needed)")
    add_cli_arguments(update, ["baselines"])
    update.add_argument("--from", dest="source", required=True, help="a pytest-benchmark JSON file of a timed run")
    update.add_argument("--force", action="store_true", help=FORCE_HELP)
    update.set_defaults(func=cmd_update)
    prune = sub.add_parser("prune", help="remove entries whose kernel file or case no longer exists")
    add_cli_arguments(prune, ["baselines"])
    prune.add_argument("--root", default=".", help="the directory kernel paths are relative to (default: .)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    prune.set_defaults(func=cmd_prune)
    plot = sub.add_parser(
        "plot", help="draw a saved run's pictures and index.html (no GPU needed; see docs/reports.md)"
    )
    add_cli_arguments(plot, [*GATE, "overwrite-report"])  # the gate: for a run saved without verdicts
    plot.add_argument("run", help="a pytest-benchmark JSON file of a pytest-gemm run, or a report's run.json")
    plot.add_argument(
        "--out", required=True, help="the report folder to write: a new or empty one, or one pytest-gemm wrote"
    )
    plot.add_argument(
        "--size", help="the shape of the %% of cuBLAS chart, e.g. 4096 or 384x640x512 (default: the largest)"
    )
    plot.set_defaults(func=cmd_plot)
    add_merge_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # text from a file (a date, a note) that no encoding can print is escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
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
