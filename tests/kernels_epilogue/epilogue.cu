// Kernels for the GPU tests of fused epilogues (tests/gpu/test_gpu_epilogue.py): one thread per element of D,
// D = act(alpha A B + beta C + bias) + residual. Five are right (each activation, each bias axis, C in place or D
// apart, with and without aux and a residual); the rest get the epilogue wrong on purpose, each in one way only, so
// that the diagnosis can name it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ float to_f(float x) { return x; }
__device__ float to_f(__half x) { return __half2float(x); }
__device__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T from_f(float x);
template <> __device__ float from_f<float>(float x) { return x; }
template <> __device__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// ACT: 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh), 4 silu
template <int ACT> __device__ float act(float x) {
    if (ACT == 1) return fmaxf(x, 0.0f);
    if (ACT == 2) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    if (ACT == 3) return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    if (ACT == 4) return x / (1.0f + expf(-x));
    return x;
}

// BIAS_M: the bias runs along M (one value a row); FAULT: 0 none, 1 the bias along the other axis, 2 the activation
// before the bias, 3 the residual ignored, 4 aux written after the activation
template <typename T, int BIAS_M, int ACT, int FAULT>
__device__ void body(int M, int N, int K, float alpha, float beta, const T* A, const T* B, const T* C, T* D,
                     const T* bias, const T* residual, T* aux) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_f(A[(size_t)row * K + k]) * to_f(B[(size_t)k * N + col]);
    size_t at = (size_t)row * N + col;
    float p = alpha * acc;
    if (beta != 0.0f) p += beta * to_f(C[at]);
    float b = 0.0f;
    if (bias) b = to_f(bias[(BIAS_M != (FAULT == 1)) ? row : col]);
    float y = FAULT == 2 ? act<ACT>(p) + b : act<ACT>(p + b);
    if (aux) aux[at] = from_f<T>(FAULT == 4 ? y : p + b);
    if (residual && FAULT != 3) y += to_f(residual[at]);
    D[at] = from_f<T>(y);
}

template <typename T, int BIAS_M, int ACT, int FAULT>
__global__ void full(int M, int N, int K, float alpha, float beta, const T* A, const T* B, const T* C, T* D,
                     const T* bias, const T* residual, T* aux) {
    body<T, BIAS_M, ACT, FAULT>(M, N, K, alpha, beta, A, B, C, D, bias, residual, aux);
}

template <typename T, int BIAS_M, int ACT, int FAULT>
__global__ void apart(int M, int N, int K, float alpha, float beta, const T* A, const T* B, const T* C, T* D,
                      const T* bias, const T* residual) {
    body<T, BIAS_M, ACT, FAULT>(M, N, K, alpha, beta, A, B, C, D, bias, residual, nullptr);
}

template <typename T, int ACT>
__global__ void in_place(int M, int N, int K, float alpha, float beta, const T* A, const T* B, T* C, const T* bias) {
    body<T, 0, ACT, 0>(M, N, K, alpha, beta, A, B, C, C, bias, nullptr, nullptr);
}

template <typename T>
__global__ void d_only(int M, int N, int K, float alpha, float beta, const T* A, const T* B, const T* C, T* D) {
    body<T, 0, 0, 0>(M, N, K, alpha, beta, A, B, C, D, nullptr, nullptr, nullptr);
}

/* pytest-gemm
name = "epi_gelu_aux"
description = "D = gelu(alpha A B + beta C + bias[N]) + residual, aux = the pre-activation value"
entry = "full<float, 0, 2, 0>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual", "aux"]
dtypes = ["fp32"]
epilogue = { bias = "N", activation = "gelu", residual = true, aux = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_silu_bias_m_fp16"
description = "D = silu(alpha A B + beta C + bias[M]) + residual, in fp16"
entry = "apart<__half, 1, 4, 0>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual"]
dtypes = ["fp16"]
epilogue = { bias = "M", activation = "silu", residual = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_gelu_tanh_bf16"
description = "D = gelu_tanh(alpha A B + beta C + bias[N]) + residual, in bf16"
entry = "apart<__nv_bfloat16, 0, 3, 0>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual"]
dtypes = ["bf16"]
epilogue = { bias = "N", activation = "gelu_tanh", residual = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_relu_in_place_bf16"
description = "C = relu(alpha A B + beta C + bias[N]), C in place"
entry = "in_place<__nv_bfloat16, 1>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "bias"]
dtypes = ["bf16"]
epilogue = { bias = "N", activation = "relu" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_d_only"
description = "D = alpha A B + beta C, C an input only (no epilogue declared: D in args says it)"
entry = "d_only<float>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_bias_other_axis"
description = "WRONG: the bias declared along N read along M (bias[row])"
entry = "apart<float, 0, 1, 1>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual"]
dtypes = ["fp32"]
epilogue = { bias = "N", activation = "relu", residual = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_act_before_bias"
description = "WRONG: gelu(alpha A B + beta C) + bias"
entry = "apart<float, 0, 2, 2>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual"]
dtypes = ["fp32"]
epilogue = { bias = "N", activation = "gelu", residual = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_residual_ignored"
description = "WRONG: the residual never added"
entry = "apart<__half, 1, 4, 3>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual"]
dtypes = ["fp16"]
epilogue = { bias = "M", activation = "silu", residual = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "epi_aux_after_act"
description = "WRONG: aux holds the activation's output, not its argument"
entry = "full<float, 0, 2, 4>"
args = ["M", "N", "K", "alpha", "beta", "A", "B", "C", "D", "bias", "residual", "aux"]
dtypes = ["fp32"]
epilogue = { bias = "N", activation = "gelu", residual = true, aux = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
