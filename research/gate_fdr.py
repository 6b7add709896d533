"""Count what the gate did across runs (research/gate-fdr.sh): per run, the unchanged cases it failed as regressed
(false alarms), the slowed kernel's cases it caught, and the cases it flagged that their re-timing cleared.

    python research/gate_fdr.py RUN.json [RUN.json ...]

A run's file is pytest-benchmark's JSON (--benchmark-json); each case's gated record is its ``extra_info["gemm"]``
(:class:`pytest_gemm.records.case_record.CaseRecord`). The slowed kernel is the naive one (``01_naive.cu``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_gemm.records.case_record import CaseRecord
from pytest_gemm.records.verdicts import NOT_CONFIRMED, GateVerdict

SLOWED = "kernels/01_naive.cu::"


def count(path: Path) -> tuple[int, int, int, int, int, list[float], int]:
    """(unchanged cases gated, of them regressed, slowed cases gated, of them regressed, cleared by re-timing, the
    slowed cases' changes, gated cases compared with other GPUs' records: none of the GPU that timed them)."""
    records = [CaseRecord.from_dict(b["extra_info"]["gemm"]) for b in json.loads(path.read_text())["benchmarks"]]
    gated = [r for r in records if r.gate is not None and r.gate.change is not None]
    slowed = [r for r in gated if r.test.startswith(SLOWED)]
    others = [r for r in gated if not r.test.startswith(SLOWED)]
    regressed = sum(1 for r in others if r.gate is not None and r.gate.verdict == GateVerdict.REGRESSED)
    caught = sum(1 for r in slowed if r.gate is not None and r.gate.verdict == GateVerdict.REGRESSED)
    cleared = sum(1 for r in gated if r.gate is not None and NOT_CONFIRMED in r.gate.notes)
    changes = [100 * (r.gate.change or 0.0) for r in slowed if r.gate is not None]
    with_others = sum(1 for r in gated if r.gate is not None and r.gate.compared_with == "others")
    return len(others), regressed, len(slowed), caught, cleared, changes, with_others


def main(paths: list[str]) -> None:
    columns = (
        "run",
        "unchanged gated",
        "false regressions",
        "slowed gated",
        "slowed caught",
        "cleared",
        "changes %",
        "against other GPUs",
    )
    print("\t".join(columns))
    totals = [0, 0, 0, 0]
    for path in sorted(paths):
        others, false, slowed, caught, cleared, changes, with_others = count(Path(path))
        totals = [totals[0] + false, totals[1] + (caught == slowed and slowed > 0), totals[2] + 1, totals[3] + cleared]
        said = " ".join(f"{c:+.1f}" for c in changes)
        print(f"{Path(path).stem}\t{others}\t{false}\t{slowed}\t{caught}\t{cleared}\t{said}\t{with_others}")
    print(
        f"all: {totals[0]} false regression(s); the slowed kernel caught in every case in {totals[1]} of {totals[2]} "
        f"run(s); {totals[3]} flagged case(s) cleared by their re-timing"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
