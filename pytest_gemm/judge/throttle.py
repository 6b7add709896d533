"""Reading NVML's samples: why the clocks were held down while a case was timed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PERF_POLICIES", "THROTTLE_REASONS", "reason_names", "throttle_flags"]

#: Clock-event reasons (NVML bit masks) that mean the clocks were held down while we measured.
THROTTLE_REASONS = {
    0x4: "power cap",
    0x8: "hw slowdown",
    0x20: "sw thermal",
    0x40: "hw thermal",
    0x80: "power brake",
}
#: The other reasons, reported but harmless for timing.
OTHER_REASONS = {0x1: "idle", 0x2: "app clocks", 0x10: "sync boost", 0x100: "display clocks"}
#: NVML's performance policies whose cumulative violation time is sampled
PERF_POLICIES = {"power": 0, "thermal": 1}  # NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL


def reason_names(mask: int | None) -> list[str]:
    """The names of the clock-event reasons set in ``mask``."""
    if not mask:
        return []
    names = {**THROTTLE_REASONS, **OTHER_REASONS}
    return [name for bit, name in sorted(names.items()) if mask & bit]


def throttle_flags(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """Why the clocks were held down during a measurement, from the samples taken around it.

    A throttle reason set in either sample counts, and so does any growth of NVML's cumulative
    power or thermal violation time between the two samples. An empty list means no evidence of
    throttling (or no NVML).
    """
    before, after = before or {}, after or {}
    flags: list[str] = []
    for sample in (before, after):
        mask = sample.get("clock_event_reasons") or 0
        flags += [name for bit, name in THROTTLE_REASONS.items() if mask & bit and name not in flags]
    for name in PERF_POLICIES:
        t0 = (before.get("violation_ns") or {}).get(name)
        t1 = (after.get("violation_ns") or {}).get(name)
        if t0 is not None and t1 is not None and t1 > t0:
            flags.append(f"{name} violation {(t1 - t0) / 1e6:.1f} ms")
    return flags
