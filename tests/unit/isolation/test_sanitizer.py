"""compute-sanitizer on the CPU: reading the tools' reports, and the shape each kernel is run on. Running the tools
needs a GPU: tests/gpu/test_gpu.py runs them on real kernels."""

from __future__ import annotations

from pytest_gemm.isolation.sanitizer import read_report
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cufile import parse_cu_file
from pytest_gemm.specs.sanitizing import sanitize_case

from support import BROKEN, KERNELS

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at unchecked_k_tail(int, int, int, float, ...)+0x2a0 in sanitize.cu:56
=========     by thread (4,2,0) in block (2,4,0)
=========     Address 0x7f3c5e0009c4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f3c5e000000 of size 2500 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at unchecked_k_tail(int, int, int, float, ...)+0x2a0 in sanitize.cu:56
=========
========= ERROR SUMMARY: 20 errors
"""

RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at tiled16<false>(int, int, int, float, ...)+0x160 in sanitize.cu:43
=========     and Read access at tiled16<false>(int, int, int, float, ...)+0x1e0 in sanitize.cu:45 [1024 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_the_first_report_and_the_count_are_read_from_the_log():
    errors, first = read_report("memcheck", MEMCHECK)
    assert errors == 20
    assert first[0] == "Invalid __global__ read of size 4 bytes"
    assert first[1].endswith("in sanitize.cu:56") and first[2] == "    by thread (4,2,0) in block (2,4,0)"
    assert len(first) == 5  # the first report only
    errors, first = read_report("racecheck", RACECHECK)
    assert errors == 1 and first[0].startswith("Error: Race reported between Write access")
    assert read_report("memcheck", CLEAN) == (0, ())
    assert read_report("memcheck", "Traceback (most recent call last):\n  ...") == (
        None,
        ("Traceback (most recent call last):", "  ..."),
    )


def test_the_sanitizer_runs_on_the_first_edge_shape_a_kernels_rules_allow():
    (naive,) = parse_cu_file(KERNELS / "01_naive.cu")
    case = sanitize_case(naive)
    assert (case.shape, case.dtype, case.ab.beta) == (Shape(67, 45, 37), "fp32", 0.0)
    square = next(s for s in parse_cu_file(BROKEN / "faults.cu") if s.name == "wrong_operand")  # M == N == K
    assert sanitize_case(square).shape == Shape(128, 128, 128)
    (fp8,) = parse_cu_file(KERNELS / "13_fp8_wgmma.cu")  # K % 16: still tails in M, N and K
    assert sanitize_case(fp8).shape == Shape(100, 104, 80)
    assert sanitize_case(naive, ["fp16"]) is None  # no selected dtype
