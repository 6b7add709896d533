// Step 5: vectorised loads, A transposed in shared memory.
//
// Change from step 4: every global load and store moves a float4 (16 bytes) instead of a
// float, so a block issues a quarter of the memory instructions for its tiles. A is
// written into shared memory transposed (As[k][m]), so in the inner loop a thread's TM
// values of A, like its TN values of B, lie next to each other and come in as two
// float4 shared-memory loads each: 4 load instructions per k instead of 16. The results
// are stored as float4 too. The params (BM, BN, ...) are #defined by the harness.
// Measured on the H100 at 4096^3: 31.0 TFLOP/s, 1.79x step 4, 60% of cuBLAS.

/* pytest-gemm
name = "sgemm_vec4"
description = "the 2-D thread tile with float4 global loads and A stored transposed in shared memory"
entry = "sgemm_vec4"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { BM = [128], BN = [128], BK = [8], TM = [8], TN = [8] }
block = ["(BM / TM) * (BN / TN)"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
# float4 accesses need rows of A (length K) and of B and C (length N) to start on 16-byte
# boundaries: K and N must be multiples of 4. M may be anything.
requires = ["K % 4 == 0", "N % 4 == 0"]
*/

extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN))
    sgemm_vec4(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
               float beta, float* __restrict__ C) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN);
    const int trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK / 4; i += THREADS) {  // a float4 along K from one row of A
            const int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            const float4 v = (row0 + r < M && k0 + c < K)
                                 ? *reinterpret_cast<const float4*>(&A[(size_t)(row0 + r) * K + k0 + c])
                                 : zero;
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
        for (int i = tid; i < BK * BN / 4; i += THREADS) {  // a float4 along N from one row of B
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) =
                (k0 + r < K && col0 + c < N) ? *reinterpret_cast<const float4*>(&B[(size_t)(k0 + r) * N + col0 + c])
                                             : zero;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[k][trow * TM + i]);
                a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tcol * TN + j]);
                b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
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
        const int row = row0 + trow * TM + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = col0 + tcol * TN + j;
            if (col >= N) break;  // N % 4 == 0: a float4 is wholly inside or wholly outside
            float4* out = reinterpret_cast<float4*>(&C[(size_t)row * N + col]);
            float4 r = make_float4(alpha * acc[i][j], alpha * acc[i][j + 1], alpha * acc[i][j + 2], alpha * acc[i][j + 3]);
            if (beta != 0.0f) {
                const float4 c = *out;
                r.x = fmaf(beta, c.x, r.x), r.y = fmaf(beta, c.y, r.y), r.z = fmaf(beta, c.z, r.z), r.w = fmaf(beta, c.w, r.w);
            }
            *out = r;
        }
    }
}
