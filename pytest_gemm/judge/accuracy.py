"""The pass rule: compare a kernel's output with the fp64 truth, with bounds from rounding-error analysis.

Every function takes the array module (``numpy`` or ``cupy``) as ``xp`` so the same maths
runs on the GPU in the harness and on recorded or simulated data in the CPU tests.

Two tests, both must pass (constants, reasoning and simulated margins in docs/verification.md, "How results are
judged"):

* per element: ``|C - C*| <= LAMBDA * (u_in + sqrt(K) * u_acc) * G + OUTPUT_ROUNDINGS * u_out * H + f tiny_out
  + LAMBDA * sqrt(K) * tiny_acc`` with ``G = |alpha| |A| |B| + |beta| |C0|``; catches wrong values anywhere
  (skipped tiles, wrong operand, ignored alpha or beta), and is safe against false alarms (probabilistic bound,
  Higham & Mary 2019). ``H`` (:func:`rounding_scale`) is the scale of what rounding to C's type may cost a correct
  kernel on the way to C: ``|alpha A B| + |beta C0|``, the parts it sums, plus ``R``, the root of the summed
  squares of the products, ``sqrt(alpha^2 (A*A)(B*B) + beta^2 C0*C0)``. In C's type the product may be rounded,
  alpha and beta may be (CuPy rounds a Python scalar to an fp16 array's type), their products and the sum are,
  each by at most ``u_out`` of what it rounds: at most ``4 u_out (|alpha A B| + |beta C0|)``; and the products
  themselves may be rounded before they are summed (CuPy's fp16 ``A @ B`` of a 1 x K and a K x 1 matrix is),
  ``u_out R / sqrt(3)`` in the rms, so ``4 u_out R`` is about seven of its standard deviations. ``|C*|`` alone
  failed CuPy's own ``alpha * (A @ B) + beta * C`` in fp16 by up to 770x where beta C0 cancels alpha A B. The
  last two terms are the absolute rounding errors of the subnormal range: C's roundings to its
  type's subnormal spacing (``tiny_out``, times (|alpha| + 1) / 2, or (|alpha| + 3) / 2 with beta:
  :func:`subnormal_floor`) and the accumulation's own (``acc_tiny``), from the dtypes; without them a correct
  fp16 GEMM failed at K = 1, where outputs near 1e-7 are fp16 subnormals;
* normwise, on the harness's zero-mean data: ``||C - C*||_F <= NORM_C * (u_in + sqrt(K) * u_acc)
  * max(||C*||_F, S) + OUTPUT_ROUNDINGS * u_out * ||H||_F + sqrt(MN) * (f tiny_out + NORM_C * sqrt(K) * tiny_acc)``,
  where ``S`` (:func:`sum_scale`) is
  the Frobenius norm zero-mean sums have in expectation; catches a quietly lower precision (fp16-rounded
  operands, TF32 products) that a per-element bound of the sqrt(K) form lets through at large K. ``S`` keeps a
  tiny output judged: ``||C*||_F`` alone may cancel to near zero by chance there (a correct sequential fp32 sum
  at 1 x 1 x 1000 failed on 7 of 400 seeds, up to 18x), and ``S`` does not. The error is reported divided by
  ``max(||C*||_F, S)``, and the tolerance is the right-hand side divided by the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..records.outcome import ErrorStats
from .figures import calc_diff, cosine

__all__ = [
    "LAMBDA",
    "NORM_C",
    "OUTPUT_ROUNDINGS",
    "TILE",
    "Truth",
    "count_changed",
    "element_bound",
    "element_ratios",
    "error_stats",
    "matmul",
    "norm_test",
    "norm_tolerance",
    "rounding_scale",
    "subnormal_floor",
    "sum_scale",
    "tile_summary",
    "to_host",
]

LAMBDA = 10.0
NORM_C = 4.0
#: roundings to C's type a correct kernel may make on the way to C, as multiples of H (:func:`rounding_scale`): the
#: product, alpha, their product, beta, its product with C0 and the sum (at most 4 H); products rounded before
#: they are summed (R's part of H)
OUTPUT_ROUNDINGS = 4
TILE = 32
WORST = 5
MAX_TILES_LISTED = 8


def matmul(x: Any, y: Any, batch: int = 1) -> Any:
    """``x @ y``; for a batch, of each pair of stacked matrices: x is (batch m) x k, y (batch k) x n,
    and the product (batch m) x n, each batch's rows after the other's."""
    if batch == 1:
        return x @ y
    k = x.shape[1]
    return (x.reshape(batch, -1, k) @ y.reshape(batch, k, -1)).reshape(-1, y.shape[1])


def rounding_scale(
    xp: Any, a64: Any, b64: Any, c064: Any | None, alpha: float, beta: float, product: Any, batch: int = 1
) -> Any:
    """H, the scale of C's roundings: ``|alpha A B| + |beta C0| + R`` with ``R = sqrt(alpha^2 (A*A)(B*B) +
    beta^2 C0*C0)`` (``product``: ``alpha A B``, already computed; ``c064`` None when beta = 0; ``batch``: the
    matrices are stacked batches, :func:`matmul`). One more GEMM, of the squares."""
    squares = matmul(a64 * a64, b64 * b64, batch)
    squares *= alpha * alpha
    hscale = xp.abs(product)
    if c064 is not None and beta != 0.0:
        squares += (beta * beta) * (c064 * c064)
        hscale += abs(beta) * xp.abs(c064)
    hscale += xp.sqrt(squares, out=squares)
    return hscale


def element_bound(
    xp: Any,
    gscale: Any,
    truth: Any,
    k: int,
    dtype: DType,
    out: DType,
    hscale: Any | None = None,
    subnormal: float | None = None,
) -> Any:
    """The per-element error bound for every element of C (``dtype``: the inputs' type with the accumulation the
    kernel declares, ``records.dtypes.accumulating``; ``out``: C's type; ``hscale``: H, :func:`rounding_scale`; None
    takes ``|C*|`` for it, as for a misreading's candidate output; ``subnormal``: :func:`subnormal_floor`, one
    spacing of C's type when None)."""
    scale = LAMBDA * (dtype.u_in + math.sqrt(k) * dtype.u_acc)
    rounded = xp.abs(truth) if hscale is None else hscale
    return scale * gscale + OUTPUT_ROUNDINGS * out.u_store * rounded + _underflow(k, dtype, out, LAMBDA, subnormal)


def norm_tolerance(k: int, dtype: DType, out: DType) -> float:
    """The largest ``||C - C*||_F / max(||C*||_F, S)`` a kernel of this precision may show on zero-mean data, less
    the parts of C's rounding (:func:`error_stats` adds them for the case)."""
    return NORM_C * (dtype.u_in + math.sqrt(k) * dtype.u_acc)


def _underflow(k: int, dtype: DType, out: DType, factor: float, subnormal: float | None = None) -> float:
    """The absolute error an element may carry from the subnormal ranges: C's roundings to its subnormal spacing
    (:func:`subnormal_floor`; one spacing when None), and the accumulation's roundings at its own."""
    return (out.tiny if subnormal is None else subnormal) + factor * math.sqrt(k) * dtype.acc_tiny


def subnormal_floor(out: DType, alpha: float, beta: float) -> float:
    """The absolute error C's roundings may leave in its type's subnormal range, where each errs by up to half a
    spacing (``out.tiny``) whatever the value: the product's, scaled by alpha, and alpha times it; with beta != 0,
    beta times C0 and the sum too. ``(|alpha| + 1) / 2`` spacings, ``(|alpha| + 3) / 2`` with beta: one spacing for
    alpha = 1, beta = 0 (the README's kernel at K = 1 and alpha = -1.5 erred by 1.25 spacings)."""
    return out.tiny * max(1.0, (abs(alpha) + 1.0 + (2.0 if beta != 0.0 else 0.0)) / 2.0)


def sum_scale(xp: Any, a64: Any, b64: Any, c064: Any | None, alpha: float, beta: float, batch: int = 1) -> float:
    """``S``, the Frobenius norm of ``alpha A B + beta C0`` when no sum cancels by chance: the square root of the
    sum over C of E[C*_ij^2] for zero-mean data, ``alpha^2 sum_k ||A[:,k]||^2 ||B[k,:]||^2 + beta^2 ||C0||_F^2``,
    summed over a batch's matrices (stacked, :func:`matmul`). O(MK + KN): no product of A and B. ``c064`` is None
    when C0 plays no part (beta = 0)."""
    k = a64.shape[1]
    squares = (a64 * a64).reshape(batch, -1, k)
    cols = (xp.ones(squares.shape[1]) @ squares).reshape(-1)  # ||A_b[:,k]||^2, batch by batch
    rows = (b64 * b64) @ xp.ones(b64.shape[1])  # ||B_b[k,:]||^2, the same order
    total = alpha * alpha * float(cols @ rows)
    if c064 is not None and beta != 0.0:
        flat = c064.ravel()
        total += beta * beta * float(flat @ flat)
    return math.sqrt(total)


def element_ratios(
    xp: Any,
    got: Any,
    truth: Any,
    gscale: Any,
    k: int,
    dtype: DType,
    out: DType,
    hscale: Any | None = None,
    subnormal: float | None = None,
) -> Any:
    """Each element's |error| as a multiple of its bound (inf where the output is not finite)."""
    bound = element_bound(xp, gscale, truth, k, dtype, out, hscale, subnormal)
    bound = xp.maximum(bound, xp.finfo(xp.float64).tiny)
    return xp.where(xp.isfinite(got), xp.abs(got - truth) / bound, xp.inf)


def error_stats(
    xp: Any,
    got: Any,
    truth: Any,
    gscale: Any,
    k: int,
    dtype: DType,
    out: DType,
    unchanged: Any | None = None,
    *,
    scale_norm: float,
    hscale: Any | None = None,
    subnormal: float | None = None,
    ratio: Any | None = None,
    batch: int = 1,
    norms: tuple[float, float] | None = None,
) -> ErrorStats:
    """Judge ``got`` (M x N, float64; a batch's stacked, (batch M) x N) against ``truth``; ``unchanged`` marks
    elements C still holds from before.

    ``scale_norm`` is :func:`sum_scale` of the case's inputs, the normwise test's floor under ``||C*||_F``;
    ``hscale`` is H and ``subnormal`` the subnormal floor (:func:`element_bound`).
    ``ratio``, when given, is :func:`element_ratios` of these same arrays, already computed by the caller, and
    ``norms`` the truth's :func:`truth_norms`.
    """
    finite = xp.isfinite(got)
    if ratio is None:
        ratio = element_ratios(xp, got, truth, gscale, k, dtype, out, hscale, subnormal)
    bad_mask = ratio > 1.0
    bad = int(bad_mask.sum())
    nonfinite = int(got.size - int(finite.sum()))
    unwritten = int((unchanged & bad_mask).sum()) if unchanged is not None else 0
    norm_error, norm_tol = norm_test(xp, got, truth, k, dtype, out, scale_norm, hscale, subnormal, finite, norms=norms)
    if nonfinite:
        norm_error = math.inf

    flat = ratio.ravel()
    # the worst elements, the first of equals first; with none bad only the worst one, without a sort
    order = xp.argsort(-flat, kind="stable")[:WORST] if bad else xp.argmax(flat).reshape(1)
    n_cols = got.shape[1]
    worst = tuple(
        (int(i) // n_cols, int(i) % n_cols, float(got.ravel()[i]), float(truth.ravel()[i]), float(flat[i]))
        for i in to_host(order)
    )
    tiles, n_bad_tiles, n_tiles = tile_summary(xp, bad_mask, batch=batch)
    return ErrorStats(
        max_ratio=float(flat.max()),
        median_ratio=_median(xp, flat),
        bad=bad,
        total=int(got.size),
        nonfinite=nonfinite,
        unwritten=unwritten,
        norm_error=norm_error,
        norm_tol=norm_tol,
        worst=worst,
        bad_tiles=tiles,
        n_bad_tiles=n_bad_tiles,
        n_tiles=n_tiles,
        tile=TILE,
    )


def norm_test(
    xp: Any,
    got: Any,
    truth: Any,
    k: int,
    dtype: DType,
    out: DType,
    scale_norm: float,
    hscale: Any | None,
    subnormal: float | None,
    finite: Any | None = None,
    *,
    norms: tuple[float, float] | None = None,
    diff_norm: float | None = None,
) -> tuple[float, float]:
    """The normwise test of :func:`error_stats`: ``||C - C*||_F / max(||C*||_F, S)`` and its tolerance (the elements
    outside ``finite``, when given, left out of the difference). ``norms``: the truth's :meth:`Truth.norms`, and
    ``diff_norm``: ``||C - C*||_F``, where the caller has them already."""
    truth_norm, rounded = norms if norms is not None else truth_norms(xp, truth, hscale)
    floor = max(truth_norm, scale_norm)
    if diff_norm is None:
        diff_norm = float(xp.linalg.norm(got - truth if finite is None else xp.where(finite, got - truth, 0.0)))
    norm_tol = norm_tolerance(k, dtype, out)
    if floor > 0.0:
        underflow = _underflow(k, dtype, out, NORM_C, subnormal)
        absolute = OUTPUT_ROUNDINGS * out.u_store * rounded + math.sqrt(got.size) * underflow
        norm_tol += absolute / floor
    if floor == 0.0:
        return (0.0 if diff_norm == 0.0 else math.inf), norm_tol
    return diff_norm / floor, norm_tol


def truth_norms(xp: Any, truth: Any, hscale: Any | None) -> tuple[float, float]:
    """``||C*||_F`` and ``||H||_F`` (``||C*||_F`` again where there is no H): what the normwise test takes of the
    truth."""
    value = float(xp.linalg.norm(truth))
    return value, value if hscale is None else float(xp.linalg.norm(hscale))


def tile_summary(
    xp: Any, bad_mask: Any, tile: int = TILE, batch: int = 1
) -> tuple[tuple[tuple[int, int], ...], int, int]:
    """Which ``tile`` x ``tile`` blocks of C hold errors: (first few, how many, of how many). A batch's C (stacked)
    is tiled matrix by matrix, its tile rows stacked: row r of tiles is row r % ceil(M / tile) of batch
    r // ceil(M / tile)."""
    rows, n = bad_mask.shape
    m = rows // batch
    tm, tn = -(-m // tile), -(-n // tile)
    padded = xp.zeros((batch, tm * tile, tn * tile), dtype=bool)
    padded[:, :m, :n] = bad_mask.reshape(batch, m, n)
    # one flag a tile (1/1024 of C) goes to the host, where NumPy lists and counts them: on the GPU that was five
    # more kernels for CuPy to JIT-compile on a fresh machine (scans, a count; docs/measurements.md)
    per_tile = to_host(padded.reshape(batch * tm, tile, tn, tile).any(axis=(1, 3)))
    where = np.argwhere(per_tile)[:MAX_TILES_LISTED]
    return tuple((int(r), int(c)) for r, c in where), int(np.count_nonzero(per_tile)), batch * tm * tn


def count_changed(xp: Any, before: Any, after: Any) -> int:
    """How many elements differ bitwise (NaN payloads included)."""
    view = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[before.dtype.itemsize]
    return int((before.view(view) != after.view(view)).sum())


def _median(xp: Any, flat: Any) -> float:
    """NumPy's median of a 1-D array (the mean of the two middle values when their count is even), from a full
    sort: CuPy sorts with code compiled ahead of time, where its ``median`` JIT-compiles a NaN check, a mean
    and a where (docs/measurements.md). The ratios it is given are never NaN (a NaN would sort last
    here, where NumPy's median is NaN)."""
    ordered = xp.sort(flat)
    n = int(ordered.size)
    middle = float(ordered[n // 2])
    return middle if n % 2 else (float(ordered[n // 2 - 1]) + middle) / 2


def to_host(a: Any) -> np.ndarray:
    """An array on the host: a CuPy array copied there, a NumPy one as it is."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


@dataclass
class Truth:
    """A case's fp64 result and the scales its two tests need (arrays of the module that computed them)."""

    value: Any  # C* = alpha A B + beta C0
    gscale: Any  # G = |alpha| |A| |B| + |beta| |C0|
    hscale: Any | None  # H, :func:`rounding_scale`
    spread: float  # S, :func:`sum_scale`
    subnormal: float | None = None  # :func:`subnormal_floor` of the case's scalars
    batch: int = 1  # the matrices are a batch's, stacked (:func:`matmul`)
    figures: bool = False  # judged outputs carry calc_diff and the cosine similarity (FP8 and INT8)
    #: :func:`truth_norms` of ``value`` and ``hscale``, from the first judgement (:meth:`norms`)
    _norms: tuple[float, float] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls, xp: Any, a64: Any, b64: Any, c064: Any | None, alpha: float, beta: float, out: DType, batch: int = 1
    ) -> Truth:
        """The truth of ``alpha A B + beta C0`` from the inputs in float64 (``c064`` None when C held no prior data;
        ``batch``: stacked batches, :func:`matmul`) and C's type ``out``."""
        value = alpha * matmul(a64, b64, batch)
        hscale = rounding_scale(xp, a64, b64, c064, alpha, beta, value, batch)
        gscale = abs(alpha) * matmul(xp.abs(a64), xp.abs(b64), batch)
        if c064 is not None:
            value += beta * c064
            gscale += abs(beta) * xp.abs(c064)
        floor = subnormal_floor(out, alpha, beta if c064 is not None else 0.0)
        return cls(value, gscale, hscale, sum_scale(xp, a64, b64, c064, alpha, beta, batch), floor, batch)

    def ratios(self, xp: Any, got: Any, k: int, dtype: DType, out: DType) -> Any:
        """:func:`element_ratios` of ``got`` against this truth."""
        return element_ratios(xp, got, self.value, self.gscale, k, dtype, out, self.hscale, self.subnormal)

    def judge(
        self, xp: Any, got: Any, k: int, dtype: DType, out: DType, unchanged: Any | None = None, ratio: Any = None
    ) -> ErrorStats:
        """:func:`error_stats` of ``got`` against this truth (with :attr:`figures`, the peers' figures too)."""
        stats = error_stats(
            xp, got, self.value, self.gscale, k, dtype, out, unchanged, scale_norm=self.spread, hscale=self.hscale,
            subnormal=self.subnormal, ratio=ratio, batch=self.batch, norms=self.norms(xp),
        )  # fmt: skip
        if not self.figures or stats.nonfinite:
            return stats
        return replace(stats, calc_diff=calc_diff(xp, got, self.value), cosine=cosine(xp, got, self.value))

    def passes(self, xp: Any, got: Any, k: int, dtype: DType, out: DType) -> bool:
        """Whether :meth:`judge` would pass ``got`` (``ErrorStats.passed``), from a maximum and the normwise test:
        where only the verdict is wanted (a timed launch's output, a graph's replay), not the figures of an output
        that passes. A NaN ratio fails here as there, by its normwise error."""
        ratio = self.ratios(xp, got, k, dtype, out)
        worst, diff_norm = (float(x) for x in to_host(xp.stack([ratio.max(), xp.linalg.norm(got - self.value)])))
        if worst > 1.0:  # an element past its bound, or not finite (its ratio is inf)
            return False
        norm_error, norm_tol = norm_test(
            xp, got, self.value, k, dtype, out, self.spread, self.hscale, self.subnormal,
            norms=self.norms(xp), diff_norm=diff_norm,
        )  # fmt: skip
        return norm_error <= norm_tol

    def norms(self, xp: Any) -> tuple[float, float]:
        """:func:`truth_norms` of this truth, computed at the first judgement and kept: every output of the case is
        judged against the same truth."""
        if self._norms is None:
            self._norms = truth_norms(xp, self.value, self.hscale)
        return self._norms
