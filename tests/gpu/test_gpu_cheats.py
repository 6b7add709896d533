"""On the GPU: Python kernels that cheat from inside the worker (docs/verification.md#the-harness-unchanged) fail,
each named for what it did, timed or not, and the run goes on; the honest control passes. Needs a CUDA device."""

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


def test_the_honest_control_passes_and_is_timed(cheats_run):
    outcomes = outcomes_in(cheats_run)
    assert {name: outcomes.get(name) for name in _names("honest")} == dict.fromkeys(_names("honest"), "PASSED")


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_fails_named_for_what_it_did(cheats_run, cheat):
    outcomes = outcomes_in(cheats_run)
    assert {name: outcomes.get(name) for name in _names(cheat)} == dict.fromkeys(_names(cheat), "FAILED"), cheats_run[
        -4000:
    ]
    for name in _names(cheat):
        text = failure_section(cheats_run, name)
        assert all(said in text for said in CHEATS[cheat]) and "the worker was replaced" in text, text
