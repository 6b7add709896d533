"""What the driver is asked directly (through ctypes): TMA tensor maps for a launch (``cuTensorMapEncodeTiled``) and a
compiled kernel's parameter sizes (``cuFuncGetParamInfo``)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..records.dtypes import DType
from ..specs.cases import Case, tensor_map_box
from ..specs.spec import KernelFileError
from ..specs.tensor_maps import TensorMapLayout, layout_problems
from .errors import LaunchRefused

__all__ = ["encode_tensor_map", "operand_map", "parameter_sizes"]

# CUtensorMapDataType by storage type, and the other cuTensorMapEncodeTiled choices the harness makes
_TMA_DATA_TYPES = {
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
    "float8_e4m3fn": 0,
    "float8_e5m2": 0,
    "int8": 0,
    "int32": 3,
}
_TMA_SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
_TMA_L2_PROMOTION_128B = 2
_TMA_OOB_FILL_ZEROS = 0
_CUDA_ERROR_INVALID_VALUE = 1


def encode_tensor_map(address: int, layout: TensorMapLayout, dt: DType) -> np.ndarray:
    """Ask the CUDA driver (cuTensorMapEncodeTiled) for a tiled tensor map of one operand (2-D, or 3-D split, with
    dimensions of 1 up to its rank)."""
    try:
        encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError) as exc:
        raise LaunchRefused(f"cannot load cuTensorMapEncodeTiled from the CUDA driver: {exc}") from None
    encode.restype = ctypes.c_int
    storage = ctypes.create_string_buffer(128 + 64)  # CUtensorMap is 128 bytes, 64-byte aligned
    aligned = (ctypes.addressof(storage) + 63) // 64 * 64
    dims, strides, box = layout.dims_and_strides()
    rank = len(dims)
    rc = encode(
        ctypes.c_void_p(aligned),
        _TMA_DATA_TYPES[dt.storage],
        rank,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * rank)(*dims),
        (ctypes.c_uint64 * (rank - 1))(*strides),
        (ctypes.c_uint32 * rank)(*box),
        (ctypes.c_uint32 * rank)(*([1] * rank)),
        0,  # no interleave
        _TMA_SWIZZLE_MODES[layout.swizzle],
        _TMA_L2_PROMOTION_128B,
        _TMA_OOB_FILL_ZEROS,
    )
    if rc != 0:
        raise LaunchRefused(f"cuTensorMapEncodeTiled failed with CUDA error {rc} for {layout}")
    record = np.zeros(1, dtype=np.dtype([("bytes", np.uint8, 128)]))
    record.view(np.uint8)[:] = np.frombuffer(ctypes.string_at(aligned, 128), dtype=np.uint8)
    return record


def operand_map(kept: dict[tuple, np.ndarray], case: Case, operand: str, g: Any, dt: DType) -> np.ndarray:
    """The tensor map of ``operand`` of ``case``, held in ``g`` (a GuardedMatrix, in its storage order: the inner
    dimension is the contiguous one, whichever order the operand is stored in), encoded once per address and
    layout (``kept``). A layout TMA cannot take is the header's mistake: a KernelFileError naming the rule."""
    spec, wanted = case.spec, case.spec.tensor_map(operand)
    box = tensor_map_box(spec, wanted, case.variant)
    # a grouped operand's matrices (one a group, packed): one map over them stacked, as DeepGEMM's
    layout = TensorMapLayout(
        operand, g.rows * g.batch, g.cols, g.ld, dt.itemsize, box[0], box[1], wanted.swizzle, wanted.split,
        box[2] if len(box) > 2 else 1, wanted.dims,
    )  # fmt: skip
    problems = layout_problems(layout)
    if g.batch > 1 and g.batch_stride > g.rows * g.ld:
        problems.append(f"{operand}'s matrices lie a stride's gap apart (the kernel takes stride_{operand.lower()})")
    if problems:
        raise KernelFileError(
            spec.path,
            f"{spec.name}[{case.id}]: cannot build {operand}_map: " + "; ".join(problems),
            line=spec.line,
            key="tensor_maps",
        )
    address = g.pointer().data.ptr
    key = (address, layout, dt.storage)
    if key not in kept:
        kept[key] = encode_tensor_map(address, layout, dt)
    return kept[key]


def parameter_sizes(function: int) -> list[int] | None:
    """The compiled kernel's parameter sizes in bytes, in order, from the driver (``cuFuncGetParamInfo``, CUDA 12.4
    and later); None where the driver cannot say. Where the driver counts them (``cuFuncGetParamCount``), no call
    asks past the last one; else the call past the last fails, which compute-sanitizer reports as the kernel's error
    (``worker.sanitize`` does not ask: the H100's driver 580, CUDA 13.0, cannot count them)."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        info = driver.cuFuncGetParamInfo
    except (OSError, AttributeError):
        return None
    info.restype = ctypes.c_int
    count = _parameter_count(driver, function)
    sizes: list[int] = []
    offset, size = ctypes.c_size_t(), ctypes.c_size_t()
    while len(sizes) < (4096 if count is None else count):
        rc = info(ctypes.c_void_p(function), ctypes.c_size_t(len(sizes)), ctypes.byref(offset), ctypes.byref(size))
        if rc == _CUDA_ERROR_INVALID_VALUE and sizes and count is None:  # past the last parameter
            break
        if rc != 0:  # the driver cannot say (or a kernel without parameters, which no GEMM is)
            return None
        sizes.append(int(size.value))
    return sizes


def _parameter_count(driver: ctypes.CDLL, function: int) -> int | None:
    """How many parameters the kernel takes (``cuFuncGetParamCount``, CUDA 13), or None where the driver cannot
    say."""
    try:
        count_of = driver.cuFuncGetParamCount
    except AttributeError:
        return None
    count_of.restype = ctypes.c_int
    count = ctypes.c_size_t()
    return int(count.value) if count_of(ctypes.c_void_p(function), ctypes.byref(count)) == 0 else None
