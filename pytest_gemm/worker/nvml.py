"""Facts about the GPU and samples of its state, through NVML (the ``nvidia-ml-py`` bindings).

NVML numbers devices its own way and ignores ``CUDA_VISIBLE_DEVICES``, so the CUDA device is found
by its PCI bus id. Nothing here raises when NVML is missing: :func:`open_monitor` then returns a
monitor whose facts say why, and whose samples are empty. Reading the samples is pure code, in
:mod:`pytest_gemm.judge.throttle`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from ..judge.throttle import PERF_POLICIES, reason_names
from ..records.outcome import cuda_version

__all__ = ["GpuMonitor", "StateAround", "bus_key", "open_monitor"]

_CLOCK_SM, _CLOCK_MEM = 1, 2  # NVML_CLOCK_SM, NVML_CLOCK_MEM
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)$")


def bus_key(bus_id: str | bytes) -> tuple[int, ...] | None:
    """(domain, bus, device, function) from '0000:18:00.0' or NVML's '00000000:18:00.0'."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    match = _BUS_ID.match(text.strip())
    if not match:
        return None
    domain, bus, device, function = (int(g, 16) if g else 0 for g in match.groups())
    return (domain, bus, device, function)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class GpuMonitor:
    """One GPU seen through NVML; ``handle`` is None when NVML could not be used (see ``reason``)."""

    def __init__(self, nvml: Any = None, handle: Any = None, reason: str = "") -> None:
        self.nvml, self.handle, self.reason = nvml, handle, reason

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _get(self, call: Callable[[], Any]) -> Any:
        """One NVML query; None when this GPU or driver does not support it."""
        try:
            return call()
        except Exception:  # NVMLError_NotSupported, NoPermission, FunctionNotFound ...
            return None

    def uuid(self) -> str:
        """NVML's UUID of the GPU ('' when NVML cannot say)."""
        if not self.available:
            return ""
        return _maybe_text(self._get(lambda: self.nvml.nvmlDeviceGetUUID(self.handle))) or ""

    def facts(self) -> dict[str, Any]:
        """What does not change during a run: identity, driver, memory, modes, link, limits, clocks."""
        if not self.available:
            return {"nvml": False, "nvml_reason": self.reason}
        n, h, get = self.nvml, self.handle, self._get
        cuda_driver = get(n.nvmlSystemGetCudaDriverVersion_v2) or get(n.nvmlSystemGetCudaDriverVersion)
        memory = get(lambda: n.nvmlDeviceGetMemoryInfo(h))
        ecc = get(lambda: n.nvmlDeviceGetEccMode(h))
        power_limit = get(lambda: n.nvmlDeviceGetPowerManagementLimit(h))
        enforced = get(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
        return {
            "nvml": True,
            "name": _maybe_text(get(lambda: n.nvmlDeviceGetName(h))),
            "uuid": self.uuid() or None,
            "pci_bus_id": _maybe_text(get(lambda: n.nvmlDeviceGetPciInfo(h).busId)),
            "driver_version": _maybe_text(get(n.nvmlSystemGetDriverVersion)),
            "cuda_driver_version": cuda_version(cuda_driver) if cuda_driver else None,
            "memory_total_bytes": int(memory.total) if memory is not None else None,
            "ecc_mode": None if ecc is None else ("on" if ecc[0] else "off"),
            "persistence_mode": _on_off(get(lambda: n.nvmlDeviceGetPersistenceMode(h))),
            "pcie_link": {
                "generation": get(lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                "width": get(lambda: n.nvmlDeviceGetCurrPcieLinkWidth(h)),
                "max_generation": get(lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                "max_width": get(lambda: n.nvmlDeviceGetMaxPcieLinkWidth(h)),
            },
            "power_limit_w": power_limit / 1000 if power_limit else None,
            "enforced_power_limit_w": enforced / 1000 if enforced else None,
            "max_sm_clock_mhz": get(lambda: n.nvmlDeviceGetMaxClockInfo(h, _CLOCK_SM)),
            "max_mem_clock_mhz": get(lambda: n.nvmlDeviceGetMaxClockInfo(h, _CLOCK_MEM)),
            "app_sm_clock_mhz": get(lambda: n.nvmlDeviceGetApplicationsClock(h, _CLOCK_SM)),
            "app_mem_clock_mhz": get(lambda: n.nvmlDeviceGetApplicationsClock(h, _CLOCK_MEM)),
        }

    def sample(self) -> dict[str, Any]:
        """The state now: clocks, temperature, power, clock-event reasons and cumulative violation times."""
        if not self.available:
            return {}
        n, h, get = self.nvml, self.handle, self._get
        reasons = get(lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h))
        if reasons is None:
            reasons = get(lambda: n.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        power = get(lambda: n.nvmlDeviceGetPowerUsage(h))
        violations = {}
        for name, policy in PERF_POLICIES.items():
            status = get(lambda policy=policy: n.nvmlDeviceGetViolationStatus(h, policy))
            violations[name] = int(status.violationTime) if status is not None else None
        return {
            "sm_clock_mhz": get(lambda: n.nvmlDeviceGetClockInfo(h, _CLOCK_SM)),
            "mem_clock_mhz": get(lambda: n.nvmlDeviceGetClockInfo(h, _CLOCK_MEM)),
            "temperature_c": get(lambda: n.nvmlDeviceGetTemperature(h, 0)),  # NVML_TEMPERATURE_GPU
            "power_w": power / 1000 if power is not None else None,
            "clock_event_reasons": reasons,
            "clock_event_names": reason_names(reasons),
            "violation_ns": violations,
        }


class StateAround:
    """A GPU's state (:meth:`GpuMonitor.sample`) before a case's timed launches and after them, each read on a thread
    of ``pool``'s while the timer sets up or checks outputs, since NVML's violation counters take a while to read:
    :meth:`timing` waits for the first before the first timed launch, :meth:`timed` starts the second. Without a
    monitor, both samples are empty."""

    def __init__(self, monitor: GpuMonitor | None = None, pool: Executor | None = None) -> None:
        self._sample = monitor.sample if monitor is not None else dict
        self._pool = pool
        self._before = self._read()
        self._after: Future[dict[str, Any]] | None = None

    def _read(self) -> Future[dict[str, Any]]:
        if self._pool is not None:
            return self._pool.submit(self._sample)
        done: Future[dict[str, Any]] = Future()
        done.set_result(self._sample())
        return done

    def timing(self) -> None:
        """Wait for the state before (the first timed launch comes next)."""
        self._before.result()

    def timed(self) -> None:
        """Start reading the state after (the last timed launch is done)."""
        if self._after is None:
            self._after = self._read()

    def samples(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The states before and after (after: read now, where the timing ended before :meth:`timed`)."""
        self.timed()
        assert self._after is not None
        return self._before.result(), self._after.result()


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _on_off(value: Any) -> str | None:
    return None if value is None else ("on" if value else "off")


def open_monitor(pci_bus_id: str | None) -> GpuMonitor:
    """The NVML view of the GPU with this PCI bus id, or an unavailable monitor that says why."""
    try:
        import pynvml
    except ImportError:
        return GpuMonitor(reason="nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return GpuMonitor(reason=f"NVML could not start: {exc}")
    wanted = bus_key(pci_bus_id) if pci_bus_id else None
    if wanted is None:
        return GpuMonitor(pynvml, None, f"no usable PCI bus id for the CUDA device ({pci_bus_id!r})")
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            if bus_key(pynvml.nvmlDeviceGetPciInfo(handle).busId) == wanted:
                return GpuMonitor(pynvml, handle)
    except Exception as exc:
        return GpuMonitor(pynvml, None, f"NVML failed while listing devices: {exc}")
    return GpuMonitor(pynvml, None, f"NVML has no device at PCI bus id {pci_bus_id}")
