"""Every word a case can be judged with, defined once: reports, tables, the gate and the CLI all use these."""

from __future__ import annotations

import enum

__all__ = [
    "NOT_CONFIRMED",
    "OTHER_GPUS",
    "REFERENCE_MOVED",
    "SOURCE_CHANGED",
    "TIMER_CHANGED",
    "Check",
    "ErrorCause",
    "FailureKind",
    "GateVerdict",
    "Misreading",
    "Sanity",
    "Stop",
    "TimingProblem",
    "Verdict",
]

#: notes the gate attaches to a verdict (tables and summaries look for them)
SOURCE_CHANGED = "kernel source changed since the baseline"
REFERENCE_MOVED = "reference moved"
TIMER_CHANGED = "timer changed"
OTHER_GPUS = "other GPUs"
NOT_CONFIRMED = "not confirmed"  # a flagged case as fast as its baseline when timed again in a fresh worker


class _Word(str, enum.Enum):
    def __str__(self) -> str:
        return self.value


class Stop(_Word):
    """Why a case's timing stopped (judge.stats.StopRule)."""

    CONVERGED = "converged"  # every tracked median's interval within --gemm-noise
    CLOCK_RESOLUTION = "clock resolution"  # wider than --gemm-noise, but no wider than one step of the GPU's clock
    TIME_CAP = "time cap"  # --gemm-max-time passed first


class Sanity(_Word):
    """Whether a verified case's timing can be believed."""

    OK = "ok"
    WRONG = "wrong"  # the output of the last timed launch is wrong
    SUSPICIOUS = "suspicious"  # faster than the GPU's peak, or far faster than cuBLAS

    @property
    def flag(self) -> str:
        """The mark in the timing table ('' when there is nothing to say)."""
        return {"ok": "", "wrong": "WRONG OUTPUT", "suspicious": "SUSPICIOUS"}[self.value]


class GateVerdict(_Word):
    """The regression gate's verdict on one timed case against its baseline."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    NEW = "new"  # no baseline entry
    UNSTABLE = "unstable"  # measured while the GPU throttled

    @property
    def mark(self) -> str:
        """One character for compact listings (``pytest-gemm compare``)."""
        return {"regressed": "+", "improved": "-", "same": " ", "new": "n", "unstable": "?"}[self.value]


class FailureKind(_Word):
    """Why a case produced no verdict of its own: what went wrong in the worker, or with the worker."""

    CUDA_ERROR = "CUDA error"  # an error CUDA reported while the kernel or the harness ran on the GPU
    LAUNCH = "launch refused"  # the launch broke a limit (registers, threads, shared memory); the worker lives
    TIMEOUT = "timed out"  # over --gemm-timeout; the worker is killed and replaced
    WORKER_DIED = "worker died"  # the worker process ended (signal, exit code) while running the case
    KERNEL_RAISED = "kernel raised"  # a Python kernel raised an exception
    HARNESS_CHANGED = "harness changed"  # a kernel file's code changed the worker's code; the worker is replaced
    THREAD_LEFT = "thread left running"  # a kernel file's code left a thread running after its call; the same
    KERNEL_FILE = "kernel file"  # the kernel file cannot be used for this case (header, tensor map, import)
    COMPILE = "compile error"  # the compiler rejected the kernel
    TOO_BIG = "too big for GPU memory"  # the case's arrays cannot fit in the device's free memory; nothing ran
    INTERNAL = "internal error"  # a pytest-gemm bug


class ErrorCause(_Word):
    """Where a wrong element of C came from, most telling first: an error map cell shows the first that applies."""

    GUARD_A = "read past A"  # a NaN that came from the guard memory before or after A
    GUARD_B = "read past B"  # the same for B
    GUARD_C = "read past C"  # the same for C (a wrong ldc, or reading beyond C's edge)
    GUARD_SCALES = "read past the scales"  # the same for an FP8 kernel's grid of scales: past its edge block
    GUARD_EPILOGUE = "read past the bias or residual"  # the same for a fused epilogue's bias vector or residual
    READ_C = "C read although beta = 0"  # right once C holds finite prior data: the kernel read C
    UNWRITTEN = "unwritten"  # still holds the poison it was given before the launch
    ARITHMETIC = "NaN or Inf from arithmetic"  # non-finite, and none of the above
    OVER_BOUND = "over the bound"  # finite, but further from the truth than the error bound allows

    @property
    def rank(self) -> int:
        """Order of precedence: 0 is the most telling."""
        return list(ErrorCause).index(self)


class Check(_Word):
    """A finding about a wrong output that is not the cause of its wrong elements (those are ``ErrorCause``)."""

    OUT_OF_BOUNDS = "out-of-bounds write"  # a guard region around C changed
    INPUT_MODIFIED = "input modified"  # A or B changed
    NONDETERMINISTIC = "non-deterministic output"  # C differs bit for bit between launches on the same inputs
    BATCH_VARIANT = "rows of C change with M"  # declared batch_invariant, a row differs bit for bit at a smaller M
    GRAPH_REPLAY = "wrong when replayed from a CUDA graph"  # one launch captured, its replay's output over the bound
    NONFINITE = "non-finite output"  # NaN or Inf whose source the worker did not trace
    LOW_PRECISION = "precision too low"  # only the normwise test failed by a little: a lower precision than promised
    NORMWISE = "normwise error"  # the normwise test failed: small errors in every element add up
    # a grouped GEMM's rows of C that belong to no group, written (records.groups; Fault.where names the groups)
    PADDING_WRITTEN = "padding rows written"  # rows after a contiguous group's end, up to its padded end
    PAST_GROUP_END = "rows past a group's end written"  # a masked slot's rows past its group's count
    EMPTY_GROUP = "an empty group not skipped"  # a masked slot of an empty group written
    PADDING_READ = "padding rows read as data"  # a group's rows that turn finite when A's padding rows (NaN) do
    # a fused epilogue's second output (records.epilogue): Fault.where says how it is wrong
    AUX_WRONG = "aux output wrong"  # aux is not the pre-activation value within its bound


class Misreading(_Word):
    """How a wrong output was computed, when (nearly) all of it matches a plausible misreading of the inputs: the
    most telling finding of a wrong output (``judge.misread``), listed before its wrong values."""

    B_ORDER = "B read in the other order"  # B's stored elements read as if stored K x N where N x K, or the reverse
    A_ORDER = "A read in the other order"  # the same for A (M x K and K x M)
    A_AS_B = "A read as B"  # A's elements read in place of B's: B never read (C = A x A when square)
    B_AS_A = "B read as A"  # B's elements read in place of A's: A never read
    C_TRANSPOSED = "C written transposed"  # C written in its other order (N x M where M x N), read back as declared
    ALPHA_IGNORED = "alpha ignored"  # C = A B + beta C: alpha taken as 1
    BETA_IGNORED = "beta ignored"  # C = alpha A B: beta taken as 0
    BETA_AS_ONE = "beta taken as 1"  # C = alpha A B + C
    ALPHA_BETA_IGNORED = "alpha and beta ignored"  # C = A B
    # a strided batch's matrices mixed up, batch by batch: Misread.batches says which with which
    OTHER_BATCH_A = "another batch's A read"  # batch j's C is alpha A_i B_j + beta C0_j
    OTHER_BATCH_B = "another batch's B read"  # batch j's C is alpha A_j B_i + beta C0_j
    OTHER_BATCH_C = "another batch's result written"  # batch j's C holds batch i's result: a write into another C
    # a grouped GEMM's groups mixed up: Misread.batches pairs group g with the group h whose B it read
    OTHER_GROUP_B = "another group's B read"  # group g's rows computed with group h's B
    EMPTY_GROUP_COMPUTED = "an empty group computed over another's rows"  # group h is empty and was not skipped
    OTHER_GROUP_SCALES = "another group's scales applied"  # FP8: group g's B elements with group h's scales
    OTHER_GROUP_A_SCALES = "another slot's scales of A applied"  # FP8, masked: group g's A rows with slot h's scales
    # a fused epilogue's slips (judge.epilogue): D = act(P + bias) + residual computed another way
    BIAS_OTHER_AXIS = "bias applied along the other axis"  # bias[i] added to row i where it was column i, or reverse
    ACTIVATION_BEFORE_BIAS = "activation applied before the bias"  # act(P) + bias
    BIAS_IGNORED = "bias ignored"  # act(P)
    ACTIVATION_IGNORED = "activation not applied"  # P + bias
    OTHER_GELU = "GELU's other form"  # tanh's approximation where erf's was declared, or the reverse
    RESIDUAL_IGNORED = "residual ignored"  # act(P + bias) without the residual
    # an FP8 kernel's scales or data misread; Misread.as_read names the block a granularity's slip reads at
    SCALES_IGNORED = "scales ignored"  # C = A B of the FP8 elements as they are
    A_SCALES_IGNORED = "A's scales ignored"
    B_SCALES_IGNORED = "B's scales ignored"
    A_SCALES_TRANSPOSED = "A's scales read in the other order"  # its grid's stored elements in the other order
    B_SCALES_TRANSPOSED = "B's scales read in the other order"
    A_SCALES_GRANULARITY = "A's scales at the wrong granularity"  # the declared grid read at another block's index
    B_SCALES_GRANULARITY = "B's scales at the wrong granularity"
    OTHER_FP8 = "FP8 data read as the other format"  # e4m3 bytes as e5m2, or the reverse
    INT16_ACCUMULATION = "accumulated in 16 bits"  # an INT8 GEMM whose sums wrapped at 16 bits: an overflow


class TimingProblem(_Word):
    """Why a verified case's timing cannot be believed (its facts are in the case's timing record)."""

    ABOVE_PEAK = "above the GPU's peak"  # TFLOP/s over the device's peak for the dtype
    FASTER_THAN_CUBLAS = "far faster than cuBLAS"  # judge.metrics.FASTER_THAN_CUBLAS times, where cuBLAS is not tiny
    WRONG_WHEN_TIMED = "wrong output when timed"  # the last timed launch's output is wrong: state between launches?
    REFERENCE_WRONG = "cuBLAS wrong when timed"  # cuBLAS's timed launches fail the bound: a calibration error
    OTHER_STREAM = "launched on another stream"  # GPU work outside the harness's stream: neither waited nor timed


class Verdict(_Word):
    """The kind of a case's diagnosis (a failed case's, or a calibration error's): which facts it holds
    (``records.diagnosis``) and how it reads."""

    FAULT = "fault"  # no verdict of its own: the worker's Failure says what went wrong (crash, hang, refused launch)
    NO_RESULT = "no result"  # the worker answered with neither a result nor a failure
    WRONG_OUTPUT = "wrong output"  # the verification failed: its findings, error statistics and error map
    TIMING = "timing"  # verified, but the timed launches cannot be believed: its TimingProblems
    #: the peer (cuBLAS) fails the bound on this case, so the bound is wrong there: a pytest-gemm
    #: calibration error; the kernel is not judged by that bound (skipped), only by its other findings
    CALIBRATION = "calibration error"
