// Kernels for the GPU tests of grouped FP8 GEMMs (tests/gpu/test_gpu_grouped_fp8.py): one thread per element of C,
// e4m3 with DeepSeek-V3's scales (A 1 x 128 a row, each group's B 128 x 128), B stored N x K, each 128 of K summed
// in fp32 and scaled (DeepGEMM's promotion), bf16 out. Two are right (contiguous by each row's group index, masked by
// each slot's count); one applies the next group's scales of B to each group's B, and nothing else.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

/* pytest-gemm
name = "fp8_grouped_contiguous"
description = "contiguous groups found by each row's group index, each group's B with its own 128 x 128 scales"
entry = "contiguous_fp8<0>"
args = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b", "ld_scale_a", "ld_scale_b", "group_index", "num_groups"]
dtypes = ["fp8_e4m3"]
scales = { A = "1x128", B = "128x128", stored = { B = "NxK" } }
storage = { B = "NxK" }
groups = { layout = "contiguous", align = 4 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "fp8_grouped_other_scales"
description = "WRONG: group g's B scaled by group g + 1's scales (an index off by one, into the grid of scales only)"
entry = "contiguous_fp8<1>"
args = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b", "ld_scale_a", "ld_scale_b", "group_index", "num_groups"]
dtypes = ["fp8_e4m3"]
scales = { A = "1x128", B = "128x128", stored = { B = "NxK" } }
storage = { B = "NxK" }
groups = { layout = "contiguous", align = 4 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "fp8_grouped_masked"
description = "masked groups: a slot of M rows a group (its A's scales a grid of their own), its first group_rows[g] valid"
entry = "masked_fp8"
args = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b", "ld_scale_a", "ld_scale_b", "group_rows", "num_groups"]
dtypes = ["fp8_e4m3"]
scales = { A = "1x128", B = "128x128", stored = { B = "NxK" } }
storage = { B = "NxK" }
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

// One element of group g's C: A's row (its 1 x 128 scales in sa), B's column n of group g (stored N x K, its grid
// of 128 x 128 scales in sb, stored N/128 x K/128 with rows ld_sb apart).
__device__ float dot_fp8(int n, int N, int K, const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, const float* sa,
                         const float* sb, int ld_sb) {
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 128) {
        float part = 0.0f;
        for (int k = k0; k < min(k0 + 128, K); ++k) part += float(a[k]) * float(b[(long)n * K + k]);
        acc += part * sa[k0 / 128] * sb[(n / 128) * ld_sb + k0 / 128];
    }
    return acc;
}

template <int WRONG>
__global__ void contiguous_fp8(int M, int N, int K, const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B,
                               __nv_bfloat16* C, const float* scale_a, const float* scale_b, int ld_scale_a,
                               int ld_scale_b, const int* group_index, int num_groups) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int g = group_index[row];
    if (g < 0) return;  // a padding row: no group's
    int grid_rows = (N + 127) / 128;                   // each group's grid of B's scales: N/128 rows of ld_scale_b
    int s = WRONG ? (g + 1) % num_groups : g;
    const __nv_fp8_e4m3* b = B + (long)g * N * K;
    float v = dot_fp8(col, N, K, A + (long)row * K, b, scale_a + (long)row * ld_scale_a,
                      scale_b + (long)s * grid_rows * ld_scale_b, ld_scale_b);
    C[(long)row * N + col] = __float2bfloat16(v);
}

extern "C" __global__ void masked_fp8(int M, int N, int K, const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B,
                                      __nv_bfloat16* C, const float* scale_a, const float* scale_b, int ld_scale_a,
                                      int ld_scale_b, const int* group_rows, int num_groups) {
    int g = blockIdx.z, row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= group_rows[g] || col >= N) return;
    long r = (long)g * M + row;  // the row among every slot's
    int grid_rows = (N + 127) / 128;
    float v = dot_fp8(col, N, K, A + r * K, B + (long)g * N * K, scale_a + r * ld_scale_a,
                      scale_b + (long)g * grid_rows * ld_scale_b, ld_scale_b);
    C[r * N + col] = __float2bfloat16(v);
}
