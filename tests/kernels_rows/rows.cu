// Kernels for the GPU test of batch invariance (tests/gpu/test_gpu_batch_rows.py;
// docs/verification.md#batch-invariance): one thread per element of C, each summing K in order. `rows_fixed` does
// so whatever M is, and declares it; the two others, when M is under 64, sum K in two halves and add them (as a
// split-K chosen by M would), right within the bound but other roundings: one declares batch invariance and must
// fail, the other does not and passes, flagged.

/* pytest-gemm
name = "rows_fixed"
description = "one thread per element, K summed in order whatever M is"
entry = "rows_gemm<0>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
batch_invariant = true
*/

/* pytest-gemm
name = "rows_split_declared"
description = "K summed in two halves when M < 64, yet declared batch invariant"
entry = "rows_gemm<1>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
batch_invariant = true
*/

/* pytest-gemm
name = "rows_split"
description = "K summed in two halves when M < 64, not declared batch invariant"
entry = "rows_gemm<1>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

template <int SPLIT_WHEN_FEW>
__global__ void rows_gemm(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                          float beta, float* __restrict__ C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    if (SPLIT_WHEN_FEW && M < 64) {
        float low = 0.0f, high = 0.0f;
        for (int k = 0; k < K / 2; ++k) low = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], low);
        for (int k = K / 2; k < K; ++k) high = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], high);
        acc = low + high;
    } else {
        for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    }
    const size_t idx = (size_t)row * N + col;
    C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
}
