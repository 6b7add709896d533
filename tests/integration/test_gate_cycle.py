"""The whole cycle through pytest on outcomes recorded on an H100: update, compare, regression, accept,
pass; and every gate rule, the summary, xdist and the pytest-gemm command. No GPU needed.

These runs are real plugin runs: the GPU worker processes serve the recording (tests/replay_backend.py)
instead of running CUDA, and everything after the worker (verdict, record, pytest-benchmark, gate,
baselines, reports) is the code a GPU run uses. ``REPLAY_SCALE`` slows the kernel down.
"""

from __future__ import annotations

import json
import os

import pytest

from support.cli import cli

H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
NAIVE = "kernels/01_naive.cu::sgemm_naive"
KEYS = sorted(
    f"{NAIVE}[fp32-{s}{ab}]" for s in ("512x512x512", "4096x4096x4096") for ab in ("", "-a0.7b1.3", "-a-1.5b0")
)
SMEM = "kernels/02_smem_tiling.cu::sgemm_smem[TILE32-fp32-1024x1024x1024-a0.7b1.3]"


def _run(project, *args, scale=None, **env):
    """A run of the naive kernel's six recorded cases, timed and gated (compile items left out with -m gpu)."""
    old = {k: os.environ.get(k) for k in ("REPLAY_SCALE", *env)}
    os.environ["REPLAY_SCALE"] = str(scale or 1)
    os.environ.update(env)
    paths = [a for a in args if a.startswith("kernels/")] or ["kernels/01_naive.cu"]
    options = [a for a in args if not a.startswith("kernels/")]
    try:
        return project.runpytest("--gemm-kernels", *paths, "-m", "gpu", *options)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _entries(project):
    return json.loads((project.path / H100_FILE).read_text())["entries"]


def test_update_compare_regress_accept_pass(replay):
    first = _run(replay)
    first.assert_outcomes(passed=6)
    first.stdout.fnmatch_lines(
        [
            "*pytest-gemm gate*",
            "kernel/cuBLAS time ratio, threshold 3% (or the kernel's own): "
            "0 regressed, 0 improved, 0 same, 6 new, 0 unstable",
            f"no baselines for NVIDIA H100 80GB HBM3 ({H100_FILE}): every timed case is new; "
            "record them with --gemm-update-baselines",
        ]
    )
    assert not (replay.path / "baselines").exists()

    update = _run(replay, "--gemm-update-baselines")
    update.assert_outcomes(passed=6)
    update.stdout.fnmatch_lines(["*pytest-gemm baselines*", f"{H100_FILE}: 6 added, 0 changed, 0 removed"])
    entries = _entries(replay)
    assert sorted(entries) == KEYS
    naive = entries[f"{NAIVE}[fp32-4096x4096x4096]"]
    assert naive["ratio"] == pytest.approx(8.878, rel=1e-3) and naive["samples"] == 10
    assert naive["recorded"]["cublas"] == "13.1.0" and naive["recorded"]["sm_clock_mhz"] == [1980, 1980]

    same = _run(replay, "--benchmark-json", "same.json")
    same.assert_outcomes(passed=6)
    same.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 6 same, 0 new, 0 unstable"])
    saved = json.loads((replay.path / "same.json").read_text())["benchmarks"]
    assert [b["extra_info"]["gemm"]["gate"]["verdict"] for b in saved] == ["same"] * 6  # the gate's verdict is saved

    slower = _run(replay, "--junitxml=junit.xml", "--gemm-summary=summary.md", scale=1.10)
    slower.assert_outcomes(failed=6)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(
        [
            "*performance regression: sgemm_naive[[]fp32-4096x4096x4096[]]: kernel/cuBLAS time ratio is +10.0% "
            "against its baseline (threshold 3%)",
            "*how sure: noise alone makes a same-code run this slow with a chance of * (a regression needs under "
            "0.0083: 5% for any of the run's 6 gated case(s))",
            "*timed again in a fresh worker: +10.0% (chance *; needs over the threshold and under 0.01): confirmed",
            "*kernel/cuBLAS time ratio (gated) *8.878 * 9.766 *+10.0%",
            f"*to accept the new number: pytest '{NAIVE}[[]fp32-4096x4096x4096[]]' "
            "--gemm-kernels --gemm-shapes 4096x4096x4096 --gemm-update-baselines",
            "*REGRESSED +10.0%*",
        ]
    )
    assert "performance regression" in (replay.path / "junit.xml").read_text()
    summary = (replay.path / "summary.md").read_text()
    assert summary.count("**FAILED** (regressed)") == 6 and "+10.0%" in summary

    accept = _run(replay, "--gemm-update-baselines", scale=1.10)
    accept.stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 6 changed, 0 removed"])
    _run(replay, scale=1.10).assert_outcomes(passed=6)


def test_each_gpu_is_compared_with_its_own_record_or_with_the_range_of_the_others(replay):
    """GPUs of one model differ (H100s: cuBLAS at half precision 1024^3 4% apart with the same code): a GPU that
    recorded an entry is held to its own record; another one to the range of those recorded."""
    _run(replay, "--gemm-update-baselines", REPLAY_UUID="GPU-a").assert_outcomes(passed=6)
    second = _run(replay, "--gemm-update-baselines", scale=1.08, REPLAY_UUID="GPU-b")
    second.stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 6 changed, 0 removed"])
    assert all(len(entry["gpus"]) == 2 for entry in _entries(replay).values())

    other = _run(replay, scale=1.10, REPLAY_UUID="GPU-c")  # 10% over GPU a, 1.9% over GPU b
    other.assert_outcomes(passed=6)
    other.stdout.fnmatch_lines(
        [
            "*: 0 regressed, 0 improved, 6 same, 0 new, 0 unstable",
            "6 case(s) compared with the range of the other GPUs' records (this GPU has none of its own): a "
            "regression is slower than the slowest of them; --gemm-update-baselines adds this GPU's records",
        ]
    )
    own = _run(replay, scale=1.10, REPLAY_UUID="GPU-a")
    own.assert_outcomes(failed=6)
    own.stdout.fnmatch_lines(["*kernel/cuBLAS time ratio is +10.0% against its baseline*"])
    assert "compared with the range" not in own.stdout.str()
    far = _run(replay, scale=1.20, REPLAY_UUID="GPU-c")
    far.assert_outcomes(failed=6)
    far.stdout.fnmatch_lines(
        [
            "*kernel/cuBLAS time ratio is +11.1% against its baseline*",
            "*note: other GPUs: this GPU has no record of its own; the 2 GPU(s) recorded span * to *, and it was "
            "compared with the slowest",
        ]
    )


@pytest.fixture
def recorded(replay):
    _run(replay, "--gemm-update-baselines").assert_outcomes(passed=6)
    return replay


def test_faster_is_improved_and_small_changes_are_the_same(recorded):
    _run(recorded, scale=0.9).stdout.fnmatch_lines(["*improved -10.0%*", "*: 0 regressed, 6 improved, 0 same*"])
    result = _run(recorded, scale=1.02)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 6 same*"])


def test_threshold_option_and_time_metric(recorded):
    _run(recorded, scale=1.04).assert_outcomes(failed=6)
    _run(recorded, "--gemm-threshold", "0.05", scale=1.04).assert_outcomes(passed=6)
    result = _run(recorded, "--gemm-gate-metric", "time", scale=1.10)
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(
        ["*median device time is +10.0% against its baseline*", "median device time, threshold 3%*"]
    )


def test_a_flagged_case_is_timed_again_in_a_fresh_worker_and_passes_when_that_is_not_slower(recorded, tmp_path):
    """docs/baselines.md#the-runs-false-alarms: a case the gate flags (its first timing 10% slower) is timed again in
    a worker started for it; as fast as its baseline there, it passes, flagged as not confirmed, and nothing
    fails."""
    case = "sgemm_naive[fp32-4096x4096x4096]"
    log = tmp_path / "replay.log"
    result = _run(recorded, "-v", REPLAY_ACT=f"01_naive.cu::{case}=slow-once:1.10", REPLAY_LOG=str(log))
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*not confirmed +10.0% then +0.0%*", "*: 0 regressed, 0 improved, 6 same*"])
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    timed = [r["pid"] for r in runs if r["case"].endswith(case) and r["timed"]]
    assert len(timed) == 2 and timed[0] != timed[1]  # timed again, in another worker
    assert sum(1 for r in runs if r["timed"]) == 7  # only the flagged case twice


def test_throttled_cases_are_unstable_not_failed_unless_asked(recorded):
    result = _run(recorded, scale=1.5, REPLAY_THROTTLE="1")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*unstable, throttled*", "*: 0 regressed, 0 improved, 0 same, 0 new, 6 unstable"])
    strict = _run(recorded, "--gemm-fail-unstable", scale=1.5, REPLAY_THROTTLE="1")
    strict.assert_outcomes(failed=6)
    strict.stdout.fnmatch_lines(["*measured while throttled (power cap) (--gemm-fail-unstable / gemm_fail_unstable)*"])


def test_new_cases_can_be_made_to_fail(replay):
    result = _run(replay, "--gemm-fail-new")
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines([f"*no baseline entry for {NAIVE}[[]fp32-4096x4096x4096[]] in {H100_FILE}*"])


def test_a_baseline_from_another_gpu_is_never_used(recorded):
    result = _run(recorded, scale=1.5, REPLAY_GPU="NVIDIA A100-SXM4-80GB")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["*6 new*", "no baselines for NVIDIA A100-SXM4-80GB (baselines/nvidia-a100-sxm4-80gb.json)*"]
    )


def test_a_changed_kernel_source_is_noted(recorded):
    naive = recorded.path / "kernels" / "01_naive.cu"
    naive.write_text(naive.read_text() + "\n// edited\n")
    result = _run(recorded)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["sgemm_naive *23.67 ms *11.3%*source changed*"])  # its row: a column a shape


def test_a_corrupt_file_stops_a_run_and_is_only_replaced_by_an_update(recorded):
    """A damaged file stops a run; --gemm-update-baselines (the advice the run gives) records it afresh, keeping the
    damaged file aside as it was and the file's mode; the command's update needs --force for that
    (tests/integration/test_hostile_runs.py)."""
    path = recorded.path / H100_FILE
    damaged = '{"schema": 1, "gpu": "NVIDIA H100 80GB HBM3", "entries": {"k": []}'
    path.write_text(damaged)
    path.chmod(0o664)
    result = _run(recorded)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: pytest-gemm: {H100_FILE}: not valid JSON (*); fix it there, restore it from version control, or "
         "record it again with --gemm-update-baselines or pytest-gemm update --force (*)"]
    )  # fmt: skip
    assert path.read_text() == damaged  # untouched
    update = _run(recorded, "--gemm-update-baselines")
    update.assert_outcomes(passed=6)
    update.stdout.fnmatch_lines(
        [f"{H100_FILE}: 6 added*", "*note: the unreadable file was kept as nvidia-h100-80gb-hbm3.unreadable-*.json*"]
    )
    (kept,) = [p for p in (recorded.path / "baselines").iterdir() if "unreadable" in p.name]
    assert kept.read_text() == damaged and sorted(_entries(recorded)) == KEYS
    assert path.stat().st_mode & 0o777 == 0o664  # the new file keeps the old one's mode
    _run(recorded).assert_outcomes(passed=6)  # the kept copy does not stop later runs


def test_a_baseline_file_of_a_newer_format_is_never_replaced_by_an_update(recorded):
    """A file a newer pytest-gemm wrote stops a run, and --gemm-update-baselines (which replaces a damaged file)
    leaves it as it is, saying to upgrade pytest-gemm, and fails the run."""
    path = recorded.path / H100_FILE
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema": 2}))
    before = path.read_bytes()
    newer = (
        f"{H100_FILE}: schema version 2 is not one this pytest-gemm reads (1): a newer pytest-gemm wrote it; upgrade "
        "pytest-gemm to use or update it (this version never replaces it, not even with --force or "
        "--gemm-update-baselines)"
    )
    result = _run(recorded)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-gemm: {newer}"])
    update = _run(recorded, "--gemm-update-baselines")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines([f"*error: {newer}; nothing written"])
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if "unreadable" in p.name]


def test_a_baseline_file_recorded_on_another_gpu_model_fails_each_timed_case_and_keeps_its_times(recorded):
    """A baseline file named for this GPU but recorded on another model is never used: each timed case fails with
    the gate's words (no verdict), and its device times still reach pytest-benchmark and the saved run."""
    path = recorded.path / H100_FILE
    path.write_text(json.dumps({**json.loads(path.read_text()), "gpu": "NVIDIA A100-SXM4-80GB"}))
    result = _run(recorded, "--benchmark-json", "run.json")
    result.assert_outcomes(failed=6)
    said = (
        f"pytest-gemm gate: *{H100_FILE}: recorded on 'NVIDIA A100-SXM4-80GB', not on this GPU "
        "('NVIDIA H100 80GB HBM3'); it is not used"
    )
    result.stdout.fnmatch_lines([said])
    assert "threshold 3% (or the kernel's own)" not in result.stdout.str()  # no verdict to count
    saved = json.loads((recorded.path / "run.json").read_text())
    assert len(saved["benchmarks"]) == 6 and all("gate" not in b["extra_info"]["gemm"] for b in saved["benchmarks"])
    assert all(t["message"].startswith("pytest-gemm gate: ") for t in saved["gemm"]["tests"].values())


def test_entries_of_gone_cases_are_removed_only_when_their_whole_file_ran(recorded):
    path = recorded.path / H100_FILE
    data = json.loads(path.read_text())
    stale = dict(data["entries"][KEYS[0]], kernel="sgemm_gone")
    data["entries"]["kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]"] = stale
    path.write_text(json.dumps(data))
    # Part of the file selected: the entry stays.
    partial = _run(recorded, "-k", "not a0.7", "--gemm-update-baselines")
    partial.stdout.fnmatch_lines([f"{H100_FILE}: unchanged"])
    assert "kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]" in _entries(recorded)
    # The whole file selected: the entry of a case that no longer exists goes; the others stay.
    whole = _run(recorded, "--gemm-update-baselines")
    whole.stdout.fnmatch_lines(
        [
            f"{H100_FILE}: 0 added, 0 changed, 1 removed",
            "  removed: kernels/01_naive.cu::sgemm_gone[[]fp32-512x512x512[]]",
        ]
    )
    assert sorted(_entries(recorded)) == KEYS


def test_under_xdist_cases_are_verified_and_the_update_says_why_nothing_was_timed(replay):
    """pytest-benchmark turns benchmarks off under xdist (even with --benchmark-enable): verification only."""
    result = _run(replay, "-n", "2", "--benchmark-enable", "--gemm-update-baselines")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*timing off under xdist*", "nothing recorded: no case was timed and passed*"])
    assert not (replay.path / "baselines").exists()
    slower = _run(replay, "-n", "2", scale=1.10)
    slower.assert_outcomes(passed=6)
    assert "pytest-gemm gate" not in slower.stdout.str()


def test_markdown_summary_goes_to_github_step_summary(recorded, tmp_path):
    step = tmp_path / "step.md"
    step.write_text("# earlier step\n")
    result = _run(recorded, "--gemm-summary", "out/summary.md", GITHUB_STEP_SUMMARY=str(step))
    written = (recorded.path / "out" / "summary.md").read_text()
    assert written.startswith("## pytest-gemm\n\n| case | verdict |")
    line = f"| `{NAIVE}[fp32-4096x4096x4096]` | passed (same) | 23.67 ms | 5.81 | 11.3% | +0.0% |"
    assert line in written
    assert written.count("| passed (same) |") == 6
    assert step.read_text() == "# earlier step\n" + written
    assert result.ret == pytest.ExitCode.OK


def _cli(project, *args):
    return cli(project.path, *args)


def test_the_command_line_compares_updates_shows_and_prunes_saved_runs(replay):
    _run(replay, "--benchmark-json", "run.json").assert_outcomes(passed=6)
    _run(replay, "--benchmark-json", "slow.json", scale=1.1).assert_outcomes(passed=6)
    smem = ["kernels/02_smem_tiling.cu", "--gemm-shapes", "1024", "-k", "TILE32 and a0.7", "--benchmark-json"]
    _run(replay, *smem, "smem.json").assert_outcomes(passed=1, deselected=9)
    missing = _cli(replay, "compare", "run.json")
    assert missing.returncode == 2 and f"{H100_FILE}: no such baseline file" in missing.stderr

    update = _cli(replay, "update", "--from", "run.json")
    assert update.returncode == 0 and f"{H100_FILE}: 6 added, 0 changed, 0 removed" in update.stdout
    assert sorted(_entries(replay)) == KEYS
    assert _cli(replay, "update", "--from", "smem.json").returncode == 0

    same = _cli(replay, "compare", "run.json")
    assert same.returncode == 0 and "0 regressed, 0 improved, 6 same, 0 new, 0 unstable" in same.stdout
    slow = _cli(replay, "compare", "slow.json")
    assert slow.returncode == 1 and "6 regressed" in slow.stdout
    assert any(line.startswith("+") and "sgemm_naive[fp32-4096x4096x4096]" in line for line in slow.stdout.splitlines())
    lenient = _cli(replay, "compare", "slow.json", "--threshold", "0.2")  # the plugin's option, shared
    assert lenient.returncode == 0 and "6 same" in lenient.stdout
    wrong = _cli(replay, "compare", "slow.json", "--gate-metric", "tflops")
    assert wrong.returncode == 2 and "expected one of ratio, time, got 'tflops'" in wrong.stderr

    show = _cli(replay, "show")
    assert show.returncode == 0 and f"{H100_FILE}: NVIDIA H100 80GB HBM3, 7 entries" in show.stdout

    (replay.path / "kernels" / "02_smem_tiling.cu").unlink()
    dry = _cli(replay, "prune", "--dry-run")
    assert f"would remove {SMEM}: its kernel file is gone" in dry.stdout
    assert len(_entries(replay)) == 7
    pruned = _cli(replay, "prune")
    assert pruned.returncode == 0 and sorted(_entries(replay)) == KEYS

    bad = _cli(replay, "compare", "nope.json")
    assert bad.returncode == 2
    assert "nope.json: not a pytest-benchmark JSON file (cannot be read: No such file or directory)" in bad.stderr
