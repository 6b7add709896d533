"""pytest-benchmark records, prints, saves and compares device times (recorded on an H100), and the
timing report and machine info work without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pytest_gemm.benchmark_bridge import DeviceClock

from conftest import KERNELS, NO_DEVICE, RECORDED, recorded_rows

REPLAY_TEST = """
import json
import pytest
from pytest_gemm.benchmark_bridge import DeviceClock, record_device_times

ROWS = json.load(open({recorded!r}))["rows"]
CLOCKS = [DeviceClock() for _ in ROWS]

@pytest.mark.parametrize("i", range(len(ROWS)), ids=[r["test"].split("::")[1] for r in ROWS])
def test_replay(i, benchmark, record_property):
    row = ROWS[i]
    record_property("gemm_timing", row)
    record_device_times(benchmark, CLOCKS[i], row["raw"]["kernel_s"], row)
"""


def test_device_clock_reads_one_recorded_duration_per_round():
    clock = DeviceClock()
    clock.load([0.5, 0.25])
    readings = []
    for _ in range(2):
        start = clock()
        clock.tick()
        readings.append(clock() - start)
    assert readings == [0.5, 0.25]
    with pytest.raises(IndexError):
        clock.tick()


@pytest.fixture
def replayed(pytester):
    """A run whose benchmarks replay the recorded device times through the bridge."""
    pytester.makepyfile(test_replay=REPLAY_TEST.format(recorded=str(RECORDED)))
    # The marker must be on the item before pytest-benchmark's fixture reads it: add it at collection.
    pytester.makeconftest(
        """
import pytest
def pytest_collection_modifyitems(items):
    import test_replay
    for item in items:
        i = item.callspec.params["i"]
        item.add_marker(pytest.mark.benchmark(timer=test_replay.CLOCKS[i]))
"""
    )
    return pytester


def test_saved_json_holds_the_device_times(replayed):
    result = replayed.runpytest("--benchmark-json", "run.json")
    result.assert_outcomes(passed=3)
    data = json.loads((replayed.path / "run.json").read_text())
    by_name = {b["name"]: b for b in data["benchmarks"]}
    for row in recorded_rows():
        bench = by_name[f"test_replay[{row['test'].split('::')[1]}]"]
        samples = np.array(row["raw"]["kernel_s"])
        stats = bench["stats"]
        assert stats["rounds"] == samples.size and stats["iterations"] == 1
        assert stats["median"] == pytest.approx(np.median(samples), rel=1e-12)
        assert (stats["min"], stats["max"]) == (samples.min(), samples.max())
        assert stats["mean"] == pytest.approx(samples.mean(), rel=1e-12)
        assert bench["extra_info"]["gemm"]["ratio"] == row["ratio"]
        assert bench["options"]["timer"].endswith("cuda_event_time")


def test_pytest_benchmark_compare_opens_the_saved_json(replayed):
    replayed.runpytest("--benchmark-json", "run.json").assert_outcomes(passed=3)
    compare = subprocess.run(
        [sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "compare", "run.json"],
        cwd=replayed.path,
        capture_output=True,
        text=True,
    )
    assert compare.returncode == 0, compare.stderr
    for row in recorded_rows():
        assert f"test_replay[{row['test'].split('::')[1]}]" in compare.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_timing_tables_are_printed_from_reports(replayed, workers):
    result = replayed.runpytest("--gemm-kernels", "test_replay.py", *workers)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*pytest-gemm timing (device time, CUDA events)*",
            "fp32:",
            "kernel *shape *median *TFLOP/s *% cuBLAS*noise *n *flags",
            "sgemm_naive *4096x4096x4096 *23.61 ms *5.82 *11.3%*",
            "3 case(s) timed in 1.0 s*",
        ]
    )


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
