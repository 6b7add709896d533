"""The pass rule on simulated kernels (NumPy): correct fp32 passes, precision cheats and faults fail."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import (
    count_changed,
    element_ratios,
    norm_tolerance,
    tile_summary,
)
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.report.failure import stats_line

from support.simulated import as_fp16, as_tf32, judged, random_operands, sequential

FP32 = get_dtype("fp32")


@pytest.mark.parametrize("k", [1, 2, 7, 64, 1024, 16384])
def test_correct_sequential_fp32_passes_with_margin(k):
    a, b, _ = random_operands(16, 16, k, seed=k)
    stats = judged(sequential(a, b), a, b)
    assert stats.passed
    assert stats.margin > 4, stats  # at least 4x inside both tests


@pytest.mark.parametrize("k", [1, 9, 256])
def test_correct_alpha_beta_passes(k):
    a, b, c0 = random_operands(32, 24, k, seed=k)
    stats = judged(sequential(a, b, c0, alpha=0.7, beta=1.3), a, b, c0, alpha=0.7, beta=1.3)
    assert stats.passed and stats.margin > 3, stats


def test_float64_matmul_of_fp32_data_passes_with_large_margin():
    a, b, _ = random_operands(64, 64, 4096)
    got = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert judged(got, a, b).margin > 50


@pytest.mark.parametrize("k", [1, 3, 64, 4096, 16384])
@pytest.mark.parametrize("cheat", [as_fp16, as_tf32], ids=["fp16-operands", "tf32-product"])
def test_lower_precision_products_fail_at_every_k(k, cheat):
    a, b, _ = random_operands(16, 16, k, seed=k + 1)
    stats = judged(sequential(a, b, operand=cheat), a, b)
    assert not stats.passed
    assert stats.norm_error > 3 * stats.norm_tol, stats


def test_tf32_passes_when_the_kernel_declares_tf32():
    a, b, _ = random_operands(16, 16, 4096, seed=3)
    stats = judged(sequential(a, b, operand=as_tf32), a, b, dtype=get_dtype("tf32"))
    assert stats.passed


def test_normwise_tolerance_grows_with_sqrt_k():
    assert norm_tolerance(4 * 1024, FP32, FP32) / norm_tolerance(1024, FP32, FP32) == pytest.approx(2, rel=0.01)


def test_unwritten_tile_is_located():
    a, b, _ = random_operands(100, 70, 16)
    got = sequential(a, b)
    got[64:96, 32:64] = np.nan
    stats = judged(got, a, b, unchanged=np.isnan(got))
    assert not stats.passed
    assert stats.unwritten == 32 * 32 and stats.nonfinite == 32 * 32
    assert stats.n_bad_tiles == 1 and stats.bad_tiles == ((2, 1),) and stats.n_tiles == 4 * 3
    assert {(r, c) for r, c, *_ in stats.worst} <= {(r, c) for r in range(64, 96) for c in range(32, 64)}


@pytest.mark.parametrize("fault", ["ignored_alpha", "ignored_beta", "wrong_operand", "one_element"])
def test_wrong_values_fail(fault):
    a, b, c0 = random_operands(48, 48, 48)
    alpha, beta = 0.7, 1.3
    got = {
        "ignored_alpha": lambda: sequential(a, b, c0, 1.0, beta),
        "ignored_beta": lambda: sequential(a, b, c0, alpha, 0.0),
        "wrong_operand": lambda: sequential(a, a, c0, alpha, beta),
        "one_element": lambda: sequential(a, b, c0, alpha, beta) + np.eye(48, dtype=np.float32)[0] * 1e-3,
    }[fault]()
    stats = judged(got, a, b, c0, alpha, beta)
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
    # (the normwise test divides by max(||C*||_F, S), and judges every size).
    failed = []
    for seed in range(seeds):
        a, b, _ = random_operands(m, n, 1000, seed=seed)
        stats = judged(sequential(a, b), a, b)
        if not stats.passed:
            failed.append((seed, stats.norm_error))
    assert failed == []


def test_a_tiny_output_is_judged_element_by_element_and_normwise():
    a, b, _ = random_operands(1, 1, 1000, seed=5)
    got = sequential(a, b) * np.float32(1.01)  # 1% off: far outside the per-element bound
    stats = judged(got, a, b)
    assert not stats.passed and stats.bad == 1
    assert stats.norm_error > stats.norm_tol and "not judged" not in stats_line(stats)


@pytest.mark.parametrize("size", [1, 2, 7, 10])
def test_the_median_is_numpys_for_odd_and_even_counts_and_infinities(size):
    rng = np.random.default_rng(size)
    a, b, _ = random_operands(size, 3, 8)
    got = sequential(a, b) * np.float32(1 + 1e-6 * rng.standard_normal((size, 3)))
    got[0, 0] = np.inf
    stats = judged(got, a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ratio = element_ratios(np, got.astype(np.float64), a64 @ b64, np.abs(a64) @ np.abs(b64), 8, FP32, FP32)
    assert stats.median_ratio == np.median(ratio)  # from a sort on the GPU (no JIT-compiled selection)


def test_the_worst_element_of_a_passing_output_is_the_first_largest():
    a, b, _ = random_operands(40, 30, 16)
    got = sequential(a, b)
    stats = judged(got, a, b)
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
