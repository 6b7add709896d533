"""The pass rule: compare a kernel's output with the fp64 truth, with bounds from rounding-error analysis.

Every function takes the array module (``numpy`` or ``cupy``) as ``xp`` so the same maths
runs on the GPU in the harness and on recorded or simulated data in the CPU tests.

Two tests, both must pass (constants and reasoning in the README, "How results are judged"):

* per element: ``|C - C*| <= LAMBDA * (u_in + sqrt(K) * u_acc) * G + 2 * u_out * |C*|`` with
  ``G = |alpha| |A| |B| + |beta| |C0|``; catches wrong values anywhere (skipped tiles, wrong
  operand, ignored alpha or beta), and is safe against false alarms (probabilistic bound,
  Higham & Mary 2019);
* normwise, on the harness's zero-mean data: ``||C - C*||_F / ||C*||_F <= NORM_C *
  (u_in + sqrt(K) * u_acc) + u_out``; catches a quietly lower precision (fp16-rounded
  operands, TF32 products) that a per-element bound of the sqrt(K) form lets through at large K.
  It needs ``NORM_MIN_ELEMENTS`` elements of C: with fewer, ``||C*||_F`` is a handful of zero-mean
  sums, any of which may cancel to near zero by chance, and a correct kernel would fail (a
  sequential fp32 sum at 1 x 1 x 1000 did on 7 of 400 seeds, up to 18x the tolerance).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..records.outcome import ErrorStats

__all__ = [
    "LAMBDA",
    "NORM_C",
    "NORM_MIN_ELEMENTS",
    "TILE",
    "count_changed",
    "element_bound",
    "element_ratios",
    "error_stats",
    "norm_tolerance",
    "tile_summary",
    "to_host",
]

LAMBDA = 10.0
NORM_C = 4.0
NORM_MIN_ELEMENTS = 16  # the normwise test judges outputs of at least this many elements
TILE = 32
WORST = 5
MAX_TILES_LISTED = 8


def element_bound(xp: Any, gscale: Any, truth: Any, k: int, dtype: DType, out: DType) -> Any:
    """The per-element error bound for every element of C."""
    scale = LAMBDA * (dtype.u_in + math.sqrt(k) * dtype.u_acc)
    return scale * gscale + 2.0 * out.u_store * xp.abs(truth)


def norm_tolerance(k: int, dtype: DType, out: DType) -> float:
    """The largest ``||C - C*||_F / ||C*||_F`` a kernel of this precision may show on zero-mean data."""
    return NORM_C * (dtype.u_in + math.sqrt(k) * dtype.u_acc) + out.u_store


def element_ratios(xp: Any, got: Any, truth: Any, gscale: Any, k: int, dtype: DType, out: DType) -> Any:
    """Each element's |error| as a multiple of its bound (inf where the output is not finite)."""
    bound = xp.maximum(element_bound(xp, gscale, truth, k, dtype, out), xp.finfo(xp.float64).tiny)
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
    ratio: Any | None = None,
) -> ErrorStats:
    """Judge ``got`` (M x N, float64) against ``truth``; ``unchanged`` marks elements C still holds from before.

    ``ratio``, when given, is :func:`element_ratios` of these same arrays, already computed by the caller.
    """
    finite = xp.isfinite(got)
    if ratio is None:
        ratio = element_ratios(xp, got, truth, gscale, k, dtype, out)
    bad_mask = ratio > 1.0
    bad = int(bad_mask.sum())
    nonfinite = int(got.size - int(finite.sum()))
    unwritten = int((unchanged & bad_mask).sum()) if unchanged is not None else 0

    truth_norm = float(xp.linalg.norm(truth))
    diff_norm = float(xp.linalg.norm(xp.where(finite, got - truth, 0.0)))
    if nonfinite:
        norm_error = math.inf
    elif truth_norm == 0.0:
        norm_error = 0.0 if diff_norm == 0.0 else math.inf
    else:
        norm_error = diff_norm / truth_norm

    flat = ratio.ravel()
    # the worst elements, the first of equals first; with none bad only the worst one, without a sort
    order = xp.argsort(-flat, kind="stable")[:WORST] if bad else xp.argmax(flat).reshape(1)
    n_cols = got.shape[1]
    worst = tuple(
        (int(i) // n_cols, int(i) % n_cols, float(got.ravel()[i]), float(truth.ravel()[i]), float(flat[i]))
        for i in to_host(order)
    )
    tiles, n_bad_tiles, n_tiles = tile_summary(xp, bad_mask)
    return ErrorStats(
        max_ratio=float(flat.max()),
        median_ratio=_median(xp, flat),
        bad=bad,
        total=int(got.size),
        nonfinite=nonfinite,
        unwritten=unwritten,
        norm_error=norm_error,
        norm_tol=norm_tolerance(k, dtype, out) if got.size >= NORM_MIN_ELEMENTS else math.inf,
        worst=worst,
        bad_tiles=tiles,
        n_bad_tiles=n_bad_tiles,
        n_tiles=n_tiles,
        tile=TILE,
    )


def tile_summary(xp: Any, bad_mask: Any, tile: int = TILE) -> tuple[tuple[tuple[int, int], ...], int, int]:
    """Which ``tile`` x ``tile`` blocks of C hold errors: (first few, how many, of how many)."""
    m, n = bad_mask.shape
    tm, tn = -(-m // tile), -(-n // tile)
    padded = xp.zeros((tm * tile, tn * tile), dtype=bool)
    padded[:m, :n] = bad_mask
    # one flag a tile (1/1024 of C) goes to the host, where NumPy lists and counts them: on the GPU that was five
    # more kernels for CuPy to JIT-compile on a fresh machine (scans, a count; docs/measurements.md)
    per_tile = to_host(padded.reshape(tm, tile, tn, tile).any(axis=(1, 3)))
    where = np.argwhere(per_tile)[:MAX_TILES_LISTED]
    return tuple((int(r), int(c)) for r, c in where), int(np.count_nonzero(per_tile)), tm * tn


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
