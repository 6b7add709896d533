// Kernels that crash with sticky CUDA errors: after one, the CUDA context of the process that ran
// it is lost. The harness must fail that case alone, replace its GPU worker, and go on.

/* pytest-gemm
name = "wild_write"
description = "stores through a pointer 2^40 floats past C: an illegal address"
entry = "wild_write"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [32]
grid = [1]
*/

/* pytest-gemm
name = "misaligned_load"
description = "a float4 load from A + 1, which is 4 bytes past a 16-byte boundary: a misaligned address"
entry = "misaligned_load"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [32]
grid = [1]
*/

/* pytest-gemm
name = "trap"
description = "calls __trap(): an unspecified launch failure"
entry = "trap"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [32]
grid = [1]
*/

extern "C" __global__ void wild_write(int M, int N, int K, const float* A, const float* B, float* C) {
    float* wild = C + ((size_t)1 << 40);
    wild[threadIdx.x] = 1.0f;
}

extern "C" __global__ void misaligned_load(int M, int N, int K, const float* A, const float* B, float* C) {
    const float4* p = reinterpret_cast<const float4*>(A + 1);
    float4 v = p[threadIdx.x];
    C[threadIdx.x] = v.x + v.y + v.z + v.w;
}

extern "C" __global__ void trap(int M, int N, int K, const float* A, const float* B, float* C) {
    if (threadIdx.x == 0) __trap();
}
