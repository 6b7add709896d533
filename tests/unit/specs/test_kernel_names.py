"""What names a kernel and what it declares, checked where the header is read: the entry as NVRTC names it (namespaces
and templates, ASCII only), a kernel's name and its params' names (ASCII identifiers), and the accumulation each dtype
takes (docs/kernel-files.md#header-keys). Each refusal names the file, the key and the rule."""

from __future__ import annotations

import pytest

from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.pyfile import parse_py_source

from support import NAIVE_BODY, NAIVE_HEADER, NAIVE_LOOP, requires_nvrtc, with_keys

NAMESPACED = (
    """/* pytest-gemm
entry = "M6::inner::matmul<BM, 8>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { BM = [16, 32] }
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/
namespace M6 {
namespace inner {
template <int TILE_M, int TILE_K>  // not BM: each param is #defined above the source
__global__ void matmul(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
"""
    + NAIVE_LOOP
    + """}
}  // namespace inner
}  // namespace M6
"""
)


def _entry(entry: str) -> str:
    return with_keys(NAIVE_HEADER + NAIVE_BODY, entry=f'"{entry}"', params="{ BM = [64] }")


def _refusal(source: str, path: str = "k.cu") -> str:
    with pytest.raises(KernelFileError) as caught:
        parse_py_source(path, source) if path.endswith(".py") else parse_cu_source(path, source)
    return str(caught.value)


# -- the entry as NVRTC names it ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expression", "name"),
    [
        ("M6::matmulKernel6<128, 256>", "M6::matmulKernel6<128, 256>", "matmulKernel6"),
        ("ns::inner::k<BM>", "ns::inner::k<64>", "k"),
        ("::ns::k<BM, 8>", "::ns::k<64, 8>", "k"),
        ("ns :: k", "ns :: k", "k"),
        ("sgemm", "sgemm", "sgemm"),
    ],
)
def test_a_namespaced_entry_is_the_name_expression_nvrtc_gets(entry, expression, name):
    """Namespace-qualified kernels (``M6::matmulKernel6<128, 256>``) were refused as "expected a kernel name";
    the whole chain is the name expression NVRTC gets, with the params' values, and the test name is the function's."""
    (spec,) = parse_cu_source("k.cu", _entry(entry))
    assert spec.entry_for(spec.variants()[0]) == expression
    assert spec.function_name == name and spec.name == name


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("sgemm_naïve", "'sgemm_naïve' is not an ASCII name ('ï'): NVRTC reads a kernel's C++ name as ASCII"),
        ("ns::Outer<4>::k", "only namespaces qualify a kernel (a __global__ function is no class member)"),
        ("a::::b", 'expected a kernel name such as "sgemm", "sgemm<128, 8>" or "ns::sgemm<BM, BN>"'),
        ("ns::", "expected a kernel name such as"),
        ("k()", "expected a kernel name such as"),
        ("&k", "expected a kernel name such as"),
    ],
)
def test_an_entry_nvrtc_cannot_name_is_refused_with_the_reason(entry, said):
    """``entry = "sgemm_naïve"`` passed the header check and failed in NVRTC ("unrecognized token"); it is refused
    at the header, saying why, as is what NVRTC cannot name (a template in the middle of the chain)."""
    assert _refusal(_entry(entry)).startswith("k.cu:2: key 'entry': ")
    assert said in _refusal(_entry(entry))


@requires_nvrtc
def test_the_namespaced_entry_compiles_through_the_compile_process_on_the_cpu():
    """Header, spec, the name expression given to NVRTC in the compile process (compiler/child.py): NVRTC lowers the
    namespaced template and ptxas reports its resources under the lowered name."""
    from pytest_gemm.compiler.limited import LimitedCompiler
    from pytest_gemm.compiler.nvrtc import compile_kernel

    (spec,) = parse_cu_source("ns.cu", NAMESPACED)
    compiler = LimitedCompiler(120.0)
    try:
        for variant, bm in zip(spec.variants(), (16, 32)):
            result = compile_kernel(spec, variant, "sm_90", None, compiler)
            assert result.lowered_name.startswith(f"_ZN2M65inner6matmulILi{bm}ELi8EE")  # M6::inner::matmul<bm, 8>
            assert result.resources is not None and result.resources.registers > 0 and result.cubin
    finally:
        compiler.close()


# -- names and params: ASCII identifiers --------------------------------------------------------------------------

_PY = "from pytest_gemm import gemm_kernel\n\n\n@gemm_kernel({args})\ndef {name}(A, B, C, alpha, beta):\n    pass\n"


def test_a_python_kernel_whose_function_name_is_not_ascii_is_told_to_give_a_name():
    """``def ядро(...)`` (a valid Python identifier) was refused as "expected an identifier ... got 'ядро'", not
    saying ASCII; the message says a kernel's name is an ASCII identifier, and how to give one."""
    said = _refusal(_PY.format(args='dtypes=["fp32"]', name="ядро"), "пи_ядро.py")
    assert said == (
        "пи_ядро.py:4: key 'name': the function's name 'ядро' cannot name the kernel: a kernel's name is an ASCII "
        "identifier such as 'sgemm_tiled', as C++ names are for NVRTC; give it one: name='...'"
    )
    (spec,) = parse_py_source("k.py", _PY.format(args='dtypes=["fp32"], name="yadro"', name="ядро"))
    assert spec.name == "yadro" and spec.attr == "ядро"  # the worker still finds the function by its own name
    given = _refusal(_PY.format(args='dtypes=["fp32"], name="ядро"', name="k"), "k.py")
    assert "key 'name': a kernel's name is an ASCII identifier such as 'sgemm_tiled'" in given and "'ядро'" in given
    assert "ASCII identifier" in _refusal(with_keys(NAIVE_HEADER + NAIVE_BODY, name='"naïve"'))


@pytest.mark.parametrize("param", ["ТАЙЛ", "Tї", "_T", "M"])
def test_a_param_name_must_be_an_ascii_identifier_and_the_message_says_so(param):
    said = _refusal(_PY.format(args=f'dtypes=["fp32"], params={{"{param}": [1]}}', name="k"), "k.py")
    assert said.startswith(f"k.py:4: key 'params': {param!r} cannot be a param name: a param is #defined in a .cu ")
    assert "so it is an ASCII identifier (C++ names are ASCII for NVRTC) not starting with _, other than M, N" in said


# -- accumulate: what each dtype accumulates in ---------------------------------------------------------------------


def _accumulate(dtypes: list[str], value: str) -> str:
    """The spec's ``accumulate``, or the refusal's text."""
    try:
        return spec_from_mapping(
            {"dtypes": dtypes, "accumulate": value}, path="k.py", kind="py", default_name="k"
        ).accumulate
    except KernelFileError as exc:
        return str(exc)


def test_each_dtypes_own_accumulation_written_out_is_the_default():
    """``accumulate = "fp64"`` (the documented fp64 default) was refused; each dtype's own is taken as not declaring
    one: fp32, fp64 for fp64, int32 for int8; fp16 stays the one declared accumulation."""
    assert _accumulate(["fp64"], "fp64") == ""
    assert _accumulate(["fp32", "bf16", "fp16"], "fp32") == ""
    assert _accumulate(["int8"], "int32") == ""
    assert _accumulate(["fp16"], "fp16") == "fp16"


@pytest.mark.parametrize(
    ("dtypes", "value", "said"),
    [
        (
            ["fp64"],
            "fp32",
            "expected what the kernel's dtypes accumulate in, the default ('fp64' for fp64); got 'fp32'",
        ),
        (["fp32"], "fp64", "the default ('fp32' for fp32); got 'fp64'"),
        (["int8"], "fp32", "the default ('int32' for int8); got 'fp32'"),
        (["fp16"], "bf16", "the default ('fp32' for fp16), or 'fp16' (fp16 inputs and output only); got 'bf16'"),
        (
            ["fp32", "fp64"],
            "fp64",
            "'fp64' is not what each of dtypes ['fp32', 'fp64'] accumulates in (fp32 in fp32); leave accumulate out",
        ),
        (["fp16", "bf16"], "fp16", "fp16 accumulation is declared for fp16 inputs and an fp16 output only"),
    ],
)
def test_an_accumulation_a_dtype_does_not_take_says_what_it_takes(dtypes, value, said):
    """An fp64 kernel's ``accumulate = "fp32"`` was refused as "expected 'fp16' (or 'fp32', ...), got 'fp32'"; each
    refusal says what the kernel's dtypes accumulate in."""
    assert _accumulate(dtypes, value).startswith("k.py:1: key 'accumulate': ")
    assert said in _accumulate(dtypes, value)


def test_an_fp8_python_kernel_with_alpha_beta_is_refused_as_the_cu_form_is():
    source = (
        "from pytest_gemm import gemm_kernel\n\n\n"
        '@gemm_kernel(dtypes=["fp8_e4m3"], scales={"A": "1x128", "B": "128x128"}, alpha_beta=True)\n'
        "def f8(A, B, C, scale_a, scale_b, alpha, beta):\n    pass\n"
    )
    assert _refusal(source, "f8.py") == (
        "f8.py:4: key 'alpha_beta': a fp8_e4m3 kernel computes C = A B with its scales (no alpha and beta), as "
        "cuBLASLt's FP8 and INT8 GEMMs do here; leave alpha and beta out"
    )


def test_a_bare_toml_key_that_is_not_ascii_is_said_to_be_the_cause():
    """`params = { ТАЙЛ = [16] }` fails in TOML itself ("Invalid initial character for a key part"): the message adds
    that bare keys and the header's names are ASCII, at the line of the file."""
    said = _refusal(with_keys(NAIVE_HEADER + NAIVE_BODY, params="{ ТАЙЛ = [16] }"))
    assert "the pytest-gemm header is not valid TOML: " in said
    assert "TOML's bare keys are ASCII letters, digits, _ and -, and the names a header gives are ASCII" in said
    quoted = _refusal(with_keys(NAIVE_HEADER + NAIVE_BODY, params='{ "ТАЙЛ" = [16] }'))
    assert "'ТАЙЛ' cannot be a param name" in quoted and "TOML" not in quoted
