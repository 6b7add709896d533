// Kernels for the GPU tests of strided-batched GEMMs (tests/gpu/test_gpu_batched.py): one thread per element of C
// and grid z over the batch. Four are right (B and C in either order; fp32 and fp16; int, size_t or long long
// strides), one computes a packed batch's offsets itself, one declares no batch at all, and four get the batch wrong
// on purpose, each in one way only (otherwise right), so that the diagnosis can name it.

/* pytest-gemm
name = "sgemm_batched"
description = "strided-batched fp32, B and C in either order, grid z over the batch"
entry = "batched_gemm<B_NxK, C_NxM, float, int, int>"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
params = { B_NxK = [0, 1], C_NxM = [0, 1] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "sgemm_batched_fp16"
description = "strided-batched fp16 with fp32 accumulation, B and C in either order, grid z over the batch"
entry = "batched_gemm<B_NxK, C_NxM, __half, int, int>"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp16"]
params = { B_NxK = [0, 1], C_NxM = [0, 1] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "batched_size_t"
description = "strided-batched fp32 with size_t sizes, leading dimensions, batch count and (so) strides"
entry = "batched_gemm<0, 0, float, size_t, size_t>"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
size_type = "size_t"
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "batched_long_strides"
description = "strided-batched fp32 as cuBLAS declares it: int sizes and batch count, long long strides"
entry = "batched_gemm<0, 0, float, int, long long>"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
stride_type = "long long"
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "batched_packed"
description = "takes the batch count but no strides or leading dimensions: every operand packed, batch after batch"
entry = "batched_packed"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "batch"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "unbatched"
description = "declares no batch: skipped on batched shapes"
entry = "unbatched"
args = ["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "a_stride_ignored"
description = "WRONG on purpose: never advances A by stride_a, so every batch reads batch 0's A"
entry = "a_stride_ignored"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "b_next_batch"
description = "WRONG on purpose: batch b reads the B of batch (b + 1) % batch"
entry = "b_next_batch"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "c_reversed"
description = "WRONG on purpose: batch b writes its result into the C of batch (batch - 1 - b)"
entry = "c_reversed"
args = ["M", "N", "K", "A", "lda", "stride_a", "B", "ldb", "stride_b", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

/* pytest-gemm
name = "c_gap_write"
description = "WRONG on purpose: right results, but each batch also writes element (M, 0) of its C, one row past its end"
entry = "c_gap_write"
args = ["M", "N", "K", "alpha", "A", "lda", "stride_a", "B", "ldb", "stride_b", "beta", "C", "ldc", "stride_c", "batch"]
dtypes = ["fp32"]
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "batch"]
*/

#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

// The one way each wrong kernel gets the batch wrong.
enum Bug { RIGHT, A_STRIDE_IGNORED, B_NEXT_BATCH, C_REVERSED, C_GAP_WRITE };

// One element of C for batch blockIdx.z: A stored M x K, B K x N (BT = 0) or N x K (BT = 1), C M x N (CT = 0) or
// N x M (CT = 1); batch i's operands start stride_x elements after batch i - 1's. I: the sizes' and the batch
// count's type, S: the strides'.
template <int BT, int CT, Bug BUG, typename T, typename I, typename S>
__device__ __forceinline__ void batched_element(I M, I N, I K, float alpha, const T* A, I lda, S stride_a, const T* B,
                                                I ldb, S stride_b, float beta, T* C, I ldc, S stride_c, I batch) {
    const size_t col = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t row = blockIdx.y * (size_t)blockDim.y + threadIdx.y;
    const size_t b = blockIdx.z;
    const size_t count = (size_t)batch;
    if (row >= (size_t)M || col >= (size_t)N || b >= count) return;
    const size_t a_batch = BUG == A_STRIDE_IGNORED ? 0 : b;
    const size_t b_batch = BUG == B_NEXT_BATCH ? (b + 1) % count : b;
    const size_t c_batch = BUG == C_REVERSED ? count - 1 - b : b;
    const T* Ab = A + a_batch * (size_t)stride_a;
    const T* Bb = B + b_batch * (size_t)stride_b;
    T* Cb = C + c_batch * (size_t)stride_c;
    float acc = 0.0f;
    for (size_t k = 0; k < (size_t)K; ++k) {
        const T a = Ab[row * lda + k];
        const T bk = BT ? Bb[col * ldb + k] : Bb[k * ldb + col];
        acc = fmaf(to_float(a), to_float(bk), acc);
    }
    const size_t at = CT ? col * ldc + row : row * ldc + col;
    float r = alpha * acc;
    if (beta != 0.0f) r += beta * to_float(Cb[at]);
    Cb[at] = from_float<T>(r);
    if (BUG == C_GAP_WRITE && row == 0 && col == 0) {
        // Row M of this batch's C: past its last row, in the gap before the next batch (or the guard after C).
        Cb[(size_t)M * ldc] = from_float<T>(r);
    }
}

template <int BT, int CT, typename T, typename I, typename S>
__global__ void batched_gemm(I M, I N, I K, float alpha, const T* A, I lda, S stride_a, const T* B, I ldb, S stride_b,
                             float beta, T* C, I ldc, S stride_c, I batch) {
    batched_element<BT, CT, RIGHT>(M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c, batch);
}

extern "C" __global__ void batched_packed(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                          float* C, int batch) {
    const size_t m = M, n = N, k = K;
    batched_element<0, 0, RIGHT>(m, n, k, alpha, A, k, m * k, B, n, k * n, beta, C, n, m * n, (size_t)batch);
}

extern "C" __global__ void unbatched(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
                                     float beta, float* C, int ldc) {
    batched_element<0, 0, RIGHT>(M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

extern "C" __global__ void a_stride_ignored(int M, int N, int K, float alpha, const float* A, int lda, int stride_a,
                                            const float* B, int ldb, int stride_b, float beta, float* C, int ldc,
                                            int stride_c, int batch) {
    batched_element<0, 0, A_STRIDE_IGNORED>(M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c,
                                            batch);
}

extern "C" __global__ void b_next_batch(int M, int N, int K, float alpha, const float* A, int lda, int stride_a,
                                        const float* B, int ldb, int stride_b, float beta, float* C, int ldc,
                                        int stride_c, int batch) {
    batched_element<0, 0, B_NEXT_BATCH>(M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c,
                                        batch);
}

extern "C" __global__ void c_reversed(int M, int N, int K, const float* A, int lda, int stride_a, const float* B,
                                      int ldb, int stride_b, float* C, int ldc, int stride_c, int batch) {
    batched_element<0, 0, C_REVERSED>(M, N, K, 1.0f, A, lda, stride_a, B, ldb, stride_b, 0.0f, C, ldc, stride_c,
                                      batch);
}

extern "C" __global__ void c_gap_write(int M, int N, int K, float alpha, const float* A, int lda, int stride_a,
                                       const float* B, int ldb, int stride_b, float beta, float* C, int ldc,
                                       int stride_c, int batch) {
    batched_element<0, 0, C_GAP_WRITE>(M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc, stride_c,
                                       batch);
}
