"""What a GPU worker sends back for one case: results, or what went wrong, as plain records."""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from .plain import PlainError, fields_from_plain
from .shapes import Shape
from .verdicts import Check, ErrorCause, FailureKind, Misreading

__all__ = [
    "CAUSE_LETTERS",
    "PHASES",
    "STREAMS_KEPT",
    "ErrorMap",
    "ErrorSource",
    "ErrorStats",
    "Failure",
    "Fault",
    "Misread",
    "Outcome",
    "TimingRun",
    "Verification",
    "cuda_version",
    "internal_failure",
]

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


#: the letter of each cause in a map's stored rows ('.' within the bound): readable in the JSON itself
CAUSE_LETTERS = {
    ErrorCause.GUARD_A: "A",
    ErrorCause.GUARD_B: "B",
    ErrorCause.GUARD_C: "C",
    ErrorCause.READ_C: "R",
    ErrorCause.UNWRITTEN: "U",
    ErrorCause.ARITHMETIC: "N",
    ErrorCause.OVER_BOUND: "x",
}
_WORDS = {letter: cause.value for cause, letter in CAUSE_LETTERS.items()} | {".": ""}
_RANK = {cause.value: cause.rank for cause in ErrorCause} | {"": len(ErrorCause)}
#: a ratio is stored as two characters: 0, or 10 ** ((code - _ZERO) / _STEPS) for codes 1 to 4095, so within
#: 1.2% of its value from 10^-20 to 10^20 (clamped beyond); the map's largest ratio is stored exactly beside
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"
_STEPS, _ZERO, _TOP = 100, 2048, 64 * 64 - 1
MAX_OUTSIDE_STORED = 64  # rectangles of writes outside C a pooled map keeps


def _code(value: float) -> str:
    if not value > 0.0:
        return "00"
    code = min(_TOP, max(1, _ZERO + round(math.log10(value) * _STEPS))) if math.isfinite(value) else _TOP
    return _DIGITS[code // 64] + _DIGITS[code % 64]


@dataclass(frozen=True)
class ErrorMap:
    """Where in C a wrong output is wrong, downsampled so that the worst value of each cell wins.

    C (``rows`` x ``cols``) is cut into cells of ``cell`` = (rows, columns) elements; the grid is
    ceil(rows / cell[0]) x ceil(cols / cell[1]). ``ratio`` holds each cell's largest |error| / bound over
    its finite elements (0.0 where all are exact); ``cause`` holds each cell's most telling ErrorCause
    word (see ``ErrorCause.rank``), or "" where every element is within the bound.
    ``tile`` is the kernel's output tile (rows, columns) when the launch geometry tells it, for outlines.
    ``outside`` holds the writes that landed in the guard around C, as rectangles (first row, first column,
    rows, columns, elements written) in C's logical coordinates, as if C's storage went on past its ends: for
    a row-major C, rows below 0 before it, rows from ``rows`` on after it, columns from ``cols`` on in its
    row padding (for a column-major C the same with rows and columns exchanged).

    Stored (:meth:`to_plain_value`), a row of ratios is a string of two characters a cell and a row of
    causes a string of one letter a cell (:data:`CAUSE_LETTERS`), so a map of 64 x 64 cells takes about 16 KB.
    """

    rows: int
    cols: int
    cell: tuple[int, int]
    ratio: tuple[tuple[float, ...], ...]
    cause: tuple[tuple[str, ...], ...]
    tile: tuple[int, int] | None = None
    outside: tuple[tuple[int, int, int, int, int], ...] = ()

    @property
    def causes(self) -> tuple[ErrorCause, ...]:
        """The causes present, most telling first."""
        seen = {word for line in self.cause for word in line if word}
        return tuple(sorted((ErrorCause(w) for w in seen), key=lambda c: c.rank))

    @property
    def grid(self) -> tuple[int, int]:
        """How many cells down and across."""
        return len(self.ratio), len(self.ratio[0]) if self.ratio else 0

    def pooled(self, max_cells: int) -> ErrorMap:
        """This map with at most ``max_cells`` cells a side: whole blocks of cells pooled into one, the worst ratio
        and the most telling cause of each block kept (as if C had been pooled with the larger cells at once)."""
        down, across = self.grid
        fr, fc = max(1, math.ceil(down / max_cells)), max(1, math.ceil(across / max_cells))
        outside = _merged(self.outside, MAX_OUTSIDE_STORED, (self.rows, self.cols))
        if fr == fc == 1:
            return replace(self, outside=outside)
        blocks = [(range(i, min(i + fr, down)), range(j, min(j + fc, across))) for i in range(0, down, fr)
                  for j in range(0, across, fc)]  # fmt: skip
        width = math.ceil(across / fc)
        ratio = [max(self.ratio[i][j] for i in rs for j in cs) for rs, cs in blocks]
        cause = [min((self.cause[i][j] for i in rs for j in cs), key=_RANK.__getitem__) for rs, cs in blocks]
        return replace(
            self,
            cell=(self.cell[0] * fr, self.cell[1] * fc),
            ratio=tuple(tuple(ratio[k : k + width]) for k in range(0, len(ratio), width)),
            cause=tuple(tuple(cause[k : k + width]) for k in range(0, len(cause), width)),
            outside=outside,
        )

    def to_plain_value(self) -> dict[str, Any]:
        peak = max((v for line in self.ratio for v in line), default=0.0)
        return {
            "rows": self.rows,
            "cols": self.cols,
            "cell": list(self.cell),
            "tile": list(self.tile) if self.tile else None,
            "outside": [list(r) for r in self.outside],
            "peak": peak,
            "ratio": ["".join(_code(v) for v in line) for line in self.ratio],
            "cause": ["".join(CAUSE_LETTERS[ErrorCause(w)] if w else "." for w in line) for line in self.cause],
        }

    @classmethod
    def from_plain_value(cls, value: Any) -> ErrorMap:
        """A stored map: rows as strings (:meth:`to_plain_value`), or as lists of numbers and words (saved runs
        written before maps were stored this way). Each value is checked; a saved run holds hundreds of maps, so
        the grids are read here, not field by field."""
        if not isinstance(value, dict):
            raise PlainError(f"ErrorMap: expected an object, got {type(value).__name__}")
        data = dict(value)
        peak, ratio, cause = data.pop("peak", None), data.pop("ratio", None), data.pop("cause", None)
        head = fields_from_plain(cls, {**data, "ratio": [], "cause": []})
        _check_head(head)
        ratios, causes = _ratios(ratio, peak), _causes(cause)
        grid = (math.ceil(head.rows / head.cell[0]), math.ceil(head.cols / head.cell[1]))
        for name, rows in (("ratio", ratios), ("cause", causes)):
            if len(rows) != grid[0] or any(len(line) != grid[1] for line in rows):
                raise PlainError(f"ErrorMap.{name}: expected {grid[0]} rows of {grid[1]} cells for its size and cell")
        return replace(head, ratio=ratios, cause=causes)


_TABLE = {a + b: 0.0 if i == 0 else 10.0 ** ((i - _ZERO) / _STEPS) for i, (a, b) in
          enumerate((a, b) for a in _DIGITS for b in _DIGITS)}  # fmt: skip


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_head(emap: ErrorMap) -> None:
    """A stored map's sizes, cell, tile and writes outside C: whole numbers, the sizes at least 1."""
    if not (_positive(emap.rows) and _positive(emap.cols)):
        raise PlainError(
            f"ErrorMap: rows and cols must be whole numbers of at least 1, got {emap.rows!r}, {emap.cols!r}"
        )
    for name, pair in (("cell", emap.cell), ("tile", emap.tile or (1, 1))):
        if len(pair) != 2 or not all(_positive(v) for v in pair):
            raise PlainError(f"ErrorMap.{name}: expected two whole numbers of at least 1, got {list(pair)!r}")
    for rect in emap.outside:
        if len(rect) != 5 or not all(isinstance(v, int) and not isinstance(v, bool) for v in rect):
            raise PlainError(f"ErrorMap.outside: expected rectangles of five whole numbers, got {list(rect)!r}")


def _ratios(rows: Any, peak: Any) -> tuple[tuple[float, ...], ...]:
    """A stored map's ratios: two characters a cell, or numbers (older files)."""
    if not isinstance(rows, list):
        raise PlainError("ErrorMap.ratio: expected a list of rows")
    if all(isinstance(line, str) for line in rows):
        if any(len(line) % 2 for line in rows):
            raise PlainError("ErrorMap.ratio: a row of stored ratios has an odd number of characters")
        try:
            grid = [[_TABLE[line[k : k + 2]] for k in range(0, len(line) - 1, 2)] for line in rows]
        except KeyError as exc:
            raise PlainError(f"ErrorMap.ratio: {exc.args[0]!r} is not a stored ratio") from None
        cells = [(v, i, j) for i, line in enumerate(grid) for j, v in enumerate(line)]
        if cells and isinstance(peak, (int, float)) and math.isfinite(peak) and peak > 0:
            _, i, j = max(cells)  # the largest ratio exactly, and none above it from rounding its code
            grid = [[min(v, float(peak)) for v in line] for line in grid]
            grid[i][j] = float(peak)
        return tuple(map(tuple, grid))
    numbers = all(isinstance(line, list) for line in rows) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for line in rows for v in line
    )
    if not numbers:
        raise PlainError("ErrorMap.ratio: expected rows of stored ratios or of numbers")
    return tuple(tuple(float(v) for v in line) for line in rows)


def _causes(rows: Any) -> tuple[tuple[str, ...], ...]:
    """A stored map's causes: a letter a cell, or words (older files)."""
    if not isinstance(rows, list) or not all(isinstance(line, (str, list)) for line in rows):
        raise PlainError("ErrorMap.cause: expected a list of rows")
    words = set(_RANK)
    if all(isinstance(line, str) for line in rows):
        if any(letter not in _WORDS for line in rows for letter in line):
            raise PlainError(f"ErrorMap.cause: expected rows of {''.join(_WORDS)}")
        return tuple(tuple(_WORDS[letter] for letter in line) for line in rows)
    if any(not isinstance(line, list) or any(w not in words for w in line) for line in rows):
        raise PlainError("ErrorMap.cause: expected rows of cause words")
    return tuple(tuple(line) for line in rows)


def _merged(
    rects: tuple[tuple[int, int, int, int, int], ...], most: int, size: tuple[int, int]
) -> tuple[tuple[int, int, int, int, int], ...]:
    """Rectangles of writes outside C (of ``size`` rows and columns) merged by their corners' grid cells, growing
    the cells until at most ``most`` remain; rectangles on different sides of C never merge, so no box covers C."""
    rows, cols = size
    cell = 1
    while len(rects) > most:
        cell *= 2
        groups: dict[tuple[int, ...], list[int]] = {}
        for r, c, h, w, n in rects:
            side = (r < 0, r >= rows, c < 0, c >= cols)
            box = groups.setdefault((*side, r // cell, c // cell), [r, c, r + h, c + w, 0])
            box[0], box[1] = min(box[0], r), min(box[1], c)
            box[2], box[3], box[4] = max(box[2], r + h), max(box[3], c + w), box[4] + n
        rects = tuple((r0, c0, r1 - r0, c1 - c0, n) for r0, c0, r1, c1, n in groups.values())
    return rects


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
class Misread:
    """The misreading a wrong output matches (#34 item 7): ``matched`` of its elements lie within that reading's
    bound (``judge.misread``). For a batch's mix-up (#34 item 3), ``batches`` pairs each batch that matched with the
    batch whose data it holds (the first few; ``batch_count`` of them in all)."""

    kind: Misreading
    matched: int
    batches: tuple[tuple[int, int], ...] = ()
    batch_count: int = 0


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
    # a Python kernel's first launch, watched by CUPTI (#35): the streams besides the harness's it launched work on
    # (CUPTI's ids: the first STREAMS_KEPT and one more), or why that could not be checked
    other_streams: tuple[int, ...] = ()
    unchecked_streams: str = ""

    @property
    def passed(self) -> bool:
        return self.kernel.passed and not self.faults and not self.other_streams


#: the other streams a timed case shows (a kernel that makes a stream for each call shows one a launch): the first few;
#: one more is kept to say there were more
STREAMS_KEPT = 8


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
    last_output: ErrorStats | None = None  # the last timed launch's output, verified again
    reference_output: ErrorStats | None = None  # the same for cuBLAS: proves it computed this case
    timer: str = "events"  # what kernel_s and reference_s were measured with: a key of TIMERS
    timer_note: str = ""  # why CUPTI was asked for and not used
    events_median_s: tuple[float, float] | None = None  # the events' medians (kernel, cuBLAS), as a cross-check
    other_streams: tuple[int, ...] = ()  # CUPTI's ids of streams besides the harness's that the kernel launched on
    host_median_s: tuple[float, float] | None = None  # a Python kernel's host time to make one launch call, cuBLAS's


@dataclass(frozen=True)
class Failure:
    """What kept a case from a verdict of its own, in the words of CUDA, the compiler or the kernel."""

    kind: FailureKind
    message: str
    phase: str = ""  # a key of PHASES
    details: tuple[str, ...] = ()  # more lines: the numbers that broke a limit, a Python kernel's traceback
    replace_worker: bool = False  # the worker cannot be used again (lost CUDA context, killed, dead)


def internal_failure(exc: BaseException, phase: str) -> Failure:
    """A fault of pytest-gemm's own code: the exception and the last 12 entries of its traceback; the worker
    that raised it is replaced."""
    chunks = traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]
    details = tuple(line.rstrip() for chunk in chunks for line in chunk.splitlines())
    return Failure(FailureKind.INTERNAL, f"{type(exc).__name__}: {exc}", phase, details, replace_worker=True)


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
    phase_s: dict[str, float] = field(default_factory=dict)  # seconds spent in each phase
    output: str = ""  # what the worker printed while it ran the case (a kernel's printf, warnings)
    worker: int = 0  # process id of the worker that ran it
    compiled: int = 0  # kernels NVRTC compiled for this case (0 when loaded, or found in the compile cache)
    cached: int = 0  # kernels found compiled in the compile cache for this case
    autotuned: tuple[str, ...] = ()  # a Python kernel's autotuned Triton kernels, each with its choice for this case
