"""Arguments as public kernels take them (docs/kernel-files.md#buffers, #tma-tensor-maps): a tensor map by pointer,
3-D maps with the inner dimension split (and up to 5 dimensions), buffers with declared contents, and headers included
from beside the kernel file. Read and laid out on the CPU; on the GPU, pranjalssh/fast.cu's kernels run through them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, Case, tensor_map_box
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.files import read_specs
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.signature import declared_sizes
from pytest_gemm.specs.spec import Variant
from pytest_gemm.specs.tensor_maps import TensorMapLayout, layout_problems
from pytest_gemm.worker.buffers_fill import buffer_contents
from pytest_gemm.worker.kernels import KernelFiles

BASE = {"entry": "k", "block": [128], "grid": [1], "dtypes": ["bf16"], "arch": "sm_90a"}
ARGS = ["M", "N", "K", "C", "A_map", "B_map"]


def _cu(**keys):
    return spec_from_mapping({**BASE, "args": ARGS, **keys}, path="k.cu", kind="cu")


def test_a_map_by_pointer_is_passed_as_eight_bytes_and_a_split_map_is_3d():
    maps = {
        "A": {"box": [64, 128], "swizzle": 128, "pointer": True},
        "B": {"box": [64, 256, 1], "split": 64, "rank": 5, "swizzle": 128},
    }
    spec = _cu(tensor_maps=maps)
    a, b = spec.tensor_map("A"), spec.tensor_map("B")
    assert (a.pointer, a.dims, b.split, b.dims) == (True, 2, 64, 5)
    sizes = {name: size for name, size, _ in declared_sizes(spec, "bf16")}
    assert sizes["A_map"] == 8 and sizes["B_map"] == 128
    assert tensor_map_box(spec, b, Variant()) == (64, 256, 1)


def test_a_split_maps_dimensions_strides_and_box():
    layout = TensorMapLayout("A", 4096, 1024, 1024, 2, 64, 128, 128, split=64, box_pieces=1, rank=5)
    dims, strides, box = layout.dims_and_strides()
    assert dims == [64, 4096, 16, 1, 1]  # fast.cu's {64, rows, cols / 64, 1, 1}
    assert strides[:2] == [2048, 128]  # a row's pitch, then 64 elements
    assert box == [64, 128, 1, 1, 1]
    plain = TensorMapLayout("A", 4096, 1024, 1024, 2, 64, 128, 128)
    assert plain.dims_and_strides() == ([1024, 4096], [2048], [64, 128])


def test_a_split_that_does_not_divide_the_rows_is_refused_saying_what_to_require():
    problems = layout_problems(TensorMapLayout("A", 64, 1000, 1000, 2, 64, 64, 128, split=64, box_pieces=1, rank=3))
    assert any("whole number of pieces" in p and "K % 64 == 0" in p for p in problems), problems


@pytest.mark.parametrize(
    ("maps", "words"),
    [
        ({"A": {"box": [64, 64, 1]}, "B": {"box": [64, 64]}}, "box is [inner, outer] in elements"),
        ({"A": {"box": [64, 64], "split": 64}, "B": {"box": [64, 64]}}, "box is [inner, outer, pieces]"),
        ({"A": {"box": [64, 64], "rank": 6}, "B": {"box": [64, 64]}}, "rank is 2 to 5 dimensions"),
        ({"A": {"box": [64, 64], "pointer": 1}, "B": {"box": [64, 64]}}, "pointer is true or false"),
        ({"A": {"box": [64, 64], "stride": 2}, "B": {"box": [64, 64]}}, "(with split, rank, pointer)"),
    ],
)
def test_a_wrong_tensor_map_entry_is_refused(maps, words):
    with pytest.raises(KernelFileError, match="key 'tensor_maps'") as raised:
        _cu(tensor_maps=maps)
    assert words in str(raised.value)


def test_buffers_are_declared_arguments_with_a_type_a_size_and_contents():
    maps = {"A": {"box": [64, 64]}, "B": {"box": [64, 64]}}
    buffers = {"dspace": {"type": "int32", "size": "SM_COUNT * 128", "fill": "schedule.py:tiles"}, "DB": {"size": 1}}
    spec = _cu(args=[*ARGS, "dspace", "DB"], tensor_maps=maps, buffers=buffers)
    assert [(b.name, b.type, b.fill) for b in spec.buffers] == [
        ("dspace", "int32", "schedule.py:tiles"),
        ("DB", "int32", "zeros"),
    ]
    assert {name: size for name, size, _ in declared_sizes(spec, "bf16")}["dspace"] == 8  # a pointer


@pytest.mark.parametrize(
    ("args", "buffers", "words"),
    [
        (["space"], {}, "unknown argument 'space'"),
        ([], {"space": {"size": 4}}, "space is declared but the kernel does not take it"),
        (["space"], {"space": {"size": 4, "type": "half"}}, "type is one of int32"),
        (["space"], {"space": {"size": 4, "fill": "ones"}}, 'fill is "zeros" or "FILE.py:FUNCTION"'),
        (["M"], {"M": {"size": 4}}, "a buffer's name is an argument's"),
        (["space"], {"space": {"size": "Q * 2"}}, "key 'buffers'"),
        (["tile_map"], {"tile_map": {"size": 4}}, "not ending in _map"),
        (["space"], {"space": {"size": 4, "type": ["int32"]}}, "type is one of int32"),
        (["C"], {}, "argument 'C' is listed twice"),
    ],
)
def test_a_wrong_buffer_is_refused(args, buffers, words):
    maps = {"A": {"box": [64, 64]}, "B": {"box": [64, 64]}}
    with pytest.raises(KernelFileError) as raised:
        _cu(args=[*ARGS, *args], tensor_maps=maps, buffers=buffers)
    assert words in str(raised.value), str(raised.value)


def _case(tmp_path: Path, fill: str) -> tuple[Case, str]:
    maps = {"A": {"box": [64, 64]}, "B": {"box": [64, 64]}}
    spec = _cu(args=[*ARGS, "space"], tensor_maps=maps, buffers={"space": {"size": "M // 64 + 1", "fill": fill}})
    return Case(spec, Variant(), "bf16", Shape(128, 64, 64), AB_CASES[0]), str(tmp_path / "k.cu")


def test_a_buffers_contents_come_from_its_function_called_with_the_shape(tmp_path):
    (tmp_path / "schedule.py").write_text(
        "def tiles(M, N, K, SM_COUNT):\n    return [M, N, K, SM_COUNT][: M // 64 + 1]\n\n"
        "def short(M, N, K, SM_COUNT):\n    return [1]\n\n"
        "def broken(M, N, K, SM_COUNT):\n    raise ValueError('no schedule for this shape')\n"
    )
    runner = SimpleNamespace(sm_count=132, files=KernelFiles())
    case, path = _case(tmp_path, "schedule.py:tiles")
    assert buffer_contents(runner, case, case.spec.buffers[0], path).tolist() == [128, 64, 64]
    case, path = _case(tmp_path, "zeros")
    zeros = buffer_contents(runner, case, case.spec.buffers[0], path)
    assert zeros.dtype == np.int32 and zeros.tolist() == [0, 0, 0]
    for fill, words in (
        ("schedule.py:short", "short() gave 1 values for 128x64x64; buffer space is 3 elements"),
        ("schedule.py:broken", "broken() for 128x64x64 (buffer space) raised ValueError: no schedule for this shape"),
        ("schedule.py:missing", "has no function 'missing'"),
        ("absent.py:tiles", "does not exist"),
    ):
        case, path = _case(tmp_path, fill)
        with pytest.raises(KernelFileError) as raised:
            buffer_contents(runner, case, case.spec.buffers[0], path)
        assert words in str(raised.value), str(raised.value)


HEADER = """
/* pytest-gemm
entry = "k"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [1]
grid = [1]
*/
"""


def test_headers_included_from_beside_the_kernel_file_are_written_into_its_source(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "common.cuh").write_text('#pragma once\n#include "inner.h"\n__device__ int twice(int x);\n')
    (tmp_path / "lib" / "inner.h").write_text("#define INNER 7\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text(
        '#include "lib/common.cuh"\n#include "lib/common.cuh"\n#include <cuda_fp16.h>\n#include "absent.h"\n'
        + HEADER
        + "__global__ void k() {}\n"
    )
    (spec,), _ = read_specs(kernel, "kernels/k.cu")
    source = spec.source
    assert source.count("__device__ int twice(int x);") == 1  # each file once
    assert "#define INNER 7" in source and "#pragma once" not in source
    assert '#line 1 "kernels/lib/common.cuh"' in source and '#line 1 "kernels/lib/inner.h"' in source
    assert '#line 2 "kernels/k.cu"' in source  # back in the kernel file, at the directive's next line
    assert "#include <cuda_fp16.h>" in source and '#include "absent.h"' in source  # NVRTC's to find, or to name
    (tmp_path / "lib" / "inner.h").write_text("#define INNER 8\n")
    (again,), _ = read_specs(kernel, "kernels/k.cu")
    assert again.source != source  # a changed header changes the source, and so the compile cache's key


def test_a_kernel_including_more_than_the_limit_is_refused_naming_it(tmp_path):
    from pytest_gemm.specs.includes import MAX_INCLUDED

    for i in range(MAX_INCLUDED + 1):
        (tmp_path / f"h{i}.h").write_text(f'#include "h{i + 1}.h"\n' if i < MAX_INCLUDED else "")
    kernel = tmp_path / "k.cu"
    kernel.write_text('#include "h0.h"\n' + HEADER)
    with pytest.raises(KernelFileError, match=f"includes more than {MAX_INCLUDED} files from beside it"):
        read_specs(kernel, "k.cu")


def test_a_changed_header_is_a_changed_kernel_file(tmp_path):
    (tmp_path / "tile.cuh").write_text("#define TILE 16\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text('#include "tile.cuh"\n' + HEADER)
    _, before = read_specs(kernel, "k.cu")
    (tmp_path / "tile.cuh").write_text("#define TILE 32\n")
    _, after = read_specs(kernel, "k.cu")
    assert before != after  # the gate says "kernel source changed since the baseline"
    plain = tmp_path / "plain.cu"
    plain.write_text(HEADER)
    import hashlib

    assert read_specs(plain, "plain.cu")[1] == hashlib.sha256(plain.read_bytes()).hexdigest()  # as before


def test_a_param_named_in_args_is_a_constant_int_argument():
    spec = spec_from_mapping(
        {**BASE, "params": {"TRANS_A": [0, 1]}, "args": ["M", "N", "K", "A", "B", "C", "TRANS_A"]},
        path="k.cu",
        kind="cu",
    )
    assert spec.args[-1] == "TRANS_A" and len(spec.variants()) == 2
    assert declared_sizes(spec, "bf16")[-1] == ("TRANS_A", 4, "a param, passed as an int")
    with pytest.raises(KernelFileError, match=r"unknown argument 'TRANS_B'; expected names from .*a param"):
        spec_from_mapping({**BASE, "args": ["M", "N", "K", "A", "B", "C", "TRANS_B"]}, path="k.cu", kind="cu")


def test_an_alpha_without_a_beta_runs_the_pairs_with_beta_zero():
    from pytest_gemm.specs.cases import scalar_pairs

    spec = spec_from_mapping({**BASE, "args": ["M", "N", "K", "alpha", "A", "B", "C"]}, path="k.cu", kind="cu")
    assert [(ab.alpha, ab.beta) for ab in scalar_pairs(spec)] == [(1.0, 0.0), (-1.5, 0.0)]
    with pytest.raises(KernelFileError, match="a kernel that takes beta takes alpha"):
        spec_from_mapping({**BASE, "args": ["M", "N", "K", "beta", "A", "B", "C"]}, path="k.cu", kind="cu")


def test_half_scalars_are_two_bytes_each_and_only_for_an_fp16_output():
    args = ["M", "N", "K", "alpha", "beta", "A", "B", "C"]
    base = {**BASE, "dtypes": ["fp16"], "args": args, "scalars": "fp16"}
    spec = spec_from_mapping(base, path="k.cu", kind="cu")
    assert [size for name, size, _ in declared_sizes(spec, "fp16") if name in ("alpha", "beta")] == [2, 2]
    for bad in ({"c_dtype": "fp32"}, {"dtypes": ["bf16"]}, {"scalars": "bf16"}):
        with pytest.raises(KernelFileError, match="key 'scalars'"):
            spec_from_mapping({**base, **bad}, path="k.cu", kind="cu")
