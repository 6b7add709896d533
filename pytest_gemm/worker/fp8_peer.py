"""cuBLASLt's FP8 GEMM with the kernel's scaling, through torch: the peer and the timed reference of an
FP8 case. torch's ``_scaled_mm`` reaches cuBLASLt's own FP8 kernels on Hopper for per-tensor, per-row/column
(outer-vector) and DeepSeek-V3's 1 x 128 / 128 x 128 scaling (measured on an H100: docs/measurements.md#the-fp8-peer
says why torch rather than nvmath-python). cuBLASLt reads A row-major and B column-major (B stored N x K) and its own
layout of the scales, so the peer is given copies in those layouts, made once per set of operands, outside any timed
call: the same FP8 bytes and the same scales (UE8M0 ones as the fp32 powers of two they are). torch is imported here
(or ahead, by a standby)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType
from ..records.scales import Scales
from ..specs.cases import Case
from .cublas import Bind

__all__ = ["device_matrix", "fp8_runner", "needs_copy", "peer_scales", "scaled_gemm"]


def _torch() -> Any:
    import torch

    return torch


def device_matrix(cp: Any, ptr: int, rows: int, cols: int, ld: int, itemsize: int) -> Any:
    """A rows x cols CuPy view (bytes, or the element type's unsigned integers) of memory the harness owns."""
    dtype = {1: cp.uint8, 2: cp.uint16, 4: cp.uint32}[itemsize]
    memory = cp.cuda.UnownedMemory(ptr, rows * ld * itemsize, None)
    return cp.ndarray((rows, ld), dtype, cp.cuda.MemoryPointer(memory, 0))[:, :cols]


def peer_scales(torch: Any, scales: Scales, values: tuple[Any, Any]) -> tuple[Any, Any]:
    """The scales as cuBLASLt takes them through torch: a 0-d tensor per tensor; (M, 1) and (1, N) per row and column;
    A's 1 x 128 grid (M, K/128) M-major, B's 128 x 128 grid (K/128, N/128) with each N block's K blocks together, its
    stored rows padded to 16 bytes (measured on an H100, torch 2.11: research/fp8_peer_layouts.py)."""
    found = []
    for op, grid64 in zip("AB", values):
        grid = torch.from_dlpack(grid64).float()  # logical, fp32 (UE8M0's powers of two exactly)
        kind = scales.granularity(op)
        if kind == "tensor":
            found.append(grid.reshape(()))
        elif kind in ("row", "col"):
            found.append(grid.contiguous())
        elif op == "A":  # (M, K/128), M-major (torch checks its strides are (1, M))
            found.append(grid.t().contiguous().t())
        else:  # (K/128 rounded up to 4, N/128), each N block's K blocks together (strides (1, that)): equal to the
            rows, cols = grid.shape  # grid where K/128 is a multiple of 4, as _scaled_mm takes it; padded, as scaled_mm
            padded = torch.zeros(cols, -(-rows // 4) * 4, device=grid.device, dtype=torch.float32)
            padded[:, :rows] = grid.t()
            found.append(padded.t())
    return found[0], found[1]


def fp8_runner(
    cp: Any, case: Case, scales: Scales, values: tuple[Any, Any], out: DType, device: int, stream: int
) -> Bind:
    """A function that, given each operand's (device address, leading dimension, batch stride) by name, as stored,
    returns a function queueing cuBLASLt's FP8 GEMM of the case on ``stream`` (the harness's, on ``device``; torch's
    current stream while it runs, and left so: the backend sets torch's back after each case), writing C; ``values``:
    A's and B's grids of ``scales`` as float64, logical, on the device."""
    torch = _torch()
    external = torch.cuda.ExternalStream(stream, device=torch.device("cuda", device))
    fp8, out_type = torch.float8_e4m3fn, getattr(torch, out.storage)
    shape, storage = case.shape, case.storage
    with torch.cuda.stream(external):  # the scales' copies on the harness's stream, before any GEMM reads them
        scale_a, scale_b = peer_scales(torch, scales, values)

    padded_k = needs_copy(scales, shape.K)

    def bind(operands: dict[str, tuple[int, int, int]]) -> Callable[[], None]:
        torch.cuda.set_stream(external)  # the copies below, on the harness's stream
        views = {}
        for op in "ABC":
            ptr, ld, _ = operands[op]
            rows, cols = storage.stored_shape(op, shape)
            itemsize = out.itemsize if op == "C" else 1
            views[op] = torch.from_dlpack(device_matrix(cp, ptr, rows, cols, ld, itemsize))
        a = views["A"].view(fp8)
        a = a.t().contiguous() if storage.transposed("A") else a  # row-major M x K
        b = views["B"].view(fp8)
        b = b.t() if storage.transposed("B") else b.t().contiguous().t()  # column-major K x N
        c = views["C"].view(out_type)  # row-major M x N (no_peer: a C stored N x M has none)

        def gemm() -> None:
            torch.cuda.set_stream(external)
            scaled_gemm(torch, a, b, scale_a, scale_b, c, padded_k)

        return gemm

    return bind


def needs_copy(scales: Scales, k: int) -> bool:
    """Whether cuBLASLt's FP8 GEMM of this K writes a C of its own, copied into the kernel's: torch's ``_scaled_mm``
    (which writes into C) takes B's 128 x 128 grid only where K/128 is a multiple of 4; its ``scaled_mm`` takes the
    padded grid at any K (measured, H100)."""
    return scales.granularity("B") == "128x128" and -(-k // 128) % 4 != 0


def scaled_gemm(torch: Any, a: Any, b: Any, scale_a: Any, scale_b: Any, c: Any, copy: bool) -> None:
    """One FP8 GEMM of cuBLASLt's into ``c`` (A row-major, B column-major, the scales as :func:`peer_scales` gives
    them), queued on torch's current stream; ``copy``: :func:`needs_copy`."""
    if copy:
        recipes = (torch.nn.functional.ScalingType.BlockWise1x128, torch.nn.functional.ScalingType.BlockWise128x128)
        c.copy_(torch.nn.functional.scaled_mm(a, b, scale_a, recipes[0], scale_b, recipes[1], output_dtype=c.dtype))
    else:
        torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=c.dtype, out=c)
