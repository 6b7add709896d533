// A plain INT8 GEMM, one thread an output element, int32 accumulation and output; ACC16 = 1 accumulates in
// 16 bits, the overflow the harness must name.
template <int ACC16>
__global__ void int8_gemm(const signed char* A, const signed char* B, int* C, int M, int N, int K) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    int acc = 0;
    short narrow = 0;
    for (int k = 0; k < K; ++k) {
        int p = int(A[long(i) * K + k]) * int(B[long(k) * N + j]);
        if (ACC16) narrow = short(narrow + p); else acc += p;
    }
    C[long(i) * N + j] = ACC16 ? int(narrow) : acc;
}

/* pytest-gemm
name = "int8_naive"
entry = "int8_gemm<0>"
args = ["A", "B", "C", "M", "N", "K"]
dtypes = ["int8"]
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
*/

/* pytest-gemm
name = "int8_fault_overflow"
entry = "int8_gemm<1>"
args = ["A", "B", "C", "M", "N", "K"]
dtypes = ["int8"]
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
description = "accumulates in 16 bits: the overflow the harness must name (run with -k fault)"
*/
