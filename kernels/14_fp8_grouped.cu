// Step 14: a grouped FP8 GEMM for MoE layers: step 13's kernel over DeepSeek-V3's contiguous layout (DeepGEMM's
// m_grouped_fp8_gemm_nt_contiguous), every expert's rows in one A and one C, each expert's B and scales its own.
//
// Change from step 13 (one FP8 GEMM with 1 x 128 / 128 x 128 scales):
// - Groups. A holds every group's rows one group after the other, each group padded to 128 rows (the header's
//   align = 128), so a 128-row tile never spans two groups; group_index gives each row's group (-1 for padding). The
//   producer and the consumers read the group of a tile's first row and skip a tile of padding alone.
// - B is G matrices N x K, one map over them stacked (G N rows): a tile of group g loads rows g N + col0. A tile
//   that passes N reads the next group's first rows, whose sums land in columns past N, which the store clips.
// - B's scales are G grids, one after the other: group g's starts at g cdiv(N, 128) ld_scale_b.
// - The padding rows of a group's last tile are computed and written (A's padding is whatever it holds): the
//   header declares writes_padding, as DeepGEMM's kernel does. Nothing else changed: the persistent grid over every
//   group's tiles, the banded order, the promotion every 128 of K, the epilogue.
// Why it is fast: one persistent launch for every expert, where a loop of GEMMs launches one per expert and drains
// the GPU at each one's tail (inferred, not profiled); a tile's B is one expert's, read once per tile as in step 13.
// Measured on an H200 at DeepSeek-V3's MoE shapes (the moe-deepseek-v3 set: 8 local experts, 'edge' group sizes with
// an empty expert and a 5-row one), 3 separate pytest runs, each case against the grouped FP8 peer, cuBLASLt's FP8
// GEMM with the same scales one expert at a time (docs/data/h200-2026-11-28-step14.txt), medians (range) of BN = 256:
// prefill 8192x4096x7168g8 1038 TFLOP/s, 97.8% (97.8-98.2) of the peer; 8192x7168x2048g8 1026 TFLOP/s, 107.6%
// (107.4-107.9); decode 256x4096x7168g8 198.7% (196.3-199.2) and 256x7168x2048g8 155.2% (153.4-156.4), where the
// peer's GEMMs of about 40 rows leave most SMs idle (hence expect_fast). BN = 128: 97.2%, 101.8%, 187.2% and 151.3%.
// Step 13 made 1083 TFLOP/s on one 4096^3 GEMM (H100); the prefill shapes here pad each expert's rows to 128 (up to
// 127 rows an expert of extra work) and still reach 1026-1038.
//
// arch: sm_90a (wgmma, setmaxnreg), as step 13.
// requires: K % 16 (TMA's 16-byte rows of A and B), N % 8 (C's bf16 rows).

/* pytest-gemm
name = "fp8_grouped_contiguous"
description = "step 13's kernel over contiguous groups (DeepSeek-V3's MoE layout): each 128-row tile one group's, its B and 128 x 128 scales the group's; A's 1 x 128 scales; bf16 out"
entry = "fp8_grouped_ws"
args = ["M", "N", "K", "A_map", "B_map", "C_map", "scale_a", "scale_b", "ld_scale_a", "ld_scale_b", "group_index"]
dtypes = ["fp8_e4m3"]
arch = "sm_90a"
storage = { B = "NxK" }
scales = { A = "1x128", B = "128x128", stored = { A = "KxM", B = "NxK" }, align = 16 }
groups = { layout = "contiguous", align = 128, writes_padding = true }
params = { BN = [256, 128] }
block = [384]
grid = ["min(cdiv(M, 128) * cdiv(N, BN), SM_COUNT)"]
shared_mem = "(4 - BN // 256) * (128 * 128 + BN * 128 + 128 * 4) + 2 * 64 * BN * 2 + 1024"
tensor_maps = { A = { box = [128, 128], swizzle = 128 }, B = { box = [128, "BN"], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 16 == 0", "N % 8 == 0"]
expect_fast = "one launch over every expert's tiles, where the peer (cuBLASLt's FP8 GEMM a group at a time) launches one GEMM an expert: at decode (32 rows an expert) each of its GEMMs keeps 16 to 28 tiles of the 132 SMs busy, while this kernel reads every expert's B at once"
*/

#include <cuda_bf16.h>

#define BM 128
#define BK 128                            // one block of scales per stage: a stage's sums are promoted at once
#define HALVES (BN / 128)                 // 128-wide column blocks of a tile: one of B's scales each
#define STAGES (4 - BN / 256)             // 3 for BN = 256, as many as fit beside the epilogue's buffer; 4 for 128
                                          // (5 would fit; not measured). shared_mem in the header follows it
#define BAND 16                           // tile rows per band of the tile order
#define A_BYTES (BM * BK)                 // 16 KB: 128 rows of 128 e4m3 (128 bytes)
#define B_BYTES (BN * BK)                 // BN rows of 128 k (B stored N x K): 16 KB a half
#define C_BOX_BYTES (64 * 64 * 2)         // 8 KB: 64 rows of 64 bf16; BN / 64 per consumer
#define C_OFFSET (STAGES * (A_BYTES + B_BYTES))  // 1 KB-aligned, as the 128-byte swizzle needs
#define SA_OFFSET (C_OFFSET + 2 * (BN / 64) * C_BOX_BYTES)  // A's scales, 128 a stage
#define CONSUMER_WARPS 8

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// --- mbarriers -----------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// --- TMA -----------------------------------------------------------------------------------
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}
// `bytes` (a multiple of 16) from global memory at `src` (16-byte aligned), counted on `bar`: A's scales of a tile.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
// One box of shared memory to global through C's tensor map; TMA leaves out what lies past M or N.
__device__ __forceinline__ void tma_store(const TensorMap* map, unsigned src, int inner, int outer) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(inner), "r"(outer), "r"(src)
                 : "memory");
}
// The 128 threads of consumer warpgroup c meet at barrier 1 + c (0 is __syncthreads'); the id is an immediate so
// that ptxas reserves only these barriers.
__device__ __forceinline__ void consumer_barrier(int c) {
    if (c == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// --- wgmma ---------------------------------------------------------------------------------
// K-major operands in the 128-byte swizzle (A, and B stored N x K): 8-row groups 1 KB apart; a k-step of 32
// e4m3 is 32 bytes into each 128-byte row.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
           (1ull << 62);
}
#define SUMS(x) \
    "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]), "+f"(x[7]), \
    "+f"(x[8]), "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]), "+f"(x[14]), "+f"(x[15]), \
    "+f"(x[16]), "+f"(x[17]), "+f"(x[18]), "+f"(x[19]), "+f"(x[20]), "+f"(x[21]), "+f"(x[22]), "+f"(x[23]), \
    "+f"(x[24]), "+f"(x[25]), "+f"(x[26]), "+f"(x[27]), "+f"(x[28]), "+f"(x[29]), "+f"(x[30]), "+f"(x[31]), \
    "+f"(x[32]), "+f"(x[33]), "+f"(x[34]), "+f"(x[35]), "+f"(x[36]), "+f"(x[37]), "+f"(x[38]), "+f"(x[39]), \
    "+f"(x[40]), "+f"(x[41]), "+f"(x[42]), "+f"(x[43]), "+f"(x[44]), "+f"(x[45]), "+f"(x[46]), "+f"(x[47]), \
    "+f"(x[48]), "+f"(x[49]), "+f"(x[50]), "+f"(x[51]), "+f"(x[52]), "+f"(x[53]), "+f"(x[54]), "+f"(x[55]), \
    "+f"(x[56]), "+f"(x[57]), "+f"(x[58]), "+f"(x[59]), "+f"(x[60]), "+f"(x[61]), "+f"(x[62]), "+f"(x[63])
#define WGMMA_FP8(SCALE_D) \
    "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
    "%64, %65, " #SCALE_D ", 1, 1;\n"

// One stage's 128 of K into `t`, from nothing (scale-d 0 on the first k-step): four wgmma m64n128k32, one group.
__device__ __forceinline__ void stage_sums(float (&t)[64], unsigned a_base, unsigned b_base) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(WGMMA_FP8(0) : SUMS(t) : "l"(smem_desc(a_base)), "l"(smem_desc(b_base)));
#pragma unroll
    for (int k = 1; k < BK / 32; ++k)
        asm volatile(WGMMA_FP8(1) : SUMS(t) : "l"(smem_desc(a_base + 32 * k)), "l"(smem_desc(b_base + 32 * k)));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Tile `t` of the order: bands of BAND tile rows, column by column within a band.
__device__ __forceinline__ void tile_of(int t, int rows, int cols, int& row, int& col) {
    const int band = t / (BAND * cols), in_band = min(BAND, rows - band * BAND), local = t - band * BAND * cols;
    row = band * BAND + local % in_band;
    col = local / in_band;
}

// C_g = (A_g s_a)(B_g s_b,g)^T for each group g: A M x K e4m3 (every group's rows, each group padded to 128), B
// G matrices N x K e4m3, s_a one fp32 per row and 128 of K (stored K-block by K-block, ld_scale_a apart), s_b,g one
// per 128 x 128 block of B_g (stored N-block by N-block, ld_scale_b apart, group after group), C M x N bf16.
extern "C" __global__ void __launch_bounds__(384, 1)
    fp8_grouped_ws(int M, int N, int K, const __grid_constant__ TensorMap A_map, const __grid_constant__ TensorMap B_map,
                   const __grid_constant__ TensorMap C_map, const float* __restrict__ scale_a,
                   const float* __restrict__ scale_b, int ld_scale_a, int ld_scale_b,
                   const int* __restrict__ group_index) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
    const unsigned smem = (smem_addr(smem_raw) + 1023) & ~1023u;
    const float* sa_smem = reinterpret_cast<const float*>(smem_raw + (smem - smem_addr(smem_raw)) + SA_OFFSET);
    const int wg = threadIdx.x / 128;
    const int blocks = (K + BK - 1) / BK;
    const int rows = (M + BM - 1) / BM, cols = (N + BN - 1) / BN, tiles = rows * cols;
    const int grid_b = (N + 127) / 128 * ld_scale_b;  // one group's grid of B's scales, in floats
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);
            mbar_init(smem_addr(&empty_bar[s]), CONSUMER_WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int row, col;
                tile_of(t, rows, cols, row, col);
                const int row0 = row * BM, col0 = col * BN, g = __ldg(&group_index[row0]);
                // a tile of padding alone: never, with groups padded to 128 (skipped alike below). The kernel needs
                // align = 128: at a smaller one a tile would span two groups and compute the second with the first's B
                if (g < 0) continue;
                // A's scales of the tile's rows, each K block's contiguous (M-major): up to the grid's padded end
                const unsigned sa_bytes = 4u * min(BM, ld_scale_a - row0);
                for (int kb = 0; kb < blocks; ++kb, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(smem_addr(&empty_bar[s]), (it / STAGES - 1) & 1);
                    const unsigned bar = smem_addr(&full_bar[s]), dst = smem + s * (A_BYTES + B_BYTES);
                    mbar_expect_bytes(bar, A_BYTES + B_BYTES + sa_bytes);
                    tma_load(dst, &A_map, kb * BK, row0, bar);
                    tma_load(dst + A_BYTES, &B_map, kb * BK, g * N + col0, bar);  // BN rows of B_g: halves end to end
                    bulk_load(smem + SA_OFFSET + s * BM * 4, scale_a + (size_t)kb * ld_scale_a + row0, sa_bytes, bar);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int consumer = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
        const int r_lo = consumer * 64 + warp * 16 + lane / 4;  // this thread's rows in the tile: r_lo, r_lo + 8
        float acc[64 * HALVES], sums[64];
        // Half h of stage i (stages counted over all tiles): its four wgmma into `sums`; then, once they are done, the
        // sums times s_a[row] s_b[h] added to that half's fp32 accumulators. The stage goes back after its last half.
        auto issue = [&](int i, int h) {
            const unsigned base = smem + (i % STAGES) * (A_BYTES + B_BYTES);
            stage_sums(sums, base + consumer * (64 * BK), base + A_BYTES + h * (128 * BK));
        };
        auto promote = [&](int h, float lo, float hi) {
#pragma unroll
            for (int j = 0; j < 64; j += 4) {
                acc[64 * h + j] = fmaf(sums[j], lo, acc[64 * h + j]);
                acc[64 * h + j + 1] = fmaf(sums[j + 1], lo, acc[64 * h + j + 1]);
                acc[64 * h + j + 2] = fmaf(sums[j + 2], hi, acc[64 * h + j + 2]);
                acc[64 * h + j + 3] = fmaf(sums[j + 3], hi, acc[64 * h + j + 3]);
            }
        };
        // Epilogue through shared memory and TMA, as step 12's: this consumer's 64 x BN in 64 x 64 boxes in the
        // 128-byte swizzle (16-byte piece p of row r at p ^ (r % 8)), written out by TMA, which clips them at M and N.
        const unsigned cbuf = smem + C_OFFSET + consumer * (BN / 64) * C_BOX_BYTES;
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int row, col;
            tile_of(t, rows, cols, row, col);
            const int row0 = row * BM, col0 = col * BN, g = __ldg(&group_index[row0]);
            if (g < 0) continue;
            const float* sb = scale_b + (size_t)g * grid_b + (size_t)col * HALVES * ld_scale_b;  // the first half's
#pragma unroll
            for (int j = 0; j < 64 * HALVES; ++j) acc[j] = 0.0f;
            for (int kb = 0; kb < blocks; ++kb, ++it) {
                const int s = it % STAGES;
                float b_scale[HALVES];
#pragma unroll
                for (int h = 0; h < HALVES; ++h)  // a half past N reads nothing and is clipped by the store
                    b_scale[h] = col0 + 128 * h < N ? __ldg(&sb[h * ld_scale_b + kb]) : 0.0f;
                mbar_wait(smem_addr(&full_bar[s]), (it / STAGES) & 1);
                const float a_lo = sa_smem[s * BM + r_lo], a_hi = sa_smem[s * BM + r_lo + 8];
#pragma unroll
                for (int h = 0; h < HALVES; ++h) {
                    issue(it, h);
                    asm volatile("wgmma.wait_group.sync.aligned 0;\n" : SUMS(sums) : : "memory");
                    if (h == HALVES - 1 && lane == 0) mbar_arrive(smem_addr(&empty_bar[s]));
                    promote(h, a_lo * b_scale[h], a_hi * b_scale[h]);
                }
            }

            if (t128 == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // last tile's boxes read
            consumer_barrier(consumer);
#pragma unroll
            for (int lower = 0; lower < 2; ++lower) {  // this thread's rows r_lo, then r_lo + 8
                const int rl = warp * 16 + lane / 4 + lower * 8;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    __nv_bfloat162 v = __floats2bfloat162_rn(acc[4 * j + 2 * lower], acc[4 * j + 2 * lower + 1]);
                    const unsigned at = cbuf + (j / 8) * C_BOX_BYTES + rl * 128 + (((j % 8) ^ (rl % 8)) << 4) + 4 * (lane % 4);
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(*reinterpret_cast<unsigned*>(&v)) : "memory");
                }
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the writes, visible to TMA
            consumer_barrier(consumer);
            if (t128 == 0) {
#pragma unroll
                for (int b = 0; b < BN / 64; ++b)
                    if (row0 + consumer * 64 < M && col0 + 64 * b < N)
                        tma_store(&C_map, cbuf + b * C_BOX_BYTES, col0 + 64 * b, row0 + consumer * 64);
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
        if (t128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // no box left unwritten
    }
}
