"""The timer's warm-up (docs/timing.md#timing), on the CPU: the batches' code driven by stand-in CUDA events whose
elapsed times are set, and launches that count themselves. Two rounds, then one round for each set of inputs the
case rotates through (at least eight), more where the warm-up's device time asks for them, at most a batch; then the
timed rounds."""

from __future__ import annotations

import pytest

from pytest_gemm.records.request import TimingSettings
from pytest_gemm.worker.batches import Batches
from pytest_gemm.worker.rounds import MAX_BATCH, WARM_ROUNDS


class _Event:
    def __init__(self) -> None:
        self.at = 0.0

    def record(self, stream: _Stream) -> None:
        stream.now += stream.step_ms
        self.at = stream.now


class _Stream:
    def __init__(self, step_ms: float) -> None:
        self.now, self.step_ms = 0.0, step_ms  # each record one launch's time on the device after the one before

    def synchronize(self) -> None:
        pass


class _Cuda:
    Event = _Event

    @staticmethod
    def get_elapsed_time(start: _Event, end: _Event) -> float:
        return end.at - start.at


class _Cupy:
    cuda = _Cuda


def _rounds(copies: int, launch_ms: float, warmup_s: float = 0.0) -> tuple[int, int]:
    """The kernel's launches in the warm-up and in the timed batches, for a case of ``copies`` sets of inputs whose
    launches (the kernel's and cuBLAS's alike) each take ``launch_ms`` by the events."""
    stream = _Stream(launch_ms)
    batches = Batches(_Cupy(), stream, mark=lambda *a: None, spin=lambda *a: None)
    launched: list[int] = []
    sets = list(range(copies))
    run = (sets, sets, lambda ops: None, launched.append, lambda ops: None)
    settings = TimingSettings(warmup_s=warmup_s, max_time=0.0)
    measured, rounds, _, timer = batches.timed(run, (None, "no CUPTI here"), settings, lambda: None, 0.0,
                                               watched=False, after=None)  # fmt: skip
    assert timer == "events" and rounds == measured.rounds == len(measured.events_k)
    return len(launched) - rounds, rounds


@pytest.mark.parametrize("copies", [1, 10, 20, 32])
def test_the_warm_up_meets_each_set_of_inputs_once_after_two_rounds(copies):
    warm, timed = _rounds(copies, launch_ms=0.02)
    assert warm == 2 + max(copies, WARM_ROUNDS)
    assert timed >= TimingSettings().min_samples


def test_a_warm_up_asked_for_device_time_runs_until_it_has_it_within_a_batch():
    assert _rounds(10, launch_ms=0.1, warmup_s=0.0039)[0] == 2 + 20  # 3.9 ms at 0.2 ms a round (its two launches)
    assert _rounds(10, launch_ms=0.001, warmup_s=1.0)[0] == 2 + MAX_BATCH
