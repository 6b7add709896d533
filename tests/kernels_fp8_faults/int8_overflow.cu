// An INT8 GEMM that accumulates in 16 bits: it wraps once a sum passes 32767 (#36's INT8 overflow).
__global__ void int8_gemm16(const signed char* A, const signed char* B, int* C, int M, int N, int K) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    short acc = 0;
    for (int k = 0; k < K; ++k) acc = short(acc + int(A[long(i) * K + k]) * int(B[long(k) * N + j]));
    C[long(i) * N + j] = acc;
}

/* pytest-gemm
name = "int8_overflow"
entry = "int8_gemm16"
args = ["A", "B", "C", "M", "N", "K"]
dtypes = ["int8"]
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
description = "accumulates in 16 bits"
*/
