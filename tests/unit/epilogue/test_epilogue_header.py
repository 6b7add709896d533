"""The epilogue key (docs/kernel-files.md#fused-epilogues): a right table becomes an Epilogue record, with D apart from
C where the kernel takes D; each wrong one is refused with the file, the key and what is wrong."""

from __future__ import annotations

import pytest

from pytest_gemm.records.epilogue import Epilogue
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.header import spec_from_mapping

CU = {"entry": "k", "block": [16], "grid": [1], "dtypes": ["fp16"]}
BASE_ARGS = ["M", "N", "K", "alpha", "beta", "A", "B", "C"]


def _py(epilogue, **more):
    return spec_from_mapping(
        {"dtypes": ["fp16"], "epilogue": epilogue, **more}, path="k.py", kind="py", default_name="k"
    )


def _cu(args, epilogue=None, **more):
    mapping = {**CU, "args": BASE_ARGS + args, **more}
    if epilogue is not None:
        mapping["epilogue"] = epilogue
    return spec_from_mapping(mapping, path="k.cu", kind="cu")


def test_a_python_kernel_lists_its_epilogue_operands_in_order():
    spec = _py({"bias": "N", "activation": "gelu", "residual": True, "args": ["residual", "bias", "D"]})
    assert spec.epilogue == Epilogue(bias="N", activation="gelu", residual=True, d=True, args=("residual", "bias", "D"))
    assert spec.epilogue.describe() == "D = gelu(alpha A B + beta C + bias[N]) + residual"


def test_a_cu_kernel_names_them_in_args_and_takes_d_to_write_apart_from_c():
    spec = _cu(["D", "bias", "aux"], {"bias": "M", "activation": "silu", "aux": True})
    assert spec.epilogue == Epilogue(bias="M", activation="silu", aux=True, d=True, args=("D", "bias", "aux"))
    assert _cu(["D"]).epilogue == Epilogue(d=True, args=("D",))  # D alone: separate C and D, nothing fused
    assert _cu(["bias"], {"bias": "N"}).epilogue.d is False  # C written in place


@pytest.mark.parametrize(
    ("epilogue", "more", "words"),
    [
        ({"bias": "K", "args": ["bias"]}, {}, "bias: expected one of 'N', 'M', got 'K'"),
        ({"activation": "tanh"}, {}, "activation: expected one of 'relu', 'gelu', 'gelu_tanh', 'silu'"),
        ({"aux": True, "args": ["aux"]}, {}, "aux: the second output holds the pre-activation value"),
        ({}, {}, "declares nothing"),
        ({"bias": "N"}, {}, "the kernel takes bias: name it in the epilogue's args"),
        ({"activation": "relu", "args": ["bias"]}, {}, "args names bias, which the epilogue does not declare"),
        ({"activation": "relu", "scale": 2}, {}, "unknown key 'scale'"),
        ({"activation": ["relu"]}, {}, "activation: expected one of"),
        ({"bias": ["N"], "args": ["bias"]}, {}, "bias: expected one of"),
        ({"activation": "relu"}, {"batched": True}, "strided batches with one: not supported yet"),
        ({"activation": "relu"}, {"dtypes": ["fp8_e4m3"], "scales": {"A": "tensor", "B": "tensor"}}, "FP8 kernels"),
    ],
)
def test_a_wrong_epilogue_table_is_refused_naming_the_key(epilogue, more, words):
    with pytest.raises(KernelFileError) as raised:
        _py(epilogue, **more)
    assert "key 'epilogue'" in str(raised.value) and words in str(raised.value), str(raised.value)
    assert "k.py" in str(raised.value)


def test_a_cu_kernel_taking_an_epilogue_operand_must_declare_it():
    with pytest.raises(KernelFileError, match="bias is an epilogue's operand; declare the epilogue"):
        _cu(["bias"])
    with pytest.raises(KernelFileError, match="the kernel takes residual: name it in the header's args"):
        _cu(["D"], {"residual": True})
    with pytest.raises(KernelFileError, match=r"a \.cu kernel names the epilogue's operands in the header's args"):
        _cu(["bias"], {"bias": "N", "args": ["bias"]})
