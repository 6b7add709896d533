"""The accuracy rule never cries wolf and has no blind spots (the CPU side).

Simulated kernels (NumPy, many seeds at once) judged by the real rule: correct sums in fp32 and fp16, fp16 outputs
in the subnormal range, operands rounded to fp16 or TF32, and fp16 accumulation declared or not. Then the standing
rule: where the peer (cuBLAS) fails the bound, the case is a calibration error, skipped unless the kernel's other
findings fail it, with recorded outcomes (tests/integration/test_calibration_errors.py runs it through the plugin).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from pytest_gemm.judge import accuracy
from pytest_gemm.judge.accuracy import LAMBDA, OUTPUT_ROUNDINGS, element_bound, error_stats, norm_tolerance, sum_scale
from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.dtypes import DTYPES, accumulating, get_dtype
from pytest_gemm.records.outcome import Fault, Misread
from pytest_gemm.records.plain import to_plain
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Check, ErrorCause, Misreading, Sanity, TimingProblem, Verdict
from pytest_gemm.report.failure import diagnosis_lines, failure_text, headline, stats_line
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.header import spec_from_mapping

from support import recorded_outcome, recording

FP32, FP16, FP64 = get_dtype("fp32"), get_dtype("fp16"), get_dtype("fp64")
FP16_ACC = accumulating(FP16, "fp16")
SEEDS = range(400)


# -- simulated kernels, one array axis per seed -------------------------------------------------------------------
def _draw(seeds, m: int, n: int, k: int, store=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """A and B of each seed, uniform in (-1, 1) as the harness draws them, stored as ``store``."""
    a = [np.random.default_rng(s).uniform(-1, 1, (m, k)).astype(np.float32) for s in seeds]
    b = [np.random.default_rng(10**6 + s).uniform(-1, 1, (k, n)).astype(np.float32) for s in seeds]
    return np.stack(a).astype(store), np.stack(b).astype(store)


def _fp16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def _tf32(x: np.ndarray) -> np.ndarray:
    """Each value rounded to 10 explicit mantissa bits (to nearest), as TF32 tensor cores take fp32 operands."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _fp32_sum(a: np.ndarray, b: np.ndarray, fma: bool = True) -> np.ndarray:
    """A naive fp32 kernel: a float32 running sum over k in order (the worst order), fused or not."""
    acc = np.zeros((a.shape[0], a.shape[1], b.shape[2]), np.float32)
    columns, rows = _by_k(a, b, np.float64)
    for ak, bk in zip(columns, rows):
        product = ak[:, :, None] * bk[:, None, :]  # exact: two fp32 values' product fits in fp64
        acc = (acc + product).astype(np.float32) if fma else acc + product.astype(np.float32)
    return acc


def _by_k(a: np.ndarray, b: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """A's columns and B's rows, k first and contiguous (seeds x M, seeds x N each)."""
    return np.ascontiguousarray(np.moveaxis(a, 2, 0), dtype), np.ascontiguousarray(np.moveaxis(b, 1, 0), dtype)


def _fp16_sum(a: np.ndarray, b: np.ndarray, fma: bool = False) -> np.ndarray:
    """A kernel accumulating in fp16: a float16 running sum (the product rounded to fp16 too unless fused)."""
    acc = np.zeros((a.shape[0], a.shape[1], b.shape[2]), np.float16)
    columns, rows = _by_k(a, b, np.float64 if fma else np.float16)
    for ak, bk in zip(columns, rows):
        product = ak[:, :, None] * bk[:, None, :]
        acc = (acc + product).astype(np.float16) if fma else acc + product
    return acc


def _judge(got: np.ndarray, a: np.ndarray, b: np.ndarray, dtype=FP32, out=FP32) -> list:
    """Each seed's output judged by the harness's rule (the worker's calls, on NumPy arrays)."""
    judged = []
    for g, a1, b1 in zip(got, a, b):
        a64, b64 = a1.astype(np.float64), b1.astype(np.float64)
        truth, gscale = a64 @ b64, np.abs(a64) @ np.abs(b64)
        spread = sum_scale(np, a64, b64, None, 1.0, 0.0)
        hscale = accuracy.rounding_scale(np, a64, b64, None, 1.0, 0.0, truth)  # as the worker judges
        judged.append(
            error_stats(
                np, g.astype(np.float64), truth, gscale, a.shape[2], dtype, out, scale_norm=spread, hscale=hscale
            )
        )
    return judged


def _worst(stats) -> float:
    """The largest multiple of either test's bound over all seeds (under 1: every seed passed)."""
    return max(max(s.max_ratio, s.norm_ratio) for s in stats)


def _least(stats) -> float:
    """The smallest multiple of the bound a seed's output reached, the larger of its two tests."""
    return min(max(s.max_ratio, s.norm_ratio) for s in stats)


# -- the dtypes' subnormal ranges ---------------------------------------------------------------------------------
def test_each_dtype_knows_the_smallest_subnormal_of_its_storage_and_its_accumulation():
    """The underflow term comes from the dtypes, not from a tuned constant."""
    for name in ("fp32", "tf32", "fp16", "fp64"):
        dt = DTYPES[name]
        assert dt.tiny == np.finfo(np.dtype(dt.storage)).smallest_subnormal, name
        accumulate = np.float64 if name == "fp64" else np.float32
        assert dt.acc_tiny == np.finfo(accumulate).smallest_subnormal, name
    bf16 = DTYPES["bf16"]
    assert bf16.tiny == 2.0**-126 * 2.0**-7 and bf16.acc_tiny == 2.0**-149  # 7 explicit mantissa bits, fp32's range


def test_declared_fp16_accumulation_changes_only_the_accumulation():
    """``accumulating`` is what the worker judges a declared accumulation by."""
    assert FP16_ACC.u_acc == 2.0**-11 and FP16_ACC.acc_tiny == np.finfo(np.float16).smallest_subnormal
    assert dataclasses.replace(FP16_ACC, u_acc=FP16.u_acc, acc_tiny=FP16.acc_tiny) == FP16
    assert accumulating(FP16, "") is FP16 and accumulating(FP64, "") is FP64
    with pytest.raises(KeyError, match="unknown accumulation 'fp8'; expected one of fp16"):
        accumulating(FP16, "fp8")


# -- underflow ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m, n, seeds", [(64, 64, 100), (256, 256, 20), (4096, 64, 6)])
def test_a_correct_fp16_gemm_passes_at_k_1_where_its_outputs_are_fp16_subnormals(m, n, seeds):
    """cuBLAS failed at 4096x4096x1 on 12 of 12 seeds (585x), at 256x256x1 and 64x64x1 too; the exact
    product rounded once to fp16 passes, within half the bound, and the relative terms alone would fail it."""
    a, b = _draw(range(seeds), m, n, 1, np.float16)
    exact = np.einsum("smk,skn->smn", a.astype(np.float64), b.astype(np.float64))
    got = exact.astype(np.float16)
    stats = _judge(got, a, b, FP16, FP16)
    assert all(s.passed for s in stats) and _worst(stats) <= 0.5, _worst(stats)
    smallest_normal = np.finfo(np.float16).tiny
    assert (np.abs(exact) < smallest_normal).sum() > seeds  # outputs in the subnormal range: what is tested
    relative = 10 * FP16.u_acc * np.abs(exact) + 2 * FP16.u_store * np.abs(exact)  # the bound without its new terms
    over = (np.abs(got - exact) / relative).max(axis=(1, 2))
    assert (over > 1).sum() >= seeds // 10 and over.max() > 50  # the false alarm the absolute term ends


def test_the_underflow_term_is_one_subnormal_spacing_so_a_kernel_that_flushes_them_fails():
    """No blind spot: the absolute term is fp16's subnormal spacing (2^-24), not a tolerance on size."""
    a = np.array([[[0.003]]], np.float16)
    b = np.array([[[0.002]]], np.float16)
    exact = float(a[0, 0, 0]) * float(b[0, 0, 0])  # 6e-6, a subnormal fp16
    assert exact < np.finfo(np.float16).tiny
    rounded = np.array([[[exact]]]).astype(np.float16)
    assert _judge(rounded, a, b, FP16, FP16)[0].passed
    two_spacings = np.array([[[float(rounded[0, 0, 0]) + 2 * 2.0**-24]]]).astype(np.float16)
    flushed = np.zeros((1, 1, 1), np.float16)
    for wrong in (two_spacings, flushed):
        stats = _judge(wrong, a, b, FP16, FP16)[0]
        assert not stats.passed and stats.bad == 1
    gscale = truth = np.array([[exact]])
    bound = float(element_bound(np, gscale, truth, 1, FP16, FP16)[0, 0])
    assert bound == pytest.approx(
        2.0**-24 + LAMBDA * FP16.acc_tiny + 10 * 2.0**-24 * exact + OUTPUT_ROUNDINGS * 2.0**-11 * exact
    )


def test_a_single_subnormal_output_passes_the_normwise_test_too():
    """Judged normwise at every size, a 1 x 1 output in the subnormal range needs the absolute term there
    as well (an error of half a spacing is 0.3% of 1e-5, far above fp16's relative 2^-11)."""
    values = np.random.default_rng(0).uniform(2e-3, 4e-3, (2000, 1, 1))
    a, b = values.astype(np.float16), values[::-1].copy().astype(np.float16)
    exact = (a.astype(np.float64) * b.astype(np.float64)).astype(np.float16)
    stats = _judge(exact, a, b, FP16, FP16)
    assert all(s.passed for s in stats), _worst(stats)
    relative = norm_tolerance(1, FP16, FP16)
    assert max(s.norm_error for s in stats) > 10 * relative  # without the absolute term: failed


# -- tiny outputs -------------------------------------------------------------------------------------------------
def test_s_is_the_frobenius_norm_of_the_sums_without_cancellation():
    """S^2 = sum over C of E[C*_ij^2] for zero-mean data, the sum of the squared terms of each sum."""
    rng = np.random.default_rng(3)
    a, b, c0 = rng.uniform(-1, 1, (5, 7)), rng.uniform(-1, 1, (7, 3)), rng.uniform(-1, 1, (5, 3))
    terms = (0.7 * a[:, :, None] * b[None, :, :]) ** 2  # (i, k, j)
    assert sum_scale(np, a, b, c0, 0.7, 1.3) == pytest.approx(math.sqrt(terms.sum() + ((1.3 * c0) ** 2).sum()))
    assert sum_scale(np, a, b, None, 0.7, 1.3) == pytest.approx(math.sqrt(terms.sum()))
    assert sum_scale(np, a, b, c0, 0.7, 0.0) == pytest.approx(math.sqrt(terms.sum()))
    big_a, big_b = rng.uniform(-1, 1, (200, 300)), rng.uniform(-1, 1, (300, 200))
    assert sum_scale(np, big_a, big_b, None, 1.0, 0.0) == pytest.approx(np.linalg.norm(big_a @ big_b), rel=0.02)


def test_the_normwise_test_judges_outputs_of_every_size():
    a, b = _draw([5], 1, 1, 1000)
    stats = _judge(_fp32_sum(a, b) * np.float32(1.01), a, b)[0]  # 1% off
    assert not hasattr(accuracy, "NORM_MIN_ELEMENTS") and math.isfinite(stats.norm_tol)
    assert stats.norm_error > stats.norm_tol and "not judged" not in stats_line(stats)


@pytest.mark.parametrize("k", [1000, 65536])
def test_a_correct_fp32_sum_passes_at_one_output_element_on_400_seeds(k):
    """Divided by ||C*||_F alone, 7 of these 400 seeds failed at K = 1000, up to 18x; divided by
    max(||C*||_F, S) the worst of 400 is under a third of the tolerance, fused or not."""
    a, b = _draw(SEEDS, 1, 1, k)
    for fma in (True, False) if k < 10**4 else (False,):  # at K = 65536 one loop of 400 x 65536 is enough
        stats = _judge(_fp32_sum(a, b, fma), a, b)
        assert all(s.passed for s in stats) and _worst(stats) < 1 / 3, (fma, _worst(stats))


@pytest.mark.parametrize("rounding", [_fp16, _tf32], ids=["fp16-operands", "tf32-operands"])
def test_an_fp32_kernel_with_rounded_operands_fails_at_64x64x1_on_every_seed(rounding):
    """4096 products, each off by fp16's rounding of its operands: hundreds of times the bound."""
    a, b = _draw(SEEDS, 64, 64, 1)
    stats = _judge(_fp32_sum(rounding(a), rounding(b)), a, b)
    assert not any(s.passed for s in stats) and _least(stats) > 300, _least(stats)
    assert all(s.norm_error > 300 * s.norm_tol for s in stats)


@pytest.mark.parametrize("rounding", [_fp16, _tf32], ids=["fp16-operands", "tf32-operands"])
def test_an_fp32_kernel_with_rounded_operands_fails_at_1x1x1000_but_for_seeds_where_its_error_cancels(rounding):
    """One output element is one sum of 1000 rounding errors of either sign; on about 3% of seeds it
    cancels to within the tolerance (4x the worst correct sum of 400 seeds), some as far as a correct fp32 kernel's
    error on other seeds, where no rule on that one value can tell them apart. Every other seed fails, up to 89x."""
    a, b = _draw(SEEDS, 1, 1, 1000)
    stats = _judge(_fp32_sum(rounding(a), rounding(b)), a, b)
    evaded = [seed for seed, s in zip(SEEDS, stats) if s.passed]
    assert len(evaded) <= 16, evaded  # 12 of 400 measured
    assert _worst(stats) > 50
    # what evades is a cheat whose error happened to cancel, some of it below a correct sum's on other seeds
    correct = _judge(_fp32_sum(a, b, fma=False), a, b)
    assert min(stats[s].norm_error for s in evaded) < max(c.norm_error for c in correct)


# -- fp16 accumulation --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, seeds", [(1, 50), (16, 50), (256, 50), (4096, 10)])
def test_fp16_accumulation_passes_when_declared(k, seeds):
    """A float16 running sum, judged by the bound of the fp16 accumulation it declares, passes
    with at least 3x to spare, its product fused or not."""
    a, b = _draw(range(seeds), 8, 8, k, np.float16)
    for fma in (False, True):
        stats = _judge(_fp16_sum(a, b, fma), a, b, FP16_ACC, FP16)
        assert all(s.passed for s in stats) and _worst(stats) < 1 / 3, (fma, _worst(stats))
    one = _draw(range(100), 1, 1, k, np.float16)
    stats = _judge(_fp16_sum(*one), *one, FP16_ACC, FP16)
    assert all(s.passed for s in stats) and _worst(stats) < 1 / 3, _worst(stats)


@pytest.mark.parametrize("k", [256, 1024, 4096])
def test_fp16_accumulation_fails_when_judged_as_fp32_accumulation(k):
    """The declaration matters: undeclared, the same sums fail on every seed from K = 256 on (below, an
    fp16 sum of a few terms errs no more than C's own roundings allow, 4 u_out H; at K = 1 there is nothing to
    accumulate, and they pass)."""
    a, b = _draw(range(10), 8, 8, k, np.float16)
    assert not any(s.passed for s in _judge(_fp16_sum(a, b), a, b, FP16, FP16))
    a1, b1 = _draw(range(10), 8, 8, 1, np.float16)
    assert all(s.passed for s in _judge(_fp16_sum(a1, b1), a1, b1, FP16, FP16))


# -- the standing rule: the peer is judged by the same bound --------------------------------------------------------
HEADER = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [16, 16]}
NAIVE = "01_naive.cu::sgemm_naive[fp32-512x512x512]"
UNWRITTEN = "faults.cu::unwritten_tile[fp32-256x256x256]"


def _case(shape: tuple[int, int, int]) -> Case:
    spec = spec_from_mapping({**HEADER, "grid": ["cdiv(N, 16)", "cdiv(M, 16)"]}, path="k.cu")
    return Case(spec, spec.variants()[0], "fp32", Shape(*shape), AlphaBeta(1.0, 0.0))


def _miscalibrated(key: str, kernel_over: bool = False, **peer) -> tuple[CaseResult, str]:
    """A recorded outcome whose cuBLAS statistics fail the bound as ``peer`` says; the judged case and its text."""
    outcome = recorded_outcome(key)
    v = outcome.verification
    kernel = dataclasses.replace(v.kernel, bad=3, max_ratio=1.5) if kernel_over else v.kernel
    v = dataclasses.replace(v, kernel=kernel, peer=dataclasses.replace(v.peer, **peer))
    shape = (v.shape.M, v.shape.N, v.shape.K)
    result = judge_outcome(_case(shape), f"k.cu::{key}", dataclasses.replace(outcome, verification=v), GPU)
    return result, failure_text("k[x]", result, "REPLAY")


GPU = recording()["facts"]
OVER = {"bad": 7, "max_ratio": 3.2}


@pytest.mark.parametrize("kernel_over", [False, True], ids=["kernel-within", "kernel-over-the-bound"])
def test_a_peer_over_the_bound_is_a_calibration_error_and_the_case_is_skipped(kernel_over):
    """The bound, not the kernel, is wrong on this case: the kernel is not failed by it either way."""
    result, text = _miscalibrated(NAIVE, kernel_over, **OVER)
    assert result.outcome == "skipped" and not result.failed and result.timing is None
    d = result.diagnosis
    assert d.kind == Verdict.CALIBRATION and d.findings == () and d.error_map is None
    assert d.peer.max_ratio == 3.2 and (d.kernel.max_ratio == 1.5) == kernel_over
    assert ("(the kernel: 1.5x per element" in text) == kernel_over
    assert text.startswith(
        "k[x]: pytest-gemm calibration error: cuBLAS (the peer) fails the per-element bound by 3.2x "
        "(7 of 262144 elements) on this case (the kernel: "
    )
    assert "the bound, not the kernel, is wrong here, so the kernel's values are not judged by it" in text
    assert text.endswith("please report it; replay: REPLAY") and "\n" not in text


def test_a_calibration_error_names_the_normwise_test_when_that_is_the_one_failed():
    outcome = recorded_outcome(NAIVE)
    tol = outcome.verification.peer.norm_tol
    result, text = _miscalibrated(NAIVE, norm_error=1.5 * tol)
    assert result.outcome == "skipped" and result.diagnosis.kind == Verdict.CALIBRATION
    assert "cuBLAS (the peer) fails the normwise tolerance by 1.5x on this case" in text
    _, text = _miscalibrated(NAIVE, norm_error=2 * tol, **OVER)
    assert "fails the per-element bound by 3.2x (7 of 262144 elements) and the normwise tolerance by 2x" in text


def test_the_kernels_other_findings_still_fail_it_where_the_peer_fails_the_bound():
    """Unwritten elements, faults and non-finite values are not the bound's to excuse."""
    result, text = _miscalibrated(UNWRITTEN, **OVER)
    d = result.diagnosis
    assert result.failed and d.kind == Verdict.CALIBRATION
    assert [f.kind for f in d.findings] == [ErrorCause.UNWRITTEN]  # not its 'over the bound'
    lines = diagnosis_lines(d)
    assert lines[0].startswith("unwritten output: 1024 element(s) of C still hold the NaN poison")
    assert lines[-1].startswith("pytest-gemm calibration error: cuBLAS (the peer) fails the per-element bound by 3.2x")
    assert text.startswith("verification failed for k[x] (M=256, N=256, K=256, alpha=1, beta=0)")
    assert "wrong values" not in text and "  cuBLAS fp32 (peer): max 3.2x" in text
    assert headline("k[x]", result).startswith("unwritten output: 1024 element(s)")

    outcome = recorded_outcome(NAIVE)
    fault = Fault(Check.NONDETERMINISTIC, "C between launch 1 and launch 3 on the same inputs", 12)
    v = dataclasses.replace(outcome.verification, faults=(fault,), peer=dataclasses.replace(outcome.verification.peer,
                            **OVER))  # fmt: skip
    result = judge_outcome(_case((512, 512, 512)), "k.cu::x", dataclasses.replace(outcome, verification=v), GPU)
    assert result.failed and [f.kind for f in result.diagnosis.findings] == [Check.NONDETERMINISTIC]


def test_a_peer_within_the_bound_changes_nothing():
    result, _ = _miscalibrated(UNWRITTEN)
    assert result.failed and result.diagnosis.kind == Verdict.WRONG_OUTPUT
    assert ErrorCause.UNWRITTEN in [f.kind for f in result.diagnosis.findings]
    outcome = recorded_outcome(NAIVE)
    assert judge_outcome(_case((512, 512, 512)), "k.cu::x", outcome, GPU).outcome == "passed"


def test_a_calibration_error_crosses_as_json_and_comes_back_equal():
    for key in (NAIVE, UNWRITTEN):
        result, _ = _miscalibrated(key, **OVER)
        back = CaseResult.from_dict(json.loads(json.dumps(result.to_dict())))
        assert to_plain(back) == to_plain(result) and back.diagnosis.kind == Verdict.CALIBRATION


def _judged(key: str, kernel: dict, peer: dict, **found) -> tuple[CaseResult, str]:
    """A recorded outcome with the kernel's and cuBLAS's statistics changed as ``kernel`` and ``peer`` say (and the
    verification's other fields as ``found`` does); the judged case and its text."""
    outcome = recorded_outcome(key)
    v = outcome.verification
    v = dataclasses.replace(v, kernel=dataclasses.replace(v.kernel, **kernel), peer=dataclasses.replace(v.peer, **peer),
                            **found)  # fmt: skip
    shape = (v.shape.M, v.shape.N, v.shape.K)
    result = judge_outcome(_case(shape), f"k.cu::{key}", dataclasses.replace(outcome, verification=v), GPU)
    return result, failure_text("k[x]", result, "REPLAY")


ALL_WRONG = {"bad": 262144, "max_ratio": 1000.0}


def test_a_peer_barely_over_the_bound_does_not_hide_a_kernel_far_over_it():
    """No blind spot: the peer's failure sets aside only the errors it explains, those within its own
    (1.1x here); a kernel with every element 1000x over the bound fails, the calibration error said beside it."""
    result, text = _judged(NAIVE, ALL_WRONG, {"bad": 1, "max_ratio": 1.1})
    d = result.diagnosis
    assert result.failed and d.kind == Verdict.CALIBRATION
    assert [f.kind for f in d.findings] == [ErrorCause.OVER_BOUND]
    assert text.startswith("verification failed for k[x] (M=256, N=256, K=256, alpha=1, beta=0)".replace("256", "512"))
    assert "  - wrong values: 262144 of 262144 elements (100%) exceed the per-element bound, worst 1e+03x of it" in text
    assert "pytest-gemm calibration error: cuBLAS (the peer) fails the per-element bound by 1.1x (1 of 262144 " in text
    assert "so the kernel is failed only for what that does not explain; please report it" in text
    assert "the kernel's values are not judged by it" not in text
    assert headline("k[x]", result).startswith("wrong values: 262144 of 262144 elements")


def test_a_kernel_within_the_peers_own_error_is_skipped_as_a_calibration_error():
    """cuBLAS 3x over the bound, the kernel 2x: the bound, not the kernel, is wrong; and normwise alike."""
    result, text = _judged(NAIVE, {"bad": 40, "max_ratio": 2.0}, {"bad": 70, "max_ratio": 3.0})
    assert result.outcome == "skipped" and result.diagnosis.findings == ()
    assert "(the kernel: 2x per element" in text and "so the kernel's values are not judged by it" in text
    tol = recorded_outcome(NAIVE).verification.kernel.norm_tol
    result, _ = _judged(NAIVE, {"norm_error": 1.5 * tol}, {"norm_error": 2 * tol})
    assert result.outcome == "skipped" and result.diagnosis.kind == Verdict.CALIBRATION


def test_a_kernel_over_the_normwise_tolerance_fails_where_the_peer_fails_only_per_element():
    """Each test's findings are set aside by the peer's failure of that test alone."""
    tol = recorded_outcome(NAIVE).verification.kernel.norm_tol
    result, text = _judged(NAIVE, {"norm_error": 1.5 * tol}, OVER)
    assert result.failed and [f.kind for f in result.diagnosis.findings] == [Check.LOW_PRECISION]
    assert "fails the per-element bound by 3.2x (7 of 262144 elements) on this case" in text
    result, _ = _judged(NAIVE, {"norm_error": 3 * tol}, {"norm_error": 2 * tol})
    assert result.failed and [f.kind for f in result.diagnosis.findings] == [Check.LOW_PRECISION]


def test_a_misread_output_fails_whatever_the_peer_does():
    """A misreading is wrong whatever the bound: B read as K x N fails though cuBLAS fails the
    bound by more than the kernel's worst element; its over-the-bound errors are set aside, not its misreading."""
    misread = Misread(Misreading.B_ORDER, 262000)
    result, text = _judged(NAIVE, {"bad": 262144, "max_ratio": 2.0}, OVER, misread=misread)
    d = result.diagnosis
    assert result.failed and d.kind == Verdict.CALIBRATION
    assert [(f.kind, f.count) for f in d.findings] == [(Misreading.B_ORDER, 262000)]
    assert "  - matches B read as N x K; the header says K x N: 262000 of 262144 elements" in text
    assert headline("k[x]", result).startswith("matches B read as N x K")


def _timed(key: str, **peer) -> tuple[CaseResult, str]:
    """A recorded timed outcome whose cuBLAS timed output is changed as ``peer`` says; the judged case and its text."""
    outcome = recorded_outcome(key)
    run = outcome.timing
    timed = run.reference_output or outcome.verification.peer  # None where it passed: the peer's verified figures
    run = dataclasses.replace(run, reference_output=dataclasses.replace(timed, **peer))
    v = outcome.verification
    case = _case((v.shape.M, v.shape.N, v.shape.K))
    result = judge_outcome(case, f"k.cu::{key}", dataclasses.replace(outcome, timing=run), GPU)
    return result, failure_text("k[x]", result, "REPLAY")


def test_cublas_timed_output_over_the_bound_is_a_calibration_error_not_a_failure():
    """On the timed launches: cuBLAS's timed output failing the bound alone skips the case as a
    calibration error, its timing record kept on the result."""
    result, text = _timed(NAIVE, **OVER)
    d = result.diagnosis
    assert result.outcome == "skipped" and d.kind == Verdict.CALIBRATION and d.findings == ()
    assert d.problems == (TimingProblem.REFERENCE_WRONG,) and d.peer.max_ratio == 3.2
    assert result.timing is not None and result.timing.verdict == Sanity.OK and result.margin is not None
    assert text.startswith(
        "k[x]: pytest-gemm calibration error: cuBLAS (the peer) fails the per-element bound by 3.2x "
        "(7 of 262144 elements) in its timed launches on this case (the kernel: "
    )
    assert "so the kernel's values are not judged by it; please report it; replay: REPLAY" in text
    back = CaseResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.diagnosis == d and back.outcome == "skipped"
    assert _timed(NAIVE)[0].outcome == "passed"


def test_a_kernel_with_timing_problems_of_its_own_still_fails_beside_a_timed_calibration_error():
    """The memo kernel's last timed launch is wrong and far faster than cuBLAS: it fails for that,
    cuBLAS's timed output over the bound said beside it, not in its place."""
    result, text = _timed("timing_cheat_late.cu::memo_late[fp32-4096x4096x4096]", **OVER)
    d = result.diagnosis
    assert result.failed and d.kind == Verdict.TIMING and result.timing is not None
    assert {TimingProblem.WRONG_WHEN_TIMED, TimingProblem.REFERENCE_WRONG} <= set(d.problems)
    lines = text.splitlines()
    assert lines[0].startswith("k[x]: the output of the last timed launch is wrong (the first launch was right")
    assert any(line.startswith("suspicious timing: ") and "x faster than cuBLAS" in line for line in lines)
    calibration = [line for line in lines if line.startswith("pytest-gemm calibration error: ")]
    assert len(calibration) == 1 and calibration[0].startswith(
        "pytest-gemm calibration error: cuBLAS (the peer) fails the per-element bound by 3.2x (7 of 16777216 "
        "elements) in its timed launches on this case (the kernel: inf per element"  # its wrong timed output
    )
    assert calibration[0].endswith(
        "; the bound is wrong here; the kernel is failed for its own problems; please report it"
    )
    assert "pytest-gemm bug" not in text and headline("k[x]", result) == lines[0].removeprefix("k[x]: ")


# -- C's roundings on the way ------------------------------------------------------------------------------------
def _fp16_readme_kernel(a16, b16, c16, alpha, beta):
    """The README's Python kernel, ``alpha * (A @ B) + beta * C``, in fp16 arrays as CuPy computes it: the product
    rounded to fp16 (cuBLAS, fp32 accumulation), then alpha times it, beta times C and their sum, each computed in
    fp32 and rounded to fp16."""
    product = (a16.astype(np.float32) @ b16.astype(np.float32)).astype(np.float16)
    scaled = (np.float32(np.float16(alpha)) * product.astype(np.float32)).astype(np.float16)  # alpha in fp16 too
    if not beta:
        return scaled
    prior = (np.float32(np.float16(beta)) * c16.astype(np.float32)).astype(np.float16)
    return (scaled.astype(np.float32) + prior.astype(np.float32)).astype(np.float16)


@pytest.mark.parametrize("k", [1, 3, 9, 64, 1024])
def test_the_readme_kernel_in_fp16_passes_though_it_rounds_c_three_times(k):
    """Rounding to C's type at the product, its scaling and the sum with beta C0 is what CuPy's own
    matmul does as a kernel, so the bound allows OUTPUT_ROUNDINGS roundings of H = |alpha A B| + |beta C0|; with
    2 u_out |C*| it failed by up to 480x where beta C0 cancels alpha A B (the GPU sweep runs it too)."""
    worst = worst_old = 0.0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        a, b, c0 = (rng.uniform(-1, 1, shape).astype(np.float16) for shape in ((16, k), (k, 24), (16, 24)))
        for alpha, beta in ((0.7, 1.3), (1.0, 0.0), (-1.5, 0.0)):
            got = _fp16_readme_kernel(a, b, c0, alpha, beta).astype(np.float64)
            a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c0.astype(np.float64)
            product = alpha * (a64 @ b64)
            truth = product + beta * c64
            gscale = abs(alpha) * np.abs(a64) @ np.abs(b64) + abs(beta) * np.abs(c64)
            hscale = accuracy.rounding_scale(np, a64, b64, c64 if beta else None, alpha, beta, product)
            spread = sum_scale(np, a64, b64, c64 if beta else None, alpha, beta)
            floor = accuracy.subnormal_floor(FP16, alpha, beta)
            stats = error_stats(
                np, got, truth, gscale, k, FP16, FP16, scale_norm=spread, hscale=hscale, subnormal=floor
            )
            assert stats.passed, (seed, alpha, beta, stats.max_ratio, stats.norm_ratio)
            worst = max(worst, stats.max_ratio, stats.norm_ratio)
            if beta:  # judged by |C*| alone, as before, the same output fails where the sum cancels
                bound = accuracy.element_bound(np, gscale, truth, k, FP16, FP16)
                bound -= (OUTPUT_ROUNDINGS - 2) * FP16.u_store * np.abs(truth)  # 2 u_out |C*|, the rule before
                worst_old = max(worst_old, float(np.max(np.abs(got - truth) / bound)))
    assert worst < 1.0
    assert k > 64 or worst_old > 1.0  # at small K the cancellation happens on some element


def test_products_rounded_to_an_fp16_output_before_the_sum_pass_at_one_element():
    """CuPy's fp16 ``A @ B`` of a 1 x K by a K x 1 matrix rounds each product to fp16 before it sums
    them (the GPU sweep found it failing the rule by up to 4.3x at 1 x 1 x 1000): H's R term (the root of the
    summed squares of the products) allows it, on 400 seeds; and an fp32 output that rounds its products to fp16,
    lower precision than its type, still fails on most seeds."""
    fp16_out, fp32_caught = [], 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        a, b = rng.uniform(-1, 1, (1, 1000)).astype(np.float16), rng.uniform(-1, 1, (1000, 1)).astype(np.float16)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        products = (a64[0] * b64[:, 0]).astype(np.float16).astype(np.float32)
        total = np.float32(0)
        for p in products:
            total = np.float32(total + p)
        truth, gscale = a64 @ b64, np.abs(a64) @ np.abs(b64)
        spread, hscale = (
            sum_scale(np, a64, b64, None, 1.0, 0.0),
            accuracy.rounding_scale(np, a64, b64, None, 1.0, 0.0, truth),
        )
        got16 = np.array([[total]]).astype(np.float16).astype(np.float64)
        fp16_out.append(error_stats(np, got16, truth, gscale, 1000, FP16, FP16, scale_norm=spread, hscale=hscale))
        got32 = np.array([[total]], np.float64)
        fp32_caught += not error_stats(
            np, got32, truth, gscale, 1000, FP32, FP32, scale_norm=spread, hscale=hscale
        ).passed
    assert _worst(fp16_out) < 1.0, _worst(fp16_out)
    assert fp32_caught >= 380, fp32_caught


def test_subnormal_outputs_rounded_twice_pass_with_alpha_in_the_floor():
    """The README's kernel at K = 1 rounds a subnormal product to fp16, then alpha times it again: an
    error of up to (|alpha| + 1) / 2 spacings, which subnormal_floor allows (one spacing alone failed 3 of 400
    seeds at 64 x 64 x 1 with alpha = -1.5)."""
    judged, alone = [], 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        a, b = rng.uniform(-1, 1, (64, 1)).astype(np.float16), rng.uniform(-1, 1, (1, 64)).astype(np.float16)
        got = _fp16_readme_kernel(a, b, None, -1.5, 0.0).astype(np.float64)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        truth = -1.5 * (a64 @ b64)
        gscale, spread = 1.5 * np.abs(a64) @ np.abs(b64), sum_scale(np, a64, b64, None, -1.5, 0.0)
        hscale = accuracy.rounding_scale(np, a64, b64, None, -1.5, 0.0, truth)
        common = dict(scale_norm=spread, hscale=hscale)
        floor = accuracy.subnormal_floor(FP16, -1.5, 0.0)
        judged.append(error_stats(np, got, truth, gscale, 1, FP16, FP16, subnormal=floor, **common))
        alone += not error_stats(np, got, truth, gscale, 1, FP16, FP16, **common).passed
    assert _worst(judged) < 1.0, _worst(judged)
    assert alone > 0  # one spacing is not enough: the floor's alpha term is needed
    assert accuracy.subnormal_floor(FP16, 1.0, 0.0) == FP16.tiny  # alpha = 1, beta = 0: one spacing


def test_the_end_of_run_count_takes_timed_calibration_errors_beside_a_kernels_own_problems():
    """A case counted as a calibration error is one whose cuBLAS failed the bound, in verification or in
    its timed launches, also where the case fails for the kernel's own timing problems."""
    from pytest_gemm.records.diagnosis import Diagnosis
    from pytest_gemm.records.verdicts import TimingProblem

    base = dict(dtype="fp32", shape=Shape(8, 8, 8), alpha=1.0, beta=0.0)
    assert Diagnosis(Verdict.CALIBRATION, **base).miscalibrated
    both = (TimingProblem.WRONG_WHEN_TIMED, TimingProblem.REFERENCE_WRONG)
    assert Diagnosis(Verdict.TIMING, **base, problems=both).miscalibrated
    assert not Diagnosis(Verdict.TIMING, **base, problems=(TimingProblem.WRONG_WHEN_TIMED,)).miscalibrated
    assert not Diagnosis(Verdict.WRONG_OUTPUT, **base).miscalibrated
