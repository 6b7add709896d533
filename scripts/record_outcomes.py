"""Record worker outcomes on a GPU, for the CPU tests to replay (tests/replay_backend.py).

Runs the named cases through the real GPU worker (the same requests a pytest run sends, with
seed 0) and writes the device facts and each outcome as JSON. Usage, on a GPU machine:

    python scripts/record_outcomes.py tests/data/h100_outcomes.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pytest_gemm.isolation.workers import WorkerPool
from pytest_gemm.records.plain import to_plain
from pytest_gemm.records.request import TimingSettings
from pytest_gemm.records.shapes import parse_shapes
from pytest_gemm.specs.cases import case_seed, expand, to_request
from pytest_gemm.specs.files import load_specs
from pytest_gemm.worker.serve import DEFAULT_BACKEND

ROOT = Path(__file__).resolve().parent.parent
TIMED = TimingSettings()
#: (kernel file, shapes, case names to keep, timed)
CASES = [
    ("kernels/01_naive.cu", "512,4096", None, True),
    ("kernels/02_smem_tiling.cu", "1024", {"sgemm_smem[TILE32-fp32-1024x1024x1024-a0.7b1.3]"}, True),
    (
        "tests/kernels_broken/faults.cu",
        "256,100x100x64",
        {"unwritten_tile[fp32-256x256x256]", "oob_write[fp32-100x100x64]"},
        0,
    ),
    ("tests/kernels_broken/timing_cheat_late.cu", "4096", {"memo_late[fp32-4096x4096x4096]"}, True),
    ("tests/kernels_faults/sticky.cu", "256", None, False),
    ("tests/kernels_faults/registers.cu", "256", None, False),
    ("tests/kernels_faults/py_faults.py", "256", {"raises[fp32-256x256x256]"}, False),
]


def main() -> int:
    out = Path(sys.argv[1])
    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=60.0)
    outcomes = {}
    for rel, shapes, keep, timed in CASES:
        path = ROOT / rel
        for spec in load_specs(path, rel):
            for case in expand(spec, parse_shapes(shapes)):
                if keep is not None and case.name not in keep:
                    continue
                seed = case_seed(0, f"{rel}::{case.name}")
                t0 = time.perf_counter()
                outcome = pool.run(to_request(case, str(path), seed, TIMED if timed else None))
                key = f"{path.name}::{case.name}"
                print(f"{key}: {time.perf_counter() - t0:.1f} s, failure {outcome.failure and outcome.failure.kind}")
                outcomes[key] = to_plain(outcome)
    pool.close()
    if pool.unavailable is not None or not pool.facts:
        print(f"record_outcomes: nothing recorded, no GPU: {pool.unavailable}", file=sys.stderr)
        return 2
    data = {"recorded": time.strftime("%Y-%m-%d"), "facts": pool.facts, "outcomes": outcomes}
    out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
