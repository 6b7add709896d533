// Step 6: a bank-conflict-free shared-memory layout.
//
// Change from step 5 (same 128 x 128 tile, 256 threads, 8 x 8 results per thread):
// - Writing A transposed put two threads of a warp on the same bank (rows r of A land
//   BM floats apart, and BM is a multiple of 32). Each row of the transposed tile is
//   padded by PAD floats, which shifts consecutive k rows to different banks.
// - In step 5 a thread's 8 columns of B were 8 consecutive floats, so the float4 loads of
//   neighbouring threads were 32 bytes apart and two of every eight collided. Here a
//   thread owns two groups of 4 columns, 64 apart: neighbouring threads read neighbouring
//   float4s, 128 contiguous bytes per quarter warp. Rows are split the same way.
// - The 32 threads of a warp form a 4 x 8 grid of threads (a 32 x 64 patch of C) instead
//   of 2 x 16 (16 x 128): per k the warp needs 32 values of A and 64 of B rather than 16
//   and 128, fewer shared-memory bytes for the same 2048 multiply-adds.
// - The copy loops are kept rolled (#pragma unroll 1) and __launch_bounds__ asks for two
//   blocks per SM. The first version of this step unrolled them like step 5 and needed
//   133-140 registers a thread: one block of 256 threads per SM instead of two (ncu: 12.5%
//   occupancy against step 5's 25%), which made it 35% SLOWER than step 5 even with no
//   bank conflicts left (ncu: 0 shared-load conflicts, against 270 million in step 5).
//   Rolled, the kernel needs 116 registers.
// Measured on the H100 at 4096^3: 34.7 TFLOP/s, 67.2% of cuBLAS, 1.11x step 5.

/* pytest-gemm
name = "sgemm_conflict_free"
description = "step 5 with a padded A tile, split 4-wide thread columns and 4 x 8 warps: no shared-memory bank conflicts"
entry = "sgemm_conflict_free"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { BK = [8], PAD = [4] }
block = [256]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
# float4 accesses need rows of A (length K) and of B and C (length N) to start on 16-byte
# boundaries: K and N must be multiples of 4. M may be anything.
requires = ["K % 4 == 0", "N % 4 == 0"]
*/

#define BM 128
#define BN 128
#define TM 8
#define TN 8

extern "C" __global__ void __launch_bounds__(256, 2)
    sgemm_conflict_free(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                        float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BK][BM + PAD];  // transposed and padded: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    // 8 warps as 4 rows x 2 columns of 32 x 64 patches; a warp's lanes as 4 rows x 8 columns.
    const int tr = (warp / 2) * 4 + lane / 8;  // 0..15: rows tr*4 .. tr*4+3 and 64 + the same
    const int tc = (warp % 2) * 8 + lane % 8;  // 0..15: columns tc*4 .. tc*4+3 and 64 + the same
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll 1
        for (int i = tid; i < BM * BK / 4; i += 256) {  // a float4 along K from one row of A
            const int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            const float4 v = (row0 + r < M && k0 + c < K)
                                 ? *reinterpret_cast<const float4*>(&A[(size_t)(row0 + r) * K + k0 + c])
                                 : zero;
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
#pragma unroll 1
        for (int i = tid; i < BK * BN / 4; i += 256) {  // a float4 along N from one row of B
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) =
                (k0 + r < K && col0 + c < N) ? *reinterpret_cast<const float4*>(&B[(size_t)(k0 + r) * N + col0 + c])
                                             : zero;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // the two halves of the thread's rows and columns
                const float4 va = *reinterpret_cast<const float4*>(&As[k][h * 64 + tr * 4]);
                const float4 vb = *reinterpret_cast<const float4*>(&Bs[k][h * 64 + tc * 4]);
                a[h * 4 + 0] = va.x, a[h * 4 + 1] = va.y, a[h * 4 + 2] = va.z, a[h * 4 + 3] = va.w;
                b[h * 4 + 0] = vb.x, b[h * 4 + 1] = vb.y, b[h * 4 + 2] = vb.z, b[h * 4 + 3] = vb.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + (i / 4) * 64 + tr * 4 + i % 4;
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = col0 + h * 64 + tc * 4;
            if (col >= N) continue;  // N % 4 == 0: a float4 is wholly inside or wholly outside
            float4* out = reinterpret_cast<float4*>(&C[(size_t)row * N + col]);
            const float* v = &acc[i][h * 4];
            float4 r = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
            if (beta != 0.0f) {
                const float4 c = *out;
                r.x = fmaf(beta, c.x, r.x), r.y = fmaf(beta, c.y, r.y), r.z = fmaf(beta, c.z, r.z), r.w = fmaf(beta, c.w, r.w);
            }
            *out = r;
        }
    }
}
