"""The header schema: one row a key, from which the checks, the decorator's signature and the docs' table come."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys

import pytest

from pytest_gemm import gemm_kernel
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.header import DEFAULTS, key_table, python_header, python_keys, spec_from_mapping
from pytest_gemm.specs.key_readers import MISSING
from pytest_gemm.specs.kinds import KernelKind
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.specs.schema import KEYS
from pytest_gemm.specs.spec import KernelSpec

from support import ROOT

CU_HEADER = {
    "entry": "k",
    "args": ["M", "N", "K", "alpha", "beta", "A", "B", "C"],
    "dtypes": ["fp32"],
    "block": [16, 16],
    "grid": ["cdiv(N, 16)", "cdiv(M, 16)"],
}


def test_every_key_fills_the_kernel_spec_field_of_its_name():
    fields = {f.name for f in dataclasses.fields(KernelSpec)}
    assert {key.name for key in KEYS} <= fields
    # what is not a key is the kernel's identity, which the file gives, or read from its code (its library GEMM)
    assert fields - {key.name for key in KEYS} == {"path", "line", "kind", "attr", "source", "library_gemm"}


def test_the_schema_the_decorator_and_the_kernel_spec_agree_on_each_keys_default():
    """A key a header may leave out takes its KernelSpec field's default (the one definition) unless it is derived
    from the keys before it; the decorator's keywords default to None, not given, and never restate one."""
    params = inspect.signature(gemm_kernel).parameters
    for key in KEYS:
        if not key.derived and set(key.required) != set(KernelKind):
            assert key.name in DEFAULTS, key.name
        if key.python is not None:
            assert params[key.name].annotation == key.python, key.name
            required = KernelKind.PY in key.required
            assert params[key.name].default is (inspect.Parameter.empty if required else None), key.name
    assert "dtypes" not in DEFAULTS  # every header must give it


@pytest.mark.parametrize("kind", list(KernelKind))
def test_a_header_that_gives_no_optional_key_reads_as_the_spec_defaults(kind):
    """Each key's value, when absent, is the KernelSpec field's own default, derived keys' (storage, scales,
    tensor_maps) too where the keys they follow from are absent as well."""
    header = dict(CU_HEADER) if kind.compiled else {"dtypes": ["fp32"]}
    spec = spec_from_mapping(header, path=f"k.{kind}", kind=kind, default_name="k")
    plain = KernelSpec(path=f"k.{kind}", name="k", dtypes=("fp32",), kind=kind)
    given = set(header) | {"name", "alpha_beta", "batched"}  # alpha_beta and batched follow args for a .cu kernel
    for key in KEYS:
        if key.name not in given:
            assert getattr(spec, key.name) == getattr(plain, key.name), key.name


def test_the_decorators_keywords_are_the_schemas_python_keys():
    params = inspect.signature(gemm_kernel).parameters
    assert list(params) == ["dtypes", *(k.name for k in python_keys() if k.name != "dtypes")]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert params["dtypes"].default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="entry"):
        gemm_kernel(dtypes=["fp32"], entry="k")  # a .cu key: no keyword of the decorator


def test_the_decorator_states_the_header_its_keywords_give():
    @gemm_kernel(dtypes=("fp16",), requires="K % 8 == 0", params={"T": (16, 32)}, nondeterministic=None)
    def k(A, B, C, alpha, beta, T):
        pass

    assert k.__pytest_gemm__ == {"dtypes": ["fp16"], "requires": "K % 8 == 0", "params": {"T": [16, 32]}}
    assert python_header({"storage": None, "layout": "col"}) == {"layout": "col"}


def test_a_key_of_the_other_kind_of_file_is_refused_saying_why():
    with pytest.raises(KernelFileError, match=re.escape("a .cu kernel runs strided batches by taking batch")):
        spec_from_mapping({**CU_HEADER, "batched": True}, path="k.cu")
    ints = "a Python kernel takes Python ints; size_type is for .cu kernels"
    with pytest.raises(KernelFileError, match=re.escape(ints)):
        spec_from_mapping({"dtypes": ["fp32"], "size_type": "int"}, path="k.py", kind=KernelKind.PY, default_name="k")
    with pytest.raises(KernelFileError, match="unknown key; expected one of"):
        spec_from_mapping({**CU_HEADER, "speed": "fast"}, path="k.cu")
    with pytest.raises(
        KernelFileError, match=re.escape("key 'grid': a Python kernel takes no grid: it is a key of .cu")
    ):
        spec_from_mapping({"dtypes": ["fp32"], "grid": [1]}, path="k.py", kind=KernelKind.PY, default_name="k")


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ("entry='k'", "k.py:3: key 'entry': a Python kernel takes no entry: it is a key of .cu kernels"),
        ("entry=None", "k.py:3: key 'entry': a Python kernel takes no entry: it is a key of .cu kernels"),
        ("size_type='int'", "k.py:3: key 'size_type': a Python kernel takes Python ints; size_type is for .cu"),
        ("speed='fast'", "k.py:3: key 'speed': unknown key; expected one of accumulate, alpha_beta,"),
        ("dtypes=['fp32'], **{'layout': 'col'}", "k.py:3: gemm_kernel(...) takes each argument as a keyword, not **"),
        ("layout='row'", "k.py:3: key 'dtypes': missing; a Python kernel declares dtypes"),
    ],
)
def test_a_decorators_keywords_are_checked_as_a_headers_keys(keywords, message):
    """A kernel file's decorator gets the schema's words: a .cu key says why a Python kernel takes none."""
    if "dtypes" not in keywords and "missing" not in message:
        keywords = f"dtypes=['fp32'], {keywords}"
    source = (
        f"from pytest_gemm import gemm_kernel\n\n@gemm_kernel({keywords})\ndef k(A, B, C, alpha, beta):\n    pass\n"
    )
    with pytest.raises(KernelFileError) as info:
        parse_py_source("k.py", source)
    assert str(info.value).startswith(message)


def test_two_kernels_of_one_name_are_refused_alike_in_both_kinds_of_file():
    py = (
        "from pytest_gemm import gemm_kernel\n\n"
        + "@gemm_kernel(dtypes=['fp32'], name='k')\ndef f(A, B, C):\n    pass\n" * 2
    )
    cu = "".join(f"/* pytest-gemm\n{line}\nname = 'k'\n*/\n" for line in ["entry = 'k'"] * 2)
    cu = cu.replace("entry = 'k'", "\n".join(f"{key} = {value!r}" for key, value in CU_HEADER.items()))
    said = "key 'name': two kernels are named 'k'; give each a distinct name"
    with pytest.raises(KernelFileError, match=r"^k\.py:6: " + said):
        parse_py_source("k.py", py.replace("def f(", "def g(", 1))
    with pytest.raises(KernelFileError, match=r"^k\.cu:10: " + said):
        parse_cu_source("k.cu", cu)


def test_an_fp8_python_kernel_that_says_it_takes_alpha_and_beta_is_refused_as_the_cu_form_is():
    scales = {"A": "tensor", "B": "tensor"}
    with pytest.raises(KernelFileError, match="computes C = A B with its scales"):
        spec_from_mapping({"dtypes": ["fp8_e4m3"], "scales": scales, "alpha_beta": True}, path="k.py",
                          kind=KernelKind.PY, default_name="k")  # fmt: skip
    header = {**CU_HEADER, "dtypes": ["fp8_e4m3"], "scales": scales, "args": [*CU_HEADER["args"], "scale_a", "scale_b"]}
    with pytest.raises(KernelFileError, match="computes C = A B with its scales"):
        spec_from_mapping(header, path="k.cu")


def test_every_key_a_python_kernel_declares_has_a_keyword_and_every_required_key_is_read_from_missing():
    for key in KEYS:
        assert (KernelKind.PY in key.kinds) == (key.python is not None), key.name
        assert key.meaning, key.name
    assert repr(MISSING) == "MISSING"


def test_the_docs_key_table_is_the_schemas():
    text = (ROOT / "docs" / "kernel-files.md").read_text(encoding="utf-8")
    assert "\n".join(key_table()) in text
    check = subprocess.run([sys.executable, "scripts/docs_tables.py", "--check"], cwd=ROOT, capture_output=True)
    assert check.returncode == 0, check.stdout
