"""TMA tensor maps for a launch: the driver encodes them (``cuTensorMapEncodeTiled``, through ctypes)."""

from __future__ import annotations

import ctypes

import numpy as np

from ..records.dtypes import DType
from ..specs.tensor_maps import TensorMapLayout
from .errors import LaunchRefused

__all__ = ["encode_tensor_map"]

# CUtensorMapDataType by storage type, and the other cuTensorMapEncodeTiled choices the harness makes
_TMA_DATA_TYPES = {"float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
_TMA_SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
_TMA_L2_PROMOTION_128B = 2
_TMA_OOB_FILL_ZEROS = 0


def encode_tensor_map(address: int, layout: TensorMapLayout, dt: DType) -> np.ndarray:
    """Ask the CUDA driver (cuTensorMapEncodeTiled) for a 2-D tiled tensor map of one operand."""
    try:
        encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError) as exc:
        raise LaunchRefused(f"cannot load cuTensorMapEncodeTiled from the CUDA driver: {exc}") from None
    encode.restype = ctypes.c_int
    storage = ctypes.create_string_buffer(128 + 64)  # CUtensorMap is 128 bytes, 64-byte aligned
    aligned = (ctypes.addressof(storage) + 63) // 64 * 64
    rc = encode(
        ctypes.c_void_p(aligned),
        _TMA_DATA_TYPES[dt.storage],
        2,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * 2)(layout.cols, layout.rows),
        (ctypes.c_uint64 * 1)(layout.pitch_bytes),
        (ctypes.c_uint32 * 2)(layout.box_inner, layout.box_outer),
        (ctypes.c_uint32 * 2)(1, 1),
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
