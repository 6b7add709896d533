"""The whole cycle through pytest (pytester) on timings recorded on an H100: update, compare, regression,
accept, pass; and every gate rule, the summary, xdist and the pytest-gemm command. No GPU needed.

The "timed cases" here replay recorded device times through the same code a GPU case uses
(``summarize`` for the metrics, the row it reports); ``REPLAY_SCALE`` slows the kernel down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import KERNELS, NO_DEVICE, RECORDED, recorded_rows

H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
KEYS = sorted(row["test"] for row in recorded_rows())

REPLAY = """
import json, os, pathlib
import pytest
from pytest_gemm.benchmark_bridge import DeviceClock, record_device_times
from pytest_gemm.kernel_files import source_hash
from pytest_gemm.peaks import peak_flops
from pytest_gemm.timing import TimingRun, summarize

DATA = json.load(open({recorded!r}))
SCALE = float(os.environ.get("REPLAY_SCALE", "1"))
GPU = dict(DATA["gpu"], name=os.environ.get("REPLAY_GPU", DATA["gpu"]["name"]))
THROTTLE = [t for t in os.environ.get("REPLAY_THROTTLE", "").split(",") if t]
CLOCKS = [DeviceClock() for _ in DATA["rows"]]


def replayed_row(rec):
    run = TimingRun(tuple(t * SCALE for t in rec["raw"]["kernel_s"]), tuple(rec["raw"]["cublas_s"]),
                    rec["timing_s"], rec["stop"], True, rec["input_copies"], 0)
    m, n, k = (int(v) for v in rec["shape"].split("x"))
    row = {{key: rec[key] for key in ("test", "file", "kernel", "dtype", "shape", "ab", "alpha", "beta")}}
    row.update(summarize(run, flops=2 * m * n * k, throttle=THROTTLE,
                         peak_flops=peak_flops(GPU["name"], (9, 0), GPU["sm_count"], 1980, "fp32")))
    row.update(gpu=GPU["name"], verdict="ok", variant="", nvml_before=rec["nvml_before"], nvml_after=rec["nvml_after"])
    row["source_sha256"] = source_hash(pathlib.Path(rec["file"]))
    return row


@pytest.mark.parametrize("i", range(len(DATA["rows"])), ids=[r["test"].split("::")[1] for r in DATA["rows"]])
def test_timed(i, record_property):
    row = replayed_row(DATA["rows"][i])
    record_property("gemm_gpu", GPU)
    record_property("gemm_case", {{"file": row["file"]}})
    record_property("gemm_timing", row)
    return row
"""

#: The same cases, saved through pytest-benchmark (for the pytest-gemm command, which reads saved runs).
REPLAY_SAVED = """
import pytest
from test_replay import CLOCKS, DATA, SCALE, replayed_row
from pytest_gemm.benchmark_bridge import record_device_times

@pytest.mark.parametrize("i", range(len(DATA["rows"])), ids=[r["test"].split("::")[1] for r in DATA["rows"]])
def test_saved(i, benchmark):
    kernel_s = [t * SCALE for t in DATA["rows"][i]["raw"]["kernel_s"]]
    record_device_times(benchmark, CLOCKS[i], kernel_s, replayed_row(DATA["rows"][i]))
"""

BENCH_CONFTEST = """
import pytest
def pytest_collection_modifyitems(items):
    import test_replay
    for item in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.benchmark(timer=test_replay.CLOCKS[item.callspec.params["i"]]))
"""


@pytest.fixture
def project(pytester, monkeypatch):
    kernels = pytester.mkdir("kernels")
    (kernels / "01_naive.cu").write_text((KERNELS / "01_naive.cu").read_text())
    (kernels / "02_smem_tiling.cu").write_text((KERNELS / "02_smem_tiling.cu").read_text())
    pytester.makepyfile(test_replay=REPLAY.format(recorded=str(RECORDED)), test_replay_saved=REPLAY_SAVED)
    pytester.makeconftest(BENCH_CONFTEST)
    pytester.makeini("[pytest]\ngemm_shapes = 64\n")
    for var in ("REPLAY_SCALE", "REPLAY_GPU", "REPLAY_THROTTLE", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)
    return pytester


def _run(project, *args, scale=None, **env):
    """A run of the replayed cases (real GPU cases are skipped or only verified: timing is replayed)."""
    old = {k: os.environ.get(k) for k in ("REPLAY_SCALE", *env)}
    os.environ["REPLAY_SCALE"] = str(scale or 1)
    os.environ.update(env)
    try:
        return project.runpytest_subprocess("--gemm-kernels", "test_replay.py", "--benchmark-skip", *args)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _entries(project):
    return json.loads((project.path / H100_FILE).read_text())["entries"]


def test_update_compare_regress_accept_pass(project):
    first = _run(project)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(
        [
            "*pytest-gemm gate*",
            "kernel/cuBLAS time ratio, threshold 5% (or the kernel's own): "
            "0 regressed, 0 improved, 0 same, 3 new, 0 unstable",
            f"no baselines for NVIDIA H100 80GB HBM3 ({H100_FILE}): every timed case is new; "
            "record them with --gemm-update-baselines",
        ]
    )
    assert not (project.path / "baselines").exists()

    update = _run(project, "--gemm-update-baselines")
    update.assert_outcomes(passed=3)
    update.stdout.fnmatch_lines(["*pytest-gemm baselines*", f"{H100_FILE}: 3 added, 0 changed, 0 removed"])
    entries = _entries(project)
    assert sorted(entries) == KEYS
    naive = entries["kernels/01_naive.cu::sgemm_naive[fp32-4096x4096x4096]"]
    assert naive["ratio"] == pytest.approx(8.87, rel=0.01) and naive["samples"] == 10
    assert naive["recorded"]["cublas"] == "13.1.0" and naive["recorded"]["sm_clock_mhz"] == [1980, 1980]

    same = _run(project)
    same.assert_outcomes(passed=3)
    same.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 3 same, 0 new, 0 unstable"])

    slower = _run(project, "--junitxml=junit.xml", "--gemm-summary=summary.md", scale=1.10)
    slower.assert_outcomes(failed=3)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(
        [
            "*performance regression: sgemm_naive[[]fp32-4096x4096x4096[]]: kernel/cuBLAS time ratio is +10.0% "
            "against its baseline (threshold 5%, 95% intervals apart)",
            "*kernel/cuBLAS time ratio (gated) *8.87 * 9.757 *+10.0%",
            "*to accept the new number: pytest 'kernels/01_naive.cu::sgemm_naive[[]fp32-4096x4096x4096[]]' "
            "--gemm-kernels --gemm-shapes 4096x4096x4096 --gemm-update-baselines",
            "*REGRESSED +10.0%*",
        ]
    )
    assert "performance regression" in (project.path / "junit.xml").read_text()
    summary = (project.path / "summary.md").read_text()
    assert summary.count("**FAILED** (regressed)") == 3 and "+10.0%" in summary

    accept = _run(project, "--gemm-update-baselines", scale=1.10)
    accept.stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 3 changed, 0 removed"])
    _run(project, scale=1.10).assert_outcomes(passed=3)


@pytest.fixture
def recorded(project):
    _run(project, "--gemm-update-baselines").assert_outcomes(passed=3)
    return project


def test_faster_is_improved_and_small_changes_are_the_same(recorded):
    _run(recorded, scale=0.9).stdout.fnmatch_lines(["*: 0 regressed, 3 improved, 0 same*", "*improved -10.0%*"])
    result = _run(recorded, scale=1.03)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 3 same*"])


def test_threshold_option_and_time_metric(recorded):
    _run(recorded, "--gemm-threshold", "0.02", scale=1.03).assert_outcomes(failed=3)
    result = _run(recorded, "--gemm-gate-metric", "time", scale=1.10)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        ["*median device time is +10.0% against its baseline*", "median device time, threshold 5%*"]
    )


def test_throttled_cases_are_unstable_not_failed_unless_asked(recorded):
    result = _run(recorded, scale=1.5, REPLAY_THROTTLE="power cap")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 0 same, 0 new, 3 unstable", "*unstable, throttled*"])
    strict = _run(recorded, "--gemm-fail-unstable", scale=1.5, REPLAY_THROTTLE="power cap")
    strict.assert_outcomes(failed=3)
    strict.stdout.fnmatch_lines(["*measured while throttled (power cap) (--gemm-fail-unstable / gemm_fail_unstable)*"])


def test_new_cases_can_be_made_to_fail(project):
    result = _run(project, "--gemm-fail-new")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [f"*no baseline entry for kernels/01_naive.cu::sgemm_naive[[]fp32-4096x4096x4096[]] in {H100_FILE}*"]
    )


def test_a_baseline_from_another_gpu_is_never_used(recorded):
    result = _run(recorded, scale=1.5, REPLAY_GPU="NVIDIA A100-SXM4-80GB")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*3 new*", "no baselines for NVIDIA A100-SXM4-80GB (baselines/nvidia-a100-sxm4-80gb.json)*"]
    )


def test_a_changed_kernel_source_is_noted(recorded):
    naive = recorded.path / "kernels" / "01_naive.cu"
    naive.write_text(naive.read_text() + "\n// edited\n")
    result = _run(recorded)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*sgemm_naive *4096x4096x4096*source changed*"])


def test_a_corrupt_file_stops_a_run_and_is_only_replaced_by_an_update(recorded):
    path = recorded.path / H100_FILE
    path.write_text('{"schema": 1, "gpu": "NVIDIA H100 80GB HBM3", "entries": {"k": []}')
    result = _run(recorded)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*pytest-gemm: *{H100_FILE}: not valid JSON*"])
    assert path.read_text().endswith('"k": []}')  # untouched
    update = _run(recorded, "--gemm-update-baselines")
    update.assert_outcomes(passed=3)
    update.stdout.fnmatch_lines(
        [
            f"{H100_FILE}: 3 added*",
            "*note: the unreadable file was kept as baselines/nvidia-h100-80gb-hbm3.unreadable-*.json*",
        ]
    )
    kept = [p.name for p in (recorded.path / "baselines").iterdir() if "unreadable" in p.name]
    assert len(kept) == 1 and sorted(_entries(recorded)) == KEYS
    _run(recorded).assert_outcomes(passed=3)  # the kept copy does not stop later runs


def test_entries_of_gone_cases_are_removed_only_when_their_whole_file_ran(recorded):
    path = recorded.path / H100_FILE
    data = json.loads(path.read_text())
    stale = dict(data["entries"][KEYS[0]], kernel="sgemm_gone")
    data["entries"]["kernels/01_naive.cu::sgemm_gone[fp32-64x64x64]"] = stale
    path.write_text(json.dumps(data))
    # Part of the file selected: the entry stays.
    partial = _run(recorded, "kernels/01_naive.cu", "-k", "not a0.7 and not compile", "--gemm-update-baselines")
    partial.stdout.fnmatch_lines([f"{H100_FILE}: unchanged"])
    assert "kernels/01_naive.cu::sgemm_gone[fp32-64x64x64]" in _entries(recorded)
    # The whole file selected: the entry of a case that no longer exists goes; the others stay.
    whole = _run(recorded, "kernels/01_naive.cu", "--gemm-update-baselines")
    whole.stdout.fnmatch_lines(
        [f"{H100_FILE}: 0 added, 0 changed, 1 removed", "  removed: kernels/01_naive.cu::sgemm_gone[[]fp32-64x64x64[]]"]
    )
    assert sorted(_entries(recorded)) == KEYS


def test_update_under_xdist_writes_once_from_the_controller(project):
    result = _run(project, "-n", "2", "--gemm-update-baselines")
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("3 added") == 1
    assert sorted(_entries(project)) == KEYS
    assert [p.name for p in (project.path / "baselines").iterdir()] == ["nvidia-h100-80gb-hbm3.json"]
    gated = _run(project, "-n", "2", scale=1.10)
    gated.assert_outcomes(failed=3)
    gated.stdout.fnmatch_lines(["*: 3 regressed, 0 improved, 0 same, 0 new, 0 unstable"])


def test_markdown_summary_goes_to_github_step_summary(recorded, tmp_path):
    step = tmp_path / "step.md"
    step.write_text("# earlier step\n")
    result = _run(recorded, "kernels/01_naive.cu", "--gemm-summary", "out/summary.md", GITHUB_STEP_SUMMARY=str(step))
    written = (recorded.path / "out" / "summary.md").read_text()
    assert written.startswith("## pytest-gemm\n\n| case | verdict |")
    assert (
        "| `kernels/01_naive.cu::sgemm_naive[fp32-4096x4096x4096]` | passed (same) | 23.61 ms | 5.82 | 11.3% | +0.0% |"
        in written
    )
    real = [line for line in written.splitlines() if "sgemm_naive[fp32-64x64x64" in line]
    assert len(real) == 3  # the real 64^3 cases: skipped without a GPU (with the reason), else verified (not timed)
    for line in real:
        assert ("| skipped |" in line and "no CUDA device" in line) if NO_DEVICE else "| passed |" in line
    assert step.read_text() == "# earlier step\n" + written
    assert result.ret == pytest.ExitCode.OK


def _cli(project, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest_gemm.cli", *args], cwd=project.path, capture_output=True, text=True
    )


def test_the_command_line_compares_updates_shows_and_prunes_saved_runs(project):
    os.environ["REPLAY_SCALE"] = "1"
    try:
        project.runpytest_subprocess("test_replay_saved.py", "--benchmark-json", "run.json").assert_outcomes(passed=3)
        os.environ["REPLAY_SCALE"] = "1.1"
        project.runpytest_subprocess("test_replay_saved.py", "--benchmark-json", "slow.json").assert_outcomes(passed=3)
    finally:
        os.environ.pop("REPLAY_SCALE")
    missing = _cli(project, "compare", "run.json")
    assert missing.returncode == 2 and f"{H100_FILE}: no such baseline file" in missing.stderr

    update = _cli(project, "update", "--from", "run.json")
    assert update.returncode == 0 and f"{H100_FILE}: 3 added, 0 changed, 0 removed" in update.stdout
    assert sorted(_entries(project)) == KEYS

    same = _cli(project, "compare", "run.json")
    assert same.returncode == 0 and "0 regressed, 0 improved, 3 same, 0 new, 0 unstable" in same.stdout
    slow = _cli(project, "compare", "slow.json")
    assert slow.returncode == 1 and "3 regressed" in slow.stdout
    assert any(line.startswith("+") and "sgemm_naive[fp32-4096x4096x4096]" in line for line in slow.stdout.splitlines())

    show = _cli(project, "show")
    assert show.returncode == 0 and f"{H100_FILE}: NVIDIA H100 80GB HBM3, 3 entries" in show.stdout

    (project.path / "kernels" / "02_smem_tiling.cu").unlink()
    dry = _cli(project, "prune", "--dry-run")
    assert (
        "would remove kernels/02_smem_tiling.cu::sgemm_smem[TILE32-fp32-1024x1024x1024-a0.7b1.3]: "
        "its kernel file is gone" in dry.stdout
    )
    assert len(_entries(project)) == 3
    pruned = _cli(project, "prune")
    assert pruned.returncode == 0 and len(_entries(project)) == 2

    bad = _cli(project, "compare", "nope.json")
    assert bad.returncode == 2 and "nope.json: not a pytest-benchmark JSON file" in bad.stderr
