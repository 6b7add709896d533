"""The record of one timed case: what the timing table, pytest-benchmark, the gate and baselines read.

It replaces a free-form dict: every field is named and typed here, once. ``to_dict`` gives the
JSON form saved under pytest-benchmark's ``extra_info["gemm"]`` and passed between xdist
processes; ``from_dict`` reads it back (the ``pytest-gemm`` command reads saved runs with it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from .dtypes import INPUT_DTYPES
from .plain import from_plain, to_plain
from .shapes import Shape
from .verdicts import GateVerdict, Sanity, TimingProblem

__all__ = [
    "COMPARED_WITH",
    "GPU_RECORD_KEYS",
    "INTERVALS",
    "LONGEST_GPU_NAME",
    "LONGEST_PHASE_S",
    "LONGEST_TEXT",
    "METRICS",
    "TIMING_FIGURES",
    "CaseRecord",
    "CompileRecord",
    "GateResult",
    "dtype_problem",
    "figure_problem",
    "figures_problem",
    "gpu_identity",
    "max_sm_clock",
    "nvml_values",
    "path_problem",
    "printable",
    "quoted",
    "record_problem",
    "text_problem",
]

#: what the gate may compare: metric -> (record field of the value, field of its 95% interval, label)
METRICS = {
    "ratio": ("ratio", "ratio_ci", "kernel/cuBLAS time ratio"),
    "time": ("median_s", "ci_s", "median device time"),
}


#: what a baseline entry keeps of each GPU that recorded it (its ``gpus`` map), and what the gate reads of one
GPU_RECORD_KEYS = ("ratio", "ratio_ci", "median_s", "ci_s", "date")

#: the figures of a timed case that no timing makes otherwise, and the rule of each (:func:`figure_problem`)
_POSITIVE = ("median_s", "cublas_median_s", "ratio", "pct_cublas")  # a time, a ratio, a share: finite and above 0
#: each 95% interval (two bounds, each by its estimate's rule, the low one first) and the estimate it must contain
INTERVALS = {"ci_s": "median_s", "cublas_ci_s": "cublas_median_s", "ratio_ci": "ratio", "pct_cublas_ci": "pct_cublas"}
_RATES = ("tflops", "cublas_tflops")  # TFLOP/s: finite and at least 0
_COUNTS = ("samples", "input_copies")  # a whole number of at least 1
TIMING_FIGURES = _POSITIVE + tuple(INTERVALS) + _RATES + _COUNTS
#: the longest a phase of a case may run, in seconds: a day (the most --gemm-timeout and --gemm-compile-timeout may
#: be), so no time a timing makes is longer
LONGEST_PHASE_S = 86_400.0
#: the most a figure can plausibly be, and how a message says it: a time a phase's longest, a ratio to cuBLAS a
#: billion (and a share of it 100 / 1e-9), a rate a million TFLOP/s (a thousand times any GPU's peak)
_MOST = {
    "median_s": (LONGEST_PHASE_S, f"{LONGEST_PHASE_S:g} s (a day)"),
    "cublas_median_s": (LONGEST_PHASE_S, f"{LONGEST_PHASE_S:g} s (a day)"),
    "ratio": (1e9, "1e9"),
    "pct_cublas": (1e11, "1e11"),
    "tflops": (1e6, "1e6 TFLOP/s"),
    "cublas_tflops": (1e6, "1e6 TFLOP/s"),
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _said(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def figure_problem(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` as the timing figure ``name`` (one of :data:`TIMING_FIGURES`, a field of
    :class:`CaseRecord` and of a baseline entry), None when nothing is: the one rule by which saved runs and
    baseline files are read and cases recorded. A time, a ratio and each bound of their intervals must be finite,
    above 0 (NaN, an infinity, 0 or a negative value could never be gated against) and at most what it can plausibly
    be (``_MOST``); an interval's low bound first; TFLOP/s finite, at least 0 and plausible; a count at least 1."""
    if name in INTERVALS:
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) and v > 0 for v in value)):
            return f"{name} must be a list of two positive numbers, got {_said(value)!r}"
        if value[0] > value[1]:
            return f"{name} must be [low, high] with low <= high, got {_said(value)!r}"
        most, said = _MOST[INTERVALS[name]]
        return f"{name} must be at most {said}, got {_said(value)!r}" if value[1] > most else None
    if name in _COUNTS:
        whole = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if whole else f"{name} must be a whole number of at least 1, got {value!r}"
    if name in _RATES:
        if not (_number(value) and value >= 0):
            return f"{name} must be a finite number of at least 0, got {value!r}"
    elif name not in _POSITIVE:
        raise KeyError(f"{name!r} is not a timing figure")
    elif not (_number(value) and value > 0):
        return f"{name} must be a positive number, got {value!r}"
    most, said = _MOST[name]
    return f"{name} must be at most {said}, got {value!r}" if value > most else None


def figures_problem(values: Mapping[str, Any], names: Iterable[str]) -> str | None:
    """What is wrong with the timing figures ``names`` of ``values`` (a record's fields, a baseline entry, one GPU's
    record in it), None when nothing is: each by :func:`figure_problem`, then each interval among them against its
    estimate, which it must contain. The message starts with the figure's name."""
    names = tuple(names)
    for name in names:
        problem = figure_problem(name, values.get(name))
        if problem:
            return problem
    for name in names:
        estimate = INTERVALS.get(name)
        if estimate in names and not values[name][0] <= values[estimate] <= values[name][1]:
            return f"{name} {_said(values[name])!r} does not contain {estimate} {values[estimate]!r}"
    return None


#: the most characters a test id, a kernel file's path or a kernel's name[variant] may hold: what a path may be
#: (Linux's PATH_MAX)
LONGEST_TEXT = 4096
#: the most characters a GPU model's name may hold: it names its baseline file and that file's lock file
#: (``.<name>.json.lock``), and a file's name may be at most 255 bytes
LONGEST_GPU_NAME = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's control characters (category Cc)


def quoted(value: Any, most: int = 120) -> str:
    """``value`` as a message quotes it: its repr (which escapes a lone surrogate and a control character), cut to
    about ``most`` characters, a string's length said."""
    shown = repr(value)
    if len(shown) <= most:
        return shown
    return f"{shown[: most - 3]}..." + (f" ({len(value)} characters)" if isinstance(value, str) else "")


def text_problem(name: str, value: Any, longest: int = LONGEST_TEXT) -> str | None:
    """What is wrong with ``value`` as a text field (``name``: where it is) of a record or a baseline file: a test id,
    a kernel file's path, a kernel's name[variant], a GPU model's name; None when nothing is. The one rule by which
    saved runs and baseline files are read and cases recorded, since messages print these and files are named after
    them: a string that UTF-8 can encode (no lone surrogate), without control characters (a newline, an escape,
    NUL), at most ``longest`` characters."""
    if not isinstance(value, str):
        return f"{name} must be a string, got {value!r}"
    if len(value) > longest:
        return f"{name} must be at most {longest} characters, got {len(value)}: {quoted(value, 60)}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{name} must be text UTF-8 can encode, got {quoted(value)} (a lone surrogate at character {exc.start})"
    control = _CONTROL.search(value)
    if control:
        at = f"{control[0]!r} at character {control.start()}"
        return f"{name} must hold no control characters, got {quoted(value)} ({at})"
    return None


def printable(text: str) -> str:
    """``text`` (a test id) as a message may print it: itself when it holds by :func:`text_problem`, else its repr,
    cut short."""
    return text if text_problem("", text) is None else quoted(text)


def path_problem(name: str, value: Any) -> str | None:
    """What is wrong with a test id or a kernel file's path (``name``: where it is) as saved runs and baseline files
    hold it, None when nothing is: text by :func:`text_problem` whose file (before ``::``) is a path relative to the
    project's root that stays in it (not absolute, no drive, no ``..`` part), since kernel files are read from it
    and files named after it."""
    if not isinstance(value, str) or not value:
        return f"{name} must be a test id or a kernel file's path, got {value!r}"
    problem = text_problem(name, value)
    if problem:
        return problem
    file = value.split("::", 1)[0]
    parts = re.split(r"[/\\]", file)
    if file.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", file) or ".." in parts:
        return f"{name} must name a file inside the project (a relative path without '..'), got {value!r}"
    return None


def dtype_problem(value: Any) -> str | None:
    """What is wrong with a case's dtype as saved runs and baseline files hold it (None: nothing): one of the input
    dtypes pytest-gemm knows (it names files: each dtype's chart)."""
    if isinstance(value, str) and value in INPUT_DTYPES:
        return None
    return f"dtype must be one of {', '.join(INPUT_DTYPES)}, got {value!r}"


def record_problem(record: CaseRecord) -> str | None:
    """What is wrong with a timed case's record as a saved run holds it (None: nothing), by the rules a baseline entry
    is read with: its test id and file (:func:`path_problem`), its kernel and GPU model (:func:`text_problem`), its
    dtype, its figures (:func:`figures_problem`)."""
    return (
        path_problem("test", record.test)
        or path_problem("file", record.file)
        or text_problem("kernel", record.kernel)
        or text_problem("gpu", record.gpu, LONGEST_GPU_NAME)
        or text_problem("peer", record.peer)
        or text_problem("library_gemm", record.library_gemm)
        or dtype_problem(record.dtype)
        or figures_problem({name: getattr(record, name) for name in TIMING_FIGURES}, TIMING_FIGURES)
    )


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
    p_value: float | None = None  # the chance that noise alone makes a same-code run this much slower (an improvement:
    # faster) (docs/baselines.md#the-runs-false-alarms)
    cases: int = 1  # the run's gated cases, among which the chance of a false regression was split
    confirmed_change: float | None = None  # a flagged case's change when timed again in a fresh worker
    confirmed_p: float | None = None  # and its chance by noise alone


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
    timer_note: str = ""  # why the timer asked for (timer_asked) was not used
    timer_asked: str = "cupti"  # the timer the run asked for (--gemm-timer; runs saved before: cupti)
    gpu_id: str = ""  # which GPU of its model timed it (gpu_identity; '' when NVML gave no UUID, or saved before)
    accumulate: str = ""  # a declared accumulation ("fp16", timed against cuBLAS computing in it); '' for the default
    peer: str = "cuBLAS"  # what the cuBLAS figures timed: cuBLAS, or a grouped case's torch _grouped_mm
    library_gemm: str = ""  # a library GEMM a Python kernel's code uses ("@", "torch.matmul"): a note, not a verdict
    events_median_s: float | None = None  # the CUDA events' medians around the same launches, as a cross-check
    events_cublas_median_s: float | None = None
    host_s: float | None = (
        None  # a Python kernel's median host time to make one launch call: beside, never in, its time
    )
    cublas_host_s: float | None = None
    autotuned: tuple[str, ...] = ()  # the autotuned Triton kernels a Python kernel called, each with its choice
    unchecked_streams: str = ""  # why a Python kernel's streams were not checked: then the gate leaves it alone
    fresh_inputs: bool = False  # each timed launch had inputs of its own (docs/verification.md, "Fresh inputs")
    checked_outputs: int = 0  # timed outputs checked against the truth, besides the last
    persisting_l2: int = 0  # bytes of persisting L2 its host code set, reset after each call (docs/verification.md)
    batch_invariant: bool | None = None  # its rows of C the same at a smaller M, as measured (None: not checked)
    graph_refused: str | None = None  # why a CUDA graph could not capture a launch ('': it did; None: not checked)
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
