// Step 2: shared-memory tiling along K.
//
// Change from step 1: a block of TILE x TILE threads computes a TILE x TILE tile of C.
// It walks K in slices of TILE: every thread loads one element of the A slice and
// one of the B slice into shared memory, the block synchronises, and each thread
// then takes its TILE products from shared memory. Each element loaded from global
// memory is now used TILE times by the block instead of once per thread, cutting
// global (L1/L2) traffic by a factor of TILE; shared memory is much faster.
// Rows, columns and K positions past M, N and K load zeros (which add nothing to the dot
// product) and store nothing, so every shape works.
// Measured on the H100 at 4096^3: 8.90 TFLOP/s (TILE 32), 1.52x step 1 (5.85), 17% of cuBLAS.

/* pytest-gemm
name = "sgemm_smem"
description = "TILE x TILE blocks of A and B staged through shared memory"
entry = "sgemm_smem<TILE>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { TILE = [32, 16] }
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
*/

template <int T>
__global__ void sgemm_smem(int M, int N, int K, float alpha, const float* __restrict__ A,
                           const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty;
    const int col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (col < N && k0 + ty < K) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t idx = (size_t)row * N + col;
        C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
    }
}
