// A kernel that cheats at timing: it remembers, per block, the C it last computed, and skips the
// work when it is launched again on the same C. Its first launch on any buffer is correct, but
// verification's determinism check launches it again on the same buffers, and finds the second
// launch's C unwritten. (timing_cheat_late.cu waits for the fourth launch; timing catches that one.)

/* pytest-gemm
name = "memo_naive"
entry = "memo_naive"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
requires = ["cdiv(N, 32) * cdiv(M, 32) <= 65536"]
*/

__device__ const float* memo_last_c[65536];

extern "C" __global__ void memo_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                      float* C) {
    const int block = blockIdx.y * gridDim.x + blockIdx.x;
    if (memo_last_c[block] == C) return;  // "already computed": the cheat
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
    }
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) memo_last_c[block] = C;
}
