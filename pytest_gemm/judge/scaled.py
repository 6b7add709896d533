"""Scaled low precision: FP8 operands quantised block by block, their exact dequantised values, and the
figures peers report (DeepGEMM's ``calc_diff``, the cosine similarity).

The harness draws each operand in float64, with magnitudes that change from block to block (so that a scale applied
to the wrong block shows), and quantises it per block of its granularity (``specs.scaling``): the block's scale is
``amax / max`` of the format (448 for e4m3, 57344 for e5m2), rounded to fp32, or up to a power of two for UE8M0 (so
that no element passes the format's maximum), and never zero (a block of zeros gets 1). The kernel gets the FP8 bytes
and the scales; the truth is the float64 product of exactly the dequantised operands, ``q * s``, so that input
rounding is zero by construction and the bound is the accumulation's alone.

Pure: NumPy on the host (ml_dtypes gives the formats' rounding), and ``xp`` (NumPy or CuPy) where the worker works on
the device.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..records.dtypes import get_dtype
from ..records.scales import BLOCK, Scales
from ..records.shapes import Shape
from ..records.storage import LOGICAL
from ..specs.scaling import INT8_MAX

__all__ = [
    "FP8_MAX",
    "dequantised",
    "draw_int8",
    "draw_quantised",
    "expand",
    "fp8_table",
    "scale_values",
]

#: the largest finite value of each FP8 format
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}
#: magnitudes of the drawn data change by up to this factor either way from block to block
_SPREAD = 4.0


def fp8_table(fmt: str) -> np.ndarray:
    """The float64 value of each of the 256 bytes of an FP8 format (NaN where the byte is one): a byte's value is
    ``table[byte]``, on the host or, copied there, on the device."""
    import ml_dtypes

    return np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, get_dtype(fmt).storage)).astype(np.float64)


def expand(xp: Any, grid: Any, block: tuple[int, int], rows: int, cols: int) -> Any:
    """A grid of per-block values spread over the rows x cols elements they cover."""
    spread = xp.repeat(xp.repeat(grid, block[0], axis=0), block[1], axis=1)
    return spread[:rows, :cols]


def scale_values(xp: Any, grid: Any, kind: str) -> Any:
    """Scales as float64: fp32 ones as they are, UE8M0 bytes as the powers of two they are (2^(e - 127))."""
    if kind == "ue8m0":
        return xp.ldexp(xp.ones(grid.shape), grid.astype(xp.int32) - 127)
    return grid.astype(xp.float64)


def dequantised(xp: Any, values: Any, grid: Any, block: tuple[int, int], batch: int = 1) -> Any:
    """An operand's exact values: its elements (float64, logical) times their blocks' scales (float64 grid); a batch's
    (a grouped operand's one matrix a group) stacked, each matrix with its own grid, stacked as the elements are."""
    if batch == 1:
        return values * expand(xp, grid, block, *values.shape)
    rows, grid_rows = values.shape[0] // batch, grid.shape[0] // batch
    found = xp.empty(values.shape)
    for i in range(batch):
        part, own = values[i * rows : (i + 1) * rows], grid[i * grid_rows : (i + 1) * grid_rows]
        found[i * rows : (i + 1) * rows] = part * expand(xp, own, block, *part.shape)
    return found


def _magnitudes(rng: np.random.Generator, shape: tuple[int, int], fine: tuple[int, int]) -> np.ndarray:
    """A power of two for each element of a rows x cols operand: 2^(u + v), u uniform in +-log2(_SPREAD) for each
    128 x 128 block and v in +-1 for each ``fine`` block (A's 1 x 128, B's 128 x 1), so that every granularity's
    blocks differ in size (a 128 x 128 block's largest element too)."""
    exponents = []
    for block, spread in (((BLOCK, BLOCK), math.log2(_SPREAD)), (fine, 1.0)):
        grid = -(-shape[0] // block[0]), -(-shape[1] // block[1])
        exponents.append(expand(np, rng.uniform(-spread, spread, grid), block, *shape))
    return np.exp2(exponents[0] + exponents[1])


def _block_amax(x: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """The largest |x| of each block (a partial block at the edges counts what it holds)."""
    rows, cols = x.shape
    gr, gc = -(-rows // block[0]), -(-cols // block[1])
    padded = np.zeros((gr * block[0], gc * block[1]))
    padded[:rows, :cols] = np.abs(x)
    return padded.reshape(gr, block[0], gc, block[1]).max(axis=(1, 3))


def draw_quantised(
    rng: np.random.Generator, operand: str, shape: Shape, fmt: str, scales: Scales, gain: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """One matrix of an FP8 case's operand, logical (A: M x K, B: K x N of ``shape``; a grouped operand is a batch of
    them, each drawn so): its FP8 elements (ml_dtypes' type) and its grid of scales as the kernel gets it (float32, or
    UE8M0 bytes as uint8), logical; ``gain`` scales the whole matrix (a power of two)."""
    import ml_dtypes

    rows, cols = (getattr(shape, d) for d in LOGICAL[operand])
    x = rng.uniform(-1.0, 1.0, (rows, cols))
    x *= _magnitudes(rng, (rows, cols), (1, BLOCK) if operand == "A" else (BLOCK, 1)) * gain
    block = scales.block(operand, shape)
    scale = _block_amax(x, block) / FP8_MAX[fmt]
    scale[scale == 0.0] = 1.0  # a block of zeros: never a zero scale
    if scales.type == "ue8m0":
        exponent = np.ceil(np.log2(scale))  # up to a power of two: no element passes the format's maximum
        raw, scale = (exponent + 127).astype(np.uint8), np.exp2(exponent)
    else:
        raw = scale.astype(np.float32)
        scale = raw.astype(np.float64)
    q = np.clip(x / expand(np, scale, block, rows, cols), -FP8_MAX[fmt], FP8_MAX[fmt])
    return q.astype(getattr(ml_dtypes, get_dtype(fmt).storage)), raw


def draw_int8(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """An INT8 operand: integers in [-INT8_MAX, INT8_MAX]."""
    return rng.integers(-INT8_MAX, INT8_MAX + 1, (rows, cols), dtype=np.int8)
