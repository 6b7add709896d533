"""How fast mma.sync and cuBLAS's bf16 GEMM run once the GPU sits at its power cap.

research/mma_ceiling.py measures mma.sync's ceiling in launches of a few milliseconds, at the
highest SM clock. A real 8192^3 product runs long enough for the power cap to lower the clock,
and mma.sync (operands through the register file) may draw more power per FLOP than cuBLAS's
wgmma. This script runs each workload back to back for ``--seconds`` while NVML samples the SM
clock, the board power and the clock-event reasons, and reports the second half of each run (the
launches that end in it, and the samples taken in it):

- ``mma.sync 64x64``: step 10's warp tile as register fragments (4 x 8 mma.sync.m16n8k16 per k
  step, fp32 accumulation, random bf16 operands in [-1, -0.5] and [0.5, 1)), two blocks of 4 warps per SM, no memory
  traffic: an upper bound for any mma.sync kernel with that warp tile;
- ``cuBLAS bf16 NxNxN``: cublasGemmEx, bf16 in and out, fp32 compute, random operands.

    python research/power_ceiling.py [--seconds 6] [--sizes 4096,8192] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable

import cupy as cp
import numpy as np
import pynvml
from cupy_backends.cuda.libs import cublas
from mma_ceiling import FLOP_PER_MMA, _bf16_bits  # research/, beside this script

SOURCE = r"""
// Step 10's 64 x 64 warp tile as register fragments: per k step 4 x 8 mma.sync on random bf16 operands.
__device__ __forceinline__ unsigned bits(unsigned x) {  // two bf16 values in [-1, -0.5] or [0.5, 1)
    x *= 0x9E3779B9u; x ^= x >> 15; x *= 0x85EBCA6Bu; x ^= x >> 13;
    return (x & 0x807F807Fu) | 0x3F003F00u;
}
extern "C" __global__ void tile(float* out, int iters, unsigned seed) {
    unsigned a[4][4], b[8][2];
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x + seed;
    for (int m = 0; m < 4; ++m) for (int i = 0; i < 4; ++i) a[m][i] = bits(t * 64 + m * 4 + i);
    for (int n = 0; n < 8; ++n) for (int i = 0; i < 2; ++i) b[n][i] = bits(t * 64 + 16 + n * 2 + i);
    float d[4][8][4];
    for (int m = 0; m < 4; ++m) for (int n = 0; n < 8; ++n) for (int i = 0; i < 4; ++i) d[m][n][i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int n = 0; n < 8; ++n)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(d[m][n][0]), "+f"(d[m][n][1]), "+f"(d[m][n][2]), "+f"(d[m][n][3])
                             : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]), "r"(b[n][1]));
    }
    float s = 0.0f;
    for (int m = 0; m < 4; ++m) for (int n = 0; n < 8; ++n) for (int i = 0; i < 4; ++i) s += d[m][n][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap


def sustain(handle, launch: Callable[[], None], flop: float, seconds: float) -> dict:
    """Run ``launch`` back to back for ``seconds``; the rate, clock and power of the second half."""
    samples: list[tuple[float, int, float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(
                (
                    time.perf_counter(),
                    pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
                    pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
                )
            )
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    spans: list[tuple[float, float]] = []  # (host time at the end, device seconds)
    began = time.perf_counter()
    try:
        while time.perf_counter() - began < seconds:
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            spans.append((time.perf_counter(), cp.cuda.get_elapsed_time(start, stop) / 1e3))
    finally:
        done.set()
        sampler.join()
    half = began + seconds / 2
    late = [s for end, s in spans if end >= half]
    late_samples = [s for s in samples if s[0] >= half]
    if not late or not late_samples:
        raise RuntimeError(f"no launch or NVML sample in the second half of {seconds} s: run longer")
    clocks = [s[1] for s in late_samples]
    return {
        "tflops": flop * len(late) / sum(late) / 1e12,
        "launch_ms": float(np.median(late)) * 1e3,
        "sm_clock_mhz": float(np.median(clocks)),
        "sm_clock_range_mhz": [min(clocks), max(clocks)],
        "power_w": float(np.median([s[2] for s in late_samples])),
        "power_capped_share": float(np.mean([bool(s[3] & POWER_CAP) for s in late_samples])),
    }


def mma_tile(handle, sms: int, seconds: float) -> dict:
    kernel = cp.RawModule(code=SOURCE).get_function("tile")
    blocks, threads = 2 * sms, 128  # 8 warps per SM
    out = cp.zeros(blocks * threads, dtype=cp.float32)
    iters = 256
    while True:  # about 50 ms a launch
        launch = lambda n=iters: kernel((blocks,), (threads,), (out, np.int32(n), np.uint32(7)))  # noqa: E731
        t0 = time.perf_counter()
        launch()
        cp.cuda.Device().synchronize()
        if time.perf_counter() - t0 >= 0.05:
            break
        iters *= 2
    flop = FLOP_PER_MMA * 32 * iters * blocks * threads // 32
    return sustain(handle, launch, flop, seconds)


def cublas_bf16(handle, n: int, seconds: float) -> dict:
    a, b, c = _bf16_bits((n, n)), _bf16_bits((n, n)), cp.zeros((n, n), dtype=cp.uint16)
    alpha, beta = np.array(1.0, np.float32), np.array(0.0, np.float32)
    h = cp.cuda.device.get_cublas_handle()
    bf16_type, compute_32f, default_algo = 14, 68, -1  # CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT

    def launch() -> None:
        cublas.gemmEx(h, 0, 0, n, n, n, alpha.ctypes.data, b.data.ptr, bf16_type, n, a.data.ptr, bf16_type, n,
                      beta.ctypes.data, c.data.ptr, bf16_type, n, compute_32f, default_algo)  # fmt: skip

    launch()
    return sustain(handle, launch, 2.0 * n**3, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="how long each workload runs (default 6)")
    parser.add_argument("--sizes", default="4096,8192", help="cuBLAS sizes (default 4096,8192)")
    parser.add_argument("--json", help="write the results to this file as JSON")
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000
    top = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
    print(f"{pynvml.nvmlDeviceGetName(handle)}, {sms} SMs, power limit {limit:.0f} W, max SM clock {top} MHz")
    print(f"second half of {args.seconds:g} s each:")
    results: dict = {"gpu": pynvml.nvmlDeviceGetName(handle), "power_limit_w": limit, "max_sm_clock_mhz": top}
    runs: list[tuple[str, Callable[[], dict]]] = [("mma.sync 64x64 tile", lambda: mma_tile(handle, sms, args.seconds))]
    for size in (int(s) for s in args.sizes.split(",")):
        runs.append((f"cuBLAS bf16 {size}^3", lambda n=size: cublas_bf16(handle, n, args.seconds)))
    runs.append(("mma.sync 64x64 tile (again)", lambda: mma_tile(handle, sms, args.seconds)))
    for name, run in runs:
        row = results[name] = run()
        low, high = row["sm_clock_range_mhz"]
        print(
            f"{name:28} {row['tflops']:6.1f} TFLOP/s  SM {row['sm_clock_mhz']:.0f} MHz ({low}-{high})  "
            f"{row['power_w']:.0f} W  power-capped {100 * row['power_capped_share']:.0f}% of samples",
            flush=True,
        )
    tile = min(results["mma.sync 64x64 tile"]["tflops"], results["mma.sync 64x64 tile (again)"]["tflops"])
    for name, row in results.items():
        if name.startswith("cuBLAS"):
            print(f"mma.sync tile ceiling / {name}: {100 * tile / row['tflops']:.1f}%")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
