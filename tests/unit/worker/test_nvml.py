"""NVML: throttle evidence from samples (pure), PCI bus ids, a missing NVML in the worker's monitor, and the states read
around a case's timed launches on a thread beside the timer."""

from __future__ import annotations

import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

from pytest_gemm.judge.throttle import PERF_POLICIES, throttle_flags
from pytest_gemm.worker.nvml import GpuMonitor, StateAround, bus_key, open_monitor

CALM = {"clock_event_reasons": 0x1, "violation_ns": {"power": 1000, "thermal": 0}}  # idle: harmless


def test_no_throttle_evidence():
    assert throttle_flags(CALM, CALM) == []
    assert throttle_flags({}, {}) == []  # no NVML: no evidence either way


def test_throttle_reasons_in_either_sample_count_once():
    hot = {"clock_event_reasons": 0x4 | 0x20, "violation_ns": {"power": 1000, "thermal": 0}}
    assert throttle_flags(CALM, hot) == ["power cap", "sw thermal"]
    assert throttle_flags(hot, hot) == ["power cap", "sw thermal"]


def test_violation_time_that_grew_during_timing_counts():
    later = {"clock_event_reasons": 0, "violation_ns": {"power": 12_001_000, "thermal": 0}}
    assert throttle_flags(CALM, later) == ["power violation 12.0 ms"]


def test_pci_bus_ids_in_cuda_and_nvml_forms_match():
    assert bus_key("0000:18:00.0") == bus_key("00000000:18:00.0") == (0, 0x18, 0, 0)
    assert bus_key(b"00000000:AF:00.1") == (0, 0xAF, 0, 1)
    assert bus_key("not a bus id") is None


def test_a_monitor_without_nvml_or_device_says_why_and_samples_nothing():
    monitor = open_monitor(None)  # no driver here, or no CUDA device to match
    assert not monitor.available and monitor.reason
    assert monitor.facts() == {"nvml": False, "nvml_reason": monitor.reason}
    assert monitor.sample() == {}


class _Nvml:
    """Stands in for NVML's bindings: a power violation counter the test moves, each read of it slow, and the thread
    each sample was read on."""

    def __init__(self) -> None:
        self.power_ns, self.threads = 1000, []

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        time.sleep(0.02)
        self.threads.append(threading.current_thread())
        return types.SimpleNamespace(violationTime=self.power_ns if policy == PERF_POLICIES["power"] else 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0

    def nvmlDeviceGetPowerUsage(self, handle):
        return 100_000

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 40


def test_the_states_around_the_timed_launches_are_read_beside_the_timer_each_at_its_side():
    nvml = _Nvml()
    with ThreadPoolExecutor(1) as pool:
        state = StateAround(GpuMonitor(nvml, handle=object()), pool)  # the state before: read while the timer sets up
        state.timing()  # before the first timed launch: the state before is read
        assert len(nvml.threads) == len(PERF_POLICIES)
        nvml.power_ns += 12_000_000  # throttled while timed
        state.timed()  # the last timed launch is done: the state after is read from now on
        deadline = time.monotonic() + 10
        while len(nvml.threads) < 2 * len(PERF_POLICIES) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(nvml.threads) == 2 * len(PERF_POLICIES)  # read without waiting for samples()
        before, after = state.samples()
    assert throttle_flags(before, after) == ["power violation 12.0 ms"]
    assert threading.current_thread() not in nvml.threads


def test_without_a_monitor_the_states_around_timing_are_empty():
    state = StateAround()
    state.timing()
    assert state.samples() == ({}, {})  # and the state after is read even where timing ended before timed()
