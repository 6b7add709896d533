"""A timed launch's output and a graph's replay are checked for their verdict only (``Truth.passes``): it must be the
verdict the full statistics give (``Truth.judge(...).passed``), for outputs that pass, fail by one element, fail
normwise only, hold NaN or inf, or are all zero, in every output type; and for a grouped GEMM's truth (each group by
its own bounds, rows of no group not judged; a fused epilogue's: tests/unit/epilogue/test_epilogue_truth.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judge.accuracy import Truth, element_bound, error_stats
from pytest_gemm.judge.grouped import GroupedTruth
from pytest_gemm.records.dtypes import get_dtype
from pytest_gemm.records.groups import GroupPlan


def _case(dtype: str, seed: int, beta: float) -> tuple[Truth, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    m, n, k = 48, 40, 64
    a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    c0 = rng.uniform(-1, 1, (m, n)) if beta else None
    out = get_dtype(dtype)
    truth = Truth.of(np, a, b, c0, 0.7, beta, out)
    stored = (truth.value.astype(np.float16) if dtype == "fp16" else truth.value.astype(np.float32)).astype(float)
    return truth, stored, k


def _outputs(stored: np.ndarray, truth: Truth, rng: np.random.Generator) -> dict[str, np.ndarray]:
    scale = np.abs(truth.value).max()
    one_bad, nan, inf, tiny_everywhere = (stored.copy() for _ in range(4))
    one_bad[3, 5] += scale * 1e-2
    nan[0, 0] = np.nan
    inf[-1, -1] = np.inf
    tiny_everywhere += rng.choice([-1.0, 1.0], stored.shape) * np.abs(stored) * 2e-3
    return {
        "as stored": stored,
        "one element off": one_bad,
        "a NaN": nan,
        "an inf": inf,
        "every element a little off": tiny_everywhere,
        "zero": np.zeros_like(stored),
        "the truth itself": truth.value.copy(),
    }


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("beta", [0.0, 1.3])
@pytest.mark.parametrize("seed", range(6))
def test_the_verdict_alone_is_the_verdict_of_the_full_statistics(dtype, beta, seed):
    truth, stored, k = _case(dtype, seed, beta)
    dt = get_dtype(dtype)
    for name, got in _outputs(stored, truth, np.random.default_rng(seed)).items():
        full = truth.judge(np, got, k, dt, dt)
        assert truth.passes(np, got, k, dt, dt) == full.passed, name


def test_both_verdicts_are_seen():
    """The outputs above include passing and failing ones (else the comparison proves nothing)."""
    truth, stored, k = _case("fp32", 0, 0.0)
    dt = get_dtype("fp32")
    verdicts = {
        name: truth.passes(np, got, k, dt, dt)
        for name, got in _outputs(stored, truth, np.random.default_rng(0)).items()
    }
    assert verdicts["as stored"] and verdicts["the truth itself"]
    assert not any(verdicts[name] for name in ("one element off", "a NaN", "an inf", "zero"))


def test_a_truth_judges_output_after_output_as_the_rule_does_from_its_arrays_alone():
    """A truth keeps what the normwise test takes of it (``||C*||_F``, ``||H||_F``) from its first judgement: each
    later output, passing or failing, gets the figures ``error_stats`` gives it from the truth's arrays, and the same
    verdict alone."""
    dt = get_dtype("fp16")
    truth, stored, k = _case("fp16", 3, 1.3)
    for name, got in [*_outputs(stored, truth, np.random.default_rng(3)).items()] * 2:
        reference = error_stats(
            np, got, truth.value, truth.gscale, k, dt, dt, scale_norm=truth.spread, hscale=truth.hscale,
            subnormal=truth.subnormal, batch=truth.batch,
        )  # fmt: skip
        assert repr(truth.judge(np, got, k, dt, dt)) == repr(reference), name
        assert truth.passes(np, got, k, dt, dt) == reference.passed, name


def test_an_output_wrong_only_normwise_fails_both_ways():
    """Every element inside its bound, the whole too far off: the normwise test alone fails it."""
    truth, _, k = _case("fp32", 1, 0.0)
    dt = get_dtype("fp32")

    bound = element_bound(np, truth.gscale, truth.value, k, dt, dt, truth.hscale, truth.subnormal)
    got = truth.value + 0.9 * bound  # each element just inside, all errors of one sign
    full = truth.judge(np, got, k, dt, dt)
    assert full.bad == 0 and not full.passed
    assert truth.passes(np, got, k, dt, dt) is False


def _grouped(layout: str, sizes: tuple[int, ...], rng: np.random.Generator) -> tuple[GroupedTruth, GroupPlan]:
    k = 16 if layout != "k" else sum(sizes)
    plan = GroupPlan(layout, sizes, 4, 8 if layout == "k" else sum(sizes), 12, k)
    if layout == "k":
        a, b = rng.uniform(-1, 1, (plan.M, plan.K)), rng.uniform(-1, 1, (plan.K, plan.N))
    else:
        s = plan.operand_shape("A")
        a, b = rng.uniform(-1, 1, (s.M * s.batch, plan.K)), rng.uniform(-1, 1, (plan.count * plan.K, plan.N))
    return GroupedTruth.of_groups(np, plan, a, b, None, 1.0, 0.0, get_dtype("fp32")), plan


@pytest.mark.parametrize("layout", ["masked", "contiguous", "k"])
def test_a_grouped_verdict_alone_is_each_groups_verdict(layout):
    """Rows of no group hold the poison (NaN), as a correct kernel leaves them: not judged. One group past its own
    bound fails the whole, though the others and the case's K would pass it."""
    dt, rng = get_dtype("fp32"), np.random.default_rng(7)
    seen = set()
    for trial in range(60):
        sizes = tuple(int(x) for x in rng.integers(0, 7, rng.integers(1, 5)))
        if not any(sizes):
            continue
        truth, plan = _grouped(layout, sizes, rng)
        got = truth.value.astype(np.float32).astype(float)
        for r0, r1, _ in plan.outside():
            got[r0:r1] = np.nan
        if trial % 3:  # one group off by a multiple of its own bound: inside it, or past it
            g, own = truth.each()[rng.integers(len(truth.each()))]
            r0, r1 = plan.c_rows(g)
            bound = element_bound(np, own.gscale, own.value, truth._k(g), dt, dt, own.hscale, own.subnormal)
            got[r0:r1] = own.value + rng.choice([0.5, 1.5]) * bound
        full = truth.judge(np, got, plan.K, dt, dt).passed
        assert truth.passes(np, got, plan.K, dt, dt) == full, (sizes, trial)
        seen.add(full)
    assert seen == {True, False}
