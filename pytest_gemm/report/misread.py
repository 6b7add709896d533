"""A misread output in words: the reading it matches (``judge.misread``), with the orders the header
declares where the reading concerns one: "matches B read as N x K; the header says K x N"."""

from __future__ import annotations

from ..records.diagnosis import Diagnosis, Finding
from ..records.storage import ORDERS
from ..records.verdicts import Misreading
from ..specs.families import family_of
from .epilogue import EPILOGUE_READINGS, epilogue_reading

__all__ = ["misread_text"]


def _dims(order: str) -> str:
    return order.replace("x", " x ")


def _reading(kind: Misreading, d: Diagnosis, as_read: str = "") -> str:
    """What a misread output matches, with the header's order where the reading concerns one."""
    storage = d.declared.storage
    op = {Misreading.A_ORDER: "A", Misreading.B_ORDER: "B", Misreading.C_TRANSPOSED: "C"}.get(kind)
    if op is not None:
        declared = storage.order(op)
        other = _dims(ORDERS[op][1 - ORDERS[op].index(declared)])
        read = f"C written {other} (transposed)" if op == "C" else f"{op} read as {other}"
        return f"{read}; the header says {_dims(declared)}"
    if kind in EPILOGUE_READINGS:
        return epilogue_reading(kind, d)
    scaled = _scaled(kind, d, as_read)
    if scaled:
        return scaled
    same = storage.transposed("A") == storage.transposed("B")  # else the one read in place of the other is transposed
    square = d.shape.M == d.shape.N == d.shape.K
    with_c = "" if d.beta == 0 else " + beta C"
    return {
        Misreading.A_AS_B: f"C = A x {'A' if same else 'A^T'} (B never read)" if square else
        "A's elements read in place of B's (B never read)",
        Misreading.B_AS_A: f"C = {'B' if same else 'B^T'} x B (A never read)" if square else
        "B's elements read in place of A's (A never read)",
        Misreading.ALPHA_IGNORED: f"alpha ignored (C = A B{with_c}; alpha is {d.alpha:g})",
        Misreading.BETA_IGNORED: f"beta ignored (C = alpha A B; beta is {d.beta:g})",
        Misreading.BETA_AS_ONE: f"beta taken as 1 (C = alpha A B + C; beta is {d.beta:g})",
        Misreading.ALPHA_BETA_IGNORED: f"alpha and beta ignored (C = A B; alpha is {d.alpha:g}, beta {d.beta:g})",
    }[kind]  # fmt: skip


#: how a misreading of an FP8 kernel's scales or data, or an INT8 kernel's sums, reads
_SCALED = {
    Misreading.SCALES_IGNORED: "the scales ignored (C = A B of the FP8 elements as they are)",
    Misreading.A_SCALES_IGNORED: "A's scales ignored (B's applied)",
    Misreading.B_SCALES_IGNORED: "B's scales ignored (A's applied)",
    Misreading.A_SCALES_TRANSPOSED: "A's grid of scales read in its other order",
    Misreading.B_SCALES_TRANSPOSED: "B's grid of scales read in its other order",
    Misreading.OTHER_FP8: "A and B read as {other}, the other FP8 format",
    Misreading.INT16_ACCUMULATION: "the sums accumulated in 16 bits (they wrap past 32767: an overflow)",
}


def _scaled(kind: Misreading, d: Diagnosis, as_read: str) -> str:
    """A scaled or integer GEMM's misreading in words, with the granularity read and declared; empty for the others."""
    if kind in (Misreading.A_SCALES_GRANULARITY, Misreading.B_SCALES_GRANULARITY):
        op = "A" if kind == Misreading.A_SCALES_GRANULARITY else "B"
        scales = d.declared.scales
        declared = f"the header declares {scales.describe()}" if scales else "the header declares others"
        return f"{op}'s scales applied at {_BLOCKS.get(as_read, as_read or 'another granularity')}; {declared}"
    if kind not in _SCALED:
        return ""
    if kind == Misreading.OTHER_FP8:
        return _SCALED[kind].format(other=family_of(d.dtype).other(d.dtype))
    return _SCALED[kind]


#: the blocks a slip of granularity applies scales at, in words
_BLOCKS = {
    "tensor": "one scale for the whole matrix",
    "row": "one scale a row (the first of each row's)",
    "col": "one scale a column",
    "1x128": "1 x 128 blocks",
    "128x128": "128 x 128 blocks (a 128 x 128 block's index into the grid)",
    "128xN": "one scale per 128 rows of K (the first N block's)",
}


#: how a batch's mix-up reads for one pair: batch j and batch i
_MIXED = {
    Misreading.OTHER_BATCH_A: "batch {j} read batch {i}'s A",
    Misreading.OTHER_BATCH_B: "batch {j} read batch {i}'s B",
    Misreading.OTHER_BATCH_C: "batch {j}'s C holds batch {i}'s result",
    Misreading.OTHER_GROUP_B: "group {j}'s rows computed with group {i}'s B",
    Misreading.EMPTY_GROUP_COMPUTED: "group {j}'s rows computed with empty group {i}'s B",
    Misreading.OTHER_GROUP_SCALES: "group {j}'s B scaled by group {i}'s scales",
    Misreading.OTHER_GROUP_A_SCALES: "group {j}'s A scaled by slot {i}'s scales",
}
#: what a mix-up's pairs are pairs of
_MIXED_OF = {kind: "groups" for kind in _MIXED if kind.name.startswith(("OTHER_GROUP", "EMPTY_GROUP"))}


def _mixed(f: Finding, d: Diagnosis) -> str:
    """A batch's mix-up: which batch holds which batch's data."""
    listed = ", ".join(_MIXED[f.kind].format(j=j, i=i) for j, i in f.batches)
    more = ", ..." if f.batch_count > len(f.batches) else ""
    if f.kind in _MIXED_OF:
        return f"{f.kind} ({listed}{more}; {f.batch_count} of {d.shape.groups} groups)"
    return f"{f.kind} ({listed}{more}; {f.batch_count} of {d.shape.batch} batches)"


def misread_text(f: Finding, d: Diagnosis) -> str:
    """The finding of a :class:`Misreading`: what the output matches, and how much of it does."""
    assert isinstance(f.kind, Misreading)
    total = d.kernel.total if d.kernel else 0
    reading = _mixed(f, d) if f.kind in _MIXED else _reading(f.kind, d, f.as_read)
    if f.kind not in _MIXED and f.batch_count and d.shape.groups:  # a slip of one GEMM, in each of these groups
        more = ", ..." if f.batch_count > len(f.batches) else ""
        listed = ", ".join(str(g) for g, _ in f.batches)
        reading += f" in group{'s' if f.batch_count > 1 else ''} {listed}{more} ({f.batch_count} of {d.shape.groups})"
    return f"matches {reading}: {f.count} of {total} elements lie within that reading's bound"
