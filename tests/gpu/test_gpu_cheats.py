"""On the GPU: Python kernels that cheat from inside the worker (docs/verification.md#the-harness-unchanged) fail,
each named for what it did, timed or not, and the run goes on; the honest control passes. Kernels that replay
results when timed (docs/verification.md#fresh-inputs-for-timed-launches) fail, named by the round of their first
wrong timed output. Needs a CUDA device."""

from __future__ import annotations

import pytest

from support import TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = "256x256x256,1024x1024x1024"
#: each cheat, and what its failure must say (the phase it is found in: its setup call's, or the next)
CHEATS = {
    "faster_clock": ("changed pytest-gemm's worker while setting up: cupy.cuda.get_elapsed_time replaced",),
    "kind_statistics": ("worker while setting up: pytest_gemm.judge.stats.median_interval replaced",),
    "clock_by_callback": ("changed pytest-gemm's worker while", ": cupy.cuda.get_elapsed_time replaced"),
    "deferred": ("left a thread running while setting up: later-gemm",),
}


@pytest.fixture(scope="module")
def cheats_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("cheats")
    return run_kernel_files(work, TESTS / "kernels_cheats", ("in_process.py",), "--gemm-shapes", SHAPES)


def _names(kernel: str) -> set[str]:
    return {f"{kernel}[fp32-{shape}]" for shape in SHAPES.split(",")}


def _failures(run: str, kernel: str) -> list[str]:
    """Each case of ``kernel`` failed in ``run``: their failure sections."""
    outcomes, names = outcomes_in(run), _names(kernel)
    assert {name: outcomes.get(name) for name in names} == dict.fromkeys(names, "FAILED"), run[-4000:]
    return [failure_section(run, name) for name in names]


def test_the_honest_control_passes_and_is_timed(cheats_run):
    outcomes = outcomes_in(cheats_run)
    assert {name: outcomes.get(name) for name in _names("honest")} == dict.fromkeys(_names("honest"), "PASSED")


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_fails_named_for_what_it_did(cheats_run, cheat):
    for text in _failures(cheats_run, cheat):
        assert all(said in text for said in CHEATS[cheat]) and "the worker was replaced" in text, text


#: each replaying kernel, and what its first wrong timed output may be found to have returned (CuPy refuses to capture
#: their cuBLAS call into a CUDA graph, and a launch that replays a kept result is as wrong called again: timing names
#: them, docs/verification.md#cuda-graphs)
REPLAYS = {
    "by_address": ("an earlier result of the same buffers", "the result for the inputs as verified"),
    "by_shape": ("the result for the inputs as verified",),
    "previous_after_three": ("the previous round's result", "the result for the inputs as verified"),
}


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("replay")
    return run_kernel_files(work, TESTS / "kernels_cheats", ("replay.py",), "--gemm-shapes", SHAPES)


@pytest.mark.parametrize("cheat", sorted(REPLAYS))
def test_each_replay_fails_named_by_its_round(replay_run, cheat):
    for text in _failures(replay_run, cheat):
        assert "correct when verified, wrong when timed: round " in text, text
        assert any(f" returned {what}" in text for what in REPLAYS[cheat]), text
        assert "(each timed launch had inputs of its own" in text, text


def test_a_cache_keyed_by_the_inputs_values_never_hits_and_passes(replay_run):
    """Fresh inputs never repeat: a cache keyed on them gains nothing, and the kernel is as right as it computes."""
    outcomes = outcomes_in(replay_run)
    assert {name: outcomes.get(name) for name in _names("by_content")} == dict.fromkeys(_names("by_content"), "PASSED")


def test_a_persisting_l2_window_is_reset_after_each_call_and_flagged(tmp_path):
    """docs/verification.md#persisting-l2: the kernel is right, so it passes; its rows say the window was reset."""
    pytest.importorskip("cuda.bindings", reason="the kernel sets its window through cuda-bindings")
    out = run_kernel_files(tmp_path, TESTS / "kernels_cheats", ("l2_window.py",), "--gemm-shapes", SHAPES, "-vv")
    names = _names("persisting_window")
    outcomes = outcomes_in(out)
    assert {name: outcomes.get(name) for name in names} == dict.fromkeys(names, "PASSED"), out[-4000:]
    assert out.count("persisting L2 reset") >= len(names), out[-4000:]
    rows = [line for line in out.splitlines() if line.startswith("honest ")]  # the kernel that sets none, first
    assert rows and not any("persisting L2" in line for line in rows), rows
