"""NVML: throttle evidence from samples (pure), PCI bus ids and a missing NVML in the worker's monitor."""

from __future__ import annotations

from pytest_gemm.judge.throttle import throttle_flags
from pytest_gemm.worker.nvml import bus_key, open_monitor

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
