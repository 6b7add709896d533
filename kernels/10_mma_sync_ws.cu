// Step 10: mma.sync once more, warp-specialised: step 10's mma.sync + ldmatrix inner loop inside
// step 12's persistent frame (this file is the second half of step 10, and uses step 12's ideas
// without wgmma, to show how far mma.sync itself can go).
//
// Change from step 10's TMA-fed version in 10_mma_sync.cu (blocks of 128 x 128, four warps
// that also wait for thread 0's copies, C staged through shared memory and written by the
// warps):
// - A copy warpgroup: one of its threads issues the TMA copies of each slice (A as a 128 x 64
//   box, B as four 64 x 64 boxes, both with the 128-byte swizzle) into a ring of 3 stages run by
//   full/empty mbarriers. Eight mma warps, each on a 64 x 64 tile of a 128 x 256 block tile, do
//   nothing but ldmatrix and mma.sync.
// - Registers: a block of 12 warps gets 168 registers a thread from ptxas (three warps share
//   each quarter of the register file), too few for 128 accumulators and the fragments (48
//   bytes spilled without setmaxnreg). The copy warpgroup gives its registers back
//   (setmaxnreg 24) and the mma warps take them (240): no spill. (With nine warps, one copy
//   warp, ptxas also stops at 168 and spilled 112 bytes.)
// - Persistent grid (one block per SM, tiles in bands of 16 tile rows), as in step 12: the copy
//   thread fills the next tile's stages while the mma warps write C.
// - Epilogue through TMA: each warp owns one 64 x 64 box of a 64 KB buffer in the 128-byte
//   swizzle (conflict-free stores), and its lane 0 hands that box to TMA. No barrier between
//   warps: each box has one writer.
// Why it is faster: the mma warps never copy, never wait at a block-wide barrier, and do not
// hold the tensor cores idle while C goes out.
// Measured on the H100 at 4096^3 (research/kernel-speed.sh: 3 separate runs, against cuBLAS in
// the same run; docs/results.md): bf16 520 TFLOP/s, 66.6% of cuBLAS (65.8-67.9%), against the
// TMA-fed version's 474 and 60.0%; fp16 67.8% against 61.5%. At 8192^3 63.1% and 63.8%, where the
// power cap slows mma.sync more than cuBLAS's wgmma (the TMA-fed version: 59.6% and 59.4%).
// On an H200: 67.6-68.1% at 4096^3, 63.2-63.8% at 8192^3.
// Tried without a gain: fragments of the next k step loaded before the current mma (67.4%
// against 67.9%), bands of 8 tile rows (66.1%).
//
// arch: sm_90a (setmaxnreg; TMA).
// requires: TMA's 16-byte row pitch (K % 8 and N % 8); M may be anything.

/* pytest-gemm
name = "hgemm_mma_ws_bf16"
description = "mma.sync m16n8k16 + ldmatrix in eight 64 x 64 warp tiles, a copy warpgroup (one thread issuing TMA), persistent grid, TMA-store epilogue; bf16 in and out, fp32 accumulation"
entry = "gemm_mma_ws<__nv_bfloat16>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["bf16"]
arch = "sm_90a"
block = [384]
grid = ["min(cdiv(M, 128) * cdiv(N, 256), SM_COUNT)"]
shared_mem = "3 * (128 * 64 + 64 * 256) * 2 + 128 * 256 * 2 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_mma_ws_fp16"
description = "mma.sync m16n8k16 + ldmatrix in eight 64 x 64 warp tiles, a copy warpgroup (one thread issuing TMA), persistent grid, TMA-store epilogue; fp16 in and out, fp32 accumulation"
entry = "gemm_mma_ws<__half>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["fp16"]
arch = "sm_90a"
block = [384]
grid = ["min(cdiv(M, 128) * cdiv(N, 256), SM_COUNT)"]
shared_mem = "3 * (128 * 64 + 64 * 256) * 2 + 128 * 256 * 2 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BM 128
#define BN 256
#define BK 64
#define STAGES 3
#define BAND 16                      // tile rows per band of the tile order
#define MMA_WARPS 8                  // 2 x 4 warps of 64 x 64
#define MI 4                         // m16 tiles per warp ...
#define NI 8                         // ... and n8 tiles
#define A_STAGE_BYTES (BM * BK * 2)  // 16 KB: 128 rows of 128 bytes
#define B_BOX_BYTES (BK * 64 * 2)    // 8 KB: 64 k-rows of 64 columns; four boxes per slice
#define STAGE_BYTES (A_STAGE_BYTES + 4 * B_BOX_BYTES)
#define C_BOX_BYTES (64 * 64 * 2)  // 8 KB: one warp's 64 x 64 results

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
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
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap* map, unsigned src, int inner, int outer) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(inner), "r"(outer), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

template <typename E> struct Elem;
template <> struct Elem<__half> {
    using Pair = __half2;
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ Pair pack(float x, float y) { return __floats2half2_rn(x, y); }
    static __device__ __forceinline__ float2 unpack(Pair p) { return __half22float2(p); }
};
template <> struct Elem<__nv_bfloat16> {
    using Pair = __nv_bfloat162;
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ Pair pack(float x, float y) { return __floats2bfloat162_rn(x, y); }
    static __device__ __forceinline__ float2 unpack(Pair p) { return __bfloat1622float2(p); }
};

// Tile t of the order: bands of BAND tile rows, column by column within a band.
__device__ __forceinline__ void tile_of(int t, int rows, int cols, int& row, int& col) {
    const int band = t / (BAND * cols), in_band = min(BAND, rows - band * BAND), local = t - band * BAND * cols;
    row = band * BAND + local % in_band;
    col = local / in_band;
}

template <typename E>
__global__ void __launch_bounds__((MMA_WARPS + 4) * 32, 1)
    gemm_mma_ws(int M, int N, int K, float alpha, const __grid_constant__ TensorMap A_map,
                const __grid_constant__ TensorMap B_map, float beta, E* __restrict__ C,
                const __grid_constant__ TensorMap C_map) {
    using Pair = typename Elem<E>::Pair;
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
    const unsigned smem = (smem_addr(smem_raw) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1 KB
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int slices = (K + BK - 1) / BK, rows = (M + BM - 1) / BM, cols = (N + BN - 1) / BN, tiles = rows * cols;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);           // the copy thread's expect_bytes
            mbar_init(smem_addr(&empty_bar[s]), MMA_WARPS);  // one arrival per mma warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp >= MMA_WARPS) {  // the copy warpgroup: one thread issues every copy
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (threadIdx.x != MMA_WARPS * 32) return;
        int it = 0;  // slices issued so far, over all tiles: stage it % STAGES, phase it / STAGES
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int row, col;
            tile_of(t, rows, cols, row, col);
            for (int kt = 0; kt < slices; ++kt, ++it) {
                const int s = it % STAGES;
                if (it >= STAGES) mbar_wait(smem_addr(&empty_bar[s]), (it / STAGES - 1) & 1);
                // The warps' ldmatrix reads of this stage (ordered by empty_bar) before TMA's writes.
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                const unsigned bar = smem_addr(&full_bar[s]), dst = smem + s * STAGE_BYTES;
                mbar_expect_bytes(bar, STAGE_BYTES);
                tma_load(dst, &A_map, kt * BK, row * BM, bar);
#pragma unroll
                for (int j = 0; j < 4; ++j) tma_load(dst + A_STAGE_BYTES + j * B_BOX_BYTES, &B_map, col * BN + 64 * j, kt * BK, bar);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    // An mma warp: rows wr * 64 .. + 63, columns wc * 64 .. + 63 of the block tile.
    const int wr = warp / 4, wc = warp % 4;
    // This lane's ldmatrix row addresses inside a stage. A (row-major, 128-byte rows): row
    // wr * 64 + mi * 16 + lane % 16, 16-byte piece 2 ks + lane / 16, swizzled by the row's low
    // three bits (= lane % 8). B (box wc, 128-byte rows of 64 columns): k row ks * 16 + lane % 16,
    // piece 2 nj + lane / 16.
    const unsigned a_row = (wr * 64 + lane % 16) * 128, b_row = A_STAGE_BYTES + wc * B_BOX_BYTES + (lane % 16) * 128;
    // Piece 2 j + lane / 16 of a row whose low three bits are lane % 8 sits at byte
    // (((2 j + lane / 16) ^ (lane % 8)) << 4) = bx ^ (j << 5): one register for every j.
    const unsigned bx = ((lane / 16) ^ (lane % 8)) << 4;
    const unsigned cbox = smem + STAGES * STAGE_BYTES + warp * C_BOX_BYTES;
    unsigned char* box = smem_raw + (cbox - smem_addr(smem_raw));  // the same place, as a pointer

    int s = 0;
    unsigned phase = 0;  // stage s and the parity of its current fill, over all tiles
    float acc[MI][NI][4];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int row, col;
        tile_of(t, rows, cols, row, col);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.0f;
        for (int kt = 0; kt < slices; ++kt) {
            mbar_wait(smem_addr(&full_bar[s]), phase);
            const unsigned base = smem + s * STAGE_BYTES;
#pragma unroll
            for (int ks = 0; ks < BK / 16; ++ks) {
                unsigned a[MI][4];
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a[mi], base + a_row + mi * 16 * 128 + (bx ^ (ks << 5)));
#pragma unroll
                for (int nj = 0; nj < NI / 2; ++nj) {
                    unsigned b[4];
                    ldmatrix_x4_trans(b, base + b_row + ks * 16 * 128 + (bx ^ (nj << 5)));
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) {
                        Elem<E>::mma(acc[mi][2 * nj], a[mi], b[0], b[1]);
                        Elem<E>::mma(acc[mi][2 * nj + 1], a[mi], b[2], b[3]);
                    }
                }
            }
            __syncwarp();  // every lane's fragments of this stage are in registers
            if (lane == 0) mbar_arrive(smem_addr(&empty_bar[s]));
            if (++s == STAGES) s = 0, phase ^= 1;
        }

        // Epilogue: the warp's 64 x 64 results into its own box (the 16-byte piece ni of box row
        // r at ni ^ (r % 8)), then lane 0 hands the box to TMA, which clips it at M and N.
        const int row0 = row * BM + wr * 64, col0 = col * BN + wc * 64;
        if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // the last box is read
        __syncwarp();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int r = mi * 16 + lane / 4 + half * 8;
                const Pair* in = reinterpret_cast<const Pair*>(&C[(size_t)(row0 + r) * N + col0 + 2 * (lane % 4)]);
                Pair old[NI];  // all of a row's reads before any write (see step 10)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    old[ni] = beta != 0.0f && row0 + r < M && col0 + ni * 8 + 2 * (lane % 4) < N ? in[4 * ni] : Elem<E>::pack(0.0f, 0.0f);
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    const float2 c = Elem<E>::unpack(old[ni]);
                    const Pair v = Elem<E>::pack(fmaf(beta, c.x, alpha * acc[mi][ni][2 * half]), fmaf(beta, c.y, alpha * acc[mi][ni][2 * half + 1]));
                    *reinterpret_cast<Pair*>(box + r * 128 + ((ni ^ (r % 8)) << 4) + 4 * (lane % 4)) = v;
                }
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the writes, visible to TMA
        __syncwarp();
        if (lane == 0 && row0 < M && col0 < N) {
            tma_store(&C_map, cbox, col0, row0);
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
    }
    if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // no box left unwritten
}
