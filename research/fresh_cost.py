"""What a change to the timer costs: saved runs of the same kernels on one GPU compared, first written for fresh
inputs for timed launches (docs/verification.md#fresh-inputs-for-timed-launches), then used for the timer's trials
(docs/measurements.md#the-main-job).

    python research/fresh_cost.py FIRST.json OTHER.json [...]

Per run: its timed cases, their rounds (pairs of launches), the timing phase's seconds, the cost of a round, and
whether fresh inputs were on; a least-squares line through each case's seconds against its rounds (what a case
costs besides its rounds: the warm-up, CUPTI's per-batch costs, the re-verification; and what a round costs; one line
for cases of every shape, whose rounds cost differently, so a rough split); how many cases stopped at each count
of rounds. Then each case's kernel/cuBLAS ratio in each run against the first's
(median and p95 of the change), so that a change a run brings shows beside the spread between runs without it.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from pytest_gemm.records.case_record import CaseRecord


def timed(path: Path) -> dict[str, CaseRecord]:
    """Each timed case's record in a saved run (pytest-benchmark's JSON), by test."""
    records = (CaseRecord.from_dict(b["extra_info"]["gemm"]) for b in json.loads(path.read_text())["benchmarks"])
    return {r.test: r for r in records if r.timing_s}


def main(paths: list[str]) -> None:
    runs = [(Path(p).stem, timed(Path(p))) for p in paths]
    print("run\tcases\trounds\ttiming s\tus a round\tfresh inputs\tline: ms a case + us a round\tcases by rounds")
    for name, records in runs:
        samples = np.array([r.samples for r in records.values()], dtype=float)
        times = np.array([r.timing_s for r in records.values()], dtype=float)
        rounds, seconds = int(samples.sum()), float(times.sum())
        fresh = sum(r.fresh_inputs for r in records.values())
        line = "n/a (one count of rounds)"
        if len(set(samples)) > 1:
            fixed, per_round = np.linalg.lstsq(np.vstack([np.ones_like(samples), samples]).T, times, rcond=None)[0]
            line = f"{1e3 * fixed:.1f} + {1e6 * per_round:.0f}"
        counts = ", ".join(f"{n} at {k}" for k, n in sorted(Counter(int(x) for x in samples).items()))
        per = f"{1e6 * seconds / rounds:.1f}" if rounds else "n/a"
        print(f"{name}\t{len(records)}\t{rounds}\t{seconds:.2f}\t{per}\t{fresh}\t{line}\t{counts}")
    first_name, first = runs[0]
    for name, records in runs[1:]:
        common = sorted(set(first) & set(records))
        change = np.array([100 * (records[t].ratio / first[t].ratio - 1) for t in common])
        print(
            f"{name} against {first_name}: {len(common)} cases, ratio change median {np.median(change):+.2f}%, "
            f"p95 of |change| {np.percentile(np.abs(change), 95):.2f}%"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
