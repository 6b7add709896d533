"""pytest-benchmark records, prints, saves and compares device times, and the saved machine info holds the
GPU's facts. The runs are real plugin runs whose GPU workers serve outcomes recorded on an H100."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from support import KERNELS, NO_DEVICE, recorded_outcome, recording

NAIVE = ["--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu"]


def test_saved_json_holds_the_device_times_and_the_gpu(replay):
    replay.runpytest(*NAIVE, "--benchmark-json", "run.json").assert_outcomes(passed=6)
    data = json.loads((replay.path / "run.json").read_text())
    # the recorded facts, and which GPUs the worker saw (this host has one, and no CUDA_VISIBLE_DEVICES)
    facts = recording()["facts"]
    visible = [{"name": facts["name"], "capability": facts["compute_capability"]}]
    assert data["machine_info"]["gpu"] == {**facts, "cuda_visible_devices": None, "visible_devices": visible}
    by_name = {b["name"]: b for b in data["benchmarks"]}
    assert len(by_name) == 6
    for name, bench in by_name.items():
        samples = np.array(recorded_outcome(f"01_naive.cu::{name}").timing.kernel_s)
        stats = bench["stats"]
        assert stats["rounds"] == samples.size and stats["iterations"] == 1
        assert stats["median"] == pytest.approx(np.median(samples), rel=1e-12)
        assert (stats["min"], stats["max"]) == (samples.min(), samples.max())
        assert stats["mean"] == pytest.approx(samples.mean(), rel=1e-12)
        gemm = bench["extra_info"]["gemm"]
        assert gemm["median_s"] == stats["median"] and gemm["verdict"] == "ok" and gemm["samples"] == samples.size
        assert bench["options"]["timer"].endswith("device_time")
        assert bench["group"] == f"fp32 {gemm['shape']}"


def test_pytest_benchmark_compare_opens_the_saved_json(replay):
    replay.runpytest(*NAIVE, "--benchmark-json", "run.json").assert_outcomes(passed=6)
    compare = subprocess.run(
        [sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "compare", "run.json"],
        cwd=replay.path,
        capture_output=True,
        text=True,
    )
    assert compare.returncode == 0, compare.stderr
    assert "sgemm_naive[fp32-4096x4096x4096-a0.7b1.3]" in compare.stdout


def test_timing_tables_are_printed_and_benchmark_skip_only_verifies(replay):
    result = replay.runpytest(*NAIVE)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "*pytest-gemm timing (device time, CUDA events)*",
            "NVIDIA H100 80GB HBM3, 132 SMs, SM clock 1980 MHz while timing (max 1980)*",
            "fp32:",
            "kernel *4096x4096x4096 *flags",  # a row per kernel, a column per shape: median and % of cuBLAS
            "sgemm_naive *23.67 ms *11.3%*",
            "6 case(s) timed in * s*",
        ]
    )
    skipped = replay.runpytest(*NAIVE, "--benchmark-skip", "--benchmark-json", "none.json")
    skipped.assert_outcomes(passed=6)
    assert "pytest-gemm timing" not in skipped.stdout.str()


def test_benchmark_only_keeps_the_timed_cases_and_drops_the_compile_items(replay):
    result = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "--benchmark-only")
    result.assert_outcomes(passed=6, skipped=2)


def test_machine_info_says_when_there_is_no_gpu(pytester):
    """Without a device the saved machine info says why, and nothing crashes."""
    (pytester.path / "naive.cu").write_text((KERNELS / "01_naive.cu").read_text())
    pytester.makepyfile(test_plain="def test_plain(benchmark):\n    benchmark(sum, [1, 2])\n")
    result = pytester.runpytest(
        "--gemm-kernels",
        "naive.cu",
        "test_plain.py",
        "--gemm-shapes",
        "64",
        "-m",
        "gpu or not gemm",
        "-k",
        "plain or (naive and not a0.7 and not a-1.5)",
        "--benchmark-json",
        "run.json",
    )
    gpu = json.loads((pytester.path / "run.json").read_text())["machine_info"]["gpu"]
    if NO_DEVICE:
        result.assert_outcomes(passed=1, skipped=1)
        assert gpu == {"available": False, "reason": NO_DEVICE}
    else:
        result.assert_outcomes(passed=2)
        assert gpu["available"] is True and gpu["name"]
