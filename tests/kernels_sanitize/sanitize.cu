// Kernels for the compute-sanitizer tests: a 16x16 shared-memory tiled kernel with and without its
// second barrier, and a naive kernel that runs K up to a multiple of 16 without a bounds check.

/* pytest-gemm
name = "missing_barrier"
description = "no barrier after the inner product: the next tile overwrites shared memory still being read"
entry = "tiled16<false>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "with_barrier"
entry = "tiled16<true>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "unchecked_k_tail"
description = "reads A and B up to K rounded up to 16: past A's rows, and past the end of B"
entry = "unchecked_k_tail"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

template <bool SECOND_BARRIER>
__global__ void tiled16(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        if (SECOND_BARRIER) __syncthreads();
    }
    if (row < M && col < N) {
        const size_t idx = (size_t)row * N + col;
        C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
    }
}

__global__ void unchecked_k_tail(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                 float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < (K + 15) / 16 * 16; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    const size_t idx = (size_t)row * N + col;
    C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
}
