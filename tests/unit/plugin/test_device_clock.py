"""The clock pytest-benchmark reads (plugin/benchmark.py): one recorded device time per round."""

from __future__ import annotations

import pytest

from pytest_gemm.plugin.benchmark import DeviceClock


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
