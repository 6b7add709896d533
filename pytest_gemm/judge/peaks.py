"""Peak GEMM rates of known GPUs, from their per-SM throughput scaled by SM count and clock.

A GPU's dense peak for a dtype is ``flops_per_sm_per_clock x SM count x SM clock``. The table
below holds the per-SM, per-clock rates (dense, no sparsity) that a GEMM of each dtype can use:
fp32 on the CUDA cores (tensor cores cannot do true fp32), fp64, tf32, fp16 and bf16 on the tensor
cores with fp32 accumulation. They come from NVIDIA's architecture whitepapers (A100: 19.5 fp32,
19.5 fp64 tensor, 156 tf32, 312 fp16/bf16 TFLOP/s at 108 SMs x 1410 MHz; H100 SXM: 67 fp32,
67 fp64 tensor, 495 tf32, 989 fp16/bf16 TFLOP/s at 132 SMs, for fp32/fp64 at 1980 MHz and for the
tensor cores at 1830 MHz); FP8 and INT8 on the tensor cores: A100 624 INT8 TOPS, H100 SXM 1979 FP8
TFLOP/s and 1979 INT8 TOPS, dense.

The clock is the highest SM clock the device reports (NVML's max clock, else CUDA's), so the
peak is an upper bound: at 1980 MHz an H100 SXM's fp16 peak is 1070 TFLOP/s, above NVIDIA's
quoted 989. GPUs that are not in the table, including variants with cut-down tensor cores such
as the H20, get no peak rather than a guess.
"""

from __future__ import annotations

import re

__all__ = ["FAMILIES", "peak_flops"]

#: (family, name pattern, compute capability, FLOP per SM per clock for each dtype)
FAMILIES: tuple[tuple[str, re.Pattern[str], tuple[int, int], dict[str, int]], ...] = (
    (
        "Ampere data-centre (A100, A800, A30)",
        re.compile(r"\b(A100|A800|A30)\b"),
        (8, 0),
        {"fp32": 128, "fp64": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048, "int8": 4096},
    ),
    (
        "Hopper (H100, H200, H800, GH200)",
        re.compile(r"\b(H100|H200|H800|GH200)\b"),
        (9, 0),
        {
            "fp32": 256,
            "fp64": 256,
            "tf32": 2048,
            "fp16": 4096,
            "bf16": 4096,
            "fp8_e4m3": 8192,
            "fp8_e5m2": 8192,
            "int8": 8192,
        },
    ),
)


def peak_flops(
    name: str, capability: tuple[int, int], sm_count: int, sm_clock_mhz: float | None, dtype: str
) -> float | None:
    """The dense peak in FLOP/s for ``dtype`` on this GPU, or None when the GPU or dtype is not known."""
    if not sm_clock_mhz or sm_count <= 0:
        return None
    for _, pattern, cc, rates in FAMILIES:
        if cc == tuple(capability) and pattern.search(name) and dtype in rates:
            return rates[dtype] * sm_count * sm_clock_mhz * 1e6
    return None
