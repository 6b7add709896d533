/* pytest-gemm
name = "sgemm_naive"
description = "the bundled naive kernel, each block finishing LATER_PERCENT% of its own time later (a fixture for the regression gate)"
entry = "sgemm_naive"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

// A test fixture, not a kernel to learn from: kernels/01_naive.cu, each block's first thread then waiting on its SM's
// clock for LATER_PERCENT% of the cycles the block took, while the block's other threads are done. The slowdown is a
// share of the kernel's own time whatever the shape (tests/kernels_slow/naive_slower.cu's extra share of K adds less
// time where loads dominate), and the output is exact. research/gate-fdr.sh copies it over kernels/01_naive.cu in a
// scratch copy of the project, with the #define below rewritten, to check that the run-wide gate catches it.

#define LATER_PERCENT 5

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A,
                                       const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ long long began;
    const bool first = threadIdx.x == 0 && threadIdx.y == 0;
    if (first) began = clock64();
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
        }
        const size_t idx = (size_t)row * N + col;
        C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
    }
    __syncthreads();
    if (first) {
        const long long now = clock64();
        const long long until = now + (now - began) * LATER_PERCENT / 100;
        while (clock64() < until) {
        }
    }
}
