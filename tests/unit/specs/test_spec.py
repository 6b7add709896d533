from __future__ import annotations

import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, case_seed, check_launch, expand, launch_geometry, tensor_map_box
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.pyfile import parse_py_source

from support import with_keys

HEADER = """/* pytest-gemm
entry = "sgemm<BM, BN>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "lda", "ldb", "ldc"]
dtypes = ["fp32", "fp16"]
c_dtype = "fp32"
block = ["BM * BN / 16"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
shared_mem = "(BM + BN) * 8 * 4"
requires = ["K % 8 == 0", "M >= BM"]
params = { BM = [64, 128], BN = [32] }
layout = "col"
options = ["-use_fast_math"]
description = "a tiled kernel"
*/
template <int BM, int BN> __global__ void sgemm() {}
"""


def test_a_full_header_is_read_into_a_spec():
    (spec,) = parse_cu_source("k.cu", HEADER)
    assert spec.name == "sgemm"
    assert spec.args[-3:] == ("lda", "ldb", "ldc")
    assert spec.dtypes == ("fp32", "fp16")
    assert spec.c_dtype == "fp32" and spec.output_dtype("fp16") == "fp32"
    assert spec.layout == "col" and spec.options == ("-use_fast_math",)
    assert spec.line == 2
    assert [v.id for v in spec.variants()] == ["BM64-BN32", "BM128-BN32"]
    assert spec.entry_for(spec.variants()[1]) == "sgemm<128, 32>"


def test_expect_fast_gives_the_reason(naive_source):
    (plain,) = parse_cu_source("k.cu", naive_source)
    assert plain.expect_fast == ""
    text = naive_source.replace("/* pytest-gemm\n", '/* pytest-gemm\nexpect_fast = " reads only the nonzeros "\n')
    (spec,) = parse_cu_source("k.cu", text)
    assert spec.expect_fast == "reads only the nonzeros"
    assert spec.regression_threshold is None
    (spec,) = parse_cu_source(
        "k.cu", naive_source.replace("/* pytest-gemm\n", "/* pytest-gemm\nregression_threshold = 0.1\n")
    )
    assert spec.regression_threshold == 0.1


def test_expressions_use_params_and_shape():
    (spec,) = parse_cu_source("k.cu", HEADER)
    geom = launch_geometry(spec, spec.variants()[0], Shape(1000, 100, 64), sm_count=None)
    assert geom.grid == (4, 16) and geom.block == (128,) and geom.shared_mem == (64 + 32) * 32


PERSISTENT = HEADER.replace('"cdiv(N, BN)", "cdiv(M, BM)"', '"min(cdiv(N, BN) * cdiv(M, BM), SM_COUNT)"')


def test_a_persistent_grid_follows_the_gpus_sm_count():
    (spec,) = parse_cu_source("k.cu", PERSISTENT)
    variant = spec.variants()[0]  # BM 64, BN 32: 2048 tiles at 1024 x 1024
    assert launch_geometry(spec, variant, Shape(1024, 1024, 64), sm_count=132).grid == (132,)
    assert launch_geometry(spec, variant, Shape(1024, 1024, 64), sm_count=114).grid == (114,)
    assert launch_geometry(spec, variant, Shape(128, 64, 64), sm_count=132).grid == (4,)
    # on the CPU the count is unknown: the dimension is taken as 1 and left to the worker to check
    assert launch_geometry(spec, variant, Shape(1024, 1024, 64), sm_count=None).grid == (1,)


def test_a_grid_of_the_sm_count_alone_is_collected_and_sized_in_the_worker():
    (spec,) = parse_cu_source("k.cu", HEADER.replace('"cdiv(N, BN)", "cdiv(M, BM)"', '"SM_COUNT"'))
    check_launch(spec)  # nothing to check without the GPU
    variant = spec.variants()[0]
    assert launch_geometry(spec, variant, Shape(128, 64, 64), sm_count=None).grid == (1,)
    assert launch_geometry(spec, variant, Shape(128, 64, 64), sm_count=132).grid == (132,)


def test_a_grid_that_the_sm_count_makes_invalid_names_it():
    (spec,) = parse_cu_source("k.cu", HEADER.replace('"cdiv(N, BN)", "cdiv(M, BM)"', '"SM_COUNT - 200"'))
    with pytest.raises(KernelFileError, match=r"grid dimension x 'SM_COUNT - 200' is -68 for .*SM_COUNT=132"):
        launch_geometry(spec, spec.variants()[0], Shape(128, 64, 64), sm_count=132)


@pytest.mark.parametrize(
    "header",
    [
        HEADER.replace('block = ["BM * BN / 16"]', 'block = ["SM_COUNT"]'),
        HEADER.replace('requires = ["K % 8 == 0", "M >= BM"]', 'requires = ["SM_COUNT > 100"]'),
        HEADER.replace("BN = [32] }", "BN = [32], SM_COUNT = [1] }"),
    ],
    ids=["block", "requires", "param"],
)
def test_sm_count_is_a_name_of_grid_only(header):
    with pytest.raises(KernelFileError, match=r"SM_COUNT.*(known only in grid|cannot be a param name)"):
        parse_cu_source("k.cu", header)


def test_requires_gives_skip_reasons_never_failures():
    (spec,) = parse_cu_source("k.cu", HEADER)
    cases = expand(spec, [Shape(128, 128, 12), Shape(100, 100, 64)], ["fp16"])
    reasons = {(c.variant.id, c.shape.id): c.skip_reason for c in cases}
    assert reasons[("BM64-BN32", "128x128x12")] == "requires K % 8 == 0 (M=128, N=128, K=12, BM=64, BN=32)"
    assert reasons[("BM128-BN32", "100x100x64")] == "requires M >= BM (M=100, N=100, K=64, BM=128, BN=32)"
    assert reasons[("BM64-BN32", "100x100x64")] is None


def test_expansion_order_and_ids():
    (spec,) = parse_cu_source("k.cu", HEADER)
    ids = [c.id for c in expand(spec, [Shape(64, 64, 64)])]
    assert ids[:3] == ["BM64-BN32-fp32-64x64x64", "BM64-BN32-fp32-64x64x64-a0.7b1.3", "BM64-BN32-fp32-64x64x64-a-1.5b0"]
    assert len(ids) == 2 * 2 * len(AB_CASES)


def test_kernels_without_alpha_beta_get_only_the_plain_case(naive_source):
    text = naive_source.replace('"alpha", ', "").replace('"beta", ', "")
    (spec,) = parse_cu_source("k.cu", text)
    cases = expand(spec, [Shape(8, 8, 8)])
    assert [(c.ab.alpha, c.ab.beta) for c in cases] == [(1.0, 0.0)]


def test_dtype_filter():
    (spec,) = parse_cu_source("k.cu", HEADER)
    assert {c.dtype for c in expand(spec, [Shape(64, 64, 64)], ["fp16", "bf16"])} == {"fp16"}


def test_seeds_are_stable_and_distinct():
    assert case_seed(0, "a") == case_seed(0, "a")
    assert len({case_seed(0, "a"), case_seed(0, "b"), case_seed(1, "a")}) == 3


def test_a_file_without_header_declares_nothing():
    assert parse_cu_source("k.cu", "/* just a comment */ __global__ void f() {}") == []


def test_several_kernels_in_one_file(naive_source):
    second = naive_source.replace('entry = "sgemm_naive"', 'entry = "sgemm_naive"\nname = "second"')
    specs = parse_cu_source("k.cu", naive_source + second)
    assert [s.name for s in specs] == ["sgemm_naive", "second"]
    with pytest.raises(KernelFileError, match="two kernels are named 'sgemm_naive'"):
        parse_cu_source("k.cu", naive_source + naive_source)


BAD = [
    ("entry = 'x'\nentry = 'y'", None, "not valid TOML"),
    ("block = [32, 32", None, "not valid TOML"),
    ("speed = 'fast'", "speed", "unknown key"),
    ("DROP:entry", "entry", "missing"),
    ("DROP:grid", "grid", "missing"),
    ("args = ['M', 'N', 'K', 'A', 'B', 'E']", "args", "unknown argument 'E'"),
    ("args = ['M', 'A', 'B']", "args", "must take C"),
    ("args = ['M', 'beta', 'A', 'B', 'C']", "args", "a kernel that takes beta takes alpha"),
    ("dtypes = ['fp8']", "dtypes", "unknown dtype 'fp8'"),
    ("dtypes = []", "dtypes", "non-empty"),
    ("grid = ['cdiv(N, 32)', 'os.system(1)']", "grid", "not allowed"),
    ("grid = ['cdiv(N, TILE)']", "grid", "unknown name 'TILE'"),
    ("block = [1, 2, 3, 4]", "block", "1 to 3"),
    ("layout = 'diagonal'", "layout", "expected one of"),
    ("options = ['-arch=sm_70']", "options", "chooses the architecture"),
    ("params = { M = [1] }", "params", "cannot be a param name"),
    ("params = { T = [1.5] }", "params", "list of integers"),
    ("requires = [3]", "requires", "boolean expression"),
    ("c_dtype = 'int4'", "c_dtype", "unknown output dtype"),
    ("entry = 'sgemm<X>'", "entry", "neither a param nor a literal"),
    ("entry = '1bad'", "entry", "expected a kernel name"),
    ("expect_fast = ''", "expect_fast", "non-empty string saying why"),
    ("expect_fast = true", "expect_fast", "non-empty string saying why"),
    ("regression_threshold = 0", "regression_threshold", "expected a fraction such as 0.1"),
    ("regression_threshold = '5%'", "regression_threshold", "expected a fraction such as 0.1"),
    ("arch = 'sm90'", "arch", "not an architecture such as sm_90"),
    ("arch = 90", "arch", "not an architecture such as sm_90"),
    ("tensor_maps = { A = { box = [64, 64] } }", "tensor_maps", "does not take A_map; add it to args"),
    ("tensor_maps = { D = { box = [1, 1] } }", "tensor_maps", "'D' is not an operand"),
    ("tensor_maps = { A = { box = [64] } }", "tensor_maps", "box is [inner, outer]"),
    ("tensor_maps = { A = { box = [64, 'TILE'] } }", "tensor_maps", "unknown name 'TILE'"),
    ("tensor_maps = { A = { box = [64, 64], swizzle = 16 } }", "tensor_maps", "swizzle is one of 0, 32, 64, 128"),
    ("tensor_maps = { A = { size = [64, 64] } }", "tensor_maps", "expected { box = [inner, outer]"),
    ("args = ['M', 'N', 'K', 'A_map', 'B', 'C']", "tensor_maps", "A_map is in args but tensor_maps has no entry"),
    ("args = ['M', 'N', 'K', 'B', 'C']", "args", "must take A (or its tensor map A_map, or grouped A_ptrs)"),
]


@pytest.mark.parametrize(("change", "key", "message"), BAD)
def test_malformed_headers_name_the_file_key_and_expectation(naive_source, change, key, message):
    if change.startswith("DROP:"):
        field = change[5:]
        text = "\n".join(line for line in naive_source.splitlines() if not line.startswith(field + " "))
    else:
        lines = naive_source.splitlines()
        field = change.split("=")[0].strip()
        lines = [line for line in lines if not line.startswith(field + " =")] if key else lines
        lines.insert(1, change)
        text = "\n".join(lines)
    with pytest.raises(KernelFileError) as info:
        parse_cu_source("kernels/bad.cu", text)
    err = info.value
    assert str(err).startswith("kernels/bad.cu:")
    assert message in str(err)
    assert err.key == key


TMA_HEADER = """/* pytest-gemm
entry = "gemm"
args = ["M", "N", "K", "A_map", "B_map", "C"]
dtypes = ["bf16"]
arch = "sm_90a"
params = { BM = [128, 64] }
block = [384]
grid = ["cdiv(N, 256)", "cdiv(M, BM)"]
tensor_maps = { A = { box = [64, "BM"], swizzle = 128 }, B = { box = [64, 64] } }
*/
"""


def test_arch_and_tensor_maps_are_read_into_the_spec():
    (spec,) = parse_cu_source("k.cu", TMA_HEADER)
    assert spec.arch == "sm_90a"
    assert spec.args == ("M", "N", "K", "A_map", "B_map", "C")
    a, b = spec.tensor_map("A"), spec.tensor_map("B")
    assert (a.swizzle, b.swizzle) == (128, 0)
    boxes = [tensor_map_box(spec, a, v) for v in spec.variants()]
    assert boxes == [(64, 128), (64, 64)]
    assert tensor_map_box(spec, b, spec.variants()[0]) == (64, 64)


def test_a_tensor_map_box_that_is_not_an_integer_names_the_key():
    (spec,) = parse_cu_source("k.cu", TMA_HEADER.replace('box = [64, "BM"]', 'box = [64, "BM / 3"]'))
    with pytest.raises(KernelFileError, match=r"A: box 'BM / 3' gives 42\.6.* expected an integer") as info:
        tensor_map_box(spec, spec.tensor_map("A"), spec.variants()[0])
    assert info.value.key == "tensor_maps"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("always_reads_c = 1", "key 'always_reads_c': expected true or false, got 1"),
        ('batch_invariant = "yes"', "key 'batch_invariant': expected true or false, got 'yes'"),
        ('nondeterministic = ""', "key 'nondeterministic': expected a non-empty string saying why"),
        ("nondeterministic = true", "key 'nondeterministic': expected a non-empty string saying why"),
    ],
)
def test_declarations_are_checked(line, message):
    with pytest.raises(KernelFileError, match=message):
        parse_cu_source("k.cu", HEADER.replace('description = "a tiled kernel"', line))


def test_declarations_are_read_from_cu_headers_and_python_decorators():
    header = HEADER.replace(
        'description = "a tiled kernel"',
        'always_reads_c = true\nnondeterministic = "split-K with atomicAdd"\nbatch_invariant = true',
    )
    (cu,) = parse_cu_source("k.cu", header)
    source = (
        "from pytest_gemm import gemm_kernel\n\n"
        '@gemm_kernel(dtypes=["fp32"], always_reads_c=True, nondeterministic="split-K with atomicAdd")\n'
        "def k(A, B, C, alpha, beta):\n    pass\n"
    )
    (py,) = parse_py_source("k.py", source)
    for spec in (cu, py):
        assert (spec.always_reads_c, spec.nondeterministic) == (True, "split-K with atomicAdd")
    assert (cu.batch_invariant, py.batch_invariant) == (True, False)
    (plain,) = parse_cu_source("k.cu", HEADER)
    assert (plain.always_reads_c, plain.nondeterministic, plain.batch_invariant) == (False, "", False)


def test_an_unknown_architecture_in_a_header_names_the_file(naive_source):
    with pytest.raises(KernelFileError, match=r"^k\.cu:2: key 'arch': 'sm_999' is not a known GPU architecture"):
        parse_cu_source("k.cu", with_keys(naive_source, arch='"sm_999"'))
