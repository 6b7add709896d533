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

Part 3, the copies: the same loop on random data laid out as real operands (8 MB, in L2),
copied either by TMA (one thread, 2-D tensor maps, one mbarrier per stage) or by cp.async
from every thread as in step 10, each also without the ldmatrix and mma (the copies alone;
their rate is given as the TFLOP/s the loop would reach if copying were the only cost).

Part 4, the operand pattern: mma.sync on an MI x NI grid of register fragments, as a warp
tile of 16 MI x 8 NI would issue them, in four orders.

The SM clock is sampled through NVML while each configuration runs.

    python research/mma_ceiling.py [--parts peak,ablation,copies,patterns] [--json FILE]
"""

from __future__ import annotations

import argparse
import ctypes
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
FRAGMENT_SOURCE = r"""
// Shared by the ablation and copy kernels: shared-memory addresses, ldmatrix, mma.sync (bf16).
#include <cuda_bf16.h>
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
"""
ABLATION_SOURCE = r"""
#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#define MI 4
#define NI 8
#define SLICE (BM * BK + BK * BN)
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
COPY_SOURCE = r"""
// The same loop on random data in global memory laid out as real operands, with the copies
// done either by TMA (one thread, two tensor maps, mbarrier per stage) or by cp.async from
// every thread (as step 10); NO_MMA drops the ldmatrix and mma to measure the copies alone.
#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 64
#define MI 4
#define NI 8
#define STAGES 3
#define KTOT 2048  // A: 8 panels of 128 x KTOT, B: KTOT x 8 panels of 128 (8 MB: stays in L2)
#define NTOT 1024
#define A_BYTES (BM * BK * 2)
#define B_BYTES (BK * BN * 2)
#define STAGE_BYTES ((A_BYTES + B_BYTES + 1023) / 1024 * 1024)
__device__ __forceinline__ void bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void bar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tensor_copy(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// Byte offsets of 16-byte piece p of row r in a stage: A with TMA's 64-byte swizzle (rows of
// 64 bytes), B as two 64-column boxes with the 128-byte swizzle. Both are conflict-free for
// ldmatrix and identical to what TMA writes, so cp.async uses them too.
__device__ __forceinline__ unsigned a_off(int r, int p) { return r * 64 + ((p ^ ((r >> 1) & 3)) << 4); }
__device__ __forceinline__ unsigned b_off(int r, int p) {
    return A_BYTES + (p >> 3) * (BK * 128) + r * 128 + (((p & 7) ^ (r & 7)) << 4);
}

extern "C" __global__ void __launch_bounds__(128, 2)
    loop(float* out, const __nv_bfloat16* A, const __nv_bfloat16* B, const void* a_map, const void* b_map, int slices) {
    extern __shared__ __align__(1024) unsigned char sm[];
    __shared__ __align__(8) unsigned long long full[STAGES];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wr = warp / 2, wc = warp % 2;
    const unsigned base = (smem_addr(sm) + 1023) / 1024 * 1024;
    const int row0 = (blockIdx.x % 8) * BM, col0 = ((blockIdx.x / 8) % 8) * BN;
#if USE_TMA
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) bar_init(smem_addr(&full[s]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    auto issue = [&](int slice) {  // thread 0: three boxes per slice
        const int stage = slice % STAGES, k0 = (slice % (KTOT / BK)) * BK;
        const unsigned dst = base + stage * STAGE_BYTES, bar = smem_addr(&full[stage]);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        bar_expect(bar, A_BYTES + B_BYTES);
        tensor_copy(dst, a_map, k0, row0, bar);
        tensor_copy(dst + A_BYTES, b_map, col0, k0, bar);
        tensor_copy(dst + A_BYTES + BK * 128, b_map, col0 + 64, k0, bar);
    };
    if (tid == 0)
        for (int s = 0; s < STAGES - 1; ++s) issue(s);
#else
    auto issue = [&](int slice) {  // every thread: 8 pieces of 16 bytes per slice
        const int stage = slice % STAGES, k0 = (slice % (KTOT / BK)) * BK;
        const unsigned dst = base + stage * STAGE_BYTES;
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int i = tid + l * 128, r = i / 4, p = i % 4;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + a_off(r, p)),
                         "l"(A + (size_t)(row0 + r) * KTOT + k0 + p * 8));
        }
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int i = tid + l * 128, r = i / 16, p = i % 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + b_off(r, p)),
                         "l"(B + (size_t)(k0 + r) * NTOT + col0 + p * 8));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    for (int s = 0; s < STAGES - 1; ++s) issue(s);
#endif
    float acc[MI][NI][4] = {};
    for (int kt = 0; kt < slices; ++kt) {
        const int stage = kt % STAGES;
#if USE_TMA
        bar_wait(smem_addr(&full[stage]), (kt / STAGES) & 1);
        __syncthreads();  // every warp is done with the stage the next copy overwrites
        if (tid == 0 && kt + STAGES - 1 < slices) issue(kt + STAGES - 1);
#else
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();
        if (kt + STAGES - 1 < slices) issue(kt + STAGES - 1);
        else asm volatile("cp.async.commit_group;\n" ::);
#endif
        const unsigned sb = base + stage * STAGE_BYTES;
#if NO_MMA
        acc[0][0][0] += __bfloat162float(*(const __nv_bfloat16*)(sm + (sb - smem_addr(sm)) + tid * 2));
#else
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI / 2][4];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) ldm4(a[mi], sb + a_off(wr * WM + mi * 16 + lane % 16, kk / 8 + lane / 16));
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj)
                ldm4t(b[nj], sb + b_off(kk + lane % 16, (wc * WN + nj * 16) / 8 + lane / 16));
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    mma(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
        }
#endif
    }
    float s = 0.0f;
    for (int m = 0; m < MI; ++m)
        for (int n = 0; n < NI; ++n)
            for (int i = 0; i < 4; ++i) s += acc[m][n][i];
    out[blockIdx.x * 128 + tid] = s;
}
"""
PATTERN_SOURCE = r"""
// mma.sync on an MI x NI grid of fragments held in registers (a warp tile of 16 MI x 8 NI),
// issued row by row (ORDER 0), column by column (1), or snaking along rows (2) or columns (3).
extern "C" __global__ void pattern(float* out, int iters, unsigned seed) {
    unsigned a[MI][4], b[NI][2];
    for (int m = 0; m < MI; ++m)
        for (int i = 0; i < 4; ++i) a[m][i] = 0x3c003c00u ^ ((threadIdx.x + seed) * (i + 3 * m + 1));
    for (int n = 0; n < NI; ++n)
        for (int i = 0; i < 2; ++i) b[n][i] = 0x3c003c00u ^ ((threadIdx.x + seed) * (i + 5 * n + 2));
    float d[MI][NI][4];
    for (int m = 0; m < MI; ++m)
        for (int n = 0; n < NI; ++n)
            for (int i = 0; i < 4; ++i) d[m][n][i] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int x = 0; x < MI * NI; ++x) {
#if ORDER == 0
            const int m = x / NI, n = x % NI;
#elif ORDER == 1
            const int n = x / MI, m = x % MI;
#elif ORDER == 2
            const int m = x / NI, n = (m & 1) ? NI - 1 - x % NI : x % NI;
#else
            const int n = x / MI, m = (n & 1) ? MI - 1 - x % MI : x % MI;
#endif
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(d[m][n][0]), "+f"(d[m][n][1]), "+f"(d[m][n][2]), "+f"(d[m][n][3])
                         : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]), "r"(b[n][0]), "r"(b[n][1]));
        }
    }
    float s = 0.0f;
    for (int m = 0; m < MI; ++m)
        for (int n = 0; n < NI; ++n)
            for (int i = 0; i < 4; ++i) s += d[m][n][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
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
        options = (f"-DMODE={mode}", "--std=c++17")
        kernel = cp.RawModule(code=FRAGMENT_SOURCE + ABLATION_SOURCE, options=options).get_function("loop")
        kernel.max_dynamic_shared_size_bytes = ABLATION_SMEM
        kernel((blocks,), (128,), (out, source, np.int32(100)), shared_mem=ABLATION_SMEM)  # warm-up
        launch = partial(kernel, (blocks,), (128,), (out, source, np.int32(slices)), shared_mem=ABLATION_SMEM)
        seconds, clock, lowest = timed_with_clock(handle, launch, 5)
        tflops = 2.0 * 128 * 128 * 32 * slices * blocks / seconds / 1e12
        rows.append({"mode": mode, "name": name, "tflops": tflops, "sm_clock_mhz": clock, "sm_clock_min_mhz": lowest})
        print(f"{mode}  {name:36} {tflops:7.1f} TFLOP/s  SM clock {clock:.0f} MHz (min {lowest})", flush=True)
    return rows


COPY_MODES = {
    (True, False): "TMA copies + ldmatrix + mma",
    (False, False): "cp.async copies + ldmatrix + mma",
    (True, True): "TMA copies alone",
    (False, True): "cp.async copies alone",
}
PATTERNS = [(4, 8), (8, 4), (2, 8), (4, 4), (2, 16), (1, 32)]


def _bf16_bits(shape: tuple[int, int]):
    """Uniform random bf16 bit patterns (the top halves of fp32 values)."""
    x = cp.random.uniform(-1.0, 1.0, shape, dtype=cp.float32)
    return (x.view(cp.uint32) >> 16).astype(cp.uint16)


def _tensor_map(array, box: tuple[int, int], swizzle: int):
    """A 2-D bf16 CUtensorMap of a row-major device array, copied to device memory."""
    rows, cols = array.shape
    storage = ctypes.create_string_buffer(192)
    aligned = (ctypes.addressof(storage) + 63) // 64 * 64
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    bf16, l2_128b, swizzle_mode = 9, 2, {64: 2, 128: 3}[swizzle]
    rc = encode(
        ctypes.c_void_p(aligned), bf16, 2, ctypes.c_void_p(array.data.ptr), (ctypes.c_uint64 * 2)(cols, rows),
        (ctypes.c_uint64 * 1)(cols * 2), (ctypes.c_uint32 * 2)(*box), (ctypes.c_uint32 * 2)(1, 1), 0, swizzle_mode,
        l2_128b, 0,
    )  # fmt: skip
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: CUDA error {rc}")
    return cp.asarray(np.frombuffer(ctypes.string_at(aligned, 128), dtype=np.uint8).copy())


def copies(handle, sms: int) -> list[dict]:
    """Part 3: the loop's copies by TMA or cp.async, with and without the mma work."""
    a, b = _bf16_bits((8 * 128, 2048)), _bf16_bits((2048, 1024))
    a_map, b_map = _tensor_map(a, (32, 128), 64), _tensor_map(b, (64, 32), 128)
    blocks, slices, smem = 2 * sms, 20000, 3 * 16384 + 1024
    out = cp.zeros(blocks * 128, dtype=cp.float32)
    rows = []
    for (tma, no_mma), name in COPY_MODES.items():
        options = (f"-DUSE_TMA={int(tma)}", f"-DNO_MMA={int(no_mma)}", "--std=c++17")
        kernel = cp.RawModule(code=FRAGMENT_SOURCE + COPY_SOURCE, options=options).get_function("loop")
        kernel.max_dynamic_shared_size_bytes = smem
        args = (out, a, b, a_map, b_map)
        kernel((blocks,), (128,), (*args, np.int32(100)), shared_mem=smem)  # warm-up
        launch = partial(kernel, (blocks,), (128,), (*args, np.int32(slices)), shared_mem=smem)
        seconds, clock, lowest = timed_with_clock(handle, launch, 5)
        tflops = 2.0 * 128 * 128 * 32 * slices * blocks / seconds / 1e12
        l2_to_smem = 16384 * slices * blocks / seconds / 1e12
        rows.append({"name": name, "tflops": tflops, "tb_per_s": l2_to_smem, "sm_clock_mhz": clock})
        speed = f"{tflops:7.1f} TFLOP/s  {l2_to_smem:5.2f} TB/s into shared memory"
        print(f"{name:34} {speed}  SM clock {clock:.0f} MHz (min {lowest})", flush=True)
    return rows


def patterns(handle, sms: int) -> list[dict]:
    """Part 4: mma.sync on register fragments by warp-tile shape and issue order (8 warps per SM)."""
    blocks, iters = 2 * sms, 2048
    out = cp.zeros(blocks * 128, dtype=cp.float32)
    rows = []
    for mi, ni in PATTERNS:
        for order in range(4):
            options = (f"-DMI={mi}", f"-DNI={ni}", f"-DORDER={order}")
            kernel = cp.RawModule(code=PATTERN_SOURCE, options=options).get_function("pattern")
            launch = partial(kernel, (blocks,), (128,), (out, np.int32(iters), np.uint32(7)))
            launch()
            seconds, clock, _ = timed_with_clock(handle, launch, 5)
            flop = FLOP_PER_MMA * mi * ni * iters * blocks * 4
            row = {"mi": mi, "ni": ni, "order": order, "tflops": flop / seconds / 1e12, "sm_clock_mhz": clock}
            row["flop_per_sm_per_clock"] = flop / seconds / sms / (clock * 1e6)
            rows.append(row)
            rate = f"{row['tflops']:6.1f} TFLOP/s, {row['flop_per_sm_per_clock']:5.0f} FLOP/SM/clk at {clock:.0f} MHz"
            print(f"warp tile {16 * mi:3} x {8 * ni:3} order {order}: {rate}", flush=True)
    return rows


PARTS = {"peak": peak, "ablation": ablation, "copies": copies, "patterns": patterns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file as JSON")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run (default: all)")
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)
    name = pynvml.nvmlDeviceGetName(handle)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    print(f"{name}, {sms} SMs")
    results: dict = {"gpu": name, "sms": sms}
    for part in args.parts.split(","):
        results[part] = PARTS[part](handle, sms)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
