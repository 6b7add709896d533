// A plain FP8 GEMM with scales, one thread an output element: the harness's own test kernel for every scaling mode
// and the faults it must name. C = (A s_a)(B s_b) in fp32, promoted block by block: the products of each
// 128-wide block of K are summed in fp32, then scaled and added to the output's fp32 sum (as DeepGEMM promotes).
// B is stored N x K (K-major), as Hopper's FP8 MMA takes it.
#include <cuda_fp8.h>
#include <cuda_bf16.h>

// GA: A's scales, 0 per tensor, 1 per row, 2 per 1 x 128; GB: B's, 0 per tensor, 1 per column, 2 per 128 x 128.
// TA, TB: the grid stored in its second order (A's K x M, B's N x K). E5M2: the data's format. UE8M0: one byte a scale.
// BUG (the fault header's FAULT): 0 none, 1 A's scales read one per 128 x 128 block, 2 B's grid read in the other
// order, 3 scales ignored, 4 bytes read as the other format, 5 A's scales one K block ahead (past the grid at the last).
template <int E5M2>
__device__ float element(const unsigned char* p, long i) {
    if (E5M2) { __nv_fp8_e5m2 x; x.__x = p[i]; return float(x); }
    __nv_fp8_e4m3 x; x.__x = p[i]; return float(x);
}

template <int UE8M0>
__device__ float scale(const void* s, long i) {
    if (UE8M0) return exp2f(float(int(static_cast<const unsigned char*>(s)[i]) - 127));
    return static_cast<const float*>(s)[i];
}

__device__ long grid_at(int r, int c, int ld, int transposed) { return transposed ? long(c) * ld + r : long(r) * ld + c; }

template <int GA, int GB, int TA, int TB, int E5M2, int UE8M0, int OUT, int BUG>
__global__ void fp8_gemm(const unsigned char* A, const unsigned char* B, void* C, const void* scale_a,
                         const void* scale_b, int M, int N, int K, int ld_scale_a, int ld_scale_b) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    const int KB = (K + 127) / 128, NB = (N + 127) / 128;
    float acc = 0.f;
    for (int kb = 0; kb < KB; ++kb) {
        float part = 0.f;
        for (int k = kb * 128; k < min(K, kb * 128 + 128); ++k) {
            const int read_e5m2 = BUG == 4 ? !E5M2 : E5M2;
            float a = read_e5m2 ? element<1>(A, long(i) * K + k) : element<0>(A, long(i) * K + k);
            float b = read_e5m2 ? element<1>(B, long(j) * K + k) : element<0>(B, long(j) * K + k);
            part += a * b;
        }
        int ar = GA == 0 ? 0 : (BUG == 1 ? i / 128 : i), ac = GA == 2 ? (BUG == 5 ? kb + 1 : kb) : 0;
        int br = GB == 2 ? kb : 0, bc = GB == 0 ? 0 : (GB == 1 ? j : j / 128);
        float sa = scale<UE8M0>(scale_a, grid_at(ar, ac, ld_scale_a, TA));
        float sb = BUG == 2 ? scale<UE8M0>(scale_b, TB ? long(br) * NB + bc : long(bc) * KB + br)
                              : scale<UE8M0>(scale_b, grid_at(br, bc, ld_scale_b, TB));
        acc += BUG == 3 ? part : part * sa * sb;
    }
    if (OUT == 0) static_cast<__nv_bfloat16*>(C)[long(i) * N + j] = __float2bfloat16(acc);
    else static_cast<float*>(C)[long(i) * N + j] = acc;
}

/* pytest-gemm
name = "fp8_blockwise"
entry = "fp8_gemm<2, 2, 1, 1, 0, 0, 0, 0>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e4m3"]
storage = { B = "NxK" }
scales = { A = "1x128", B = "128x128", stored = { A = "KxM", B = "NxK" }, align = 16 }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
description = "DeepSeek-V3's scaling: A 1 x 128 (M-major, padded for TMA), B 128 x 128"
*/

/* pytest-gemm
name = "fp8_blockwise_ue8m0"
entry = "fp8_gemm<2, 2, 0, 0, 0, 1, 0, 0>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e4m3"]
storage = { B = "NxK" }
scales = { A = "1x128", B = "128x128", type = "ue8m0" }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
*/

/* pytest-gemm
name = "fp8_rowwise_e5m2"
entry = "fp8_gemm<1, 1, 0, 0, 1, 0, 1, 0>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e5m2"]
c_dtype = "fp32"
storage = { B = "NxK" }
scales = { A = "row", B = "col" }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
*/

/* pytest-gemm
name = "fp8_tensorwise"
entry = "fp8_gemm<0, 0, 0, 0, 0, 0, 0, 0>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e4m3"]
storage = { B = "NxK" }
scales = { A = "tensor", B = "tensor" }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
*/

/* pytest-gemm
name = "fp8_tensorwise_fp32"
entry = "fp8_gemm<0, 0, 0, 0, 0, 0, 1, 0>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e4m3"]
c_dtype = "fp32"
storage = { B = "NxK" }
scales = { A = "tensor", B = "tensor" }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
*/

/* pytest-gemm
name = "fp8_fault"
entry = "fp8_gemm<2, 2, 1, 1, 0, 0, 0, FAULT>"
args = ["A", "B", "C", "scale_a", "scale_b", "M", "N", "K", "ld_scale_a", "ld_scale_b"]
dtypes = ["fp8_e4m3"]
storage = { B = "NxK" }
scales = { A = "1x128", B = "128x128", stored = { A = "KxM", B = "NxK" }, align = 16 }
params = { FAULT = [1, 2, 3, 4, 5] }
block = [16, 16]
grid = ["(N + 15) // 16", "(M + 15) // 16"]
description = "the faults the harness must name (BUG above): run with -k fault, the correct kernels with -k 'not fault'"
*/
