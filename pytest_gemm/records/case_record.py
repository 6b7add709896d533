"""The record of one timed case: what the timing table, pytest-benchmark, the gate and baselines read.

It replaces a free-form dict: every field is named and typed here, once. ``to_dict`` gives the
JSON form saved under pytest-benchmark's ``extra_info["gemm"]`` and passed between xdist
processes; ``from_dict`` reads it back (the ``pytest-gemm`` command reads saved runs with it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from .plain import from_plain, to_plain
from .shapes import Shape
from .verdicts import GateVerdict, Sanity, TimingProblem

__all__ = [
    "COMPARED_WITH",
    "GPU_RECORD_KEYS",
    "METRICS",
    "TIMING_FIGURES",
    "CaseRecord",
    "CompileRecord",
    "GateResult",
    "figure_problem",
    "gpu_identity",
    "max_sm_clock",
    "nvml_values",
]

#: what the gate may compare: metric -> (record field of the value, field of its 95% interval, label)
METRICS = {
    "ratio": ("ratio", "ratio_ci", "kernel/cuBLAS time ratio"),
    "time": ("median_s", "ci_s", "median device time"),
}


#: what a baseline entry keeps of each GPU that recorded it (its ``gpus`` map), and what the gate reads of one
GPU_RECORD_KEYS = ("ratio", "ratio_ci", "median_s", "ci_s", "date")

#: the figures of a timed case that no timing makes otherwise, and the rule of each (:func:`figure_problem`)
_POSITIVE = ("median_s", "cublas_median_s", "ratio")  # a time or a ratio: finite and above 0
_INTERVALS = ("ci_s", "cublas_ci_s", "ratio_ci")  # a 95% interval: two bounds, each finite and above 0
_RATES = ("tflops", "cublas_tflops")  # TFLOP/s: finite and at least 0
TIMING_FIGURES = _POSITIVE + _INTERVALS + _RATES


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def figure_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the timing figure ``name`` (one of :data:`TIMING_FIGURES`, a field of
    :class:`CaseRecord` and of a baseline entry), None when nothing is: the one rule by which saved runs and
    baseline files are read and cases recorded. A time, a ratio and each bound of their intervals must be finite
    and above 0 (NaN, an infinity, 0 or a negative value could never be gated against); TFLOP/s finite and at
    least 0."""
    if name in _INTERVALS:
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) and v > 0 for v in value):
            return None
        shown = list(value) if isinstance(value, tuple) else value
        return f"{name} must be a list of two positive numbers, got {shown!r}"
    if name in _RATES:
        return None if _number(value) and value >= 0 else f"{name} must be a finite number of at least 0, got {value!r}"
    if name not in _POSITIVE:
        raise KeyError(f"{name!r} is not a timing figure")
    return None if _number(value) and value > 0 else f"{name} must be a positive number, got {value!r}"


#: what a timed case is compared with, when its baseline entry holds records of several GPUs of its model
COMPARED_WITH = {
    "own": "this GPU's own record",
    "others": "the range of the other GPUs' records (this GPU has none of its own)",
    "single": "the one record of the entry",
}


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict on one case, and the baseline file it was judged against."""

    verdict: GateVerdict
    metric: str
    threshold: float
    change: float | None = None  # now / baseline - 1 for the gated metric
    notes: tuple[str, ...] = ()
    baseline_file: str = ""
    baseline_file_missing: bool = False
    compared_with: str = ""  # which recorded GPUs the case was compared with: a key of COMPARED_WITH ('' for new)
    fails: bool = False  # whether this verdict fails the test (judge.gate.GatePolicy, with the run's settings)
    baseline: dict[str, Any] | None = None  # a regression's baseline entry, with the numbers it was compared with


@dataclass(frozen=True)
class CaseRecord:
    """One verified and timed case: identity, device times with 95% intervals, rates, flags and samples."""

    # which case, on which GPU
    test: str  # the pytest node id, also the baseline key
    file: str
    kernel: str  # name[variant]
    variant: str
    gpu: str
    source_sha256: str
    regression_threshold: float | None
    dtype: str
    shape: Shape
    ab: str  # the alpha/beta part of the id ('' for alpha = 1, beta = 0)
    alpha: float
    beta: float
    # device times (seconds) and what is made of them
    median_s: float
    ci_s: tuple[float, float]
    cublas_median_s: float
    cublas_ci_s: tuple[float, float]
    ratio: float  # kernel time / cuBLAS time, per pair
    ratio_ci: tuple[float, float]
    tflops: float
    cublas_tflops: float
    pct_cublas: float
    pct_cublas_ci: tuple[float, float]
    peak_tflops: float | None
    pct_peak: float | None
    noise: float  # the widest relative 95% half-width of the kernel, cuBLAS and ratio medians
    samples: int
    stop: str  # why timing stopped: a records.verdicts.Stop word
    timing_s: float
    cache: str  # "cold" or "hot"
    input_copies: int
    timer: str = "events"  # what the times were measured with: a key of TIMERS (runs saved before CUPTI: events)
    timer_note: str = ""  # why CUPTI was asked for and not used
    gpu_id: str = ""  # which GPU of its model timed it (gpu_identity; '' when NVML gave no UUID, or saved before)
    accumulate: str = ""  # a declared accumulation ("fp16", timed against cuBLAS computing in it); '' for the default
    events_median_s: float | None = None  # the CUDA events' medians around the same launches, as a cross-check
    events_cublas_median_s: float | None = None
    host_s: float | None = (
        None  # a Python kernel's median host time to make one launch call: beside, never in, its time
    )
    cublas_host_s: float | None = None
    autotuned: tuple[str, ...] = ()  # the autotuned Triton kernels a Python kernel called, each with its choice
    unchecked_streams: str = ""  # why a Python kernel's streams were not checked: then the gate leaves it alone
    # judgement
    throttle: tuple[str, ...] = ()
    suspicious: tuple[TimingProblem, ...] = ()  # what makes its speed hard to believe (the figures are above)
    suspicious_expected: tuple[TimingProblem, ...] = ()  # suspicious, but the header's expect_fast explains it
    verdict: Sanity = Sanity.OK
    nvml_before: dict[str, Any] = field(default_factory=dict)
    nvml_after: dict[str, Any] = field(default_factory=dict)
    gate: GateResult | None = None
    raw: dict[str, list[float]] | None = None  # the samples, with --benchmark-save-data

    @property
    def name(self) -> str:
        """The test's name without its file: ``kernel[variant-dtype-shape-ab]``."""
        return self.test.split("::")[-1]

    def with_gate(self, gate: GateResult | None) -> CaseRecord:
        return dataclasses.replace(self, gate=gate)

    def with_identity(self, gpu_id: str) -> CaseRecord:
        return dataclasses.replace(self, gpu_id=gpu_id)

    def to_dict(self) -> dict[str, Any]:
        data = to_plain(self)
        for key in ("gate", "raw"):
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRecord:
        return from_plain(cls, data)


def gpu_identity(gpu: Mapping[str, Any]) -> str:
    """A short, stable name for one physical GPU: 12 hex digits of the SHA-256 of NVML's UUID ('' without one).

    Baselines keep one record per GPU under it; the UUID itself is not written into files kept in version control.
    """
    uuid = gpu.get("uuid")
    return sha256(uuid.encode()).hexdigest()[:12] if isinstance(uuid, str) and uuid else ""


def max_sm_clock(gpu: Mapping[str, Any]) -> float | None:
    """The device's highest SM clock in MHz: NVML's, else CUDA's (None when neither is known)."""
    return gpu.get("max_sm_clock_mhz") or gpu.get("cuda_max_sm_clock_mhz") or None


def nvml_values(records: Iterable[CaseRecord], key: str) -> list[Any]:
    """Every value of ``key`` in the NVML samples taken before and after timing these cases."""
    return [s[key] for r in records for s in (r.nvml_before, r.nvml_after) if s and s.get(key) is not None]


@dataclass(frozen=True)
class CompileRecord:
    """What ptxas reported for one kernel variant compiled for one architecture (None: not reported)."""

    file: str
    kernel: str  # name[variant]
    arch: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    stack_bytes: int | None
    static_smem: int | None
    dynamic_smem: int | str  # bytes, or "by shape"
    from_cache: bool = False  # found in the compile cache: NVRTC did not run
    threads: int | None = None  # per block (None: it depends on the shape)
    blocks_per_sm: int | None = None  # resident at once on one SM of this arch (None: not known)
    occupancy_percent: float | None = None  # their warps, as a share of the most an SM holds
    occupancy_limit: str | None = None  # what bounds blocks_per_sm ("registers", "shared memory"...)
    cannot_launch: bool = False  # it breaks a launch limit of this arch whatever the shape
    near_limits: tuple[str, ...] = ()  # the launch limits it uses 90% or more of (specs.limits.near_limits)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileRecord:
        return from_plain(cls, data)
