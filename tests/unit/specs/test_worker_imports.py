"""Which cases' workers may import torch (``Case.imports``, sent as ``Request.imports``): the pool has a standby with it
imported ready for them (isolation.standby). A kernel given torch tensors, and the cases whose peer is reached
through torch (FP8, grouped, fused epilogues), name it; cuBLAS's own cases, INT8's included, name nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import expand, to_request
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.pyfile import parse_py_source

ROOT = Path(__file__).resolve().parents[3]


def _imports(relative: str, shape: Shape) -> set[tuple[str, ...]]:
    path = ROOT / relative
    parse = parse_cu_source if path.suffix == ".cu" else parse_py_source
    specs = parse(path, path.read_text(encoding="utf-8"))
    return {to_request(case, str(path), 0, None).imports for spec in specs for case in expand(spec, [shape])}


@pytest.mark.parametrize(
    ("relative", "shape", "imports"),
    [
        ("kernels/01_naive.cu", Shape(128, 128, 128), {()}),
        ("tests/kernels_fp8/int8_naive.cu", Shape(128, 128, 128), {()}),
        ("tests/kernels_fp8/fp8_naive.cu", Shape(128, 128, 128), {("torch",)}),
        ("tests/kernels_torch/torch_kernels.py", Shape(128, 128, 128), {("torch",)}),
        ("tests/kernels_grouped/grouped.cu", Shape(256, 128, 128, groups=4), {("torch",)}),
        ("tests/kernels_epilogue/epilogue.cu", Shape(128, 128, 128), {("torch",)}),
    ],
)
def test_the_cases_whose_worker_may_import_torch_say_so(relative, shape, imports):
    assert _imports(relative, shape) == imports
