// Kernels for the GPU tests of storage orders (tests/gpu/test_gpu_orders.py): one naive GEMM that reads A, B and C
// in any storage order (template flags), with size_t sizes and leading dimensions; an fp16 one with an fp32 output;
// an fp16 one that accumulates in fp16; and two that misread their operands on purpose.

/* pytest-gemm
name = "orders_fp32"
description = "every storage order of A, B and C, size_t sizes and leading dimensions"
entry = "orders_gemm<A_KxM, B_NxK, C_NxM, float, float, float, size_t>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
size_type = "size_t"
params = { A_KxM = [0, 1], B_NxK = [0, 1], C_NxM = [0, 1] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "orders_fp16_fp32out"
description = "fp16 in, fp32 out (c_dtype), fp32 accumulation, B in either order, unsigned sizes"
entry = "orders_gemm<0, B_NxK, 0, __half, float, float, unsigned>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp16"]
c_dtype = "fp32"
size_type = "unsigned"
params = { B_NxK = [0, 1] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "hacc_declared"
description = "fp16 accumulation, declared; B stored N x K, C column-major, long long sizes"
entry = "orders_gemm<0, 1, 1, __half, __half, __half, long long>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp16"]
accumulate = "fp16"
size_type = "long long"
storage = { B = "NxK", C = "NxM" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "hacc_undeclared"
description = "the same fp16 accumulation, not declared: fails at large K"
entry = "orders_gemm<0, 1, 1, __half, __half, __half, long long>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp16"]
size_type = "long long"
storage = { B = "NxK", C = "NxM" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "misread_b"
description = "declares B stored N x K but reads it as K x N"
entry = "orders_gemm<0, 0, 0, float, float, float, int>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
size_type = "int"
storage = { B = "NxK" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
requires = ["M == N and N == K"]
*/

/* pytest-gemm
name = "a_as_b"
description = "reads A where it should read B"
entry = "a_as_b"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
size_type = "size_t"
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
requires = ["M == N and N == K"]
*/

/* pytest-gemm
name = "c_transposed"
description = "declares C row-major but writes it column-major"
entry = "orders_gemm<0, 0, 1, float, float, float, int>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
requires = ["M == N"]
*/

/* pytest-gemm
name = "int_declared_for_size_t"
description = "a size_t kernel whose header leaves size_type at int"
entry = "orders_gemm<0, 0, 0, float, float, float, size_t>"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

__device__ __forceinline__ float fma_acc(float a, float b, float acc) { return fmaf(a, b, acc); }
__device__ __forceinline__ __half fma_acc(__half a, __half b, __half acc) { return __hfma(a, b, acc); }

template <int AT, int BT, int CT, typename T, typename Acc, typename Out, typename I>
__global__ void orders_gemm(I M, I N, I K, float alpha, const T* A, I lda, const T* B, I ldb, float beta, Out* C,
                            I ldc) {
    const size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    Acc acc = from_float<Acc>(0.0f);
    for (size_t k = 0; k < K; ++k) {
        const T a = AT ? A[k * lda + row] : A[row * lda + k];
        const T b = BT ? B[col * ldb + k] : B[k * ldb + col];
        acc = fma_acc(from_float<Acc>(to_float(a)), from_float<Acc>(to_float(b)), acc);
    }
    const size_t at = CT ? col * ldc + row : row * ldc + col;
    float r = alpha * to_float(acc);
    if (beta != 0.0f) r += beta * to_float(C[at]);
    C[at] = from_float<Out>(r);
}

extern "C" __global__ void a_as_b(size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
                                  const float* B, size_t ldb, float beta, float* C, size_t ldc) {
    const size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (size_t k = 0; k < K; ++k) acc += A[row * lda + k] * A[k * lda + col];
    float r = alpha * acc;
    if (beta != 0.0f) r += beta * C[row * ldc + col];
    C[row * ldc + col] = r;
}
