// Correct naive kernels for every dtype the harness supports, to check the harness's own
// handling of fp64, fp16, bf16 (with fp32 output) and tf32 on the GPU.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

/* pytest-gemm
name = "naive_fp64"
entry = "naive_t<double, double, double>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp64"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "naive_fp16"
entry = "naive_t<__half, __half, float>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp16"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "naive_bf16_fp32_out"
entry = "naive_t<__nv_bfloat16, float, float>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["bf16"]
c_dtype = "fp32"
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "naive_tf32"
entry = "naive_tf32"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["tf32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

template <typename TIn, typename TOut, typename TAcc>
__global__ void naive_t(int M, int N, int K, TAcc alpha, const TIn* A, const TIn* B, TAcc beta, TOut* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    TAcc acc = 0;
    for (int k = 0; k < K; ++k) acc += static_cast<TAcc>(A[(size_t)row * K + k]) * static_cast<TAcc>(B[(size_t)k * N + col]);
    const size_t idx = (size_t)row * N + col;
    TAcc value = alpha * acc;
    if (beta != TAcc(0)) value += beta * static_cast<TAcc>(C[idx]);
    C[idx] = TOut(value);
}

__device__ __forceinline__ float tf32(float x) {
    unsigned int bits;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
    return __uint_as_float(bits);
}

extern "C" __global__ void naive_tf32(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                      float* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(tf32(A[(size_t)row * K + k]), tf32(B[(size_t)k * N + col]), acc);
    const size_t idx = (size_t)row * N + col;
    C[idx] = beta == 0.0f ? alpha * acc : fmaf(beta, C[idx], alpha * acc);
}
