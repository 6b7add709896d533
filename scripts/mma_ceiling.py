"""How fast mma.sync can go on the current GPU, and what step 10's main loop costs on top.

Part 1, the ceiling: every warp issues ``chains`` independent chains of
mma.sync.m16n8k16 (fp32 accumulation) on register operands, no memory traffic, for 4 to 32
warps per SM.

Part 2, the ablation: step 10's warp tiling (128 x 128 block tile, four warps of 64 x 64, K
slice 32, two blocks per SM, bf16) on data that is never checked, adding one part of the
real main loop at a time:

    0  mma.sync on fragments that stay in registers
    1  + the fragments loaded with ldmatrix from a swizzled shared-memory slice
    2  + one block barrier per slice
    3  + a three-stage cp.async ring copying 16 KB per slice from global memory (8 MB read
         over and over, so it stays in L2)
    4  as 3, but every slice copies the same 16 KB with cp.async.ca (L1 hits, no L2 traffic)

The SM clock is sampled through NVML while each configuration runs.

    python scripts/mma_ceiling.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from functools import partial

import cupy as cp
import numpy as np
import pynvml

PEAK_SOURCE = r"""
extern "C" __global__ void mma_loop(float* out, int iters) {
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
    for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
    float d[ILP][4];
    for (int c = 0; c < ILP; ++c) for (int i = 0; i < 4; ++i) d[c][i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < ILP; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." DT "." DT ".f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.0f;
    for (int c = 0; c < ILP; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
ABLATION_SOURCE = r"""
#include <cuda_bf16.h>
#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#define MI 4
#define NI 8
#define SLICE (BM * BK + BK * BN)
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void ldm4(unsigned (&r)[4], unsigned a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldm4t(unsigned (&r)[4], unsigned a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void copy16(unsigned dst, const void* src) {
#if MODE == 4
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#endif
}
__device__ __forceinline__ int a_off(int r, int p) { return r * BK + ((p ^ ((r >> 1) & 3)) << 3); }
__device__ __forceinline__ int b_off(int r, int p) { return r * BN + ((p ^ (r & 7)) << 3); }

extern "C" __global__ void __launch_bounds__(128, 2) loop(float* out, const __nv_bfloat16* G, int slices) {
    extern __shared__ __align__(128) __nv_bfloat16 sm[];  // 3 stages of SLICE elements
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wr = warp / 2, wc = warp % 2;
    for (int i = tid; i < 3 * SLICE; i += 128) sm[i] = __float2bfloat16(0.001f * (i % 17));
    __syncthreads();
    float acc[MI][NI][4] = {};
    unsigned a[MI][4], b[NI / 2][4];
    for (int i = 0; i < 4; ++i)
        for (int m = 0; m < MI; ++m) a[m][i] = 0x3c003c00u ^ (lane * (i + m));
    for (int i = 0; i < 4; ++i)
        for (int m = 0; m < NI / 2; ++m) b[m][i] = 0x3c003c00u ^ (lane * (i + m + 5));
    for (int kt = 0; kt < slices; ++kt) {
        const int stage = kt % 3;
#if MODE >= 3
        asm volatile("cp.async.wait_group 1;\n" ::);
#endif
#if MODE >= 2
        __syncthreads();
#endif
#if MODE >= 3
        {
#if MODE == 3
            const __nv_bfloat16* src = G + (size_t)(blockIdx.x % 64) * 64 * 1024 + (kt % 64) * 1024;
#else
            const __nv_bfloat16* src = G;
#endif
            const unsigned base = smem_addr(sm + (kt + 2) % 3 * SLICE);
#pragma unroll
            for (int l = 0; l < 8; ++l) copy16(base + (tid + l * 128) * 16, src + ((tid + l * 128) % 128) * 8);
        }
        asm volatile("cp.async.commit_group;\n" ::);
#endif
        const unsigned ab = smem_addr(sm + stage * SLICE), bb = ab + BM * BK * 2;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
#if MODE >= 1
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
                ldm4(a[mi], ab + a_off(wr * WM + mi * 16 + lane % 16, kk / 8 + lane / 16) * 2);
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj)
                ldm4t(b[nj], bb + b_off(kk + lane % 16, (wc * WN + nj * 16) / 8 + lane / 16) * 2);
#endif
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    mma(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
        }
    }
#if MODE >= 3
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
    float s = 0.0f;
    for (int m = 0; m < MI; ++m)
        for (int n = 0; n < NI; ++n)
            for (int i = 0; i < 4; ++i) s += acc[m][n][i];
    out[blockIdx.x * 128 + tid] = s;
}
"""
ABLATION_MODES = {
    0: "mma.sync, fragments in registers",
    1: "+ ldmatrix from shared memory",
    2: "+ one barrier per slice",
    3: "+ cp.async ring, data in L2",
    4: "+ cp.async.ca ring, data in L1",
}
ABLATION_SMEM = 3 * (128 * 32 + 32 * 128) * 2
FLOP_PER_MMA = 2 * 16 * 8 * 16


def timed_with_clock(handle, launch: Callable[[], None], repeats: int) -> tuple[float, float, int]:
    """Median seconds of ``launch`` over ``repeats`` runs, with the median and lowest SM clock (MHz)."""
    clocks: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            time.sleep(0.003)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    try:
        for _ in range(repeats):
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    finally:
        done.set()
        sampler.join()
    return float(np.median(times)), float(np.median(clocks)), min(clocks)


def peak(handle, sms: int) -> list[dict]:
    """Part 1: mma.sync on register operands, by warps per SM and independent chains."""
    print(f"{'dtype':5} {'warps/SM':>8} {'chains':>6} {'TFLOP/s':>8} {'SM MHz':>7} {'FLOP/SM/clk':>11}")
    rows = []
    for dtype in ("bf16", "f16"):
        for warps in (4, 8, 16, 32):
            for chains in (4, 8, 16, 32):
                module = cp.RawModule(code=PEAK_SOURCE, options=(f"-DILP={chains}", f'-DDT="{dtype}"'))
                kernel = module.get_function("mma_loop")
                per_block = min(warps, 8)
                blocks, threads = sms * (warps // per_block), per_block * 32
                out = cp.zeros(blocks * threads, dtype=np.float32)
                iters = 256
                while True:  # grow the loop until one launch takes at least 20 ms
                    launch = partial(kernel, (blocks,), (threads,), (out, np.int32(iters)))
                    seconds, _, _ = timed_with_clock(handle, launch, 1)
                    if seconds >= 0.02:
                        break
                    iters *= 2
                seconds, clock, _ = timed_with_clock(handle, launch, 10)
                flop = FLOP_PER_MMA * chains * iters * blocks * per_block
                row = {
                    "dtype": dtype,
                    "warps_per_sm": warps,
                    "chains": chains,
                    "tflops": flop / seconds / 1e12,
                    "sm_clock_mhz": clock,
                    "flop_per_sm_per_clock": flop / seconds / sms / (clock * 1e6),
                }
                rows.append(row)
                print(
                    f"{dtype:5} {warps:>8} {chains:>6} {row['tflops']:>8.1f} {clock:>7.0f} "
                    f"{row['flop_per_sm_per_clock']:>11.0f}",
                    flush=True,
                )
    return rows


def ablation(handle, sms: int) -> list[dict]:
    """Part 2: step 10's main loop, one part at a time."""
    blocks, slices = 2 * sms, 20000
    source = cp.zeros(64 * 64 * 1024 + 64 * 1024, dtype=cp.uint16)
    out = cp.zeros(blocks * 128, dtype=cp.float32)
    print(f"step 10 main loop: {blocks} blocks of 4 warps, {slices} slices of 128 x 128 x 32 each")
    rows = []
    for mode, name in ABLATION_MODES.items():
        kernel = cp.RawModule(code=ABLATION_SOURCE, options=(f"-DMODE={mode}", "--std=c++17")).get_function("loop")
        kernel.max_dynamic_shared_size_bytes = ABLATION_SMEM
        kernel((blocks,), (128,), (out, source, np.int32(100)), shared_mem=ABLATION_SMEM)  # warm-up
        launch = partial(kernel, (blocks,), (128,), (out, source, np.int32(slices)), shared_mem=ABLATION_SMEM)
        seconds, clock, lowest = timed_with_clock(handle, launch, 5)
        tflops = 2.0 * 128 * 128 * 32 * slices * blocks / seconds / 1e12
        rows.append({"mode": mode, "name": name, "tflops": tflops, "sm_clock_mhz": clock, "sm_clock_min_mhz": lowest})
        print(f"{mode}  {name:36} {tflops:7.1f} TFLOP/s  SM clock {clock:.0f} MHz (min {lowest})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file as JSON")
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)
    name = pynvml.nvmlDeviceGetName(handle)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    print(f"{name}, {sms} SMs")
    results = {"gpu": name, "sms": sms, "peak": peak(handle, sms), "ablation": ablation(handle, sms)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
