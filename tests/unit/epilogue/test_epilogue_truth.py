"""The fused epilogue's truth and derived bound (judge.epilogue; docs/verification.md#fused-epilogues): a right fp32
epilogue, computed as a kernel would (float32 products, the activation in float32), lies within the bound for every
activation and seed, and each slip of the epilogue is named by the misreading it matches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import Truth
from pytest_gemm.judge.epilogue import EpilogueTruth, activate, epilogue_misreading, numpy_erf
from pytest_gemm.records.dtypes import accumulating, get_dtype
from pytest_gemm.records.epilogue import ACTIVATIONS, Epilogue
from pytest_gemm.records.verdicts import Misreading

M, N, K = 48, 40, 96


def _inputs(seed: int, dtype=np.float32):
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-1, 1, s).astype(dtype) for s in ((M, K), (K, N)))
    scale = math.sqrt(K / 9)
    bias, residual = (rng.uniform(-scale, scale, s).astype(dtype) for s in ((N,), (M, N)))
    return a, b, bias, residual


def _truth(epilogue: Epilogue, a, b, bias, residual, out="fp32") -> EpilogueTruth:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    base = Truth.of(np, a64, b64, None, 1.0, 0.0, get_dtype(out))
    bias64 = None if epilogue.bias is None else bias.astype(np.float64)
    res64 = residual.astype(np.float64) if epilogue.residual else None
    return EpilogueTruth.of_epilogue(np, base, epilogue, bias64, res64, get_dtype(out), numpy_erf)


def _kernel(epilogue: Epilogue, a, b, bias, residual, slip: str = "") -> np.ndarray:
    """A kernel's D in float32: products summed in float32, the epilogue in float32 (``slip``: one way wrong)."""
    p = a @ b
    b32 = bias[None, :] if slip != "axis" else np.resize(bias, M)[:, None]
    act = epilogue.activation
    y = activate(np, act, p, numpy_erf).astype(np.float32) + b32 if slip == "before" else None
    if y is None:
        pre = (p + b32).astype(np.float32)
        y = activate(np, act if slip != "noact" else None, pre.astype(np.float64), numpy_erf).astype(np.float32)
    if epilogue.residual and slip != "residual":
        y = y + residual
    return y.astype(np.float64)


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("seed", range(5))
def test_a_right_epilogue_lies_within_the_derived_bound(activation, seed):
    epilogue = Epilogue(bias="N", activation=activation, residual=True, d=True)
    a, b, bias, residual = _inputs(seed)
    truth = _truth(epilogue, a, b, bias, residual)
    stats = truth.judge(
        np, _kernel(epilogue, a, b, bias, residual), K, accumulating(get_dtype("fp32"), ""), get_dtype("fp32")
    )
    assert stats.passed and stats.max_ratio < 0.5, stats


@pytest.mark.parametrize(
    ("slip", "kind"),
    [
        ("axis", Misreading.BIAS_OTHER_AXIS),
        ("before", Misreading.ACTIVATION_BEFORE_BIAS),
        ("residual", Misreading.RESIDUAL_IGNORED),
        ("noact", Misreading.ACTIVATION_IGNORED),
    ],
)
def test_each_slip_of_the_epilogue_fails_and_is_named(slip, kind):
    epilogue = Epilogue(bias="N", activation="gelu", residual=True, d=True)
    a, b, bias, residual = _inputs(7)
    truth = _truth(epilogue, a, b, bias, residual)
    dt, out = accumulating(get_dtype("fp32"), ""), get_dtype("fp32")
    got = _kernel(epilogue, a, b, bias, residual, slip)
    if slip == "axis":
        got[N:] = np.nan  # rows past the bias's N values read its guard (NaN)
    stats = truth.judge(np, got, K, dt, out)
    assert not stats.passed
    found = epilogue_misreading(np, truth, got, stats, K, dt, out)
    assert found is not None and found.kind == kind, found


def test_gelus_tanh_form_is_told_from_erfs():
    epilogue = Epilogue(activation="gelu", d=True)
    a, b, bias, residual = _inputs(3)
    truth = _truth(epilogue, a, b, bias, residual)
    dt, out = accumulating(get_dtype("fp32"), ""), get_dtype("fp32")
    got = activate(np, "gelu_tanh", (a @ b).astype(np.float64), numpy_erf)
    stats = truth.judge(np, got, K, dt, out)
    assert not stats.passed
    assert epilogue_misreading(np, truth, got, stats, K, dt, out).kind == Misreading.OTHER_GELU


def test_the_bound_grows_with_the_activations_slope_and_error_only():
    """ReLU's bound is the GEMM's own (slope 1, exact); GELU's tanh form allows the hardware's tanh."""
    a, b, bias, residual = _inputs(1)
    plain = _truth(Epilogue(d=True), a, b, bias, residual)
    relu = _truth(Epilogue(activation="relu", d=True), a, b, bias, residual)
    tanh = _truth(Epilogue(activation="gelu_tanh", d=True), a, b, bias, residual)
    assert np.allclose(relu.gscale, plain.gscale)
    assert np.all(tanh.hscale >= relu.hscale * 1.0)
    assert np.all(tanh.gscale <= 1.13 * plain.gscale + 1e-12)


def test_a_bias_along_m_read_along_n_is_named_where_n_passes_m():
    """M = 48 rows, N = 40 columns: an M-bias read by column runs past none of its values (40 < 48)."""
    epilogue = Epilogue(bias="M", activation="relu", d=True)
    a, b, _, _ = _inputs(5)
    bias = np.random.default_rng(1).uniform(-3, 3, M).astype(np.float32)
    truth = _truth(epilogue, a, b, bias, None)
    dt, out = accumulating(get_dtype("fp32"), ""), get_dtype("fp32")
    got = np.maximum((a @ b) + bias[None, :N], 0).astype(np.float64)  # bias[j] added to column j
    stats = truth.judge(np, got, K, dt, out)
    assert not stats.passed
    assert epilogue_misreading(np, truth, got, stats, K, dt, out).kind == Misreading.BIAS_OTHER_AXIS


def test_a_bias_left_out_is_named():
    epilogue = Epilogue(bias="N", activation="silu", d=True)
    a, b, bias, residual = _inputs(9)
    truth = _truth(epilogue, a, b, bias, residual)
    dt, out = accumulating(get_dtype("fp32"), ""), get_dtype("fp32")
    got = activate(np, "silu", (a @ b).astype(np.float64), numpy_erf)
    stats = truth.judge(np, got, K, dt, out)
    assert epilogue_misreading(np, truth, got, stats, K, dt, out).kind == Misreading.BIAS_IGNORED


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("seed", range(4))
def test_a_right_half_precision_epilogue_with_beta_lies_within_the_bound(dtype, seed):
    """bf16 and fp16 inputs and D, alpha 0.7 and beta 1.3 with a prior C: products in fp32, each step rounded to D's
    type as torch's unfused steps round them."""
    import ml_dtypes

    store = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    epilogue = Epilogue(bias="N", activation="gelu", residual=True, d=True)
    a, b, bias, residual = (x.astype(store) for x in _inputs(seed))
    c0 = np.random.default_rng(seed + 50).uniform(-1, 1, (M, N)).astype(store)
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c0))
    out = get_dtype(dtype)
    base = Truth.of(np, a64, b64, c64, 0.7, 1.3, out)
    truth = EpilogueTruth.of_epilogue(
        np, base, epilogue, bias.astype(np.float64), residual.astype(np.float64), out, numpy_erf
    )
    rounded = lambda x: np.asarray(x, np.float32).astype(store).astype(np.float32)  # noqa: E731
    x = rounded(0.7 * (a.astype(np.float32) @ b.astype(np.float32)) + 1.3 * c0.astype(np.float32))
    x = rounded(x + bias.astype(np.float32)[None, :])
    x = rounded(activate(np, "gelu", x.astype(np.float64), numpy_erf))
    got = rounded(x + residual.astype(np.float32)).astype(np.float64)
    stats = truth.judge(np, got, K, accumulating(out, ""), out)
    assert stats.passed, stats


@pytest.mark.parametrize("slip", ["", "axis", "before"])
def test_a_checked_outputs_verdict_alone_is_the_full_judgements(slip):
    """A timed launch's D is checked for its verdict alone (``Truth.passes``): the verdict the full statistics give,
    for a right epilogue and for slipped ones."""
    epilogue = Epilogue(bias="N", activation="gelu", residual=True, d=True)
    a, b, bias, residual = _inputs(3)
    truth = _truth(epilogue, a, b, bias, residual)
    got = _kernel(epilogue, a, b, bias, residual, slip).astype(np.float64)
    fp32 = get_dtype("fp32")
    full = truth.judge(np, got, K, fp32, fp32).passed
    assert truth.passes(np, got, K, fp32, fp32) == full
    assert full == (slip == "")
