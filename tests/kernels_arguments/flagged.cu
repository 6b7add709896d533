// A kernel for the GPU test of constant arguments (tests/gpu/test_gpu_arguments.py): B's order is an int the kernel
// takes at run time, the swept storage flag B_NxK named in args. flagged_ignored reads B in one order whatever it is
// told, so its B_NxK = 1 cases read B in the other order.
__device__ void gemm(int M, int N, int K, const float* A, const float* B, float* C, int b_nk) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * (b_nk ? B[col * K + k] : B[k * N + col]);
    C[row * N + col] = acc;
}

extern "C" __global__ void flagged(int M, int N, int K, const float* A, const float* B, float* C, int b_nk) {
    gemm(M, N, K, A, B, C, b_nk);
}

extern "C" __global__ void flagged_ignored(int M, int N, int K, const float* A, const float* B, float* C, int b_nk) {
    gemm(M, N, K, A, B, C, 0);
}

/* pytest-gemm
name = "flagged"
entry = "flagged"
params = { B_NxK = [0, 1] }
args = ["M", "N", "K", "A", "B", "C", "B_NxK"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "flagged_ignored"
description = "WRONG: reads B as K x N whatever B_NxK says"
entry = "flagged_ignored"
params = { B_NxK = [0, 1] }
args = ["M", "N", "K", "A", "B", "C", "B_NxK"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

extern "C" __global__ void scaled_only(int M, int N, int K, float alpha, const float* A, const float* B, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc;
}

/* pytest-gemm
name = "alpha_only"
description = "C = alpha A B: an alpha without a beta"
entry = "scaled_only"
args = ["M", "N", "K", "alpha", "A", "B", "C"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

#include <cuda_fp16.h>

extern "C" __global__ void half_scalars(int M, int N, int K, __half alpha, __half beta, const __half* A,
                                        const __half* B, __half* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
    float c = __half2float(beta) != 0.0f ? __half2float(beta) * __half2float(C[row * N + col]) : 0.0f;
    C[row * N + col] = __float2half_rn(__half2float(alpha) * acc + c);
}

/* pytest-gemm
name = "half_scalars"
description = "alpha and beta as __half (cuBLAS's COMPUTE_16F convention)"
entry = "half_scalars"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C"]
dtypes = ["fp16"]
scalars = "fp16"
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
