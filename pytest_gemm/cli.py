"""The ``pytest-gemm`` command: look at baselines, compare a saved run with them, record or prune them.

No GPU is needed for any of it: runs are read from pytest-benchmark JSON files (``--benchmark-json``
or ``--benchmark-save``) written by a timed run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .baselines.store import BaselineError, BaselineFile, baseline_paths, gpu_slug, load, merge, save
from .baselines.update import gone_reason, record
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
    root = Path(args.root)
    paths = baseline_paths(Path(args.baselines))
    if not paths:
        raise CliError(f"no baseline files in {args.baselines}/")
    for path in paths:
        baseline = _load(path)
        assert baseline is not None
        total, gone = len(baseline.entries), []
        for key, entry in sorted(baseline.entries.items()):
            try:
                why = gone_reason(key, entry, root)
            except KernelFileError as exc:
                print(f"  kept {key}: cannot read {entry['file']} ({exc})")
                continue
            if why:
                gone.append((key, why))
        for key, why in gone:
            print(f"  {'would remove' if args.dry_run else 'removed'} {key}: {why}")
        if gone and not args.dry_run:
            merge(baseline, {}, [key for key, _ in gone])
            save(baseline)
        print(f"{path}: {len(gone)} of {total} entries stale")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as exc:
        print(f"pytest-gemm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
