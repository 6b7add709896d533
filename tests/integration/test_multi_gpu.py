"""Every GPU of a host: which GPU each worker gets, and runs over recorded device lists.

The device lists are recorded hosts' (names CUDA reported); the session runs use the replay backend
(tests/replay_backend.py), whose workers see the GPUs that ``CUDA_VISIBLE_DEVICES`` leaves them, as
CUDA would, and log which GPU ran each case and when. No GPU is needed, and none is pretended to
be present for a GPU test: the acceptance on two real GPUs is in scripts/gpu-check.sh.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

import pytest

from pytest_gemm.isolation.devices import timing_model

H200_X2 = ["NVIDIA H200", "NVIDIA H200"]  # nvidia-smi -L of a two-H200 host, as CUDA names them
MIXED = ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]


def _log(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _verdicts(result):
    return {test: word for word, test in re.findall(r"^(PASSED|FAILED|SKIPPED) (\S+)", result.stdout.str(), re.M)}


def _run(project, monkeypatch, *args, devices=H200_X2, sleep="0.2", outer=None, kernels="kernels/01_naive.cu"):
    log = project.path / f"replay-{len(list(project.path.glob('replay-*')))}.jsonl"
    monkeypatch.setenv("REPLAY_DEVICES", ";".join(devices))
    monkeypatch.setenv("REPLAY_LOG", str(log))
    monkeypatch.setenv("REPLAY_SLEEP", sleep)
    if outer is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", outer)
    result = project.runpytest("--gemm-kernels", kernels, "-m", "gpu", "-rA", *args)
    return result, _log(log) if log.exists() else []


def _gpu(entry):
    """The GPU a logged case ran on: the first worker starts with the outer list (None: unset) and runs on its
    first GPU, CUDA's device 0, which tells it the others; the others are pinned to one entry each."""
    return (entry["pin"] or "0").split(",")[0]


def test_cases_run_on_both_gpus_at_once_and_never_two_at_once_on_one(replay, monkeypatch):
    result, log = _run(replay, monkeypatch, outer="1,0", kernels="kernels", sleep="0.3")
    result.assert_outcomes(passed=6, skipped=12)  # the recording holds the naive kernel's cases
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: 2 GPUs, one worker each: GPU 0 (CUDA_VISIBLE_DEVICES=1) NVIDIA H200; "
            "GPU 1 (CUDA_VISIBLE_DEVICES=0) NVIDIA H200",
            "pytest-gemm: 2 GPU worker process(es) (cases run: GPU 0 (CUDA_VISIBLE_DEVICES=1): *, "
            "GPU 1 (CUDA_VISIBLE_DEVICES=0): *)*",
        ]
    )
    assert len(log) == 18 and {entry["pin"] for entry in log} == {"1,0", "0"}
    by_pin = defaultdict(list)
    for entry in log:
        by_pin[_gpu(entry)].append((entry["start"], entry["end"]))
    for spans in by_pin.values():  # one GPU: one case at a time
        spans.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
    overlaps = [(a, b) for a in by_pin["0"] for b in by_pin["1"] if a[0] < b[1] and b[0] < a[1]]
    assert overlaps, "the two GPUs never worked at the same time"


def test_two_gpus_give_the_verdicts_one_gives(replay, monkeypatch):
    both, _ = _run(replay, monkeypatch, "--benchmark-json", "two.json", sleep="0")
    one, log = _run(replay, monkeypatch, "--gemm-gpus", "1", "--benchmark-json", "one.json", sleep="0")
    assert _verdicts(both) == _verdicts(one) and len(_verdicts(one)) == 6
    assert {_gpu(entry) for entry in log} == {"0"}
    timed = [json.loads((replay.path / f).read_text())["benchmarks"] for f in ("two.json", "one.json")]
    assert sorted(b["fullname"] for b in timed[0]) == sorted(b["fullname"] for b in timed[1])  # each case once
    ratios = [{b["fullname"]: b["extra_info"]["gemm"]["ratio"] for b in runs} for runs in timed]
    assert ratios[0] == ratios[1]


def test_on_mixed_models_each_timed_case_runs_on_its_model_and_updates_that_models_baselines(replay, monkeypatch):
    result, log = _run(replay, monkeypatch, "--gemm-update-baselines", devices=MIXED, sleep="0")
    result.assert_outcomes(passed=6)
    pin_model = dict(zip(("0", "1"), MIXED, strict=True))
    for entry in log:
        assert pin_model[_gpu(entry)] == timing_model(entry["case"], MIXED), entry
    written = {p.name: json.loads(p.read_text()) for p in (replay.path / "baselines").glob("*.json")}
    assert set(written) == {"nvidia-h100-80gb-hbm3.json", "nvidia-h200.json"}
    recorded = {name: set(data["entries"]) for name, data in written.items()}
    assert not recorded["nvidia-h100-80gb-hbm3.json"] & recorded["nvidia-h200.json"]
    assert sum(len(keys) for keys in recorded.values()) == 6
    assert written["nvidia-h200.json"]["gpu"] == "NVIDIA H200"
    text = result.stdout.str()  # one timing table per model, each under its own GPU's line
    assert text.count("NVIDIA H100 80GB HBM3, 132 SMs") == 1 and text.count("NVIDIA H200, 132 SMs") == 1


def test_gemm_gpus_is_checked(replay):
    result = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "--gemm-gpus", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gemm-gpus / gemm_gpus: expected an integer from 1 to 4096, got '0'*"])


def test_a_long_run_says_in_its_progress_column_what_each_gpu_did_and_how_long_is_left(replay, monkeypatch):
    monkeypatch.setenv("REPLAY_DEVICES", ";".join(H200_X2))
    result = replay.runpytest(
        "--gemm-kernels", "kernels", "-m", "gpu", "--gemm-shapes", "quick,standard,edge", "--benchmark-skip"
    )
    assert result.ret == pytest.ExitCode.OK
    notes = re.findall(
        r"\[ *\d+%, GPU 0: \d+( busy)?, GPU 1: \d+( busy)?(, \d+ waiting)?, ~\d+s left\]", result.stdout.str()
    )
    assert notes, result.stdout.str()
    assert any(busy0 or busy1 for busy0, busy1, _ in notes)  # while the run goes on, a GPU works on a case


SKIP_ONE = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "sgemm_naive[fp32-512x512x512-a0.7b1.3]":
            item.add_marker(pytest.mark.skip(reason="skipped by the project"))
"""


def test_a_case_whose_item_will_not_run_is_not_sent_ahead(replay, monkeypatch):
    replay.makeconftest(replay.path.joinpath("conftest.py").read_text() + SKIP_ONE)
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512-a0.7b1.3]=hang")
    result, log = _run(replay, monkeypatch, "--gemm-timeout", "30", sleep="0")
    result.assert_outcomes(passed=5, skipped=1)
    assert len(log) == 5 and not any("a0.7b1.3" in e["case"] and "512x512x512" in e["case"] for e in log)
    assert result.duration < 25  # the hanging case never ran


def test_a_gpu_whose_worker_cannot_start_is_taken_out_of_service_and_the_others_run_its_cases(replay, monkeypatch):
    monkeypatch.setenv("REPLAY_BROKEN_PIN", "1")
    result, log = _run(replay, monkeypatch, sleep="0.5")  # long enough for GPU 1's start to fail
    result.assert_outcomes(passed=6)
    assert {_gpu(entry) for entry in log} == {"0"} and len(log) == 6
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: GPU 1 (CUDA_VISIBLE_DEVICES=1) was taken out of service (*the GPU at "
            "CUDA_VISIBLE_DEVICES=1 is broken*); the other GPUs ran its cases"
        ]
    )


def test_stopping_at_the_first_failure_runs_no_case_beyond_the_cases_sent_ahead(replay, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512]=exit:3")
    result, log = _run(replay, monkeypatch, "-x", sleep="1")
    result.assert_outcomes(failed=1)
    assert len(log) <= 4  # the failed case's worker died before logging; the 1 s cases running ahead were stopped
    assert result.duration < 20  # what was running ahead was stopped, not waited for


def test_under_xdist_each_xdist_worker_pins_its_gpu_worker_to_one_gpu(replay, monkeypatch):
    result, log = _run(replay, monkeypatch, "-n", "2", "--benchmark-skip", sleep="0")
    result.assert_outcomes(passed=6)
    assert {_gpu(entry) for entry in log} == {"0", "1"}
    assert {entry["pin"] for entry in log} <= {None, "1"}  # gw1 started pinned to GPU 1 after its first look


FAKE_SANITIZER = """#!{python}
import json, sys, time
start = time.time()
time.sleep(0.5)
log = sys.argv[sys.argv.index("--log-file") + 1]
open(log, "w").write("========= COMPUTE-SANITIZER\\n========= ERROR SUMMARY: 0 errors\\n")
with open({record!r}, "a") as out:
    out.write(json.dumps({{"start": start, "end": time.time()}}) + "\\n")
"""


def test_a_compute_sanitizer_run_has_the_gpus_to_itself(replay, monkeypatch):
    import sys

    tools = replay.mkdir("fake-bin")
    record = replay.path / "sanitizer.jsonl"
    tool = tools / "compute-sanitizer"
    tool.write_text(FAKE_SANITIZER.format(python=sys.executable, record=str(record)))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{__import__('os').environ['PATH']}")
    result, log = _run(
        replay, monkeypatch, "--gemm-sanitize", "memcheck", "-m", "gpu or gemm_sanitize", kernels="kernels", sleep="0.3"
    )
    # the stand-in checks nothing, so its items fail ("the kernel was not launched"); what matters is when it ran
    result.assert_outcomes(passed=6, skipped=12, failed=2)
    spans = _log(record)
    assert len(spans) == 2 and len(log) == 18
    for span in spans:
        assert not [e for e in log if e["start"] < span["end"] and span["start"] < e["end"]]


def test_last_failed_and_benchmark_only_choose_the_items_as_usual_on_two_gpus(replay, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-4096x4096x4096]=exit:3")
    first, _ = _run(replay, monkeypatch, sleep="0")
    first.assert_outcomes(passed=5, failed=1)
    monkeypatch.delenv("REPLAY_ACT")
    again, log = _run(replay, monkeypatch, "--lf", sleep="0")
    again.assert_outcomes(passed=1)
    assert [entry["case"] for entry in log] == ["kernels/01_naive.cu::sgemm_naive[fp32-4096x4096x4096]"]
    only, log = _run(replay, monkeypatch, "--benchmark-only", "--benchmark-json", "only.json", sleep="0")
    only.assert_outcomes(passed=6)
    saved = json.loads((replay.path / "only.json").read_text())["benchmarks"]
    assert len(saved) == 6 and len({b["fullname"] for b in saved}) == 6 and all(e["timed"] for e in log)


def test_a_timed_case_runs_on_the_gpu_that_recorded_its_baseline(replay, monkeypatch):
    """GPUs of one model time differently, so a case is held to the range of the others' records on a GPU that has
    none of its own (a wider spread: a smaller slowdown passes). On a host where one GPU recorded a case's baseline,
    the case is timed there; the first GPU free takes it only when its item waits for it."""
    monkeypatch.setenv("REPLAY_UUIDS", "1")  # each GPU its own identity, as NVML's UUIDs give them
    on_second = "a0.7b1.3"
    _run(replay, monkeypatch, "--gemm-update-baselines", "-k", on_second, outer="1", sleep="0")[0].assert_outcomes(
        passed=2
    )
    _run(replay, monkeypatch, "--gemm-update-baselines", "-k", f"not {on_second}", outer="0", sleep="0")[
        0
    ].assert_outcomes(passed=4)
    entries = json.loads((replay.path / "baselines" / "nvidia-h200.json").read_text())["entries"]
    assert all(len(entry["gpus"]) == 1 for entry in entries.values())

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # both GPUs
    result, log = _run(replay, monkeypatch, sleep="1")  # each GPU's worker has started before its cases are due
    result.assert_outcomes(passed=6)
    assert {entry["case"].split("::")[1]: _gpu(entry) for entry in log} == {
        name: "1" if on_second in name else "0" for name in (e.split("::")[1] for e in entries)
    }
    result.stdout.fnmatch_lines(["*: 0 regressed, 0 improved, 6 same, 0 new, 0 unstable"])
    assert "compared with the range" not in result.stdout.str()


ANOTHER_ARCH = ["NVIDIA H200", "NVIDIA A100-SXM4-80GB@8.0"]


@pytest.mark.parametrize(("devices", "ahead"), [(H200_X2, True), (ANOTHER_ARCH, False)], ids=["same", "other"])
def test_a_later_gpu_of_the_first_ones_arch_starts_its_worker_and_standby_at_once(replay, monkeypatch, devices, ahead):
    """A GPU after the first starts its worker and its standby side by side, both warmed (the first worker filled
    CuPy's cache, which is per architecture): its first timing waits for no standby started only after its worker.
    A GPU of another architecture starts as the first did: a full warm-up, then its standby."""
    starts = replay.path / "starts.jsonl"
    monkeypatch.setenv("REPLAY_STANDBY", "1")  # a start takes a second, and the backend keeps standbys
    monkeypatch.setenv("REPLAY_STARTS", str(starts))
    # a case takes a second, so GPU 1's worker is up while cases remain, and its first timing waits for its standby
    result, _ = _run(replay, monkeypatch, devices=devices, sleep="1")
    result.assert_outcomes(passed=6)
    second = sorted((s for s in _log(starts) if s["pin"] == "1"), key=lambda s: s["start"])
    assert len(second) == 2, second  # its worker and one standby: nothing crashed
    assert [s["warmed"] for s in second] == ([True, True] if ahead else [False, True])
    side_by_side = second[1]["start"] < second[0]["end"]
    assert side_by_side == ahead, second
