"""Hand device times to pytest-benchmark through its public API.

pytest-benchmark times a callable with a clock it is given: a per-test ``timer`` (the
``benchmark`` marker's keyword) read before and after each round of ``benchmark.pedantic``.
:class:`DeviceClock` is such a timer, and the "callable" only advances it by the next recorded
device time (CUPTI kernel records or CUDA events). Every statistic pytest-benchmark computes,
prints, saves and compares is then a statistic of device times, with no host clock involved.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["DeviceClock", "record_device_times"]


class DeviceClock:
    """A pytest-benchmark timer that reads 0 before a round and the round's device time after it."""

    __name__ = "device_time"  # what pytest-benchmark shows and saves as the timer's name (the clock: gemm.timer)
    __module__ = "pytest_gemm"

    def __init__(self) -> None:
        self._pending: deque[float] = deque()
        self._reading = 0.0

    def __call__(self) -> float:
        reading, self._reading = self._reading, 0.0
        return reading

    def load(self, durations: Iterable[float]) -> None:
        self._pending = deque(float(d) for d in durations)
        self._reading = 0.0

    def tick(self) -> None:
        """One round: the next reading is the next recorded duration."""
        self._reading = self._pending.popleft()


def record_device_times(benchmark: Any, clock: DeviceClock, durations: list[float], extra: dict[str, Any]) -> None:
    """Record ``durations`` (seconds) as the benchmark's rounds and ``extra`` under ``extra_info['gemm']``.

    ``clock`` must be the timer the test's ``benchmark`` marker gave pytest-benchmark.
    """
    if not durations:
        raise ValueError("no device times to record")
    clock.load(durations)
    benchmark.extra_info["gemm"] = extra
    benchmark.pedantic(clock.tick, rounds=len(durations), iterations=1, warmup_rounds=0)
