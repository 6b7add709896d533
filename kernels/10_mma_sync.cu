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
// Measured on the H100 at 4096^3 (default variant BK 32, 3 stages): bf16 421 TFLOP/s,
// 53.0% of cuBLAS bf16 in the same run; fp16 414 TFLOP/s, 53.9%; 1.23x and 1.26x step 9.
// Short of the 60% target. mma.sync itself tops out at 671 TFLOP/s on this H100
// (scripts/mma_ceiling.py: register operands, 8 warps per SM, 1980 MHz; 2,568 FLOP per SM
// per clock, 63% of wgmma's 4,096). Adding this loop's parts one at a time (same script):
// ldmatrix and one barrier per slice still make 606 TFLOP/s, but the cp.async ring brings
// it to 435-461 whether the data comes from L2 or from L1. By our estimate the ldmatrix
// reads (64 KB) and cp.async writes (32 KB) of two blocks per 512 mma keep shared memory
// about 90% busy at the mma peak, so the two cannot both run flat out. Tried without a
// gain: spreading the copies between the mma (-10%), 5-6 stages, an L2 prefetch hint,
// copies issued before the barrier, 128 x 256 and 256 x 128 tiles (one block per SM:
// 400-404 TFLOP/s), eight warps of 64 x 32 (-10%). BK 64 with 4 stages needs 128 KB, so
// only one block fits per SM: 343 TFLOP/s.
//
// requires: cp.async moves whole 16-byte pieces (8 elements) of rows of A (length K) and B
// (length N), which must start on 16-byte boundaries and lie wholly inside or outside the
// matrix: K and N must be multiples of 8. M may be anything; missing rows and slices past
// K are zero-filled by cp.async itself.

/* pytest-gemm
name = "hgemm_mma_fp16"
description = "mma.sync m16n8k16 + ldmatrix, XOR-swizzled shared memory, multi-stage cp.async; fp16 in and out, fp32 accumulation"
entry = "gemm_mma<__half>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp16"]
params = { BK = [32, 64], STAGES = [3, 4] }
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
    // each 16 x 8 tile; N % 8 == 0, so a pair is wholly inside or outside.
    using Pair = typename Elem<E>::Pair;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = row0 + wr * WM + mi * 16 + lane / 4 + half * 8;
            if (row >= M) continue;
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int col = col0 + wc * WN + ni * 8 + (lane % 4) * 2;
                if (col >= N) continue;
                Pair* out = reinterpret_cast<Pair*>(&C[(size_t)row * N + col]);
                float x = alpha * acc[mi][ni][half * 2], y = alpha * acc[mi][ni][half * 2 + 1];
                if (beta != 0.0f) {
                    const float2 c = Elem<E>::unpack(*out);
                    x = fmaf(beta, c.x, x), y = fmaf(beta, c.y, y);
                }
                *out = Elem<E>::pack(x, y);
            }
        }
    }
}
