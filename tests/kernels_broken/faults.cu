// Deliberately broken GEMM kernels: one fault each, for the harness's own GPU tests.
// Every kernel is the naive kernel with one thing wrong (FAULT selects which).

/* pytest-gemm
name = "wrong_operand"
entry = "naive_with_fault<1>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
requires = ["M == N and N == K"]
*/

/* pytest-gemm
name = "unwritten_tile"
entry = "naive_with_fault<2>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "oob_write"
entry = "naive_with_fault<3>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "modified_input"
entry = "naive_with_fault<4>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "fp16_operands"
entry = "naive_with_fault<5>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "tf32_product"
entry = "naive_with_fault<6>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "ignored_beta"
entry = "naive_with_fault<7>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "ignored_alpha"
entry = "naive_with_fault<8>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "reads_c_when_beta_is_zero"
entry = "naive_with_fault<9>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "reads_c_declared"
description = "reads C whatever beta is, and says so: its beta = 0 cases get finite data in C"
entry = "naive_with_fault<9>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
always_reads_c = true
*/

/* pytest-gemm
name = "k_rounded_up"
description = "runs K up to a multiple of 32 with no bounds check: reads past A's rows and past B's end"
entry = "naive_with_fault<10>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "differs_per_launch"
description = "one element differs by one ulp on every other launch"
entry = "naive_with_fault<11>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

/* pytest-gemm
name = "differs_declared"
entry = "naive_with_fault<11>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
nondeterministic = "a fixture: one element differs by one ulp on every other launch"
*/

/* pytest-gemm
name = "correct_naive"
entry = "naive_with_fault<0>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/

__device__ __forceinline__ float round_fp16(float x) {
    float y;
    asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; cvt.f32.f16 %0, h; }" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float round_tf32(float x) {
    unsigned int bits;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
    return __uint_as_float(bits);
}

__device__ unsigned int launch_count;  // FAULT 11: counts launches

template <int FAULT>
__global__ void naive_with_fault(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                 float* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (FAULT == 2 && blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1) return;  // skips a tile
    if (col >= N) return;
    if (FAULT != 3 && row >= M) return;  // FAULT 3: rows past M are written (out of bounds)
    float acc = 0.0f;
    const int k_end = FAULT == 10 ? (K + 31) / 32 * 32 : K;  // FAULT 10: no bounds check on the K tail
    for (int k = 0; k < k_end; ++k) {
        float a = row < M ? A[(size_t)row * K + k] : 0.0f;
        float b = FAULT == 1 ? A[(size_t)k * N + col] : B[(size_t)k * N + col];  // FAULT 1: A read for B
        if (FAULT == 5) { a = round_fp16(a); b = round_fp16(b); }
        if (FAULT == 6) { a = round_tf32(a); b = round_tf32(b); }
        acc = fmaf(a, b, acc);
    }
    if (FAULT == 11 && row == 0 && col == 0 && atomicAdd(&launch_count, 1u) % 2 == 1) acc = nextafterf(acc, 1e30f);
    const size_t idx = (size_t)row * N + col;
    if (FAULT == 7) { C[idx] = alpha * acc; return; }
    if (FAULT == 8) { C[idx] = beta == 0.0f ? acc : fmaf(beta, C[idx], acc); return; }
    if (FAULT == 9) { C[idx] = fmaf(beta, C[idx], alpha * acc); return; }
    C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
    if (FAULT == 4 && row == M - 1 && col == N - 1) const_cast<float*>(A)[0] = -1.0f;  // writes an input
}
