"""The peer of a grouped case: torch's ``_grouped_mm``, which runs every group in one launch (CUTLASS's grouped GEMM on
Hopper): contiguous groups as a 2-D A with offsets of the groups' padded ends, masked ones as 3-D batches (every slot's
rows computed), K-grouped as a 2-D A and B with offsets along K. torch takes A with K contiguous and B with K
contiguous in each group (B stored N x K), so an operand stored the other way is copied once per set of operands,
outside the timed call. Alpha and beta, where a case has them, are applied after the product. torch is imported
here (or ahead, by a standby). Part of the worker package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType, get_dtype
from ..specs.cases import Case
from ..specs.footprint import storage_dims
from .buffers import bits_to_float64, transposed_each, uint_type
from .cublas import Bind
from .fp8_peer import device_matrix
from .operands import CaseInputs
from .runner import GpuRunner

__all__ = ["grouped_result", "grouped_runner", "no_grouped_peer", "operand_view"]


#: the input dtypes torch's _grouped_mm takes, in each layout (torch 2.11 on an H200, research/grouped_peer_probe.py:
#: bf16 runs CUTLASS's grouped GEMM, fp16 and fp32 a loop of one GEMM a group, as fast as one torch.mm a group)
GROUPED_DTYPES = ("bf16", "fp16", "fp32")


def grouped_runner(device: GpuRunner, case: Case, dt: DType, out: DType) -> Bind:
    """A function that, given each operand's (device address, leading dimension, batch stride) by name, as stored,
    returns a function queueing torch's ``_grouped_mm`` of the case on the harness's stream, writing C."""
    import torch

    cp, plan = device.cp, case.plan
    assert plan is not None
    external = torch.cuda.ExternalStream(device.stream.ptr, device=torch.device("cuda", device.index))
    ends = plan.group_args()["group_ends"]
    if plan.layout == "contiguous":  # each group from its padded start: offsets are the next group's start
        ends = (*plan.starts[1:], plan.rows)
    with torch.cuda.stream(external):
        offs = None if plan.layout == "masked" else torch.tensor(ends, dtype=torch.int32, device="cuda")
    in_type, out_type = getattr(torch, dt.storage), getattr(torch, out.storage)
    alpha, beta = case.ab.alpha, case.ab.beta

    def view(op: str, ptr: int, ld: int, stride: int, itemsize: int) -> Any:
        return operand_view(torch, cp, case, op, (ptr, ld, stride), itemsize, in_type if op != "C" else out_type)

    def bind(operands: dict[str, tuple[int, int, int]]) -> Callable[[], None]:
        torch.cuda.set_stream(external)
        a, b, c = (view(op, *operands[op], (out if op == "C" else dt).itemsize) for op in "ABC")
        a = a if a.stride(-1) == 1 else a.contiguous()  # K contiguous
        b = b if b.stride(-2) == 1 else b.transpose(-1, -2).contiguous().transpose(-1, -2)  # K contiguous
        if plan.layout != "masked":
            a = a[0]
        if plan.layout == "k":
            b = b[0]
        c = c if plan.layout != "contiguous" else c[0]

        def gemm() -> None:
            torch.cuda.set_stream(external)
            made = torch._grouped_mm(a, b, offs=offs, out_dtype=out_type)
            if alpha != 1.0:
                made = made * alpha
            if beta != 0.0:
                made = made + beta * c
            c.copy_(made)

        return gemm

    return bind


def operand_view(
    torch: Any, cp: Any, case: Case, op: str, where: tuple[int, int, int], itemsize: int, dtype: Any
) -> Any:
    """Operand ``op`` of a grouped case as torch sees it, logical, batch x rows x cols (a view of the harness's memory
    at ``where``: its address, leading dimension and batch stride, as stored), elements of ``dtype``."""
    ptr, ld, stride = where
    batch, rows, cols = storage_dims(case.spec, op, case.shape)
    rows, cols = (cols, rows) if case.storage.transposed(op) else (rows, cols)
    span = (batch - 1) * stride + rows * ld
    x = torch.from_dlpack(device_matrix(cp, ptr, 1, span, span, itemsize)[0]).view(dtype)
    x = x.as_strided((batch, rows, cols), (stride, ld, 1))
    return x.transpose(-1, -2) if case.storage.transposed(op) else x


def grouped_result(device: GpuRunner, case: Case, data: CaseInputs, bits: tuple[Any, Any, Any], bind: Bind) -> Any:
    """The peer's C (logical, float64) from ``bind`` (:func:`grouped_runner`) on copies of the operands, stored as the
    kernel stores them, packed (``bits``: the logical A, B and prior C as uploaded)."""
    cp, out = device.cp, data_out(case)
    stored: dict[str, Any] = {}
    for op, x in zip("ABC", bits):
        batch, rows, cols = storage_dims(case.spec, op, case.shape)
        if x is None:
            x = cp.zeros((batch * rows, cols), dtype=uint_type(cp, out.itemsize))
        stored[op] = transposed_each(x, batch) if case.storage.transposed(op) else x.copy()
    operands = {op: (x.data.ptr, x.shape[1], x.size // data.batch_of(op)) for op, x in stored.items()}
    bind(operands)()
    device.stream.synchronize()
    return data.logical(bits_to_float64(cp, stored["C"], out), "C")


def data_out(case: Case) -> DType:
    return get_dtype(case.spec.output_dtype(case.dtype))


def no_grouped_peer(case: Case, capability: tuple[int, int]) -> str | None:
    """Why a grouped case has no peer (None: torch's ``_grouped_mm`` is its peer)."""
    plan = case.plan
    assert plan is not None
    if case.dtype not in GROUPED_DTYPES:
        return f"torch's _grouped_mm, the grouped peer, takes {', '.join(GROUPED_DTYPES)} inputs here"
    if case.spec.output_dtype(case.dtype) != case.dtype:
        return "torch's _grouped_mm, the grouped peer, writes C in the inputs' dtype"
    if capability < (9, 0):
        return "torch's _grouped_mm was measured on Hopper (sm_90) only"
    if plan.K % 8 or plan.N % 8:
        return "torch's _grouped_mm takes K and N multiples of 8 (16-byte rows)"
    if plan.layout == "k" and case.dtype == "bf16" and any(size % 8 for size in plan.sizes):
        # a device-side assert otherwise ("expected input tensor dynamic dimension byte size to be non-negative
        # multiple of 16"), which would end the worker's CUDA context: never called so
        return "torch's K-grouped bf16 _grouped_mm takes each group's K a multiple of 8 (16 bytes)"
    if case.storage.transposed("C"):
        return "torch's _grouped_mm writes C row-major, and this C is stored N x M"
    if importlib.util.find_spec("torch") is None:
        return "torch's _grouped_mm, the grouped peer, needs torch (pip install torch)"
    return None
