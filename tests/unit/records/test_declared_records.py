"""The records a header's ``scales`` and ``storage`` are read into hold the one rule of a valid value: a header is
refused with the record's own words, under its key, and a record made in code (or read back from a saved run) by the
same rule."""

from __future__ import annotations

import pytest

from pytest_gemm.records.scales import Scales
from pytest_gemm.records.storage import Storage
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.header import spec_from_mapping

FP8 = {
    "entry": "k",
    "args": ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"],
    "dtypes": ["fp8_e4m3"],
    "block": [128],
    "grid": [1],
}
CU = {**FP8, "args": ["M", "N", "K", "alpha", "beta", "A", "B", "C"], "dtypes": ["fp32"]}


def _header_error(header: dict) -> KernelFileError:
    with pytest.raises(KernelFileError) as info:
        spec_from_mapping(header, path="k.cu")
    return info.value


@pytest.mark.parametrize(
    ("table", "fields", "said"),
    [
        (
            {"align": 3},
            {"align": 3},
            "align: the bytes each stored row of a grid is padded to, a power of two up to 256",
        ),
        ({"align": 512}, {"align": 512}, "a power of two up to 256, got 512"),
        ({"align": True}, {"align": True}, "a power of two up to 256, got True"),
        ({"type": "e8m0"}, {"type": "e8m0"}, "type: expected one of 'fp32', 'ue8m0', got 'e8m0'"),
        ({"type": ["fp32"]}, {"type": ["fp32"]}, "type: expected one of 'fp32', 'ue8m0', got ['fp32']"),
        ({"A": ["row"]}, {"A": ["row"]}, "A: expected one of 'tensor', 'row', '1x128' (the granularity of its scales)"),
        ({"stored": {"B": "MxK"}}, {"B_stored": "MxK"}, "stored: B's grid is stored 'KxN' or 'NxK', got 'MxK'"),
    ],
)
def test_a_header_and_a_record_refuse_the_same_scales_in_the_same_words(table, fields, said):
    error = _header_error({**FP8, "scales": {"A": "row", "B": "col", **table}})
    assert error.key == "scales" and str(error).startswith("k.cu:1: key 'scales': ") and said in error.message
    with pytest.raises(ValueError) as info:
        Scales(**{"A": "row", "B": "col", **fields})
    assert str(info.value) == error.message


def test_an_operand_the_scales_table_leaves_out_is_named():
    error = _header_error({**FP8, "scales": {"A": "row"}})
    assert error.message == "B: expected one of 'tensor', 'col', '128x128' (the granularity of its scales), got None"


def test_scales_the_header_allows_are_the_records():
    spec = spec_from_mapping({**FP8, "scales": {"A": "1x128", "B": "128x128", "align": 256}}, path="k.cu")
    assert spec.scales == Scales("1x128", "128x128", align=256)
    assert spec_from_mapping({**FP8, "scales": {"A": "row", "B": "col"}}, path="k.cu").scales == Scales("row", "col")


def test_a_header_and_a_record_refuse_the_same_storage_order_in_the_same_words():
    error = _header_error({**CU, "storage": {"B": "MxK"}})
    said = "B: expected 'KxN' (row-major) or 'NxK' (stored transposed, i.e. column-major), the shape it has in memory"
    assert error.key == "storage" and error.message.startswith(said)
    with pytest.raises(ValueError) as info:
        Storage(B="MxK")
    assert str(info.value) == error.message
    with pytest.raises(ValueError, match="expected storage orders such as 'A MxK, B NxK, C MxN', got 'B MxK'"):
        Storage.of_text("B MxK")
    assert Storage.of_text("A KxM, C NxM") == Storage(A="KxM", C="NxM")
