"""The input families a kernel's dtypes put it in: what each declares, and the other format of a two-format family."""

from __future__ import annotations

import pytest

from pytest_gemm.records.dtypes import INPUT_DTYPES
from pytest_gemm.specs.families import family_of


def test_an_fp8_formats_other_is_the_other_fp8_format():
    assert family_of("fp8_e4m3").other("fp8_e4m3") == "fp8_e5m2"
    assert family_of("fp8_e5m2").other("fp8_e5m2") == "fp8_e4m3"


@pytest.mark.parametrize("dtype", [d for d in INPUT_DTYPES if not d.startswith("fp8")])
def test_a_family_of_other_than_two_formats_has_no_other(dtype):
    with pytest.raises(ValueError, match=f"{dtype} inputs have no other format"):
        family_of(dtype).other(dtype)


def test_fp8_and_int8_report_their_peers_figures_and_float_does_not():
    assert [family_of(d).figures for d in ("fp32", "fp8_e4m3", "int8")] == [False, True, True]
