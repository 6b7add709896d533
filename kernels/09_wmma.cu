// Step 9: tensor cores through WMMA.
//
// Change from step 8: the inputs are 16-bit (fp16 or bf16) and the multiply-adds run on
// the tensor cores instead of the FP32 pipes, still accumulating in fp32. A warp no longer
// computes its patch lane by lane: it hands 16 x 16 x 16 fragments to nvcuda::wmma, which
// loads them from shared memory and multiplies them with warp-wide instructions, keeping
// the 16 x 16 fp32 results spread over the lanes.
// - Block tile 128 x 128, K slice 32. With WN = 64 four warps each own a 64 x 64 patch
//   (4 x 4 fragments); with WN = 32 eight warps own 64 x 32 patches.
// - The copies from global memory use cp.async: each thread starts 16-byte copies straight
//   into shared memory (no trip through registers) and STAGES slices are in flight at
//   once, in a ring with one barrier per slice. The register prefetch of steps 7-8 was
//   tried first: with it this kernel reached 238-253 TFLOP/s, with cp.async 294-296. A
//   thread copies the same piece of the same rows in every slice, so its addresses and
//   bounds tests are worked out once, before the loop (234 -> 182 SASS instructions per
//   slice for sm_90).
// - Shared-memory rows are padded by PAD elements so that the rows one fragment load reads
//   fall on different banks; WMMA gives no control over the fragment layout, so padding is
//   the only remedy here. The amount matters. With 16 bytes (PAD 8) the fragment loads are
//   conflict-free, but ncu counted 1.5x the L2-to-SM traffic the copies need (100.7 M
//   sectors against 67.1 M for step 10 on the same product) and L2 busy at 88% of its
//   peak, probably because every other row then starts mid-sector and a 32-byte sector
//   split over two 128-byte lines of shared memory is fetched once per line. With 32
//   bytes (PAD 16) each sector lands whole, at the price of 2-way bank conflicts on the
//   fragment loads: 7-12% faster with four warps (WN 64), about 20% slower with eight
//   (WN 32), which load twice as many A fragments per multiply-add.
// - bf16 fragment loads go through PTX (see load_shared below): mma.h's own bf16 load
//   made the bf16 kernel 1.7x slower than fp16.
// Why it is faster: a tensor core multiply-adds 16-bit inputs at many times the rate of
// the FP32 pipes, and the operands are half as many bytes. The epilogue goes through
// shared memory: each warp stores a fragment as fp32, then each lane applies alpha and
// beta to 8 consecutive elements of a row and writes them with one 16-byte store.
// Measured on the H100 at 4096^3 (default variant WN 64, PAD 16, 4 stages): bf16 341
// TFLOP/s, 43.5% of cuBLAS bf16 in the same run; fp16 327 TFLOP/s, 42.7%; 7.4x step 8's
// fp32 throughput. With PAD 8 the same kernel made 306 and 305 TFLOP/s (38.8%, 40.0%).
// cuBLAS uses Hopper's warpgroup wgmma instructions, while WMMA compiles to the warp-level
// HMMA instructions of Ampere, fed through a layout we cannot choose (step 10 goes
// further on the same instructions).
//
// requires: rows of A (length K) and of B and C (length N) are copied in 16-byte pieces of
// 8 elements, which must start on 16-byte boundaries and lie wholly inside or outside the
// matrix: K and N must be multiples of 8. M may be anything; cp.async zero-fills pieces
// past the edges.

/* pytest-gemm
name = "hgemm_wmma_fp16"
description = "WMMA 16x16x16 fragments, cp.async multi-stage copies; fp16 inputs and output, fp32 accumulation"
entry = "gemm_wmma<__half>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp16"]
params = { WN = [64, 32], PAD = [16, 8], STAGES = [4, 3] }
block = ["2 * (128 / WN) * 32"]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * (32 + PAD) + 32 * (128 + PAD)) * 2"
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_wmma_bf16"
description = "WMMA 16x16x16 fragments, cp.async multi-stage copies; bf16 inputs and output, fp32 accumulation"
entry = "gemm_wmma<__nv_bfloat16>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["bf16"]
params = { WN = [64, 32], PAD = [16, 8], STAGES = [4, 3] }
block = ["2 * (128 / WN) * 32"]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * (32 + PAD) + 32 * (128 + PAD)) * 2"
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#define BM 128
#define BK 32
#define BN 128
#define WM 64
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define A_LOADS (BM * BK / 8 / THREADS)  // 16-byte pieces of A per thread per slice
#define B_LOADS (BK * BN / 8 / THREADS)

using namespace nvcuda;

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename E> __device__ __forceinline__ E from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Fragment loads from shared memory. For fp16, mma.h emits wmma.load with the .shared
// state space; for bf16 it emits a generic-address wmma.load, which cannot become the
// fast shared-memory fragment load and made the bf16 kernel 1.7x slower than fp16 on the
// H100. The bf16 overloads issue the same PTX instruction with .shared. A 16 x 16 x 16
// bf16 fragment is 8 elements = four 32-bit registers per lane, as the PTX ISA defines.
template <typename Frag, typename E>
__device__ __forceinline__ void load_shared(Frag& f, const E* p, unsigned ldm) {
    wmma::load_matrix_sync(f, p, ldm);
}
__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void load_shared(wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>& f,
                                            const __nv_bfloat16* p, unsigned ldm) {
    static_assert(sizeof(f.x) == 16, "bf16 m16n16k16 fragment is four 32-bit registers");
    unsigned* r = reinterpret_cast<unsigned*>(&f.x[0]);
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)), "r"(ldm));
}
__device__ __forceinline__ void load_shared(wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>& f,
                                            const __nv_bfloat16* p, unsigned ldm) {
    static_assert(sizeof(f.x) == 16, "bf16 m16n16k16 fragment is four 32-bit registers");
    unsigned* r = reinterpret_cast<unsigned*>(&f.x[0]);
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)), "r"(ldm));
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N_PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N_PENDING));
}

// Two blocks per SM: while one block waits at its barrier, the other keeps the tensor
// cores busy.
template <typename E>
__global__ void __launch_bounds__(THREADS, 2)
    gemm_wmma(int M, int N, int K, float alpha, const E* __restrict__ A, const E* __restrict__ B, float beta,
              E* __restrict__ C) {
    // Dynamic shared memory: STAGES slices of A and of B, rows padded by 8 elements. After the
    // main loop the same bytes hold each warp's fp32 staging tile for the epilogue.
    extern __shared__ __align__(128) unsigned char smem[];
    E(*As)[BM][BK + PAD] = reinterpret_cast<E(*)[BM][BK + PAD]>(smem);
    E(*Bs)[BK][BN + PAD] = reinterpret_cast<E(*)[BK][BN + PAD]>(smem + sizeof(E) * STAGES * BM * (BK + PAD));
    float(*staging)[16 * 16] = reinterpret_cast<float(*)[16 * 16]>(smem);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wr = warp / (BN / WN), wc = warp % (BN / WN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = (K + BK - 1) / BK;

    // The copies are worked out once: each thread copies the same 16-byte piece of rows r,
    // r + A_ROWS_STEP, ... of A and of B in every slice; per slice only the K offset moves.
    constexpr int A_ROWS_STEP = THREADS / (BK / 8), B_ROWS_STEP = THREADS / (BN / 8);
    const int a_row = tid / (BK / 8), a_col = tid % (BK / 8) * 8;
    const int b_row = tid / (BN / 8), b_col = tid % (BN / 8) * 8;
    const E* a_src = A + (size_t)(row0 + a_row) * K + a_col;
    const E* b_src = B + (size_t)b_row * N + col0 + b_col;
    const unsigned a_dst = shared_address(&As[0][a_row][a_col]), b_dst = shared_address(&Bs[0][b_row][b_col]);
    unsigned a_rows_ok = 0;  // bit l: row a_row + l * A_ROWS_STEP lies inside A
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) a_rows_ok |= (unsigned)(row0 + a_row + l * A_ROWS_STEP < M) << l;
    const bool b_col_ok = col0 + b_col < N;

    auto load_slice = [&](int s, int slice) {
        const int k0 = slice * BK;
        const bool a_k_ok = k0 + a_col < K;
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const bool ok = a_k_ok && (a_rows_ok >> l & 1);
            const E* src = a_src + (size_t)l * A_ROWS_STEP * K + k0;
            cp_async16(a_dst + sizeof(As[0]) * s + l * A_ROWS_STEP * (BK + PAD) * sizeof(E), ok ? src : A, ok);
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const bool ok = b_col_ok && k0 + b_row + l * B_ROWS_STEP < K;
            const E* src = b_src + (size_t)(k0 + l * B_ROWS_STEP) * N;
            cp_async16(b_dst + sizeof(Bs[0]) * s + l * B_ROWS_STEP * (BN + PAD) * sizeof(E), ok ? src : B, ok);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[WM / 16][WN / 16];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major> fa[WM / 16];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major> fb[WN / 16];

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_slice(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < slices; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kt + STAGES - 1 < slices) load_slice((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        cp_async_commit();
        const int s = kt % STAGES;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
            for (int i = 0; i < WM / 16; ++i) load_shared(fa[i], &As[s][wr * WM + i * 16][kk], BK + PAD);
#pragma unroll
            for (int j = 0; j < WN / 16; ++j) load_shared(fb[j], &Bs[s][kk][wc * WN + j * 16], BN + PAD);
#pragma unroll
            for (int i = 0; i < WM / 16; ++i)
#pragma unroll
                for (int j = 0; j < WN / 16; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    }
    cp_async_wait<0>();
    __syncthreads();  // the staging tiles reuse the stage buffers

    // Epilogue: one fragment at a time through this warp's fp32 staging tile. Each lane
    // takes 8 consecutive elements of one row (half a fragment row) and writes them with one
    // 16-byte store; N % 8 == 0 and 8-aligned columns put the 8 wholly inside or outside C.
    float* tile = staging[warp];
    const int er = lane / 2, ec = (lane % 2) * 8;
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) {
            wmma::store_matrix_sync(tile, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int row = row0 + wr * WM + i * 16 + er, col = col0 + wc * WN + j * 16 + ec;
            if (row < M && col < N) {
                uint4* out = reinterpret_cast<uint4*>(&C[(size_t)row * N + col]);
                union { uint4 v; E e[8]; } packed, old;
                if (beta != 0.0f) old.v = *out;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    float v = alpha * tile[er * 16 + ec + e];
                    if (beta != 0.0f) v = fmaf(beta, to_float(old.e[e]), v);
                    packed.e[e] = from_float<E>(v);
                }
                *out = packed.v;
            }
            __syncwarp();
        }
    }
}
