"""Why a case failed, as data: the kind of verdict (``Verdict``) and its facts.

The judgement (``judge/``) builds a :class:`Diagnosis`; the report layer (``report/``) turns it into the
failure text, the HTML page, the heatmap and the summary. A new check adds a kind of finding (a word of
``ErrorCause`` or ``Check``) and its rendering, never a sentence here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .declarations import Declarations
from .outcome import ErrorMap, ErrorStats, Failure, TimedCheck
from .shapes import Shape
from .verdicts import Check, ErrorCause, Misreading, TimingProblem, Verdict

__all__ = ["MAX_OUTPUT_LINES", "Diagnosis", "Finding"]

MAX_OUTPUT_LINES = 20  # lines of the worker's output a diagnosis keeps (the last ones)


@dataclass(frozen=True)
class Finding:
    """One thing wrong with an output: what it is, and where in C.

    ``count`` is how many elements it concerns (of C, or changed, for a bitwise check; for a ``Misreading``, how
    many match it); ``rows`` and ``cols`` the first and last row and column of C holding them and ``tiles`` how
    many 32x32 tiles of C do (None: not traced to elements); ``region`` names the guard region a read went past
    ("the guard after A"), or where a bitwise check found a change; ``batches`` (a batch's mix-up):
    each batch that matched and the batch whose data it holds, the first few of ``batch_count``.
    """

    kind: ErrorCause | Check | Misreading
    count: int = 0
    rows: tuple[int, int] | None = None
    cols: tuple[int, int] | None = None
    tiles: int | None = None
    region: str = ""
    batches: tuple[tuple[int, int], ...] = ()
    batch_count: int = 0
    as_read: str = ""  # a misreading of scales' granularity: the block they were applied at


@dataclass(frozen=True)
class Diagnosis:
    """A failed case (or a calibration error's skipped one): the kind of verdict, the case's scalars, and the facts
    of that kind.

    * ``FAULT``: ``failure`` (what the worker, CUDA or the compiler said) and ``output`` (what it printed);
    * ``WRONG_OUTPUT``: ``findings`` (most telling first), ``kernel`` (the output against the truth), ``peer``
      (cuBLAS in the same dtype, the yardstick), ``error_map`` (where over C), ``seed`` (the case's data);
    * ``TIMING``: ``problems``, with ``kernel`` the wrong timed output (a checked round's, ``timed``, or the last's)
      and ``peer`` cuBLAS's timed output when that was (the speed figures are in the case's timing record);
    * ``CALIBRATION``: ``peer`` (cuBLAS's statistics, which fail the bound, in verification or its timed launches),
      ``kernel`` (the kernel's, by the same bound), ``findings`` (what the peer's failure does not explain: faults,
      unwritten, guard reads, non-finite elements, a misreading, errors past the peer's own; none when it was
      skipped), ``problems`` (a timed case's own), ``error_map`` (with findings only), ``seed``;
    * ``NO_RESULT``: nothing more.
    """

    kind: Verdict
    dtype: str
    shape: Shape
    alpha: float
    beta: float
    seed: int = 0
    findings: tuple[Finding, ...] = ()
    kernel: ErrorStats | None = None
    peer: ErrorStats | None = None
    error_map: ErrorMap | None = None
    failure: Failure | None = None
    problems: tuple[TimingProblem, ...] = ()
    streams: tuple[int, ...] = ()  # OTHER_STREAM: CUPTI's ids of the other streams the kernel launched on
    timed: TimedCheck | None = None  # WRONG_WHEN_TIMED: the checked timed launch that was wrong, when one was
    output: str = ""
    declared: Declarations = field(default_factory=Declarations)  # the header's declarations that change the checks
    said: tuple[str, ...] = ()  # a saved run's sentences from before diagnoses were data (no findings then)

    @property
    def miscalibrated(self) -> bool:
        """Whether cuBLAS failed the bound on this case (a calibration error), in verification or in its
        timed launches, beside the kernel's own timing problems or alone."""
        return self.kind == Verdict.CALIBRATION or TimingProblem.REFERENCE_WRONG in self.problems

    @property
    def poisoned(self) -> bool:
        """Whether C (or D, written apart from C) held the NaN poison before the launch: beta = 0, and the kernel does
        not declare it reads C; or the kernel writes D apart from C."""
        apart = getattr(self.declared.epilogue, "d", False)  # a fused epilogue's D, apart from C
        return apart or (self.beta == 0 and not self.declared.always_reads_c)
