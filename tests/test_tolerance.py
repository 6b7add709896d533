"""The pass rule on simulated kernels (NumPy): correct fp32 passes, precision cheats and faults fail."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import (
    count_changed,
    element_ratios,
    error_stats,
    norm_tolerance,
    sum_scale,
    tile_summary,
)
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.report.failure import stats_line

FP32 = get_dtype("fp32")


def _data(m, n, k, seed=0, beta=0.0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    return a, b, c0


def _sequential(a, b, c0=None, alpha=1.0, beta=0.0, operand=lambda x: x):
    """A naive kernel: one fp32 FMA per k, in order (the worst accumulation order)."""
    a, b = operand(a).astype(np.float64), operand(b).astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a[:, k], b[k, :])).astype(np.float32)  # fma: one rounding
    out = (np.float32(alpha) * acc).astype(np.float32)
    if beta:
        out = (out.astype(np.float64) + np.float64(np.float32(beta)) * c0).astype(np.float32)
    return out


def _judge(got, a, b, c0=None, alpha=1.0, beta=0.0, unchanged=None, dtype=FP32):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    truth = alpha * (a64 @ b64)
    g = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta:
        truth = truth + beta * c0
        g = g + abs(beta) * np.abs(c0)
    spread = sum_scale(np, a64, b64, c0.astype(np.float64) if beta else None, alpha, beta)
    return error_stats(np, got.astype(np.float64), truth, g, a.shape[1], dtype, dtype, unchanged, scale_norm=spread)


def _fp16(x):
    return x.astype(np.float16).astype(np.float32)


def _tf32(x):
    bits = x.view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("k", [1, 2, 7, 64, 1024, 16384])
def test_correct_sequential_fp32_passes_with_margin(k):
    a, b, _ = _data(16, 16, k, seed=k)
    stats = _judge(_sequential(a, b), a, b)
    assert stats.passed
    assert stats.margin > 4, stats  # at least 4x inside both tests


@pytest.mark.parametrize("k", [1, 9, 256])
def test_correct_alpha_beta_passes(k):
    a, b, c0 = _data(32, 24, k, seed=k)
    stats = _judge(_sequential(a, b, c0, alpha=0.7, beta=1.3), a, b, c0, alpha=0.7, beta=1.3)
    assert stats.passed and stats.margin > 3, stats


def test_float64_matmul_of_fp32_data_passes_with_large_margin():
    a, b, _ = _data(64, 64, 4096)
    got = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert _judge(got, a, b).margin > 50


@pytest.mark.parametrize("k", [1, 3, 64, 4096, 16384])
@pytest.mark.parametrize("cheat", [_fp16, _tf32], ids=["fp16-operands", "tf32-product"])
def test_lower_precision_products_fail_at_every_k(k, cheat):
    a, b, _ = _data(16, 16, k, seed=k + 1)
    stats = _judge(_sequential(a, b, operand=cheat), a, b)
    assert not stats.passed
    assert stats.norm_error > 3 * stats.norm_tol, stats


def test_tf32_passes_when_the_kernel_declares_tf32():
    a, b, _ = _data(16, 16, 4096, seed=3)
    stats = _judge(_sequential(a, b, operand=_tf32), a, b, dtype=get_dtype("tf32"))
    assert stats.passed


def test_normwise_tolerance_grows_with_sqrt_k():
    assert norm_tolerance(4 * 1024, FP32, FP32) / norm_tolerance(1024, FP32, FP32) == pytest.approx(2, rel=0.01)


def test_unwritten_tile_is_located():
    a, b, _ = _data(100, 70, 16)
    got = _sequential(a, b)
    got[64:96, 32:64] = np.nan
    stats = _judge(got, a, b, unchanged=np.isnan(got))
    assert not stats.passed
    assert stats.unwritten == 32 * 32 and stats.nonfinite == 32 * 32
    assert stats.n_bad_tiles == 1 and stats.bad_tiles == ((2, 1),) and stats.n_tiles == 4 * 3
    assert {(r, c) for r, c, *_ in stats.worst} <= {(r, c) for r in range(64, 96) for c in range(32, 64)}


@pytest.mark.parametrize("fault", ["ignored_alpha", "ignored_beta", "wrong_operand", "one_element"])
def test_wrong_values_fail(fault):
    a, b, c0 = _data(48, 48, 48)
    alpha, beta = 0.7, 1.3
    got = {
        "ignored_alpha": lambda: _sequential(a, b, c0, 1.0, beta),
        "ignored_beta": lambda: _sequential(a, b, c0, alpha, 0.0),
        "wrong_operand": lambda: _sequential(a, a, c0, alpha, beta),
        "one_element": lambda: _sequential(a, b, c0, alpha, beta) + np.eye(48, dtype=np.float32)[0] * 1e-3,
    }[fault]()
    stats = _judge(got, a, b, c0, alpha, beta)
    assert not stats.passed and stats.bad >= 1


def test_an_out_of_bounds_write_changes_guard_bits():
    guard = np.full(64, 0x7FA5A5A5, np.uint32).view(np.float32)
    after = guard.copy()
    assert count_changed(np, guard, after) == 0  # NaN payloads compare bitwise, not as floats
    after[3] = 0.0
    after.view(np.uint32)[9] = 0x7FC00000  # another NaN: still a change
    assert count_changed(np, guard, after) == 2


@pytest.mark.parametrize("m, n, seeds", [(1, 1, 400), (1, 4, 50), (3, 5, 50)])
def test_a_correct_kernel_on_a_tiny_output_never_fails_the_normwise_test(m, n, seeds):
    # One zero-mean sum may cancel to near zero: divided by ||C*||_F alone, 7 of the 400 seeds at 1 x 1 failed
    # (#34 item 6: the normwise test now divides by max(||C*||_F, S), and judges every size).
    failed = []
    for seed in range(seeds):
        a, b, _ = _data(m, n, 1000, seed=seed)
        stats = _judge(_sequential(a, b), a, b)
        if not stats.passed:
            failed.append((seed, stats.norm_error))
    assert failed == []


def test_a_tiny_output_is_judged_element_by_element_and_normwise():
    a, b, _ = _data(1, 1, 1000, seed=5)
    got = _sequential(a, b) * np.float32(1.01)  # 1% off: far outside the per-element bound
    stats = _judge(got, a, b)
    assert not stats.passed and stats.bad == 1
    assert stats.norm_error > stats.norm_tol and "not judged" not in stats_line(stats)


@pytest.mark.parametrize("size", [1, 2, 7, 10])
def test_the_median_is_numpys_for_odd_and_even_counts_and_infinities(size):
    rng = np.random.default_rng(size)
    a, b, _ = _data(size, 3, 8)
    got = _sequential(a, b) * np.float32(1 + 1e-6 * rng.standard_normal((size, 3)))
    got[0, 0] = np.inf
    stats = _judge(got, a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ratio = element_ratios(np, got.astype(np.float64), a64 @ b64, np.abs(a64) @ np.abs(b64), 8, FP32, FP32)
    assert stats.median_ratio == np.median(ratio)  # from a sort on the GPU (no JIT-compiled selection)


def test_the_worst_element_of_a_passing_output_is_the_first_largest():
    a, b, _ = _data(40, 30, 16)
    got = _sequential(a, b)
    stats = _judge(got, a, b)
    assert stats.passed and len(stats.worst) == 1
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ratio = element_ratios(np, got.astype(np.float64), a64 @ b64, np.abs(a64) @ np.abs(b64), 16, FP32, FP32)
    row, col, *_, worst = stats.worst[0]
    assert (row, col) == np.unravel_index(np.argmax(ratio), ratio.shape) and worst == ratio.max()


def test_bad_tiles_are_listed_in_row_order_and_counted():
    mask = np.zeros((100, 130), bool)
    for r, c in [(99, 129), (0, 40), (33, 0), (5, 5), (70, 100)]:
        mask[r, c] = True
    tiles, n_bad, n_tiles = tile_summary(np, mask)
    assert tiles == ((0, 0), (0, 1), (1, 0), (2, 3), (3, 4)) and n_bad == 5 and n_tiles == 4 * 5
