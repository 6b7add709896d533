"""2 and 4 on the CPU: per-operand storage orders, size types and a declared accumulation in headers,
case ids and integer arguments, and the cuBLAS call that reads exactly the bytes the kernel reads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.storage import ORDERS, Storage
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.footprint import harness_ints, int_args_problem
from pytest_gemm.specs.limits import INT_ARG_MAX
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.specs.signature import signature_problems
from pytest_gemm.worker.cublas import compute_type, gemm_call, scalar_type
from pytest_gemm.worker.operands import CaseInputs


def header(**keys: str) -> str:
    lines = {
        "entry": '"k"',
        "args": '["M", "N", "K", "A", "B", "C", "lda", "ldb", "ldc"]',
        "dtypes": '["fp16"]',
        "block": "[128]",
        "grid": '["cdiv(N, 64)", "cdiv(M, 64)"]',
    } | keys
    body = "\n".join(f"{key} = {value}" for key, value in lines.items())
    return f"/* pytest-gemm\n{body}\n*/\n"


def spec(**keys: str):
    (parsed,) = parse_cu_source("k.cu", header(**keys))
    return parsed


def error(**keys: str) -> str:
    with pytest.raises(KernelFileError) as info:
        spec(**keys)
    return str(info.value)


def test_storage_sets_each_operand_and_layout_the_rest():
    """Each operand's order is its stored shape; the ones not named follow `layout`."""
    assert spec().storage == Storage("MxK", "KxN", "MxN")
    assert spec(storage='{ B = "NxK" }').storage == Storage("MxK", "NxK", "MxN")
    assert spec(storage='{ C = "NxM" }').storage == Storage("MxK", "KxN", "NxM")
    assert spec(layout='"col"').storage == Storage("KxM", "NxK", "NxM")
    assert spec(layout='"col"', storage='{ A = "MxK" }').storage == Storage("MxK", "NxK", "NxM")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('{ B = "KxM" }', "B: expected 'KxN' (row-major) or 'NxK' (stored transposed"),
        ('{ B = "T" }', "B: expected 'KxN'"),
        ('{ D = "MxN" }', "'D' is not an operand; expected A, B or C"),
        ('{ B = ["KxN", "NxK"] }', "sweep the param B_NxK (params = { B_NxK = [0, 1] }: 0 for KxN, 1 for NxK)"),
        ('"NxK"', "expected a table of operand = stored shape"),
    ],
)
def test_a_storage_that_cannot_be_read_names_the_key(value, said):
    """Storage orders are stored shapes, never N/T letters; mistakes name the key and the choices."""
    message = error(storage=value)
    assert "key 'storage'" in message and said in message, message


def test_an_order_swept_as_a_param_shows_in_the_id_and_the_entry():
    """`B_NxK = [0, 1]` runs both orders; ids say which, templates and rules see the flag."""
    s = spec(
        entry='"k<B_NxK, C_NxM>"',
        params="{ TILE = [64], B_NxK = [0, 1] }",
        storage='{ C = "NxM" }',
        requires='["B_NxK == 0 or K % 8 == 0"]',
    )
    cases = expand(s, [Shape(64, 64, 60), Shape(64, 64, 64)])
    ids = sorted({c.name for c in cases})
    assert ids == [
        "k[TILE64-BKxN-fp16-64x64x60]",
        "k[TILE64-BKxN-fp16-64x64x64]",
        "k[TILE64-BNxK-fp16-64x64x60]",
        "k[TILE64-BNxK-fp16-64x64x64]",
    ]
    by_id = {c.name: c for c in cases}
    swept = by_id["k[TILE64-BNxK-fp16-64x64x60]"]
    assert swept.storage == Storage("MxK", "NxK", "NxM")
    assert swept.skip_reason == "requires B_NxK == 0 or K % 8 == 0 (M=64, N=64, K=60, TILE=64)"
    assert by_id["k[TILE64-BKxN-fp16-64x64x60]"].skip_reason is None
    assert s.entry_for(swept.variant) == "k<1, 1>"
    assert s.entry_for(by_id["k[TILE64-BKxN-fp16-64x64x64]"].variant) == "k<0, 1>"


def test_a_swept_order_takes_only_0_and_1_and_cannot_also_be_fixed():
    """The order params are flags."""
    assert "B_NxK sweeps the storage order of B: 0 for KxN, 1 for NxK; got [0, 2]" in error(params="{ B_NxK = [0, 2] }")
    assert "B: its order is swept by a param" in error(params="{ B_NxK = [0, 1] }", storage='{ B = "NxK" }')


def test_leading_dimensions_follow_each_operands_storage():
    """Each operand gets its own ld (its stored row plus the padding) and its own guard."""
    s = spec(storage='{ A = "KxM", B = "NxK", C = "NxM" }')
    ints = harness_ints(s, Shape(100, 200, 300))
    assert ints["lda"][0] == 100 + 16 and ints["ldb"][0] == 300 + 16 and ints["ldc"][0] == 100 + 16
    assert ints["ldb"][1] == "K + 16 elements of row padding"


def test_size_types_are_declared_and_bound_the_shapes():
    """Size and ld arguments may be int, unsigned, long long or size_t; a shape past the declared
    type is skipped with the reason; cuBLAS's int arguments still bound M, N and K."""
    big_k = Shape(64, 64, INT_ARG_MAX - 8)  # lda = K + 16 is past an int, not past the others
    assert int_args_problem(spec(), big_k).startswith("lda = 2147483655 (K + 16 elements of row padding) is past")
    assert "the kernel's int arguments (at most 2147483647)" in int_args_problem(spec(), big_k)
    for name in ("unsigned", "long long", "size_t"):
        assert int_args_problem(spec(size_type=f'"{name}"'), big_k) is None, name
    beyond = Shape(64, 64, 2**32)
    assert "past cuBLAS's int arguments" in int_args_problem(spec(size_type='"size_t"'), beyond)
    assert "past the kernel's unsigned arguments (at most 4294967295)" in int_args_problem(
        spec(size_type='"unsigned"'), beyond
    )
    said = error(size_type='"int64"')
    assert "expected the C type of M, N, K, lda, ldb, ldc and batch: one of 'int', 'unsigned'" in said


def test_accumulate_declares_fp16_for_fp16_only():
    """fp16 accumulation is declared; the default stays fp32 (fp64 for fp64)."""
    assert spec().accumulate == ""  # none declared
    assert spec(accumulate='"fp16"').accumulate == "fp16"
    assert spec(accumulate='"fp32"').accumulate == ""
    assert "fp16 inputs and an fp16 output only" in error(accumulate='"fp16"', dtypes='["fp16", "bf16"]')
    assert "and c_dtype 'fp32'" in error(accumulate='"fp16"', c_dtype='"fp32"')
    assert "the default ('fp32' for fp16), or 'fp16' (fp16 inputs and output only); got 'bf16'" in error(
        accumulate='"bf16"'
    )
    assert compute_type("fp16", "fp16") == 64 and scalar_type("fp16", "fp16") is np.float16  # CUBLAS_COMPUTE_16F
    assert compute_type("fp16", "") == 68 and compute_type("tf32", "") == 77 and compute_type("fp64", "") == 70


def test_python_kernels_declare_storage_and_accumulation():
    """The decorator takes the same keys (size_type is for .cu kernels only)."""
    text = (
        "from pytest_gemm import gemm_kernel\n\n"
        '@gemm_kernel(dtypes=["fp16"], storage={"B": "NxK"}, accumulate="fp16")\n'
        "def k(A, B, C, alpha, beta):\n    pass\n"
    )
    (s,) = parse_py_source("k.py", text)
    assert s.storage == Storage("MxK", "NxK", "MxN") and s.accumulate == "fp16"


def _cublas_gemm(call, buffers, lds, alpha, beta):
    """What cuBLAS's column-major gemmEx computes on flat buffers (NumPy, in float64)."""

    def operand(name, trans, rows, cols):  # op(X) is rows x cols, column-major
        stored_rows, stored_cols = (cols, rows) if trans else (rows, cols)  # X itself, column-major
        x = np.lib.stride_tricks.as_strided(
            buffers[name], (stored_rows, stored_cols), (8, 8 * lds[name]), writeable=False
        )
        return x.T if trans else x

    first = operand(call.first, call.trans_first, call.m, call.k)
    second = operand(call.second, call.trans_second, call.k, call.n)
    c = np.lib.stride_tricks.as_strided(buffers["C"], (call.m, call.n), (8, 8 * lds["C"]))
    c[...] = alpha * (first @ second) + beta * c


@pytest.mark.parametrize("orders", list(itertools.product(*ORDERS.values())))
def test_the_cublas_call_reads_the_bytes_the_kernel_reads(orders):
    """For every storage of A, B and C (padded leading dimensions too), the peer's transa/transb and
    operand swap compute alpha A B + beta C0 into C as the kernel stores it."""
    storage = Storage(*orders)
    shape = Shape(5, 7, 3)
    rng = np.random.default_rng(0)
    a, b, c0 = rng.random((5, 3)), rng.random((3, 7)), rng.random((5, 7))
    data = CaseInputs(a, b, c0, storage)
    buffers, lds = {}, {}
    for name, x in (("A", a), ("B", b), ("C", c0)):
        stored = data.stored(x, name)
        rows, cols = storage.stored_shape(name, shape)
        assert stored.shape == (rows, cols)
        padded = np.zeros((rows, cols + 2))
        padded[:, :cols] = stored
        buffers[name], lds[name] = padded.reshape(-1), cols + 2
    _cublas_gemm(gemm_call(storage, shape), buffers, lds, 0.5, 2.0)
    rows, cols = storage.stored_shape("C", shape)
    got = data.logical(buffers["C"].reshape(rows, cols + 2)[:, :cols], "C")
    np.testing.assert_allclose(got, 0.5 * a @ b + 2.0 * c0)


def test_a_header_whose_arguments_differ_from_the_compiled_kernel_is_refused():
    """The harness compares what it would pass with the compiled kernel's parameter sizes (from the
    driver), so int sizes declared for a size_t kernel, or a missing argument, fail the case naming the fix."""
    s = spec()  # size_type int: M, N, K, lda, ldb, ldc are 4 bytes; A, B, C pointers
    assert signature_problems(s, "fp16", [4, 4, 4, 8, 8, 8, 4, 4, 4]) == []
    wrong = signature_problems(s, "fp16", [8, 8, 8, 8, 8, 8, 8, 8, 8])
    assert wrong[0] == (
        "parameter 1 (M) takes 8 bytes in the compiled kernel, but the harness passes 4 (size_type 'int'); "
        "declare size_type = 'long long' or 'size_t'"
    )
    assert len(wrong) == 6
    missing = signature_problems(s, "fp16", [4, 4, 4, 8, 8, 8, 4, 4, 4, 4])
    assert missing == ["the compiled kernel takes 10 parameter(s), but args lists 9 (M, N, K, A, B, C, lda, ldb, ldc)"]
    scalars = spec(args='["M", "N", "K", "alpha", "A", "B", "beta", "C"]', dtypes='["fp64"]')
    assert (
        "parameter 4 (alpha) takes 4 bytes in the compiled kernel, but the harness passes 8 (a fp64 kernel's double"
        in (signature_problems(scalars, "fp64", [4, 4, 4, 4, 8, 8, 8, 8])[0])
    )


def test_an_order_the_header_fixes_is_defined_for_the_preprocessor_too():
    """`#if B_NxK` sees the order whether it is swept (a param) or fixed by `storage` (an undefined
    name would read as 0, the other order)."""
    from pytest_gemm.compiler.nvrtc import source_with_params

    fixed = spec(storage='{ B = "NxK" }')
    assert source_with_params(fixed, fixed.variants()[0]).startswith("#define B_NxK 1\n#line 1")
    swept = spec(params="{ B_NxK = [0, 1] }")
    assert [source_with_params(swept, v).splitlines()[0] for v in swept.variants()] == [
        "#define B_NxK 0",
        "#define B_NxK 1",
    ]
    plain = spec()
    assert source_with_params(plain, plain.variants()[0]) == plain.source  # row-major: nothing added


@pytest.mark.parametrize(
    ("dtypes", "c_dtype", "ok"),
    [("fp16", "fp32", True), ("bf16", "fp32", True), ("tf32", "fp32", True), ("fp16", "fp16", True),
     ("fp32", "fp16", False), ("bf16", "fp16", False), ("fp64", "fp32", False), ("fp32", "fp64", False)],
)  # fmt: skip
def test_an_output_dtype_cublas_cannot_write_is_refused(dtypes, c_dtype, ok):
    """The peer writes C in the kernel's dtype (cuBLAS's Ctype), so a c_dtype it cannot write for these
    inputs is the header's error, named at collection, not a crash in verification."""
    keys = {"dtypes": f'["{dtypes}"]', "c_dtype": f'"{c_dtype}"'}
    if ok:
        assert spec(**keys).output_dtype(dtypes) == c_dtype
    else:
        message = error(**keys)
        assert "key 'c_dtype'" in message and f"{dtypes} inputs with a {c_dtype} C: cuBLAS, the peer" in message


def test_parameter_sizes_say_nothing_when_the_driver_cannot(monkeypatch):
    """Only 'past the last parameter' ends the list; any other driver error gives no list (None), so the
    signature check is skipped rather than failing every case with '0 parameters'."""
    import ctypes

    from pytest_gemm.worker import tma

    def driver(codes):
        class Lib:
            def __init__(self, name):
                self.cuFuncGetParamInfo = self

            def __call__(self, fn, index, offset, size):
                code = codes[index.value] if index.value < len(codes) else 1
                if code == 0:
                    ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))[0] = 8
                return code

        return Lib

    monkeypatch.setattr(tma.ctypes, "CDLL", driver([0, 0, 0]))
    assert tma.parameter_sizes(1) == [8, 8, 8]
    monkeypatch.setattr(tma.ctypes, "CDLL", driver([801]))  # CUDA_ERROR_NOT_SUPPORTED
    assert tma.parameter_sizes(1) is None
    monkeypatch.setattr(tma.ctypes, "CDLL", driver([1]))  # invalid value at index 0: no list, not "0 parameters"
    assert tma.parameter_sizes(1) is None


def test_parameter_sizes_never_ask_past_the_last_where_the_driver_counts_them(monkeypatch):
    """Under compute-sanitizer every failed driver call is reported as an error of the kernel's: where the driver
    counts the parameters (cuFuncGetParamCount, CUDA 13), none is asked for past the last (found on an H100: memcheck
    failed every clean kernel with 'CUDA_ERROR_INVALID_VALUE ... on CUDA API call to cuFuncGetParamInfo')."""
    import ctypes

    from pytest_gemm.worker import tma

    asked = []

    class Function:  # a ctypes function: called, and given a restype
        def __init__(self, body):
            self.body, self.restype = body, None

        def __call__(self, *args):
            return self.body(*args)

    def count(fn, found):
        ctypes.cast(found, ctypes.POINTER(ctypes.c_size_t))[0] = 2
        return 0

    def info(fn, index, offset, size):
        asked.append(index.value)
        ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))[0] = 4 if index.value else 8
        return 0 if index.value < 2 else 1

    class Lib:
        def __init__(self, name):
            self.cuFuncGetParamCount, self.cuFuncGetParamInfo = Function(count), Function(info)

    monkeypatch.setattr(tma.ctypes, "CDLL", Lib)
    assert tma.parameter_sizes(1) == [8, 4] and asked == [0, 1]


@pytest.mark.parametrize("orders", list(itertools.product(*ORDERS.values())))
@pytest.mark.parametrize("prior", [False, True], ids=["beta0", "prior"])
def test_the_peer_gets_each_operand_as_stored_from_the_truths_bits(orders, prior):
    """The peer's operands come from the bits the truth already uploaded (no second upload): those in
    their first order as they are, transposed ones transposed on the device, C in a buffer of its own (zeros when
    beta = 0), each equal, bit for bit, to the operand as the kernel stores it."""
    from pytest_gemm.records.dtypes import get_dtype
    from pytest_gemm.worker.cublas import stored_operands

    storage, shape = Storage(*orders), Shape(5, 7, 3)
    rng = np.random.default_rng(1)
    a, b, c0 = (rng.random(s).astype(np.float32) for s in ((5, 3), (3, 7), (5, 7)))
    data = CaseInputs(a, b, c0 if prior else None, storage)
    bits = (a.view(np.uint32), b.view(np.uint32), c0.view(np.uint32) if prior else None)
    found = stored_operands(np, data, bits, shape, get_dtype("fp32"))
    for name, x in (("A", a), ("B", b)):
        assert found[name].flags.c_contiguous
        assert np.array_equal(found[name], data.stored(x, name).view(np.uint32))
        assert (found[name] is bits["AB".index(name)]) == (not storage.transposed(name))  # no copy where none is needed
    assert found["C"].shape == storage.stored_shape("C", shape) and found["C"].flags.c_contiguous
    assert found["C"] is not bits[2]  # cuBLAS writes it: never the truth's own
    expected = data.stored(c0, "C").view(np.uint32) if prior else np.zeros(storage.stored_shape("C", shape), np.uint32)
    assert np.array_equal(found["C"], expected)
