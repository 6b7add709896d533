""" "Tensor maps for every order, column-major C included". The TMA tensor map the GPU worker encodes
for each operand describes the operand as stored: its inner dimension is the contiguous one (K for B stored N x K,
M for C stored N x M), its outer dimension the other, its pitch the stored row plus the row padding, and it starts
at the matrix's first element. A layout TMA cannot take is the header's mistake, named with the map and the rule.

The worker's own code runs here on NumPy: the prepared case allocates the guarded buffers, and worker.tma.operand_map
(and CudaKernel.launcher, which calls it through the GPU runner) encodes the maps; only the driver call
(encode_tensor_map) and the device pointer are stood in for."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.storage import ORDERS, Storage
from pytest_gemm.specs.cases import AlphaBeta, Case, precision
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.footprint import LD_PAD
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.worker import tma
from pytest_gemm.worker.buffers import GuardedMatrix
from pytest_gemm.worker.inputs import input_strategy
from pytest_gemm.worker.kinds import CudaKernel

from support.host_device import HostKernel, host_case

SHAPE = Shape(64, 48, 32)  # M, N and K differ, so a map of the wrong dimension shows; every row is 16-byte aligned
#: each stored order's contiguous dimension (the inner one of its tensor map) and the other (the outer one)
INNER_OUTER = {
    "MxK": ("K", "M"),
    "KxM": ("M", "K"),
    "KxN": ("N", "K"),
    "NxK": ("K", "N"),
    "MxN": ("N", "M"),
    "NxM": ("M", "N"),
}
ALL_ORDERS = [Storage(a, b, c) for a, b, c in itertools.product(ORDERS["A"], ORDERS["B"], ORDERS["C"])]
ORDER_IDS = [s.text.replace(", ", "-").replace(" ", "") for s in ALL_ORDERS]


def _header(padded: bool, dtype: str = "fp16", **extra) -> dict:
    """A TMA kernel's header taking A_map, B_map and C_map (and lda, ldb and ldc when ``padded``)."""
    lds = ["lda", "ldb", "ldc"] if padded else []
    return {
        "entry": "gemm",
        "args": ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C_map", *lds],
        "dtypes": [dtype],
        "arch": "sm_90a",
        "block": [128],
        "grid": ["cdiv(N, 64)", "cdiv(M, 64)"],
        "tensor_maps": {
            "A": {"box": [64, 64], "swizzle": 128},
            "B": {"box": [64, 32], "swizzle": 128},
            "C": {"box": [32, 16]},
        },
        **extra,
    }


def _case(storage: Storage, padded: bool, shape: Shape = SHAPE, **extra) -> Case:
    orders = {op: storage.order(op) for op in "ABC"}
    spec = spec_from_mapping(_header(padded, storage=orders, **extra), path="k.cu")
    return Case(spec, spec.variants()[0], spec.dtypes[0], shape, AlphaBeta(0.7, 1.3))


@pytest.fixture
def encoded(monkeypatch) -> list[tuple[int, object, object]]:
    """The (address, layout, dtype) of each tensor map the worker asks the driver for, in order; a map is the
    call's number. Device pointers are the host addresses of the NumPy buffers."""
    calls: list[tuple[int, object, object]] = []

    def encode(address, layout, dt):
        calls.append((address, layout, dt))
        return np.full(1, len(calls))

    monkeypatch.setattr(tma, "encode_tensor_map", encode)
    monkeypatch.setattr(
        GuardedMatrix, "pointer", lambda g: SimpleNamespace(data=SimpleNamespace(ptr=g.flat[g.start :].ctypes.data))
    )
    return calls


def _buffers(case: Case):
    """A, B and C in the guarded buffers the worker allocates for ``case`` (C holding its prior data)."""
    prepared = host_case(HostKernel(case, lambda *args: None), 7)
    ops = prepared.operands()
    return ops, prepared.data, {"A": ops.a, "B": ops.b, "C": ops.c}


def _through_map(g: GuardedMatrix, address: int, layout) -> np.ndarray:
    """The matrix a TMA unit reads through ``layout`` at ``address``: rows x cols elements, rows pitch bytes apart."""
    offset = address - g.flat.ctypes.data
    assert offset >= 0 and offset + (layout.rows - 1) * layout.pitch_bytes + layout.cols * layout.itemsize <= (
        g.flat.nbytes
    ), "the map reaches past its buffer"
    return np.ndarray(
        (layout.rows, layout.cols),
        dtype=g.flat.dtype,
        buffer=g.flat,
        offset=offset,
        strides=(layout.pitch_bytes, layout.itemsize),
    )


def _check_map(case: Case, data, op: str, g: GuardedMatrix, call, padded: bool) -> None:
    """The map of ``op`` describes it as stored, and reading through it gives the operand's elements."""
    address, layout, dt = call
    order = case.storage.order(op)
    inner, outer = INNER_OUTER[order]
    itemsize = dt.itemsize
    assert (layout.operand, layout.cols, layout.rows) == (op, getattr(case.shape, inner), getattr(case.shape, outer))
    assert layout.ld == getattr(case.shape, inner) + (LD_PAD if padded else 0)
    assert layout.pitch_bytes == layout.ld * itemsize == g.ld * itemsize
    assert address == g.flat.ctypes.data + g.start * itemsize  # the matrix's first element, past the guard
    logical = {"A": data.a, "B": data.b, "C": data.c0}[op]
    seen = _through_map(g, address, layout)
    expected = logical.T if order != ORDERS[op][0] else logical  # stored transposed: rows of the logical columns
    np.testing.assert_array_equal(seen, np.ascontiguousarray(expected).view(seen.dtype))


@pytest.mark.parametrize("padded", [False, True], ids=["no-ld", "ld"])
@pytest.mark.parametrize("storage", ALL_ORDERS, ids=ORDER_IDS)
def test_each_operands_tensor_map_describes_it_as_stored(encoded, storage, padded):
    """For every combination of orders, with and without lda/ldb/ldc, A_map, B_map and C_map have the
    stored contiguous dimension inner, the other outer, the stored row plus padding as pitch, and read back the
    operand's elements (C's prior data included)."""
    case = _case(storage, padded)
    assert case.storage == storage
    _, data, buffers = _buffers(case)
    dt, out = precision(case)
    kept: dict = {}
    for op, odt in (("A", dt), ("B", dt), ("C", out)):
        tma.operand_map(kept, case, op, buffers[op], odt)
    assert [layout.operand for _, layout, _ in encoded] == ["A", "B", "C"]
    for op, call in zip("ABC", encoded):
        _check_map(case, data, op, buffers[op], call, padded)


@pytest.mark.parametrize("padded", [False, True], ids=["no-ld", "ld"])
def test_the_launcher_passes_each_map_of_its_own_operand_swept_orders_and_c_dtype_included(encoded, padded):
    """Through the .cu kernel's launcher (worker.kinds.CudaKernel), in every variant of a header that sweeps B's and C's
    orders (B_NxK, C_NxM), each *_map argument is the map of that operand as the variant stores it, C's in C's own
    dtype (fp32 from fp16 inputs), and lda/ldb/ldc are the maps' leading dimensions."""
    extra = {"params": {"B_NxK": [0, 1], "C_NxM": [0, 1]}, "storage": {"A": "KxM"}, "c_dtype": "fp32"}
    spec = spec_from_mapping(_header(padded, **extra), path="k.cu")
    launched = []
    seen_orders = set()
    for variant in spec.variants():
        case = Case(spec, variant, "fp16", SHAPE, AlphaBeta(0.7, 1.3))
        seen_orders.add((case.storage.B, case.storage.C))
        ops, data, buffers = _buffers(case)
        kept: dict = {}
        runner = SimpleNamespace(  # what the kernel's strategy asks of the GPU runner
            cp=np,
            sm_count=132,
            function=lambda case: lambda grid, block, args, shared_mem: launched.append(args),
            tensor_map=lambda case, op, g, dt, kept=kept: tma.operand_map(kept, case, op, g, dt),
        )
        del encoded[:]
        CudaKernel(runner, case, input_strategy(case)).launcher(ops)()
        passed = dict(zip(spec.args, launched[-1]))
        assert [dt.name for _, _, dt in encoded] == ["fp16", "fp16", "fp32"]
        for number, (op, call) in enumerate(zip("ABC", encoded), start=1):
            assert int(passed[f"{op}_map"][0]) == number  # the map encoded for this operand, not another's
            _check_map(case, data, op, buffers[op], call, padded)
            if padded:
                assert int(passed[f"ld{op.lower()}"]) == call[1].ld
    assert seen_orders == {("KxN", "MxN"), ("KxN", "NxM"), ("NxK", "MxN"), ("NxK", "NxM")}


@pytest.mark.parametrize("padded", [False, True], ids=["no-ld", "ld"])
@pytest.mark.parametrize("storage", ALL_ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("odd", ["M", "N", "K"])
def test_a_stored_row_tma_cannot_take_names_the_map_and_the_rule(encoded, storage, padded, odd):
    """With one dimension 33 (66 bytes of fp16, not a multiple of 16), exactly the operands stored
    with that dimension contiguous fail, each with a KernelFileError naming the case, its map and the rule; the
    others are encoded. (A logical-shape map would fail B for an odd N even when B is stored N x K, and pass A
    stored K x M for an odd M.)"""
    shape = Shape(**{**{"M": 64, "N": 48, "K": 32}, odd: 33})
    case = _case(storage, padded, shape)
    _, _, buffers = _buffers(case)
    dt, out = precision(case)
    failed = []
    for op, odt in (("A", dt), ("B", dt), ("C", out)):
        ld = 33 + (LD_PAD if padded else 0)
        if INNER_OUTER[storage.order(op)][0] != odd:
            tma.operand_map({}, case, op, buffers[op], odt)
            continue
        with pytest.raises(KernelFileError) as info:
            tma.operand_map({}, case, op, buffers[op], odt)
        failed.append(op)
        assert info.value.key == "tensor_maps"
        assert f"{case.name}: cannot build {op}_map: the rows of {op} are {ld} elements ({2 * ld} bytes) apart; " in (
            info.value.message
        )
        assert "a TMA tensor map needs a multiple of 16 bytes" in info.value.message
    assert sorted(layout.operand for _, layout, _ in encoded) == sorted(set("ABC") - set(failed))
