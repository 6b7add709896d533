"""On the GPU: verified cases are timed on the device, saved through pytest-benchmark, and cheats are caught.

These tests need a CUDA device and skip without one ("no CUDA device: ...").
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from support import BROKEN, KERNELS, ROOT, requires_gpu

pytestmark = [requires_gpu, pytest.mark.gpu]

HAS_CUPTI = importlib.util.find_spec("cupti") is not None  # the workers run in this Python
ONE_CASE = ["-k", "not a0.7 and not a-1.5", "--gemm-max-time", "0.3"]


def _benchmarks(path) -> dict:
    return json.loads(path.read_text())


def test_a_timed_case_saves_device_times_and_gpu_facts(pytester):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "naive.cu")
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "--gemm-shapes", "512", *ONE_CASE, "--benchmark-json", "run.json"
    )
    result.assert_outcomes(passed=3)  # two compile items and one timed case
    timer = "CUPTI kernel records" if HAS_CUPTI else "CUDA events"
    result.stdout.fnmatch_lines(
        [
            f"*pytest-gemm timing (device time, {timer})*",
            "NVIDIA *SM clock*",
            "fp32:",
            "kernel *512x512x512 *flags",
            "sgemm_naive * us *%*",
        ]
    )
    if not HAS_CUPTI:
        result.stdout.fnmatch_lines(["1 case(s) timed with CUDA events, not CUPTI kernel records: cupti-python is *"])
    data = _benchmarks(pytester.path / "run.json")
    gpu = data["machine_info"]["gpu"]
    assert gpu["available"] is True and gpu["sm_count"] > 0 and gpu["cublas_version"]
    if gpu["nvml"]:
        assert gpu["uuid"].startswith("GPU-") and gpu["driver_version"] and gpu["max_sm_clock_mhz"] > 0
    (bench,) = data["benchmarks"]
    gemm = bench["extra_info"]["gemm"]
    assert bench["options"]["timer"].endswith("device_time")
    assert bench["stats"]["rounds"] == gemm["samples"] >= 10
    assert bench["stats"]["median"] == pytest.approx(gemm["median_s"], rel=1e-12)
    assert gemm["ci_s"][0] <= gemm["median_s"] <= gemm["ci_s"][1]
    assert gemm["pct_cublas"] == pytest.approx(100 / gemm["ratio"])
    assert gemm["tflops"] == pytest.approx(2 * 512**3 / gemm["median_s"] / 1e12)
    assert gemm["verdict"] == "ok" and gemm["cache"] == "cold"
    # The events bracket each launch: CUPTI's kernel-only median is shorter, by the launch's latency on the
    # device (about 2 us on an H100), and never by more than a few microseconds at this size.
    assert gemm["timer"] == ("cupti" if HAS_CUPTI else "events")
    assert gemm["events_median_s"] >= gemm["median_s"]
    if HAS_CUPTI:
        assert 0.1e-6 < gemm["events_median_s"] - gemm["median_s"] < 10e-6, gemm
    # pytest-benchmark's own command line opens the saved file.
    compare = subprocess.run(
        [sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "compare", "run.json"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert compare.returncode == 0, compare.stderr
    assert "sgemm_naive[fp32-512x512x512]" in compare.stdout


def test_benchmark_skip_verifies_without_timing(pytester):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "naive.cu")
    result = pytester.runpytest("--gemm-kernels", "naive.cu", "--gemm-shapes", "256", "--benchmark-skip")
    result.assert_outcomes(passed=2 + 3)
    assert "pytest-gemm timing" not in result.stdout.str()


def test_benchmark_only_runs_the_timed_cases_alone(pytester):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "naive.cu")
    result = pytester.runpytest("--gemm-kernels", "naive.cu", "--gemm-shapes", "256", *ONE_CASE, "--benchmark-only")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*sgemm_naive *256x256x256*"])


def test_hot_cache_timing_is_labelled(pytester):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "naive.cu")
    result = pytester.runpytest(
        "--gemm-kernels",
        "naive.cu",
        "--gemm-shapes",
        "256",
        *ONE_CASE,
        "--gemm-hot-cache",
        "--benchmark-json",
        "r.json",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*sgemm_naive *256x256x256*hot L2*"])
    (bench,) = _benchmarks(pytester.path / "r.json")["benchmarks"]
    assert bench["extra_info"]["gemm"]["cache"] == "hot"


def test_a_kernel_that_skips_work_on_its_second_launch_fails_the_determinism_check(pytester):
    """Launched again on the same buffers, it leaves C unwritten: caught before timing, and said why."""
    shutil.copy(BROKEN / "timing_cheat.cu", pytester.path / "timing_cheat.cu")
    result = pytester.runpytest_subprocess(
        "--gemm-kernels", "timing_cheat.cu", "-m", "gpu", "--gemm-shapes", "4096", *ONE_CASE
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*verification failed for memo_naive*",
            "*non-deterministic output: 16777216 element(s) changed in C between launch 1 and launch 2 on the same"
            " inputs; launch 2 left 16777216 of them unwritten, as if it remembered launch 1*",
        ]
    )


def test_a_kernel_that_skips_work_after_verification_is_caught_by_timing(pytester):
    """It passes verification (its first three launches are right) but not timing: a checked timed launch (or the last)
    left C unwritten, named by its round (docs/verification.md#fresh-inputs-for-timed-launches); no speed is kept."""
    shutil.copy(BROKEN / "timing_cheat_late.cu", pytester.path / "timing_cheat_late.cu")
    result = pytester.runpytest_subprocess(
        "--gemm-kernels",
        "timing_cheat_late.cu",
        "-m",
        "gpu",
        "--gemm-shapes",
        "4096",
        *ONE_CASE,
        "--benchmark-json",
        "r.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*correct when verified, wrong when timed: round * of * left C unwritten, as if it remembered an earlier "
            "launch (each timed launch had inputs of its own; * timed output(s) checked)*",
        ]
    )
    # Nothing untrustworthy is saved: pytest-benchmark had no benchmark to write (the file it
    # opened for --benchmark-json stays empty).
    assert (pytester.path / "r.json").read_text() == ""
    assert "no benchmarks have been run" in result.stderr.str()


COL_MAJOR = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32"], layout="col")
def cupy_col(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
"""


def test_every_dtype_and_the_column_major_layout_are_timed_against_cublas(pytester):
    """cuBLAS is called with the right types for fp64, fp16, bf16 and tf32, and the right layout for "col".

    The harness checks the output of cuBLAS's last timed launch too, and fails the case if it is wrong.
    """
    shutil.copy(ROOT / "tests" / "kernels_dtypes" / "naive_dtypes.cu", pytester.path / "naive_dtypes.cu")
    (pytester.path / "col_kernels.py").write_text(COL_MAJOR)
    result = pytester.runpytest(
        "--gemm-kernels",
        "naive_dtypes.cu",
        "col_kernels.py",
        "-m",
        "gpu",
        "--gemm-shapes",
        "512x256x384",
        *ONE_CASE,
        "--benchmark-json",
        "r.json",
    )
    result.assert_outcomes(passed=5)
    rows = {
        b["extra_info"]["gemm"]["dtype"] + ":" + b["extra_info"]["gemm"]["kernel"]: b["extra_info"]["gemm"]
        for b in _benchmarks(pytester.path / "r.json")["benchmarks"]
    }
    assert {key.split(":")[0] for key in rows} == {"fp64", "fp16", "bf16", "tf32", "fp32"}
    for row in rows.values():
        assert row["verdict"] == "ok" and row["samples"] >= 10 and row["pct_cublas"] > 0
    result.stdout.fnmatch_lines(["bf16:", "fp16:", "fp32:", "fp64:", "tf32:"], consecutive=False)
