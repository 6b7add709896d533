"""``pytest-gemm merge``: saved runs combined into one (``runs/merge.py``), then gated per GPU model against
its baseline file, or recorded as baselines; the summary, the report and the plan (docs/scaling.md).

Paths are found from ``--root`` (the project's root folder, pytest's rootdir; default: the current folder):
the baseline folder (``--baselines``, else the one the runs saved, else ``baselines``) and the kernel files
whose gone cases an update may prune.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..baselines.store import BaselineFile, DamagedBaseline, baseline_path, gpu_slug, load
from ..judge.gate import DEFAULT_BASELINES, DEFAULT_METRIC, DEFAULT_THRESHOLD, GatePolicy
from ..judge.verdict import claims_speed, ungated
from ..records.case_record import CaseRecord, GateResult, path_problem
from ..report.outputs import output_file_problem, report_folder_problem, summary_problems, write_summary
from ..report.regression import gate_line
from ..runs import merge as m
from ..runs.data import RunData
from ..runs.plan import plan_lines
from ..runs.saved import run_json
from .common import (
    FORCE_HELP,
    GATE,
    CliError,
    add_cli_arguments,
    by_gpu,
    damaged_error,
    gate_table,
    read_saved,
    record_saved_run,
    recordable,
    refuse_damaged,
    same_file,
    switch,
    write_file,
)

__all__ = ["add_merge_parser", "cmd_merge"]

#: merge's own help for the options it shares: it defaults to what the runs saved
_OWN_HELP = {
    "baselines": "folder of baseline files, relative to --root (default: the folder the runs saved, i.e. their "
    "--gemm-baselines / gemm_baselines relative to their rootdir; 'baselines' when they saved none)",
    "threshold": "gate: a case regressed when slower than its baseline by more than this fraction (and "
    "significantly; a kernel header's regression_threshold overrides it) (default: the runs' own "
    "--gemm-threshold / gemm_threshold)",
    "gate_metric": "gate: 'ratio' (kernel/cuBLAS time) or 'time' (default: the runs' own --gemm-gate-metric / "
    "gemm_gate_metric)",
}


def add_merge_parser(sub: argparse._SubParsersAction) -> None:
    merge = sub.add_parser(
        "merge",
        help="combine saved runs (the shards of one suite, or several machines) into one saved run; gate it per GPU "
        "model, or record it as baselines (docs/scaling.md)",
    )
    add_cli_arguments(merge, [*GATE, "overwrite-report"])  # the plugin's checks; the gate's defaults are merge's own
    for action in merge._actions:
        if action.dest in _OWN_HELP:
            action.default, action.help = None, _OWN_HELP[action.dest]
            action.metavar = {"baselines": "DIR", "threshold": "F", "gate_metric": "ratio|time"}[action.dest]
    merge.set_defaults(func=cmd_merge)
    merge.add_argument(
        "runs",
        nargs="+",
        metavar="RUN.json",
        help="saved runs: each shard's --gemm-report DIR/run.json (written by "
        "every run), or --benchmark-json files (written only when a case was timed)",
    )
    merge.add_argument(
        "--out", required=True, metavar="MERGED.json", help="the merged run to write (not one of the runs)"
    )
    merge.add_argument("--summary", metavar="PATH", help="write the markdown summary (also to $GITHUB_STEP_SUMMARY)")
    merge.add_argument(
        "--report",
        metavar="DIR",
        help="draw the pictures and index.html (one folder per GPU model) in a new or empty folder, or one pytest-gemm "
        "wrote",
    )
    for flag, text in (
        ("--update-baselines", "record the merged cases as each GPU model's baselines instead of gating them"),
        ("--allow-mismatch", "merge runs of different pytest-gemm versions, settings or kernel sources (warns)"),
        ("--allow-partial", "merge runs that are not the whole suite: shards missing, a run interrupted (warns)"),
    ):
        merge.add_argument(flag, action="store_true", help=text)
    merge.add_argument("--force", action="store_true", help=f"with --update-baselines: {FORCE_HELP}")
    merge.add_argument(
        "--root",
        default=".",
        metavar="DIR",
        help="the project's root folder (pytest's rootdir): the baseline folder and the kernel files (to prune gone "
        "cases) are found relative to it (default: the current folder)",
    )
    merge.add_argument("--target-wall", type=_seconds, default=600.0, metavar="S", help="plan: seconds per shard (600)")


def _seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _baselines(
    groups: Mapping[str, list[CaseRecord]], folder: Path, *, recording: bool
) -> dict[str, tuple[Path, BaselineFile | None]]:
    """Each GPU model's baseline file; refused when the runs' own gate found one that is not here. A damaged file
    stops a gate, with the advice of merge's own options; ``recording``: it is passed over (the recording refuses or,
    with --force, replaces it)."""
    found = {}
    for name, records in groups.items():
        path = baseline_path(folder, name)
        try:
            baseline = load(path, gpu=name)
        except DamagedBaseline as exc:
            if not recording:
                raise damaged_error(exc, "--update-baselines --force") from None
            found[name] = (path, None)
            continue
        gated = [r.gate for r in records if r.gate is not None and not r.gate.baseline_file_missing]
        if baseline is None and gated:
            raise CliError(
                f"{path}: no such baseline file for {name}, but the runs were gated against one "
                f"({gated[0].baseline_file}, {len(gated)} case(s)); nothing written: run merge from the project's "
                "root folder, or say where it is with --root DIR or --baselines DIR"
            )
        found[name] = (path, baseline)
    return found


def _baseline_folder(given: str | None, saved: str | None) -> str:
    """The baseline folder, relative to ``--root``: ``--baselines``, else the one the runs saved, which must lie
    under ``--root`` (a saved run is not trusted to say where files are written), else ``baselines``."""
    if given:
        return given
    if saved and path_problem("baselines", saved):
        raise CliError(
            f"the runs saved their baseline folder as {saved!r}, which is not a folder under --root; nothing written: "
            "name the baseline folder with --baselines DIR"
        )
    return saved or DEFAULT_BASELINES


def _gate(data: RunData, out: Path, found: Mapping[str, tuple[Path, BaselineFile | None]], args: Any) -> None:
    metric = args.gate_metric or data.settings.get("gate-metric") or DEFAULT_METRIC
    threshold = args.threshold if args.threshold is not None else data.settings.get("threshold", DEFAULT_THRESHOLD)
    policy = GatePolicy.of_saved(data.settings)
    gates: dict[str, GateResult] = {}
    for name, records in by_gpu(data).items():
        path, baseline = found[name]
        gated = [r for r in records if claims_speed(ungated(data.tests[r.test]))]  # as the run's own gate chose
        gates.update(gate_table(str(out), name, gated, path, baseline, metric, threshold, policy)[0])
    m.regate(data, lambda record: gates[record.test], gate_line)


def _holds(folder: Path, path: Path) -> bool:
    """Whether ``path`` lies in ``folder`` or below it, however either is spelled."""
    return any(same_file(folder, parent) for parent in path.resolve().parents)


def _check_paths(args: argparse.Namespace) -> None:
    """Before anything is read or written: each run named once, and no output that is a run, another output, a
    report folder that holds a run (its page would show the merged run beside that run's ``run.json``), or a path
    that cannot be written (a full disk shows only when written)."""
    runs = list(args.runs)
    for i, run in enumerate(runs):
        earlier = next((e for e in runs[:i] if same_file(Path(e), Path(run))), None)
        if earlier is not None:
            said = f" (as {earlier} and as {run})" if earlier != run else ""
            raise CliError(f"{run} is given twice{said}: name each saved run once; nothing merged")
    given = [(option, path) for option, path in (("--out", args.out), ("--summary", args.summary)) if path]
    outputs = [*given, *([("--report", args.report)] if args.report else [])]
    for i, (option, path) in enumerate(outputs):
        taken = [(f"{run}, one of the runs to merge", run) for run in runs]
        for what, other in [*taken, *((f"{o}'s path too", p) for o, p in outputs[:i])]:
            if same_file(Path(path), Path(other)):
                raise CliError(f"{option} {path}: is {what}; nothing written: name another path")
    held = next((run for run in runs if args.report and _holds(Path(args.report), Path(run))), None)
    if held is not None:
        raise CliError(
            f"--report {args.report}: holds {held}, one of the runs to merge; nothing written: name a folder of its "
            "own for the merged report"
        )
    problems = [f"--out: {problem}" for problem in [output_file_problem(Path(args.out))] if problem]
    if args.summary:
        problems += summary_problems(Path(args.summary), "--summary")
    if problems:
        raise CliError("\n".join(problems))


def _report_folders(data: RunData, folder: str) -> dict[str, Path]:
    """Each GPU model's report folder (a folder of its own under ``folder`` when the run holds several)."""
    parts = m.by_gpu(data)
    return {name: Path(folder) / (gpu_slug(name) * (len(parts) > 1)) for name in parts}


def _report(data: RunData, folder: str, source: str, saved: Path) -> None:
    from ..report.folder import write_report

    folders = _report_folders(data, folder)
    for name, part in m.by_gpu(data).items():
        try:
            report = write_report(part, folders[name], None, source, source=saved, processes=os.cpu_count() or 1)
        except (ImportError, OSError) as exc:
            raise CliError(f"cannot write the report in {folder}: {exc}") from None
        print(f"{report.folder / 'index.html'}: {len(report.charts)} chart(s), {len(report.heatmaps)} error map(s)")


def cmd_merge(args: argparse.Namespace) -> int:
    from ..report.markdown import markdown, summary_cases

    if args.force and not args.update_baselines:
        raise CliError("--force needs --update-baselines: it replaces a damaged baseline file as the runs are recorded")
    _check_paths(args)
    runs, command = [(name, read_saved(Path(name))) for name in args.runs], " ".join(["pytest-gemm merge", *args.runs])
    try:
        merged = m.merge_runs(
            runs, allow_mismatch=args.allow_mismatch, allow_partial=args.allow_partial, command=command
        )
    except m.MergeError as exc:
        raise CliError(str(exc)) from None
    data, out, root = merged.data, Path(args.out), Path(args.root)
    folder = root / _baseline_folder(args.baselines, data.settings.get("baselines"))
    if args.update_baselines:
        refuse_damaged([name for name, good in recordable(data).items() if good], folder, args.force)
    found = _baselines(by_gpu(data), folder, recording=args.update_baselines)
    if args.report:
        flag, allow = switch("overwrite-report"), args.overwrite_report
        for where in _report_folders(data, args.report).values():
            problem = report_folder_problem(where, overwrite=allow, switch=flag)
            if problem:
                raise CliError(f"--report: {problem}; nothing written")
    for warning in merged.warnings:
        print(f"pytest-gemm: warning: {warning}", file=sys.stderr)
    errors = m.collection_errors(data)
    twice = f"; {merged.duplicates} given twice alike, kept once" if merged.duplicates else ""
    tests = len(data.tests) - len(errors)
    print(f"{out}: {len(runs)} run(s) merged: {tests} tests, {len(data.records)} timed cases{twice}")
    source = ""
    if args.update_baselines:
        prunable = m.prunable_files(data.files, sharded=data.shard is not None)
        whole = {file: True for file in prunable if (root / file).is_file()}
        for file in sorted(set(prunable) - set(whole)):
            print(f"  note: {file} is not under {root.resolve()}: entries of its gone cases are kept (--root DIR)")
        m.regate(data, None, gate_line)
        write_file(out, json.dumps(run_json(data), indent=1) + "\n")  # first: it keeps the run if baselines cannot
        record_saved_run(data, str(out), folder, whole, root, force=args.force)
        if not data.records:
            print("nothing recorded: no timed case in the runs")
    else:
        _gate(data, out, found, args)
        source = f"gate verdicts computed by pytest-gemm merge against {folder}/"
        write_file(out, json.dumps(run_json(data), indent=1) + "\n")
    if args.summary:
        error = write_summary(
            Path(args.summary), "## pytest-gemm\n\n" + markdown(summary_cases(data.tests)), "--summary"
        )
        if error:
            raise CliError(error)
        print(f"pytest-gemm summary: {args.summary}")
    if args.report:
        _report(data, args.report, source, out)
    for line in plan_lines(runs, data, args.target_wall):
        print(line)
    if errors:
        print(f"{len(errors)} collection error(s): " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    failed = m.failed_tests(data)
    if failed:
        print(f"{len(failed)} test(s) failed: {', '.join(failed[:10])}{' ...' * (len(failed) > 10)}")
    return 1 if failed or errors else 0
