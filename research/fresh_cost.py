"""What fresh inputs for timed launches cost (docs/verification.md#fresh-inputs-for-timed-launches): saved runs of
the same kernels on one GPU, some without fresh inputs and some with, compared.

    python research/fresh_cost.py FIRST.json OTHER.json [...]

Per run: its timed cases, their rounds (pairs of launches), the timing phase's seconds, the cost of a round, and
whether fresh inputs were on; then each case's kernel/cuBLAS ratio in each run against the first's (median and p95
of the change), so that a change that fresh inputs bring shows beside the spread between runs without them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from pytest_gemm.records.case_record import CaseRecord


def timed(path: Path) -> dict[str, CaseRecord]:
    """Each timed case's record in a saved run (pytest-benchmark's JSON), by test."""
    records = (CaseRecord.from_dict(b["extra_info"]["gemm"]) for b in json.loads(path.read_text())["benchmarks"])
    return {r.test: r for r in records if r.timing_s}


def main(paths: list[str]) -> None:
    runs = [(Path(p).stem, timed(Path(p))) for p in paths]
    print("run\tcases\trounds\ttiming s\tus a round\tfresh inputs")
    for name, records in runs:
        rounds = sum(r.samples for r in records.values())
        seconds = sum(r.timing_s for r in records.values())
        fresh = sum(r.fresh_inputs for r in records.values())
        print(f"{name}\t{len(records)}\t{rounds}\t{seconds:.2f}\t{1e6 * seconds / rounds:.1f}\t{fresh}")
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
