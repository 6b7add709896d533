// A kernel whose UNROLL=4096 variant takes NVRTC 40 s or more to compile (UNROLL=8: a fraction of a second):
// the compile time limit's fixture (tests/test_limits_input.py, research/bad-input-gpu.sh).
/* pytest-gemm
entry = "slow<UNROLL>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { UNROLL = [8, 4096] }
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/
template <int U>
__global__ void slow(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    float acc = A[threadIdx.x];
#pragma unroll
    for (int i = 0; i < U; ++i) acc = acc * A[(i * 7 + threadIdx.x) % K] + 1.0f;
    C[threadIdx.x] = alpha * acc;
}
