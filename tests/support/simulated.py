"""Simulated fp32 kernels in NumPy and the pass rule's figures for their outputs (no GPU)."""

from __future__ import annotations

import numpy as np

from pytest_gemm.judge.accuracy import error_stats, sum_scale
from pytest_gemm.records.dtypes import get_dtype

FP32 = get_dtype("fp32")


def random_operands(m, n, k, seed=0, beta=0.0):
    """A, B and C0, uniform in (-1, 1), as fp32."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    return a, b, c0


def sequential(a, b, c0=None, alpha=1.0, beta=0.0, operand=lambda x: x):
    """A naive kernel: one fp32 FMA per k, in order (the worst accumulation order)."""
    a, b = operand(a).astype(np.float64), operand(b).astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a[:, k], b[k, :])).astype(np.float32)  # fma: one rounding
    out = (np.float32(alpha) * acc).astype(np.float32)
    if beta:
        out = (out.astype(np.float64) + np.float64(np.float32(beta)) * c0).astype(np.float32)
    return out


def judged(got, a, b, c0=None, alpha=1.0, beta=0.0, unchanged=None, dtype=FP32):
    """The error statistics the pass rule judges ``got`` by, against the fp64 product of ``a`` and ``b``."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    truth = alpha * (a64 @ b64)
    g = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta:
        truth = truth + beta * c0
        g = g + abs(beta) * np.abs(c0)
    spread = sum_scale(np, a64, b64, c0.astype(np.float64) if beta else None, alpha, beta)
    return error_stats(np, got.astype(np.float64), truth, g, a.shape[1], dtype, dtype, unchanged, scale_norm=spread)


def as_fp16(x):
    """Each value rounded to fp16 (and back to fp32)."""
    return x.astype(np.float16).astype(np.float32)


def as_tf32(x):
    """Each value rounded to TF32's 10 explicit mantissa bits (to nearest)."""
    bits = x.view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
