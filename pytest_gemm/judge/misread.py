"""Which misreading a wrong output is: re-judge it, from the data in hand, against plausible misreadings.

A kernel that reads A where it should read B, or B's stored elements in the other order, writes "wrong values" in
nearly every element. Each :class:`~pytest_gemm.records.verdicts.Misreading` gives another C' (and its own scale
G' = |alpha'| |X'| |Y'| + |beta'| |C0| of the per-element bound, :func:`judge.accuracy.element_bound`); the output
matches one when at least :data:`MATCH` of its elements lie within that bound:

* an operand read in its other order: its stored elements reinterpreted as stored in the other order;
* A read as B (B never read), B read as A: the other operand's stored elements reinterpreted with this operand's
  declared stored shape (element counts equal: M = N);
* C written transposed: C' stored in C's other order and read back in the declared one (the alpha A B part only,
  as a kernel that reads and writes C at the same wrong address does, or the whole of it);
* alpha ignored (alpha != 1), beta taken as 0 or as 1, both scalars ignored;
* a strided batch's matrices mixed up, batch by batch where the readings above do not explain the
  whole: batch j's C holding batch i's result (a write into another batch's C), or computed from batch i's A or B.
  The batches tried for each are the usual slips' (the first, the neighbours, the last, the mirror): a stride
  ignored reads batch 0, an index off by one a neighbour.

A batch's matrices are stacked (``worker.buffers.CaseInputs``); each reading is made matrix by matrix.

Each candidate is built only where the shapes allow it and where it changes something (a vector reads the same in
either order). An FP8 case's readings of its scales and format come first (``judge.scale_misread``, up to twelve
more, two GEMMs each); where a reading holds a NaN (e4m3 bytes read as e5m2), it matches only a NaN of the output.
Together the others cost up to ten GEMMs in float64, so the worker asks only when most elements are wrong
(:func:`may_be_misread`). A batch's mix-ups cost up to five matrix GEMMs for each of the batches tried (five
batches for each of at most 64 wrong matrices, given up after the first four match none): at most about twenty
GEMMs of the whole batch more. Pure: ``xp`` is NumPy or CuPy; it uses the array operations judging uses, no others.

Why 99%: a misread kernel may be wrong in a few more places (an edge tile, a NaN from elsewhere), and a match by
chance is no risk: an element lies within another product's bound (a few units in the last place of its magnitude)
by chance only rarely. In tests/unit/judge/test_misreadings.py's outputs (every reading, order and dtype), a
reading other than the one simulated matched at most 0.3% of the elements.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

from ..records.dtypes import DType
from ..records.outcome import ErrorStats, Misread
from ..records.storage import LOGICAL, Storage
from ..records.verdicts import Misreading
from .accuracy import Truth, element_ratios

__all__ = ["BATCHES_LISTED", "MATCH", "may_be_misread", "misreading"]

#: the share of C's elements a misreading's output must match (within that reading's bound) to be named
MATCH = 0.99
#: pairs of batches a batch's mix-up lists (the count says how many matched in all)
BATCHES_LISTED = 8
#: wrong batches of a batch tried for a mix-up; it is given up when none of the first few match
_BATCHES_TRIED, _FIRST_TRIED = 64, 4


def may_be_misread(stats: ErrorStats, batch: int = 1) -> bool:
    """Whether the worker asks :func:`misreading` about an output: more than half of its elements are wrong, and
    few enough are NaN or Inf that a reading could still match (an output left unwritten is not worth the GEMMs);
    for a batch, also when as many elements are wrong as one of its matrices has (one batch mixed up)."""
    whole = 2 * stats.bad > stats.total and stats.nonfinite <= stats.total - _needed(stats.total)
    one = _needed(stats.total // batch)  # a matrix of the batch
    return whole or (batch > 1 and stats.bad >= one and stats.nonfinite <= stats.total - one)


def _needed(total: int) -> int:
    """How many elements must match a reading: :data:`MATCH` of them, at least one."""
    return max(1, math.ceil(MATCH * total))


def misreading(
    xp: Any,
    got: Any,
    a: Any,
    b: Any,
    c0: Any | None,
    alpha: float,
    beta: float,
    storage: Storage,
    dtype: DType,
    out: DType,
    truth: Truth | None = None,
    extra: Iterable[tuple[Misreading, str, Any, Any]] = (),
) -> Misread | None:
    """The misreading ``got`` matches, or None.

    ``got`` (M x N), ``a`` (M x K), ``b`` (K x N) and ``c0`` (M x N, None when C held no prior data) are the
    logical matrices in float64 (C's output already read in its declared order), a batch's stacked; ``storage`` the
    declared orders; ``dtype`` and ``out`` the input and output types, as the output was judged, against ``truth``
    (needed for a batch's mix-ups only). Of several matching readings, the one matching most elements (the first of
    equals, in :class:`Misreading`'s order).
    """
    batch = 1 if truth is None else truth.batch
    need = _needed(got.size)
    found: Misread | None = None
    k = a.shape[1]
    got3, a3, b3 = (x.reshape(batch, -1, x.shape[1]) for x in (got, a, b))
    c3 = None if c0 is None else c0.reshape(got3.shape)
    standard = (
        (kind, "", expected, scale) for kind, expected, scale in _candidates(xp, a3, b3, c3, alpha, beta, storage)
    )
    for kind, as_read, expected, scale in itertools.chain(extra, standard):
        shaped = expected.reshape(got3.shape), scale.reshape(got3.shape)
        ratio = element_ratios(xp, got3, *shaped, k, dtype, out)
        ratio[xp.isnan(ratio)] = xp.inf  # a NaN in the reading matches no finite output
        matched = got.size - int((ratio > 1.0).sum())  # as error_stats counts (no other kernel for CuPy to compile)
        if kind == Misreading.OTHER_FP8:  # NaN where that format reads a NaN byte: matched where the output is NaN
            matched += int((xp.isnan(got3) & xp.isnan(shaped[0])).sum())
        del ratio, expected, scale, shaped
        if matched >= need and (found is None or matched > found.matched):
            found = Misread(kind, matched, as_read=as_read)
    if found is None and truth is not None and batch > 1:
        found = _mixed_batches(xp, got3, a3, b3, c3, alpha, beta, dtype, out, truth)
    return found


def _tried(j: int, batch: int) -> list[int]:
    """The batches whose data batch ``j`` may hold by the usual slips: the first, its neighbours, the last, its
    mirror."""
    return [i for i in dict.fromkeys((0, j - 1, j + 1, batch - 1, batch - 1 - j)) if 0 <= i < batch and i != j]


def _mixed_batches(
    xp: Any, got: Any, a: Any, b: Any, c0: Any | None, alpha: float, beta: float, dtype: DType, out: DType, truth: Truth
) -> Misread | None:
    """The mix-up of a batch's matrices its wrong batches match, batch by batch (``got``, ``a``, ``b``, ``c0``:
    batch x rows x cols): the kind most of them match, and which batch's data each holds."""
    batch, k = got.shape[0], a.shape[2]
    shape = got.shape
    value, gscale = truth.value.reshape(shape), truth.gscale.reshape(shape)
    hscale = None if truth.hscale is None else truth.hscale.reshape(shape)
    own = element_ratios(xp, got, value, gscale, k, dtype, out, hscale, truth.subnormal) > 1.0
    wrong = [j for j, n in enumerate(own.reshape(batch, -1).sum(axis=1).tolist()) if n >= _needed(got[0].size)]
    del own
    need = _needed(got[0].size)
    pairs: dict[Misreading, list[tuple[int, int, int]]] = {}
    for tried, j in enumerate(wrong[:_BATCHES_TRIED]):
        if tried >= _FIRST_TRIED and not pairs:
            break
        for i in _tried(j, batch):
            match = _batch_match(xp, got, a, b, c0, alpha, beta, dtype, out, truth, (value, gscale, hscale), i, j)
            if match is not None and match[1] >= need:
                pairs.setdefault(match[0], []).append((j, i, match[1]))
                break
    if not pairs:
        return None
    kind, found = max(pairs.items(), key=lambda item: len(item[1]))
    listed = tuple((j, i) for j, i, _ in found[:BATCHES_LISTED])
    return Misread(kind, sum(n for _, _, n in found), listed, len(found))


def _batch_match(
    xp: Any,
    got: Any,
    a: Any,
    b: Any,
    c0: Any | None,
    alpha: float,
    beta: float,
    dtype: DType,
    out: DType,
    truth: Truth,
    scales: tuple[Any, Any, Any | None],
    i: int,
    j: int,
) -> tuple[Misreading, int] | None:
    """Which mix-up of batch ``i``'s data batch ``j``'s output matches (the first that does), and how many of its
    elements; None when none does."""
    value, gscale, hscale = scales
    k, need = a.shape[2], _needed(got[j].size)

    def matched(expected: Any, scale: Any, h: Any | None) -> int:
        ratio = element_ratios(xp, got[j], expected, scale, k, dtype, out, h, truth.subnormal)
        return got[j].size - int((ratio > 1.0).sum())

    n = matched(value[i], gscale[i], None if hscale is None else hscale[i])
    if n >= need:
        return Misreading.OTHER_BATCH_C, n
    prior = c0 is not None and beta != 0.0
    if prior:  # batch i's product, with the C0 it found where it wrote (a wrong C pointer reads there too)
        product, scale = alpha * (a[i] @ b[i]), abs(alpha) * (xp.abs(a[i]) @ xp.abs(b[i]))
        n = matched(product + beta * c0[j], scale + abs(beta) * xp.abs(c0[j]), None)
        if n >= need:
            return Misreading.OTHER_BATCH_C, n
    for kind, x, y in ((Misreading.OTHER_BATCH_A, a[i], b[j]), (Misreading.OTHER_BATCH_B, a[j], b[i])):
        expected, scale = alpha * (x @ y), abs(alpha) * (xp.abs(x) @ xp.abs(y))
        if prior:
            expected, scale = expected + beta * c0[j], scale + abs(beta) * xp.abs(c0[j])
        n = matched(expected, scale, None)
        if n >= need:
            return kind, n
    return None


def _reread(x: Any, transposed: bool, operand: str, as_transposed: bool, dims: dict[str, int]) -> Any:
    """The logical ``operand`` a kernel sees when it reads the stored elements of ``x`` (logical matrices, batch x
    rows x cols, stored transposed or not) as ``operand`` stored in the order ``as_transposed`` says, matrix by
    matrix."""
    batch = x.shape[0]
    flat = (x.swapaxes(1, 2) if transposed else x).reshape(batch, -1)  # each one's stored elements, in memory order
    rows, cols = (dims[d] for d in LOGICAL[operand])
    stored = flat.reshape((batch, cols, rows) if as_transposed else (batch, rows, cols))
    return stored.swapaxes(1, 2) if as_transposed else stored


def _candidates(
    xp: Any, a: Any, b: Any, c0: Any | None, alpha: float, beta: float, storage: Storage
) -> Iterator[tuple[Misreading, Any, Any]]:
    """Each misreading that applies: (its word, the C it gives, the scale G of its bound), one at a time (each a
    batch x rows x cols array, as ``a``, ``b`` and ``c0`` are)."""
    _, m, k = a.shape
    n = b.shape[2]
    dims = {"M": m, "N": n, "K": k}
    ta, tb, tc = (storage.transposed(op) for op in "ABC")
    prior = c0 is not None

    def plus_c(expected: Any, scale: Any, c_scalar: float) -> tuple[Any, Any]:
        if not prior or c_scalar == 0.0:
            return expected, scale
        return expected + c_scalar * c0, scale + abs(c_scalar) * xp.abs(c0)

    operands = {}  # the operands each reading gives, made one at a time (each a copy of A or B)
    if min(k, n) > 1:  # a vector reads the same in either order
        operands[Misreading.B_ORDER] = lambda: (a, _reread(b, tb, "B", not tb, dims))
    if min(m, k) > 1:
        operands[Misreading.A_ORDER] = lambda: (_reread(a, ta, "A", not ta, dims), b)
    if m == n:  # A's elements are as many as B's
        operands[Misreading.A_AS_B] = lambda: (a, _reread(a, ta, "B", tb, dims))
        operands[Misreading.B_AS_A] = lambda: (_reread(b, tb, "A", ta, dims), b)
    for kind, read in operands.items():
        x, y = read()
        yield (kind, *plus_c(alpha * (x @ y), abs(alpha) * (xp.abs(x) @ xp.abs(y)), beta))
        del x, y

    product, magnitude = a @ b, xp.abs(a) @ xp.abs(b)  # A B and |A| |B|, which the other readings scale
    if min(m, n) > 1:
        written = (alpha * product, abs(alpha) * magnitude)
        # a kernel that reads C0 at the address it writes to (only its A B part lands transposed), or all of C
        for whole in (False, True) if prior and beta != 0.0 else (False,):
            expected, scale = (_reread(v, not tc, "C", tc, dims) for v in plus_c(*written, beta if whole else 0.0))
            yield (Misreading.C_TRANSPOSED, *plus_c(expected, scale, 0.0 if whole else beta))
        del written
    scalars = [(Misreading.ALPHA_IGNORED, 1.0, beta)] if alpha != 1.0 else []
    if prior:
        scalars += [(Misreading.BETA_IGNORED, alpha, 0.0)] if beta != 0.0 else []
        scalars += [(Misreading.BETA_AS_ONE, alpha, 1.0)] if beta != 1.0 else []
        scalars += [(Misreading.ALPHA_BETA_IGNORED, 1.0, 0.0)] if alpha != 1.0 and beta != 0.0 else []
    for kind, scalar, c_scalar in scalars:
        yield (kind, *plus_c(scalar * product, abs(scalar) * magnitude, c_scalar))
