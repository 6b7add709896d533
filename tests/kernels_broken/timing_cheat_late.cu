// A timing cheat that knows the harness: like memo_naive it remembers, per block, the C it last
// computed, but it does the work on the first three launches on a buffer and skips it only from the
// fourth. Verification launches a case three times (the determinism check), so it passes
// verification; the harness must catch it while timing (suspiciously fast, and the output of the
// last timed launch is wrong).

/* pytest-gemm
name = "memo_late"
entry = "memo_late"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
requires = ["cdiv(N, 32) * cdiv(M, 32) <= 65536"]
*/

__device__ const float* late_last_c[65536];
__device__ unsigned late_launches[65536];

extern "C" __global__ void memo_late(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                     float* C) {
    const int block = blockIdx.y * gridDim.x + blockIdx.x;
    if (late_last_c[block] == C && late_launches[block] >= 3) return;  // the cheat, from the fourth launch
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
    }
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        if (late_last_c[block] == C) {
            ++late_launches[block];
        } else {
            late_last_c[block] = C;
            late_launches[block] = 1;
        }
    }
}
