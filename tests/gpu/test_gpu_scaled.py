"""On the GPU: FP8 kernels in every scaling mode and INT8 kernels pass against the exact dequantised truth and are
timed against cuBLASLt's FP8 GEMM with the same scaling (through torch) or cuBLAS's INT8 GEMM; the fault kernels get
their exact diagnoses. Needs a device and torch."""

from __future__ import annotations

import re

import pytest

from support import ROOT, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = "256,384x256x640,1000x520x700,64x64x9,1x512x256"
KERNELS = ROOT / "tests" / "kernels_fp8"


@pytest.fixture(scope="module")
def correct_run(tmp_path_factory):
    pytest.importorskip("torch", reason="cuBLASLt's FP8 GEMM, the peer, is reached through torch")
    work = tmp_path_factory.mktemp("fp8")
    files = ("fp8_naive.cu", "int8_naive.cu", "torch_scaled.py")
    return run_kernel_files(work, KERNELS, files, "--gemm-shapes", SHAPES, "-vv", "-k", "not fault")


@pytest.fixture(scope="module")
def faults_run(tmp_path_factory):
    pytest.importorskip("torch", reason="cuBLASLt's FP8 GEMM, the peer, is reached through torch")
    work = tmp_path_factory.mktemp("fp8_faults")
    files = ("fp8_naive.cu", "int8_naive.cu")  # their fault kernels: the plain ones with a bug each
    return run_kernel_files(work, KERNELS, files, "--gemm-shapes", "512x512x512", "-k", "fault")


def test_correct_fp8_and_int8_kernels_pass_in_every_scaling_mode(correct_run):
    outcomes = outcomes_in(correct_run)
    assert outcomes, correct_run[-4000:]
    assert {name for name, outcome in outcomes.items() if outcome != "PASSED"} == set(), correct_run[-6000:]
    kernels = {name.split("[")[0] for name in outcomes}
    assert kernels >= {"fp8_blockwise", "fp8_blockwise_ue8m0", "fp8_rowwise_e5m2", "fp8_tensorwise", "int8_naive"}


def test_fp8_and_int8_cases_are_timed_against_cublas(correct_run):
    """cuBLASLt through torch is the peer: torch's own rowwise GEMM, declared as a kernel, times at about 100% of it."""
    assert re.search(r"^fp8_e4m3:$", correct_run, re.M) and re.search(r"^int8:$", correct_run, re.M), correct_run[
        -4000:
    ]
    row = re.search(r"^torch_rowwise +256x256x256 .*$", correct_run, re.M)
    assert row is not None, correct_run[-4000:]
    percent = next(float(field[:-1]) for field in row.group(0).split() if field.endswith("%"))  # the "% cuBLAS" column
    assert 50 < percent < 200, row.group(0)  # the same cuBLASLt kernel on both sides; the ratio is noisy at 256^3


@pytest.mark.parametrize(
    ("test", "said"),
    [
        ("fp8_fault[FAULT1-fp8_e4m3-512x512x512]", "matches A's scales applied at 128 x 128 blocks"),  # granularity
        ("fp8_fault[FAULT2-fp8_e4m3-512x512x512]", "matches B's grid of scales read in its other order"),  # transposed
        ("fp8_fault[FAULT3-fp8_e4m3-512x512x512]", "matches the scales ignored"),
        ("fp8_fault[FAULT4-fp8_e4m3-512x512x512]", "matches A and B read as fp8_e5m2, the other FP8 format"),
        ("int8_fault_overflow[int8-512x512x512]", "matches the sums accumulated in 16 bits"),
    ],
)
def test_each_fault_is_named(faults_run, test, said):
    assert outcomes_in(faults_run).get(test) == "FAILED", faults_run[-4000:]
    section = failure_section(faults_run, test)
    assert said in section and "262144 of 262144 elements" in section, section


def test_a_read_past_a_grid_of_scales_is_traced_to_it(faults_run):
    """The last K block's scales read one past A's grid: NaN from its guard, traced there."""
    test = "fp8_fault[FAULT5-fp8_e4m3-512x512x512]"
    assert outcomes_in(faults_run).get(test) == "FAILED", faults_run[-4000:]
    section = failure_section(faults_run, test)
    assert "reads past the end of scale_a" in section, section
    assert "read as fp8_e5m2" not in section, section  # NaN traced to a guard is not a format's NaN
