"""How much a run may ask for, checked before any case is built (specs/bounds.py, settings.py): the shapes of a run
(--gemm-max-shapes), a kernel's variants (--gemm-max-variants) and its GPU cases (--gemm-max-cases)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pytest_gemm.options import BY_NAME, OptionError, label
from pytest_gemm.records.shapes import Shape
from pytest_gemm.settings import read_settings
from pytest_gemm.specs import cases
from pytest_gemm.specs.bounds import DEFAULT_MAX_CASES, DEFAULT_MAX_SHAPES, DEFAULT_MAX_VARIANTS, check_counts
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError

from support import NAIVE_BODY, NAIVE_HEADER, with_keys

SHAPES = [Shape(i, i, 8) for i in range(1, 2001)]


def _spec(**keys: str):
    return parse_cu_source("k.cu", with_keys(NAIVE_HEADER + NAIVE_BODY, **keys))[0]


def _check(spec, shapes, dtypes=None, max_cases=DEFAULT_MAX_CASES, max_variants=DEFAULT_MAX_VARIANTS):
    check_counts(spec, shapes, dtypes, max_variants=max_variants, max_cases=max_cases, label=label)


def test_a_kernel_of_too_many_cases_is_refused_with_the_product_and_the_option(monkeypatch):
    """Variants x selected dtypes x shapes x alpha/beta pairs past the limit: one error naming the file, the kernel,
    the product and the options, before expand builds a case."""
    monkeypatch.setattr(cases, "expand", lambda *a, **k: pytest.fail("expanded"))
    spec = _spec(params="{ T = [1, 2, 3, 4] }", dtypes='["fp32", "fp64", "fp16"]')
    with pytest.raises(KernelFileError) as caught:
        _check(spec, SHAPES, ["fp32", "fp64"], max_cases=10_000)
    assert str(caught.value) == (
        "k.cu:2: sgemm_naive would have 48,000 GPU cases (4 variant(s) x 2 dtype(s) x 2,000 shapes x 3 alpha/beta "
        "pair(s)), each a test; a kernel may have at most 10,000 (--gemm-max-cases / gemm_max_cases raises the limit; "
        "--gemm-shapes / gemm_shapes and --gemm-dtypes / gemm_dtypes choose fewer)"
    )
    _check(spec, SHAPES[:400], ["fp32", "fp64"], max_cases=10_000)  # 4 x 2 x 400 x 3 = 9,600


def test_the_variant_limit_comes_first():
    spec = _spec(params="{ A1 = [1, 2, 3], A2 = [1, 2] }")
    with pytest.raises(KernelFileError, match=r"key 'params': sgemm_naive's params give 6 variants \(3 A1 x 2 A2\)"):
        _check(spec, SHAPES, max_variants=5, max_cases=1)


def test_a_kernel_without_alpha_and_beta_counts_one_pair_a_shape():
    spec = _spec(args='["M", "N", "K", "A", "B", "C"]')
    _check(spec, SHAPES[:100], max_cases=100)
    with pytest.raises(KernelFileError, match="101 GPU cases"):
        _check(spec, SHAPES[:101], max_cases=100)


def _settings(shapes: str, max_shapes: str | None = None):
    values = {"shapes": shapes} | ({"max-shapes": max_shapes} if max_shapes else {})
    return read_settings(lambda name: values.get(name, BY_NAME[name].default), lambda name: False, Path("."))


def test_a_shape_list_past_the_limit_is_a_usage_error_said_at_once():
    """100,000 shapes gave 300,002 tests, 47 s and 1.87 GB; the list is refused as the options are read, with the
    count and the option that raises the limit."""
    many = ",".join(f"{i}x{i}x8" for i in range(1, 100_001))
    began = time.monotonic()
    with pytest.raises(OptionError) as caught:
        _settings(many)
    assert time.monotonic() - began < 5
    assert str(caught.value) == (
        "--gemm-shapes / gemm_shapes: 100,000 shapes, each a case of every variant and dtype of every kernel; a run "
        "may have at most 1,024 (--gemm-max-shapes / gemm_max_shapes raises the limit)"
    )
    assert len(_settings(many, "100000").shapes) == 100_000
    assert len(_settings("quick,standard,edge,llm,batched").shapes) <= DEFAULT_MAX_SHAPES  # every set fits


def test_the_defaults_let_a_full_sweep_of_every_float_dtype_through():
    """The most variants at the quick set, in every float dtype, fit the case limit."""
    assert DEFAULT_MAX_VARIANTS * 3 * 5 * 3 <= DEFAULT_MAX_CASES


@pytest.mark.parametrize(
    ("option", "default"),
    [("max-variants", DEFAULT_MAX_VARIANTS), ("max-shapes", DEFAULT_MAX_SHAPES), ("max-cases", DEFAULT_MAX_CASES)],
)
def test_each_limits_default_is_the_one_bounds_defines(option, default):
    """The three limits' defaults are defined together, beside the rule that applies them: each option's default, as
    --help shows it and a run reads it, is that one."""
    assert BY_NAME[option].default == str(default)
    assert getattr(_settings("quick"), option.replace("-", "_")) == default
