"""How far GPUs of one model disagree, and what the gate says of runs on GPUs that did not record the baselines.

    python research/gpu_spread.py RUN.json... [--baselines NAME=FILE ...]

RUN.json are saved timed runs (pytest-benchmark JSON with pytest-gemm's records), each from one GPU.
Prints each run's GPU (its gpu_identity), then the kernel/cuBLAS ratio changes of every other run
against the first, by shape and precision, then for each baseline file the gate's verdicts on every
run (among the run's gated cases, as ``pytest-gemm compare`` gives them, before any re-timing). Runs saved before
records carried their GPU's identity get it from the run's device facts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from pytest_gemm.baselines.store import load
from pytest_gemm.judge.gate import gated_cases, judge
from pytest_gemm.records.case_record import CaseRecord, gpu_identity
from pytest_gemm.runs.saved import read_run


def records(path: str) -> tuple[str, dict[str, CaseRecord]]:
    """A run's GPU identity and its timed records by test id."""
    run = read_run(Path(path))
    gpu = gpu_identity(run.gpu)
    out = {r.test: r if r.gpu_id else dataclasses.replace(r, gpu_id=gpu) for r in run.records}
    return gpu, out


def spread(first: dict[str, CaseRecord], other: dict[str, CaseRecord]) -> list[str]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for test in first.keys() & other.keys():
        a = first[test]
        groups[(a.shape, "half" if a.dtype in ("fp16", "bf16") else a.dtype)].append(other[test].ratio / a.ratio - 1)
    every = np.abs([v for values in groups.values() for v in values])
    median, p95 = 100 * np.median(every), 100 * np.percentile(every, 95)
    lines = [
        f"  {len(every)} cases: |change| median {median:.2f}%, p95 {p95:.2f}%, max {100 * every.max():.2f}%; "
        f"within 1%: {(every < 0.01).sum()}"
    ]
    for (shape, kind), values in sorted(groups.items()):
        v = np.array(values)
        lines.append(
            f"    {shape:>16} {kind:<5} n={len(v):3d} median {100 * np.median(v):+.2f}% "
            f"[{100 * v.min():+.2f}%, {100 * v.max():+.2f}%]"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--baselines", action="append", default=[], help="NAME=FILE: a baseline file to gate with")
    args = parser.parse_args(argv)
    runs = [(path, *records(path)) for path in args.runs]
    for path, gpu, recs in runs:
        print(f"{path}: GPU {gpu or '?'}, {len(recs)} timed cases")
    first_path, first_gpu, first = runs[0]
    for path, gpu, recs in runs[1:]:
        print(f"ratios of {path} (GPU {gpu}) against {first_path} (GPU {first_gpu}):")
        print("\n".join(spread(first, recs)))
    for spec in args.baselines:
        name, _, file = spec.partition("=")
        baseline = load(Path(file))
        assert baseline is not None, file
        gpus = Counter(g for e in baseline.entries.values() for g in (e.get("gpus") or {}))
        print(f"gate against {name} ({file}; GPUs recorded: {', '.join(sorted(gpus)) or 'not said'}):")
        for path, gpu, recs in runs:
            cases = gated_cases(list(recs.values()))  # the run's share of the false-alarm chance, as the product's
            verdicts = Counter(str(judge(r, baseline.get(r.test), cases=cases).verdict) for r in recs.values())
            print(f"  {path} (GPU {gpu}): " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
