/* pytest-gemm
name = "sgemm_naive"
description = "the bundled naive kernel doing WASTE_PERCENT% more work (a fixture for the regression gate)"
entry = "sgemm_naive"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

// A test fixture, not a kernel to learn from: kernels/01_naive.cu with a second, useless dot
// product over the last WASTE_PERCENT% of K. Its result is multiplied by zero and added, which
// the compiler may not remove (0 * x is not 0 when x is Inf or NaN), so the work is really done
// and the output is still exact. research/gate-acceptance.sh (10% and 3%) and
// research/sensitivity.sh (2%) copy it over kernels/01_naive.cu in a scratch copy of the project,
// with the #define below rewritten, to check that the gate flags the slowdown.

#define WASTE_PERCENT 3

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A,
                                       const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    }
    float wasted = 0.0f;
    for (int k = K - 1; k >= K - K * WASTE_PERCENT / 100; --k) {
        wasted = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], wasted);
    }
    acc += 0.0f * wasted;
    const size_t idx = (size_t)row * N + col;
    C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
}
