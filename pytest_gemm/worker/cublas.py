"""cuBLAS's GEMM as the peer and the timed reference: the kernel's own work, on the bytes it reads.

cuBLAS is column-major. A row-major C (stored M x N) is the column-major N x M matrix C^T = B^T A^T, so cuBLAS
is asked for that (the usual operand swap); a column-major C (stored N x M) is A B as it stands. Each operand is
then passed as it is stored, with ``transa``/``transb`` saying whether cuBLAS must transpose it, and its own
leading dimension; a batch is cuBLAS's strided-batched GEMM on the same bytes, each operand with its
own batch stride. Its dtypes are the kernel's: the inputs' type, C's type (fp16 in, fp32 out is ``Ctype`` fp32),
and the compute type the kernel declares (CUBLAS_COMPUTE_16F for ``accumulate = "fp16"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..records.shapes import Shape
from ..records.storage import Storage
from .buffers import bits_to_float64, transposed_each, uint_type
from .operands import CaseInputs

__all__ = [
    "Bind",
    "GemmCall",
    "compute_type",
    "gemm_call",
    "gemm_runner",
    "packed",
    "peer_output",
    "scalar_type",
    "stacked_layout",
    "stored_operands",
]

#: a peer's GEMM, given each operand's (device address, leading dimension, batch stride) by name, as stored: a function
#: that queues it (cuBLAS's here, cuBLASLt's FP8 and torch's grouped GEMM in their modules)
Bind = Callable[[dict[str, tuple[int, int, int]]], Callable[[], None]]

#: cudaDataType of each dtype's elements (tf32 is stored as fp32)
_CUDA_TYPE = {"fp32": 0, "tf32": 0, "fp64": 1, "fp16": 2, "bf16": 14, "int8": 3, "int32": 10}
#: cublasComputeType_t
_COMPUTE_16F, _COMPUTE_32F, _COMPUTE_64F, _COMPUTE_32F_FAST_TF32, _COMPUTE_32I = 64, 68, 70, 77, 72
_OP_N, _OP_T = 0, 1
_GEMM_DEFAULT = -1


def compute_type(dtype: str, accumulate: str) -> int:
    """cuBLAS's compute type for a kernel of ``dtype`` that declares ``accumulate``."""
    if accumulate == "fp16":
        return _COMPUTE_16F
    return {"fp64": _COMPUTE_64F, "tf32": _COMPUTE_32F_FAST_TF32, "int8": _COMPUTE_32I}.get(dtype, _COMPUTE_32F)


def scalar_type(dtype: str, accumulate: str) -> type:
    """The host type of alpha and beta that cuBLAS reads for this compute type."""
    if accumulate == "fp16":
        return np.float16
    return {"fp64": np.float64, "int8": np.int32}.get(dtype, np.float32)


@dataclass(frozen=True)
class GemmCall:
    """The column-major cuBLAS GEMM that writes the kernel's C in its storage order.

    ``first`` and ``second`` name the operands cuBLAS takes as its A and B ("A" or "B"), ``trans_first`` and
    ``trans_second`` whether it transposes them, and ``m``, ``n``, ``k`` its sizes."""

    first: str
    second: str
    trans_first: bool
    trans_second: bool
    m: int
    n: int
    k: int


def gemm_call(storage: Storage, shape: Shape) -> GemmCall:
    """The cuBLAS call for a kernel whose operands are stored as ``storage`` says.

    An operand stored as rows of ``x`` elements is, to cuBLAS, a column-major matrix with columns of ``x``; for
    C = A B (C column-major) cuBLAS needs A as M x K and B as K x N column-major, which are A stored K x M and B
    stored N x K; for C^T = B^T A^T (C row-major) it needs B^T as N x K and A^T as K x M, which are B stored K x N
    and A stored M x K. Any other order is transposed by cuBLAS."""
    if storage.transposed("C"):  # C stored N x M: column-major M x N, C = A B
        return GemmCall("A", "B", not storage.transposed("A"), not storage.transposed("B"), shape.M, shape.N, shape.K)
    return GemmCall("B", "A", storage.transposed("B"), storage.transposed("A"), shape.N, shape.M, shape.K)


def gemm_runner(
    cublas: Any,
    handle: int,
    storage: Storage,
    shape: Shape,
    dt: DType,
    out: DType,
    accumulate: str,
    alpha: float,
    beta: float,
) -> Bind:
    """A function that, given each operand's (device address, leading dimension, batch stride; both in elements) by
    name, returns a function queueing cuBLAS's GEMM on them on the handle's stream (its strided-batched GEMM for a
    batch of ``shape.batch``). The host scalars cuBLAS reads live as long as the returned functions."""
    call = gemm_call(storage, shape)
    scalar = scalar_type(dt.name, accumulate)
    scalars = np.array([alpha, beta], dtype=scalar)
    in_type, c_type, compute = _CUDA_TYPE[dt.name], _CUDA_TYPE[out.name], compute_type(dt.name, accumulate)
    alpha_ptr, beta_ptr = scalars.ctypes.data, scalars.ctypes.data + scalars.itemsize

    def bind(operands: dict[str, tuple[int, int, int]]) -> Callable[[], None]:
        (p1, ld1, s1), (p2, ld2, s2), (pc, ldc, sc) = operands[call.first], operands[call.second], operands["C"]
        ops = (_OP_T if call.trans_first else _OP_N, _OP_T if call.trans_second else _OP_N, call.m, call.n, call.k)
        if shape.batch == 1:
            run = cublas.gemmEx
            operands_args = (p1, in_type, ld1, p2, in_type, ld2, beta_ptr, pc, c_type, ldc)
        else:
            run = cublas.gemmStridedBatchedEx
            operands_args = (p1, in_type, ld1, s1, p2, in_type, ld2, s2, beta_ptr, pc, c_type, ldc, sc, shape.batch)
        args = (handle, *ops, alpha_ptr, *operands_args, compute, _GEMM_DEFAULT)

        def gemm() -> None:
            _ = scalars  # keep the host scalars alive while cuBLAS may read them
            run(*args)

        return gemm

    return bind


def stored_operands(cp: Any, data: CaseInputs, bits: tuple[Any, Any, Any], shape: Shape, out: DType) -> dict:
    """A, B and C as the kernel stores them, on the device, from ``bits``: the logical A, B and prior C (None when
    beta = 0; a batch's stacked) already uploaded for the truth. An operand in its first order is its bits as they
    are (cuBLAS only reads it); a transposed one is transposed on the device, each matrix of a batch its own; C is
    always a buffer of its own (cuBLAS writes it), zeros when beta = 0 (C is output-only then). Each stacked: a
    batch's matrices one after the other, packed."""
    found = {}
    for name, x in (*zip("AB", bits[:2]), ("C", bits[2])):
        if x is None:
            rows, cols = data.storage.stored_shape("C", shape)
            found["C"] = cp.zeros((shape.batch * rows, cols), dtype=uint_type(cp, out.itemsize))
        elif data.storage.transposed(name):
            found[name] = transposed_each(x, shape.batch)
        else:
            found[name] = x.copy() if name == "C" else x
    return found


def packed(x: Any, batch: int) -> tuple[int, int, int]:
    """A stacked operand's (address, leading dimension, batch stride), as :func:`gemm_runner`'s functions take it."""
    return (x.data.ptr, *stacked_layout(x, batch))


def stacked_layout(x: Any, batch: int) -> tuple[int, int]:
    """The leading dimension and batch stride of a stacked, packed operand (a batch's matrices one after the
    other)."""
    return x.shape[1], x.size // batch


def peer_output(
    cp: Any,
    bind: Bind,
    data: CaseInputs,
    bits: tuple[Any, Any, Any],
    shape: Shape,
    out: DType,
) -> Any:
    """cuBLAS's C for the case of ``data`` (logical order, float64): ``bind`` (from :func:`gemm_runner`) run on
    :func:`stored_operands`."""
    stored = stored_operands(cp, data, bits, shape, out)
    bind({name: packed(x, shape.batch) for name, x in stored.items()})()
    return data.logical(bits_to_float64(cp, stored["C"], out), "C")
