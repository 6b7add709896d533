"""What a GPU worker sends back for one case: results, or what went wrong, as plain records."""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field
from typing import Any

from .error_map import CAUSE_LETTERS, ErrorMap
from .shapes import Shape
from .verdicts import Check, ErrorCause, FailureKind, Misreading

__all__ = [
    "CAUSE_LETTERS",
    "OUT_OF_MEMORY",
    "PHASES",
    "STREAMS_KEPT",
    "BatchRows",
    "ErrorMap",
    "ErrorSource",
    "ErrorStats",
    "Failure",
    "Fault",
    "GraphReplay",
    "Misread",
    "Outcome",
    "TimingRun",
    "Verification",
    "cuda_version",
    "internal_failure",
    "not_compiled_again",
]

#: how a failure that ran out of the GPU's memory while it ran begins (a CUDA error; TOO_BIG: refused before it ran)
OUT_OF_MEMORY = "out of GPU memory"

#: the phases of a case in a worker, and how messages name them
PHASES = {
    "start": "starting the GPU worker",
    "load": "loading the kernel file",
    "compile": "compiling",
    "setup": "setting up",  # a Python kernel's first call: Triton's JIT and autotuning, torch.compile, load_inline
    "verify": "verifying",
    "time": "timing",
}


@dataclass(frozen=True)
class ErrorStats:
    """How one output compares with the truth. Ratios are multiples of the bound (1.0 = at the bound)."""

    max_ratio: float
    median_ratio: float
    bad: int
    total: int
    nonfinite: int
    unwritten: int
    norm_error: float
    norm_tol: float
    worst: tuple[tuple[int, int, float, float, float], ...]  # row, col, got, expected, ratio
    bad_tiles: tuple[tuple[int, int], ...]  # (tile row, tile col), first few
    n_bad_tiles: int
    n_tiles: int
    tile: int = 32
    #: the figures FP8 and INT8 peers report beside the bound: DeepGEMM's calc_diff and the cosine
    #: similarity of the output and the truth (None where not computed, or where the output is not finite)
    calc_diff: float | None = None
    cosine: float | None = None

    @property
    def norm_ratio(self) -> float:
        """The normwise error as a multiple of its tolerance (0 where the output is too small to judge)."""
        return 0.0 if math.isinf(self.norm_tol) else self.norm_error / self.norm_tol

    @property
    def passed(self) -> bool:
        return self.bad == 0 and self.norm_error <= self.norm_tol

    @property
    def margin(self) -> float:
        """How far inside both tests the output is: 1 / max(worst element ratio, normwise ratio)."""
        worst = max(self.max_ratio, self.norm_ratio)
        return math.inf if worst == 0 else 1.0 / worst


@dataclass(frozen=True)
class ErrorSource:
    """Wrong elements of C traced to one source, by their bit patterns and by re-runs of the kernel."""

    cause: ErrorCause
    count: int
    rows: tuple[int, int]  # first and last row of C holding such elements
    cols: tuple[int, int]  # first and last column
    n_tiles: int  # how many 32x32 tiles of C hold them
    region: str = ""  # a guard read: which region, e.g. "the guard after A"


@dataclass(frozen=True)
class Fault:
    """A bitwise check that failed: ``where`` changed in ``count`` elements."""

    kind: Check
    where: str
    count: int


@dataclass(frozen=True)
class BatchRows:
    """Whether the kernel's rows of C depend on M (docs/verification.md#batch-invariance): the case's first ``rows``
    rows of A launched again as GEMMs of ``at`` rows each, and the rows of C that differed, bit for bit, at the first
    M where some did (``where``; 0: none did); or why it was not checked (``reason``)."""

    at: tuple[int, ...] = ()
    differing: int = 0
    where: int = 0
    reason: str = ""

    @property
    def invariant(self) -> bool | None:
        """True: every row agreed at every M; False: some differed; None: not checked."""
        return None if self.reason or not self.at else self.differing == 0


@dataclass(frozen=True)
class GraphReplay:
    """One launch captured into a CUDA graph and replayed (docs/verification.md#cuda-graphs): the replays judged,
    and the first whose output failed its bound; or why the launch could not be captured (``refused``)."""

    replays: int = 0
    wrong: ErrorStats | None = None
    refused: str = ""
    skipped: str = ""  # why it was not tried ('' when it was)


@dataclass(frozen=True)
class Misread:
    """The misreading a wrong output matches: ``matched`` of its elements lie within that reading's
    bound (``judge.misread``). For a batch's mix-up, ``batches`` pairs each batch that matched with the
    batch whose data it holds (the first few; ``batch_count`` of them in all)."""

    kind: Misreading
    matched: int
    batches: tuple[tuple[int, int], ...] = ()
    batch_count: int = 0
    as_read: str = ""  # the block a slip of granularity applies scales at ("128x128", "tensor")


@dataclass(frozen=True)
class Verification:
    """Everything one verification launch found; the failure message is built from it alone."""

    case_id: str
    seed: int
    shape: Shape
    alpha: float
    beta: float
    kernel: ErrorStats
    peer: ErrorStats | None
    faults: tuple[Fault, ...] = ()
    error_map: ErrorMap | None = None  # only for an output that failed
    sources: tuple[ErrorSource, ...] = ()  # where its wrong elements came from, most telling first
    misread: Misread | None = None  # the misreading most of a wrong output matches, when one does
    # a Python kernel's first launch, watched by CUPTI: the streams besides the harness's it launched work on
    # (CUPTI's ids: the first STREAMS_KEPT and one more), or why that could not be checked
    other_streams: tuple[int, ...] = ()
    unchecked_streams: str = ""
    batch_rows: BatchRows | None = None  # its rows of C at smaller M (docs/verification.md#batch-invariance)
    graph: GraphReplay | None = None  # one launch captured into a CUDA graph and replayed (None: not checked)

    @property
    def passed(self) -> bool:
        return self.kernel.passed and not self.faults and not self.other_streams


#: the other streams a timed case shows (a kernel that makes a stream for each call shows one a launch): the first few;
#: one more is kept to say there were more
STREAMS_KEPT = 8


#: what a wrong timed output was found to be (docs/verification.md#fresh-inputs-for-timed-launches): the result of
#: the kernel launch before it, of the launch before on the same buffers, or for the inputs as verified; or C left
#: unwritten
RETURNED = ("previous round", "same buffers", "as verified", "unwritten")


@dataclass(frozen=True)
class TimedCheck:
    """A timed launch's output, checked (its inputs fresh), that failed its bound."""

    round: int  # which kernel launch of the timing, from 1 (warm-up included)
    rounds: int  # kernel launches made by then
    stats: ErrorStats
    returned: str = ""  # what it matches: one of RETURNED ('' none of them)
    checked: int = 0  # timed outputs checked by then
    replayed: bool = False  # the timed launch was a CUDA graph's replay (--gemm-timer graph)


@dataclass(frozen=True)
class TimingRun:
    """What one case's timing produced: raw device times in seconds, paired launch by launch."""

    kernel_s: tuple[float, ...]
    reference_s: tuple[float, ...]
    elapsed_s: float  # wall time of the whole timing, warm-up included
    stop_reason: str  # why timing stopped: a records.verdicts.Stop word
    cold_cache: bool
    input_copies: int  # sets of A, B, C rotated through
    flush_bytes: int  # size of the L2 flush buffer (0 when hot)
    #: the last timed launch's output, verified again: its figures where it or cuBLAS's failed (None: both passed)
    last_output: ErrorStats | None = None
    reference_output: ErrorStats | None = None  # the same for cuBLAS: proves it computed this case
    timer: str = "events"  # what kernel_s and reference_s were measured with: a key of TIMERS
    timer_note: str = ""  # why the timer asked for (timer_asked) was not used
    timer_asked: str = "cupti"  # the timer the run asked for (--gemm-timer)
    events_median_s: tuple[float, float] | None = None  # the events' medians (kernel, cuBLAS), as a cross-check
    other_streams: tuple[int, ...] = ()  # CUPTI's ids of streams besides the harness's that the kernel launched on
    host_median_s: tuple[float, float] | None = None  # a Python kernel's host time to make one launch call, cuBLAS's
    peer: str = "cuBLAS"  # the library GEMM reference_s timed: cuBLAS (cuBLASLt's FP8 too), or a grouped case's
    fresh: bool = False  # each timed launch had inputs of its own (not for a fused epilogue)
    checked: int = 0  # timed outputs checked against the truth, besides the last
    wrong_round: TimedCheck | None = None  # a checked timed output that failed: timing stopped there
    persisting_l2: int = 0  # bytes of persisting L2 the kernel's host code set (reset after each call; 0: none)


@dataclass(frozen=True)
class Failure:
    """What kept a case from a verdict of its own, in the words of CUDA, the compiler or the kernel."""

    kind: FailureKind
    message: str
    phase: str = ""  # a key of PHASES
    details: tuple[str, ...] = ()  # more lines: the numbers that broke a limit, a Python kernel's traceback
    replace_worker: bool = False  # the worker cannot be used again (lost CUDA context, killed, dead)

    @property
    def short_of_memory(self) -> bool:
        """The case was refused for want of the GPU's memory, or ran out of it."""
        oom = self.kind == FailureKind.CUDA_ERROR and self.message.startswith(OUT_OF_MEMORY)
        return self.kind == FailureKind.TOO_BIG or oom


def internal_failure(exc: BaseException, phase: str) -> Failure:
    """A fault of pytest-gemm's own code: the exception and the last 12 entries of its traceback; the worker
    that raised it is replaced."""
    chunks = traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]
    details = tuple(line.rstrip() for chunk in chunks for line in chunk.splitlines())
    return Failure(FailureKind.INTERNAL, f"{type(exc).__name__}: {exc}", phase, details, replace_worker=True)


def not_compiled_again(compile_timeout: float) -> Failure:
    """The failure of a case whose variant's compile timed out in an earlier case on this worker's GPU."""
    return Failure(
        FailureKind.TIMEOUT,
        f"timed out after {compile_timeout:g} s",
        "compile",
        (
            "an earlier case of this variant did not compile within the limit either; it is not compiled again in "
            "this run; --gemm-compile-timeout (ini gemm_compile_timeout) sets the limit",
        ),
    )


def cuda_version(value: int) -> str:
    """A CUDA version number as a worker's facts show it: 12040 is '12.4'."""
    return f"{value // 1000}.{value % 1000 // 10}"


@dataclass(frozen=True)
class Outcome:
    """A worker's answer to one request."""

    verification: Verification | None = None
    timing: TimingRun | None = None
    nvml_before: dict[str, Any] | None = None  # NVML samples taken around the timing
    nvml_after: dict[str, Any] | None = None
    failure: Failure | None = None
    skip: str | None = None  # why this device cannot run the case (e.g. a kernel built for another arch)
    untimed: str = ""  # why a verified case was not timed though timing was asked for (no cuBLAS GEMM of it)
    phase_s: dict[str, float] = field(default_factory=dict)  # seconds spent in each phase
    output: str = ""  # what the worker printed while it ran the case (a kernel's printf, warnings)
    worker: int = 0  # process id of the worker that ran it
    compiled: int = 0  # kernels NVRTC compiled for this case (0 when loaded, or found in the compile cache)
    cached: int = 0  # kernels found compiled in the compile cache for this case
    autotuned: tuple[str, ...] = ()  # a Python kernel's autotuned Triton kernels, each with its choice for this case
