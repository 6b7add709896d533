// Step 10: tensor cores through mma.sync, ldmatrix and a swizzled shared-memory layout.
//
// Change from step 9 (same 128 x 128 block tile, 4 warps of 64 x 64, K slice 32, the same
// multi-stage cp.async ring with its copy addresses worked out once): the parts WMMA hides
// are now written by hand.
// - The PTX instruction mma.sync.m16n8k16 is issued directly, on fragments whose register
//   layout the PTX ISA defines: 4 x 8 instructions per 16-wide K step per warp, 128 fp32
//   accumulators per thread, C written straight from registers (no staging through
//   shared memory).
// - Fragments are loaded with ldmatrix (.trans for B, which is stored K-major): one
//   instruction brings four 8 x 8 matrices, each lane giving the address of one 16-byte
//   row. Each lane's ldmatrix offsets inside a stage are also worked out once.
// - Shared memory has no padding. Instead the 16-byte pieces of each row are permuted with
//   an XOR swizzle (piece c of row r goes to c ^ f(r)), so that the 8 rows one ldmatrix
//   reads, and the pieces cp.async writes, always fall on 8 different groups of banks,
//   and each 32-byte global sector lands whole. Step 9 had to choose between bank
//   conflicts and split sectors; here ncu counts 2,277 bank conflicts for a whole 4096^3
//   product and exactly the 67.1 M L2-to-SM sectors the copies need.
// Why it is faster: no conflicts, no wasted L2 traffic, no padding, and a fixed epilogue
// without a round trip through shared memory. Hoisting the copy and ldmatrix address
// arithmetic out of the loop took it from 260 to 172 SASS instructions per slice (sm_90)
// and from 367 to 421 TFLOP/s (bf16).
// Measured on the H100 at 4096^3 (default variants BK 32 with 3 stages for bf16, 4 for
// fp16): bf16 418 TFLOP/s, 53.1% of cuBLAS bf16 in the same run; fp16 417 TFLOP/s, 54.4%;
// 1.21x and 1.27x step 9. (bf16 runs 3 and 4 stages within 0.5% of each other; fp16 with 3
// stages was 6-8% slower than with 4 in three of four runs.)
// mma.sync itself tops out at 671 TFLOP/s on this H100 (scripts/mma_ceiling.py: register
// operands, 8 warps per SM, 1980 MHz; 2,568 FLOP per SM per clock, 63% of wgmma's 4,096).
// This loop on data in L2 (same script) makes 606 TFLOP/s without copies, 423-426 with the
// cp.async ring, but 525-561 when TMA does the copies, although either copy path alone
// moves 8.3-8.6 TB/s into shared memory. So the cost is not bandwidth but the copying that
// every thread does between its mma (address and bounds arithmetic, 8 LDGSTS per slice and
// their commit/wait, in the memory pipe that ldmatrix also uses).
// Tried without a gain: spreading the copies between the mma (-10%), 5-6 stages, an L2
// prefetch hint, copies issued before the barrier, 128 x 256 and 256 x 128 tiles (one block
// per SM: 400-404 TFLOP/s; with an mbarrier ring instead of the barrier: 420-429), fragments
// double-buffered across k steps (-6%), eight warps of 64 x 32 (-10%). BK 64 with 4 stages
// needs 128 KB, so only one block fits per SM: 343 TFLOP/s.
//
// The TMA-fed version (hgemm_mma_tma_*, built for sm_90): the same warp tiles and inner
// loop, but thread 0 alone copies each slice with TMA (cp.async.bulk.tensor: two boxes of A
// and TILE_N / 64 of B, from tensor maps the harness builds; header key tensor_maps) into the
// same swizzled layouts, and two mbarriers per stage take the place of the block barrier:
// "full" completes when a slice has landed, "empty" when all warps have read it. A warp waits
// only for its own next slice; thread 0 refills the stage of the previous slice one k step
// into the current one, once every warp has released it, so no warp waits for the slowest at
// every slice. BK 64 halves the waits per FLOP and, with 3 stages (96 KB), still fits two
// blocks per SM. The epilogue goes through shared memory to write whole 16-byte pieces of rows.
// Measured on the H100 at 4096^3 (default TILE_N 128, BK 64, 3 stages), one run of all steps:
// bf16 464 TFLOP/s, 60.9% of cuBLAS bf16 in the same run; fp16 466 TFLOP/s, 62.1%; 1.11x and
// 1.12x the cp.async version (418 and 417 TFLOP/s, 53.1% and 54.4%, in that run). In six more
// measurements bf16 made 60.8-61.3%, fp16 61.6-62.5%. The first TMA-fed version, with
// __syncthreads after the mbarrier wait, made 58.9-60.1% in the same runs.
// TILE_N 256 (blocks of 128 x 256, eight warps, one block per SM, 25% fewer L2-to-SM bytes
// per FLOP) makes the same 60.6-61.4%, so L2 bandwidth is not what limits it. Also tried:
// BK 32 with 4 to 6 stages (49-50%), a persistent grid whose copies run on into the next
// tile while the warps write C (56.6-58.0%), refilling two slices behind instead of one (no
// gain), and a separate producer warp (nine warps leave ptxas 168 registers per thread, and
// the warp tile then spills).
//
// requires: cp.async moves whole 16-byte pieces (8 elements) of rows of A (length K) and B
// (length N), which must start on 16-byte boundaries and lie wholly inside or outside the
// matrix: K and N must be multiples of 8. M may be anything; missing rows and slices past
// K are zero-filled by cp.async itself. The TMA version has the same rule for another
// reason: a tensor map needs the distance between stored rows to be a multiple of 16 bytes;
// TMA zero-fills whatever part of a box lies outside the matrix.

/* pytest-gemm
name = "hgemm_mma_fp16"
description = "mma.sync m16n8k16 + ldmatrix, XOR-swizzled shared memory, multi-stage cp.async; fp16 in and out, fp32 accumulation"
entry = "gemm_mma<__half>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp16"]
params = { BK = [32, 64], STAGES = [4, 3] }
block = [128]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * BK + BK * 128) * 2"
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_mma_bf16"
description = "mma.sync m16n8k16 + ldmatrix, XOR-swizzled shared memory, multi-stage cp.async; bf16 in and out, fp32 accumulation"
entry = "gemm_mma<__nv_bfloat16>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["bf16"]
params = { BK = [32, 64], STAGES = [3, 4] }
block = [128]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * BK + BK * 128) * 2"
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_mma_tma_fp16"
description = "step 10's mma.sync + ldmatrix main loop fed by TMA copies (one thread, 2-D tensor maps), a full/empty mbarrier ring instead of the block barrier, epilogue in 16-byte rows; fp16 in and out, fp32 accumulation"
entry = "gemm_mma_tma<__half>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C"]
dtypes = ["fp16"]
arch = "sm_90"
params = { TILE_N = [128, 256], BK = [64], STAGES = [3] }
block = ["TILE_N"]
grid = ["cdiv(N, TILE_N)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * BK + BK * TILE_N) * 2 + 1024"
tensor_maps = { A = { box = [32, 128], swizzle = 64 }, B = { box = [64, "BK"], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_mma_tma_bf16"
description = "step 10's mma.sync + ldmatrix main loop fed by TMA copies (one thread, 2-D tensor maps), a full/empty mbarrier ring instead of the block barrier, epilogue in 16-byte rows; bf16 in and out, fp32 accumulation"
entry = "gemm_mma_tma<__nv_bfloat16>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C"]
dtypes = ["bf16"]
arch = "sm_90"
params = { TILE_N = [128, 256], BK = [64], STAGES = [3] }
block = ["TILE_N"]
grid = ["cdiv(N, TILE_N)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * BK + BK * TILE_N) * 2 + 1024"
tensor_maps = { A = { box = [32, 128], swizzle = 64 }, B = { box = [64, "BK"], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BM 128
#define BN 128
#define WM 64
#define WN 64
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define A_CHUNKS (BM * BK / 8)  // 16-byte pieces per slice
#define B_CHUNKS (BK * BN / 8)
#define MI (WM / 16)  // mma tiles per warp along M ...
#define NI (WN / 8)   // ... and along N

// --- the PTX pieces ------------------------------------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
    // src-size 0 reads nothing and fills the 16 bytes with zeros.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N_PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N_PENDING));
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
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
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
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ Pair pack(float x, float y) { return __floats2bfloat162_rn(x, y); }
    static __device__ __forceinline__ float2 unpack(Pair p) { return __bfloat1622float2(p); }
};

// --- swizzled shared-memory layouts (offsets in elements) ----------------------------------
// A slice: BM rows of BK elements. With BK = 32 a row is 4 pieces of 16 bytes and rows r
// and r + 2 would share banks: piece c of row r is stored at c ^ ((r / 2) % 4). With
// BK = 64 a row is 8 pieces (128 bytes, all 32 banks) and piece c goes to c ^ (r % 8).
__device__ __forceinline__ int a_offset(int r, int piece) {
#if BK == 64
    return r * BK + ((piece ^ (r & 7)) << 3);
#else
    return r * BK + ((piece ^ ((r >> 1) & 3)) << 3);
#endif
}
// B slice: BK rows of BN elements. Rows r and r + 1 of one column of pieces share banks;
// piece c of row r is stored at c ^ (r % 8).
__device__ __forceinline__ int b_offset(int r, int piece) { return r * BN + ((piece ^ (r & 7)) << 3); }

// Two blocks share an SM: while one waits at its barrier, the other keeps the tensor
// cores busy.
template <typename E>
__global__ void __launch_bounds__(THREADS, 2)
    gemm_mma(int M, int N, int K, float alpha, const E* __restrict__ A, const E* __restrict__ B, float beta,
             E* __restrict__ C) {
    extern __shared__ __align__(128) unsigned char smem_bytes[];
    const unsigned a_smem = smem_addr(smem_bytes);                  // STAGES slices of BM x BK ...
    const unsigned b_smem = a_smem + STAGES * BM * BK * sizeof(E);  // ... then STAGES slices of BK x BN
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    // (Re-ordering the blocks into bands of 8 block-rows for L2 locality was measured: 393
    // vs 390 TFLOP/s at 4096^3, within noise, so the plain order stays.)
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = (K + BK - 1) / BK;

    // Everything about the copies that does not change from slice to slice is worked out
    // once: each thread copies the same 16-byte piece of rows r, r + A_ROWS_STEP, ... of A
    // and the same piece of rows of B, to shared-memory places whose swizzle depends only
    // on the thread. Per slice only the K offset moves.
    constexpr int A_ROWS_STEP = THREADS / (BK / 8), B_ROWS_STEP = THREADS / (BN / 8);
    const int a_row = tid / (BK / 8), a_piece = tid % (BK / 8);
    const int b_row = tid / (BN / 8), b_piece = tid % (BN / 8);
    const unsigned a_dst = a_offset(a_row, a_piece) * sizeof(E), b_dst = b_offset(b_row, b_piece) * sizeof(E);
    const E* a_src = A + (size_t)(row0 + a_row) * K + a_piece * 8;
    const E* b_src = B + (size_t)b_row * N + col0 + b_piece * 8;
    unsigned a_rows_ok = 0;  // bit l: row a_row + l * A_ROWS_STEP lies inside A
#pragma unroll
    for (int l = 0; l < A_CHUNKS / THREADS; ++l) a_rows_ok |= (unsigned)(row0 + a_row + l * A_ROWS_STEP < M) << l;
    const bool b_col_ok = col0 + b_piece * 8 < N;

    auto load_slice = [&](int stage, int slice) {
        const int k0 = slice * BK;
        const bool a_k_ok = k0 + a_piece * 8 < K;
#pragma unroll
        for (int l = 0; l < A_CHUNKS / THREADS; ++l) {
            const bool ok = a_k_ok && (a_rows_ok >> l & 1);
            const E* src = a_src + (size_t)l * A_ROWS_STEP * K + k0;
            cp_async16(a_smem + stage * (BM * BK * sizeof(E)) + a_dst + l * (A_ROWS_STEP * BK * sizeof(E)),
                       ok ? src : A, ok);
        }
#pragma unroll
        for (int l = 0; l < B_CHUNKS / THREADS; ++l) {
            const bool ok = b_col_ok && k0 + b_row + l * B_ROWS_STEP < K;
            const E* src = b_src + (size_t)(k0 + l * B_ROWS_STEP) * N;
            cp_async16(b_smem + stage * (BK * BN * sizeof(E)) + b_dst + l * (B_ROWS_STEP * BN * sizeof(E)),
                       ok ? src : B, ok);
        }
    };

    // Where this lane's ldmatrix rows start inside a stage, also worked out once. A: rows
    // wr * WM + mi * 16 + lane % 16, pieces kk / 8 + lane / 16 (the swizzle of those rows
    // depends only on lane); B: k rows kk + lane % 16, column pieces of the warp's 16-wide
    // groups nj.
    unsigned a_frag[BK / 16], b_frag[NI / 2];
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) a_frag[ks] = a_offset(wr * WM + lane % 16, ks * 2 + lane / 16) * sizeof(E);
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj)
        b_frag[nj] = b_offset(lane % 16, (wc * WN + nj * 16) / 8 + lane / 16) * sizeof(E);

    float acc[MI][NI][4] = {};
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_slice(s, s);
        cp_async_commit();  // an empty group past the end keeps the count of groups regular
    }

    int stage = 0, next_stage = STAGES - 1;
    for (int kt = 0; kt < slices; ++kt) {
        cp_async_wait<STAGES - 2>();  // slice kt has landed (for this thread) ...
        __syncthreads();              // ... for every thread, and slice kt - 1 is no longer read
        if (kt + STAGES - 1 < slices) load_slice(next_stage, kt + STAGES - 1);
        cp_async_commit();

        const unsigned a_base = a_smem + stage * (BM * BK * sizeof(E));
        const unsigned b_base = b_smem + stage * (BK * BN * sizeof(E));
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            unsigned a[MI][4], b[NI / 2][4];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a[mi], a_base + a_frag[ks] + mi * 16 * BK * sizeof(E));
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) ldmatrix_x4_trans(b[nj], b_base + b_frag[nj] + ks * 16 * BN * sizeof(E));
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    Elem<E>::mma(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
        }
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        next_stage = next_stage + 1 == STAGES ? 0 : next_stage + 1;
    }
    cp_async_wait<0>();

    // Epilogue: lane holds rows lane / 4 and lane / 4 + 8, columns 2 * (lane % 4) + {0, 1} of
    // each 16 x 8 tile; N % 8 == 0, so a pair is wholly inside or outside. With beta, the
    // eight pairs of C a lane owns in a row are all read before any is written: the compiler
    // cannot tell that a read does not alias an earlier write, so reading and writing pair by
    // pair costs a memory round trip per pair (it doubled the time at 1024^3).
    using Pair = typename Elem<E>::Pair;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = row0 + wr * WM + mi * 16 + lane / 4 + half * 8;
            if (row >= M) continue;
            Pair* out = reinterpret_cast<Pair*>(&C[(size_t)row * N + col0 + wc * WN + (lane % 4) * 2]);
            Pair old[NI];
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const bool read = beta != 0.0f && col0 + wc * WN + ni * 8 + (lane % 4) * 2 < N;
                old[ni] = read ? out[ni * 4] : Elem<E>::pack(0.0f, 0.0f);
            }
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                if (col0 + wc * WN + ni * 8 + (lane % 4) * 2 >= N) continue;
                const float2 c = Elem<E>::unpack(old[ni]);
                out[ni * 4] = Elem<E>::pack(fmaf(beta, c.x, alpha * acc[mi][ni][half * 2]),
                                            fmaf(beta, c.y, alpha * acc[mi][ni][half * 2 + 1]));
            }
        }
    }
}

// --- the TMA-fed version (sm_90) ----------------------------------------------------------
// The driver's CUtensorMap: 128 opaque bytes that the harness builds (header key tensor_maps)
// and passes by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// Arrive, and say how many bytes the copies tied to this phase will bring.
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
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
// One box of a 2-D tensor map (coordinates: inner, outer) into shared memory; its bytes count
// towards the mbarrier's phase. Parts of the box outside the matrix arrive as zeros.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}
// Where TMA puts piece p (16 bytes) of row r of a slice, in elements. A arrives as boxes of
// 32 columns (64-byte rows) with TMA's 64-byte swizzle, which is the a_offset swizzle above
// for BK = 32; B as boxes of 64 columns (128-byte rows) with the 128-byte swizzle.
__device__ __forceinline__ int a_box_offset(int r, int piece) {
    return (piece >> 2) * (BM * 32) + r * 32 + (((piece & 3) ^ ((r >> 1) & 3)) << 3);
}
__device__ __forceinline__ int b_box_offset(int r, int piece) {
    return (piece >> 3) * (BK * 64) + r * 64 + (((piece & 7) ^ (r & 7)) << 3);
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// The same 64 x 64 warp tiles and inner loop as gemm_mma, in blocks of 128 x TILE_N (eight
// warps for 256, four for 128). TILE_N is a param of the TMA-fed kernels only.
#ifndef TILE_N
#define TILE_N 128
#endif
#define CONSUMERS ((BM / WM) * (TILE_N / WN))
template <typename E>
__global__ void __launch_bounds__(CONSUMERS * 32, TILE_N == 128 ? 2 : 1)
    gemm_mma_tma(int M, int N, int K, float alpha, const __grid_constant__ TensorMap A_map,
                 const __grid_constant__ TensorMap B_map, float beta, E* __restrict__ C) {
    extern __shared__ __align__(128) unsigned char smem_bytes[];
    // TMA's swizzle patterns repeat every 1 KB (hence 1 KB of slack in shared_mem).
    const unsigned a_smem = (smem_addr(smem_bytes) + 1023) & ~1023u;  // STAGES slices of BM x BK ...
    const unsigned b_smem = a_smem + STAGES * BM * BK * sizeof(E);      // ... then STAGES slices of BK x TILE_N
    __shared__ __align__(8) unsigned long long full_bar[STAGES];       // a slice has landed
    __shared__ __align__(8) unsigned long long empty_bar[STAGES];      // every warp is done with it
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = warp / (TILE_N / WN), wc = warp % (TILE_N / WN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * TILE_N;
    const int slices = (K + BK - 1) / BK;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) mbar_init(smem_addr(&full_bar[s]), 1), mbar_init(smem_addr(&empty_bar[s]), CONSUMERS);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // Thread 0 alone copies a slice: BK / 32 boxes of A and TILE_N / 64 of B.
    auto load_slice = [&](int stage, int slice) {
        const unsigned bar = smem_addr(&full_bar[stage]);
        // The warps' ldmatrix reads of this stage (ordered by empty_bar) before TMA's writes.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_expect_bytes(bar, (BM * BK + BK * TILE_N) * sizeof(E));
        const unsigned a_dst = a_smem + stage * (BM * BK * sizeof(E));
        const unsigned b_dst = b_smem + stage * (BK * TILE_N * sizeof(E));
#pragma unroll
        for (int h = 0; h < BK / 32; ++h) tma_load(a_dst + h * (BM * 32 * sizeof(E)), &A_map, slice * BK + 32 * h, row0, bar);
#pragma unroll
        for (int h = 0; h < TILE_N / 64; ++h) tma_load(b_dst + h * (BK * 64 * sizeof(E)), &B_map, col0 + 64 * h, slice * BK, bar);
    };

    // Where this lane's ldmatrix rows start inside a stage, as in gemm_mma.
    unsigned a_frag[BK / 16], b_frag[NI / 2];
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) a_frag[ks] = a_box_offset(wr * WM + lane % 16, ks * 2 + lane / 16) * sizeof(E);
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj)
        b_frag[nj] = b_box_offset(lane % 16, (wc * WN + nj * 16) / 8 + lane / 16) * sizeof(E);

    float acc[MI][NI][4] = {};
    if (tid == 0)
        for (int s = 0; s < STAGES && s < slices; ++s) load_slice(s, s);
    for (int kt = 0, stage = 0, prev = 0; kt < slices; ++kt) {
        mbar_wait(smem_addr(&full_bar[stage]), (kt / STAGES) & 1);  // slice kt has landed
        const unsigned a_base = a_smem + stage * (BM * BK * sizeof(E));
        const unsigned b_base = b_smem + stage * (BK * TILE_N * sizeof(E));
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            unsigned a[MI][4], b[NI / 2][4];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a[mi], a_base + a_frag[ks] + mi * 16 * 32 * sizeof(E));
#pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) ldmatrix_x4_trans(b[nj], b_base + b_frag[nj] + ks * 16 * 64 * sizeof(E));
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    Elem<E>::mma(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
            // A k step into slice kt, thread 0 refills the stage of slice kt - 1 once every
            // warp has released it: by then the other warps are past it too, so warp 0
            // seldom waits, and no barrier holds the other warps.
            if (ks == 0 && tid == 0 && kt >= 1 && kt - 1 + STAGES < slices) {
                mbar_wait(smem_addr(&empty_bar[prev]), ((kt - 1) / STAGES) & 1);
                load_slice(prev, kt - 1 + STAGES);
            }
            __syncwarp();  // warp 0 whole again before its next ldmatrix
        }
        // The mma above consumed every fragment of this stage, so the warp's reads are done.
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_addr(&empty_bar[stage]));
        prev = stage;
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    // Epilogue, staged through shared memory so that C is written (and read, for beta) in
    // 16-byte pieces of whole rows: each warp parks 32 rows x 64 columns of fp32 at a time
    // (rows padded to 72 floats, so the 8-byte writes of a half-warp hit 32 different banks),
    // then every lane moves 8 consecutive columns.
    using Pair = typename Elem<E>::Pair;
    __syncthreads();  // every warp is done reading the stages; reuse them
    float* park = reinterpret_cast<float*>(smem_bytes + (a_smem - smem_addr(smem_bytes))) + warp * (32 * 72);
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
        for (int m2 = 0; m2 < 2; ++m2)
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
                    *reinterpret_cast<float2*>(&park[(m2 * 16 + lane / 4 + half * 8) * 72 + ni * 8 + (lane % 4) * 2]) =
                        make_float2(acc[pass * 2 + m2][ni][half * 2], acc[pass * 2 + m2][ni][half * 2 + 1]);
        __syncwarp();
        // With beta, a lane reads its eight pieces of C before writing any (see gemm_mma).
        uint4 old[8];
#pragma unroll
        for (int it = 0; it < 8; ++it) {
            const int row = row0 + wr * WM + pass * 32 + it * 4 + lane / 8, col = col0 + wc * WN + (lane % 8) * 8;
            old[it] = beta != 0.0f && row < M && col < N ? *reinterpret_cast<const uint4*>(&C[(size_t)row * N + col])
                                                         : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int it = 0; it < 8; ++it) {
            const int r = it * 4 + lane / 8, c = (lane % 8) * 8;
            const int row = row0 + wr * WM + pass * 32 + r, col = col0 + wc * WN + c;
            if (row < M && col < N) {
                const float4 v0 = *reinterpret_cast<const float4*>(&park[r * 72 + c]);
                const float4 v1 = *reinterpret_cast<const float4*>(&park[r * 72 + c + 4]);
                const float x[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
                const Pair* p = reinterpret_cast<const Pair*>(&old[it]);
                uint4 packed;
                Pair* q = reinterpret_cast<Pair*>(&packed);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float2 f = Elem<E>::unpack(p[i]);
                    q[i] = Elem<E>::pack(fmaf(beta, f.x, alpha * x[2 * i]), fmaf(beta, f.y, alpha * x[2 * i + 1]));
                }
                *reinterpret_cast<uint4*>(&C[(size_t)row * N + col]) = packed;
            }
        }
        __syncwarp();
    }
}
