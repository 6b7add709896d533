"""``pytest-gemm merge``: saved runs (shards of one suite, or runs on several machines) combined into one.

Pure: runs in, one run out, with the reasons to refuse. Runs are refused when they were made by
different pytest-gemm versions, with different settings that change results, with different text of
the same kernel file, or as shards of different counts (``--allow-mismatch`` makes these warnings); when
they are not the whole suite, shards missing or a run interrupted (``--allow-partial`` makes these
warnings); and always when the same test is in two runs with different results (overlapping shards, or
one suite on two GPU models). A collection error that several shards report is kept once. The command
(``cli/merge.py``) gates the merged cases per GPU model, records baselines, and writes the summary and report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..judge.verdict import confirmed, final, needs_confirming, ungated
from ..records.case_record import CaseRecord, GateResult
from .data import KernelFileRun, RunData, Shards, stored

__all__ = [
    "MergeError",
    "Merged",
    "Run",
    "by_gpu",
    "collection_errors",
    "describe_run",
    "failed_tests",
    "merge_runs",
    "prunable_files",
    "regate",
]

Run = tuple[str, RunData]  # a saved run and the file it came from
_LISTED = 5  # most overlapping tests named in a message
_UNSAID = "not said (saved before pytest-gemm saved it)"


class MergeError(ValueError):
    """Runs that cannot be merged; the message names the files, what differs and each value."""


@dataclass
class Merged:
    """The merged run, the mismatches let through (with ``--allow-mismatch``), and tests given twice alike."""

    data: RunData
    warnings: list[str] = field(default_factory=list)
    duplicates: int = 0


def _differs(what: str, values: Mapping[str, list[str]]) -> str:
    return f"{what} differs: " + "; ".join(f"{', '.join(names)}: {value}" for value, names in values.items())


def _grouped(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """(file, value) pairs as value -> files, in the order first seen."""
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(value, []).append(name)
    return out


def _sources(data: RunData) -> dict[str, str]:
    """Kernel file -> the SHA-256 of its text, as this run saw it (its files, else its timed cases)."""
    out = {r.file: r.source_sha256 for r in data.records if r.source_sha256}
    out.update({file: seen.sha256 for file, seen in data.files.items() if seen.sha256})
    return out


def mismatches(runs: Sequence[Run]) -> list[str]:
    """Why these runs should not be merged: one sentence per difference ([] when none)."""
    problems = []
    said = [(name, data) for name, data in runs if data.version or data.settings]
    problems += [
        f"{name} does not say which pytest-gemm made it or with which settings (saved by an older pytest-gemm)"
        for name, data in runs
        if not (data.version or data.settings)
    ]
    versions = _grouped([(name, data.version or _UNSAID) for name, data in said])
    if len(versions) > 1:
        problems.append(_differs("the pytest-gemm version", versions))
    for key in dict.fromkeys(k for _, data in said for k in data.settings):
        values = _grouped([(name, repr(data.settings.get(key, _UNSAID))) for name, data in said])
        if len(values) > 1:
            what = "timing (on unless --benchmark-skip, --benchmark-disable or pytest-xdist)" if key == "timed" else ""
            problems.append(_differs(f"the setting {what or '--gemm-' + key}", values))
    sources = [(name, _sources(data)) for name, data in runs]
    for file in sorted({f for _, seen in sources for f in seen}):
        values = _grouped([(name, seen[file]) for name, seen in sources if file in seen])
        if len(values) > 1:
            shown = {f"sha256 {sha[:12]}": names for sha, names in values.items()}
            problems.append(_differs(f"the kernel source of {file}", shown))
    counts = _grouped([(name, str(data.shard)) for name, data in runs if data.shard])
    if len({data.shard.count for _, data in runs if data.shard}) > 1:
        problems.append(_differs("the shard count", counts))
    return problems


def _content(data: RunData, test: str) -> Any:
    """Everything a run says about one test, to tell the same run given twice from a test run twice."""
    result = data.tests[test]
    return stored(result).to_dict(), result.timing.to_dict() if result.timing else None


def _shards(runs: Sequence[Run]) -> Shards | None:
    """The shards the merged run holds: None when it is a whole suite (or no input was a shard)."""
    parts = [data.shard for _, data in runs if data.shard is not None]
    if not parts:
        return None
    counts = {s.count for s in parts}
    if len(counts) > 1:
        return Shards((), max(counts))  # shards of different splits: never a whole suite
    merged = Shards(tuple(sorted({i for s in parts for i in s.index})), counts.pop())
    return None if merged.complete else merged


def describe_run(data: RunData) -> str:
    """What part of a suite a run is, in words."""
    return str(data.shard) if data.shard else "a whole run"


def _unfinished(runs: Sequence[Run], shards: Shards | None) -> tuple[list[str], list[str]]:
    """Why the merge is not the whole suite (shards missing, a run interrupted), and what else stopped early."""
    partial, notes = [], []
    if shards is not None and shards.index:
        missing = shards.missing
        said = (
            f"shard {missing[0]} of {shards.count} is"
            if len(missing) == 1
            else f"shards {', '.join(map(str, missing))} of {shards.count} are"
        )
        partial.append(
            f"{said} missing (the runs given hold {shards}; a shard that saved no run failed or did not run)"
        )
    for name, data in runs:
        end = data.session
        if end is None:
            continue
        ran = f"{end.ran} of its {end.selected} selected tests ran" if end.selected is not None else ""
        if end.exit_status == 2:
            said = f": {ran}" if ran else ""
            partial.append(f"{name} ({describe_run(data)}) was interrupted (pytest exit status 2){said}")
        elif end.selected is not None and end.ran < end.selected:
            why = f"stopped after {end.maxfail} failure(s) (-x/--maxfail)" if end.maxfail else "ended early"
            left = end.selected - end.ran
            notes.append(f"{name} ({describe_run(data)}) {why}: {ran}; the other {left} are in no run")
    return partial, notes


def _facts_differ(runs: Sequence[Run]) -> list[str]:
    """Driver and cuBLAS versions that differ between runs on one GPU model (the gate's ratio is to cuBLAS)."""
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, data in runs:
        models = {r.gpu for r in data.records if r.gpu} or {str(data.gpu.get("name") or "")} - {""}
        for model in sorted(models):
            seen.setdefault(model, []).append((name, data.facts(model)))
    out = []
    for model, facts in seen.items():
        for fact, what in (("driver_version", "driver"), ("cublas_version", "cuBLAS")):
            values = _grouped([(name, str(f[fact])) for name, f in facts if f.get(fact)])
            if len(values) > 1:
                why = " (the gate's ratio is against cuBLAS)" if fact == "cublas_version" else ""
                out.append(_differs(f"the {what} version on {model}", values) + why)
    return out


def _overlap(test: str, first: tuple[str, RunData], second: tuple[str, RunData]) -> tuple[str, set[str]]:
    """A test in two runs: the sentence naming both, and the GPU models they ran it on when those differ."""

    def model(data: RunData) -> str:
        return next((r.gpu for r in data.records if r.test == test and r.gpu), "") or data.gpu_name

    models = {model(first[1]), model(second[1])}
    if len(models) > 1:
        return f"{test} is in {first[0]} (on {model(first[1])}) and in {second[0]} (on {model(second[1])})", models
    return f"{test} is in {first[0]} and in {second[0]}", set()


def _overlap_error(overlaps: list[str], models: set[str]) -> MergeError:
    more = f"; and {len(overlaps) - _LISTED} more" if len(overlaps) > _LISTED else ""
    why = (
        f"the same tests run on {len(models)} GPU models ({', '.join(sorted(models))}): merge and gate each "
        "model's runs on their own"
        if models
        else "overlapping shards, or a shard run twice?"
    )
    return MergeError(
        f"{len(overlaps)} test(s) are in more than one run with different results ({why}): "
        f"{'; '.join(overlaps[:_LISTED])}{more}; merge each test from one run only"
    )


def merge_runs(
    runs: Sequence[Run], *, allow_mismatch: bool = False, allow_partial: bool = False, command: str = ""
) -> Merged:
    """One run holding every test of ``runs``; :class:`MergeError` when they should not be merged."""
    if not runs:
        raise MergeError("no runs to merge")
    problems = mismatches(runs)
    if problems and not allow_mismatch:
        listed = "".join(f"\n  - {p}" for p in problems)
        raise MergeError(f"cannot merge these runs:{listed}\n  --allow-mismatch merges them anyway")
    shards = _shards(runs)
    partial, stopped = _unfinished(runs, shards)
    if partial and not allow_partial:
        listed = "".join(f"\n  - {p}" for p in partial)
        raise MergeError(f"the runs are not the whole suite:{listed}\n  --allow-partial merges them anyway")
    first = runs[0][1]
    version = next((data.version for _, data in runs if data.version), "")
    settings = next((data.settings for _, data in runs if data.settings), {})
    out = RunData(gpu={}, command=command, version=version, settings=dict(settings), shard=shards)
    owner: dict[str, tuple[str, Any, RunData]] = {}  # test -> (file, what it said, its run)
    overlaps, models, duplicates = [], set(), 0
    facts: dict[str, dict[str, Any]] = {}
    for name, data in runs:
        for test, result in data.tests.items():
            said = _content(data, test)
            if test not in owner:
                owner[test] = (name, said, data)
                out.tests[test] = result
            elif result.kind == "collect":
                continue  # every shard collects: the same collection error, kept once
            elif owner[test][1] == said:
                duplicates += 1
            else:
                sentence, differ = _overlap(test, (owner[test][0], owner[test][2]), (name, data))
                overlaps.append(sentence)
                models |= differ
        for file, seen in data.files.items():
            had = out.files.get(file, seen)
            out.files[file] = KernelFileRun(had.sha256 or seen.sha256, had.whole and seen.whole)
        for model, gpu in [*data.gpus.items(), (str(data.gpu.get("name") or ""), data.gpu)]:
            if model:
                facts.setdefault(model, gpu)
        out.date = max(out.date, data.date)
        out.notes += [n for n in data.notes if n not in out.notes]
        count = len(data.tests) - len(collection_errors(data))
        made = data.command or "command not saved"
        out.notes.append(f"merged from {name} ({describe_run(data)}, {count} tests): {made}")
    if overlaps:
        raise _overlap_error(overlaps, models)
    models_timed = [r.gpu for r in out.records if r.gpu]
    main = max(dict.fromkeys(models_timed), key=models_timed.count) if models_timed else next(iter(facts), "")
    out.gpu = dict(facts.get(main) or first.gpu)
    if len(set(models_timed)) > 1:
        out.gpus = {m: facts.get(m, {"name": m}) for m in dict.fromkeys(models_timed)}
    said = [*stopped, *_facts_differ(runs)]
    out.notes += [f"merged with --allow-mismatch: {p}" for p in problems]
    out.notes += [f"merged with --allow-partial: {p}" for p in partial] + said
    return Merged(out, [*problems, *partial, *said], duplicates)


def prunable_files(files: Mapping[str, KernelFileRun], *, sharded: bool) -> list[str]:
    """Kernel files whose baseline entries of gone cases an update may remove: those a whole suite (not a shard of
    one: ``sharded``) selected whole."""
    return [] if sharded else sorted(f for f, seen in files.items() if seen.whole)


def regate(
    data: RunData, gate: Callable[[CaseRecord], GateResult] | None, describe: Callable[[CaseRecord, GateResult], str]
) -> None:
    """Gate the timed tests again with ``gate`` (None: not gated, as when recording baselines): each result as it was
    before its gate (``judge.verdict.ungated``), made final again (``judge.verdict.final``); a test that failed
    otherwise stays failed. A test the gate fails is said by ``describe``, or as it was where its old verdict failed
    it too."""
    for test, result in list(data.tests.items()):
        if result.timing is None:
            continue
        before = ungated(result)
        now = final(before, gate)
        saved = result.timing.gate
        if saved is not None and saved.confirmed_change is not None and needs_confirming(now):  # its re-timing's
            now = confirmed(now, dataclasses.replace(saved, change=saved.confirmed_change, p_value=saved.confirmed_p))
        if now.failed and not before.failed and now.timing is not None and now.timing.gate is not None:
            message = result.message if result.failed else describe(now.timing, now.timing.gate)
            now = dataclasses.replace(now, message=message)
        data.tests[test] = now


def failed_tests(data: RunData) -> list[str]:
    """The tests of the run that failed (every kind but collection errors)."""
    return sorted(t for t, r in data.tests.items() if r.failed and r.kind != "collect")


def collection_errors(data: RunData) -> dict[str, str]:
    """What could not be collected (a kernel file, a test module) -> the first line of the error."""
    return {t: r.message for t, r in sorted(data.tests.items()) if r.kind == "collect"}


def by_gpu(data: RunData) -> dict[str, RunData]:
    """The run as one run per GPU model of its timed cases (itself, when it has one model)."""
    models = list(dict.fromkeys(r.gpu for r in data.records if r.gpu))
    if len(models) < 2:
        return {data.gpu_name: data}
    note = "failed verifications do not say which GPU ran them: each GPU's report of this merge shows all of them"
    return {
        model: dataclasses.replace(
            data,
            gpu=data.facts(model) or {"name": model},
            tests={t: r for t, r in data.tests.items() if r.timing is None or r.timing.gpu == model},
            gpus={},
            notes=[*data.notes, f"the timed cases on {model} only; {note}"],
        )
        for model in models
    }
