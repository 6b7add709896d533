// Kernels for the GPU tests of grouped GEMMs (tests/gpu/test_gpu_grouped.py): one thread per element of C. Six are
// right, one a layout and a dtype (contiguous by each row's group index with padding rows, masked by each slot's
// count, K-grouped by the groups' offsets along K); one writes the padding it declares it may; the rest get the groups
// wrong on purpose, each in one way only, so that the diagnosis can name it.
#include <cuda_bf16.h>

/* pytest-gemm
name = "grouped_contiguous"
description = "contiguous groups found by each row's group index (DeepGEMM's m_indices), padding rows skipped"
entry = "contiguous<float>"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_masked"
description = "masked groups: a slot of M rows a group, its first group_rows[g] valid"
entry = "masked<float>"
args = ["M", "N", "K", "A", "B", "C", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_k"
description = "K-grouped (an MoE weight gradient): group g sums k in [offsets[g], offsets[g+1]) into its own C"
entry = "k_grouped<float>"
args = ["M", "N", "K", "A", "B", "C", "group_offsets", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "k" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_contiguous_bf16"
description = "contiguous groups found by each row's group index (DeepGEMM's m_indices), padding rows skipped"
entry = "contiguous<__nv_bfloat16>"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["bf16"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_masked_bf16"
description = "masked groups: a slot of M rows a group, its first group_rows[g] valid"
entry = "masked<__nv_bfloat16>"
args = ["M", "N", "K", "A", "B", "C", "group_rows", "num_groups"]
dtypes = ["bf16"]
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_k_bf16"
description = "K-grouped (an MoE weight gradient): group g sums k in [offsets[g], offsets[g+1]) into its own C"
entry = "k_grouped<__nv_bfloat16>"
args = ["M", "N", "K", "A", "B", "C", "group_offsets", "num_groups"]
dtypes = ["bf16"]
groups = { layout = "k" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_other_b"
description = "WRONG: group g reads group g - 1's B (an index off by one)"
entry = "other_b"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_writes_padding"
description = "WRONG: writes zeros into the padding rows, which belong to no group"
entry = "writes_padding"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_padding_declared"
description = "writes zeros into the padding rows, and declares that it may (as DeepGEMM's kernels do)"
entry = "writes_padding"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8, writes_padding = true }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_past_end"
description = "WRONG: computes every row of each slot, ignoring the groups' counts"
entry = "past_end"
args = ["M", "N", "K", "A", "B", "C", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_empty_masked"
description = "WRONG: an empty group's slot gets one tile of 16 rows computed"
entry = "empty_masked"
args = ["M", "N", "K", "A", "B", "C", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_empty_contiguous"
description = "WRONG: an empty group is not skipped: it computes 16 rows from its start, over the next group's"
entry = "empty_contiguous"
args = ["M", "N", "K", "A", "B", "C", "group_ends", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "contiguous" }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

/* pytest-gemm
name = "grouped_reads_padding"
description = "WRONG: a group's last row reads the row after it (a padding row) as data"
entry = "reads_padding"
args = ["M", "N", "K", "A", "B", "C", "group_index"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/

__device__ float f(float x) { return x; }
__device__ float f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T to(float x);
template <> __device__ float to<float>(float x) { return x; }
template <> __device__ __nv_bfloat16 to<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// C[row, col] = A[arow, k0:k1] . B_g[k0:k1, col], B_g K x N with K_ld rows
template <typename T>
__device__ void dot(int row, int col, int N, int K, int k0, int k1, const T* A, const T* Bg, T* C, int arow) {
    float acc = 0.f;
    for (int k = k0; k < k1; ++k) acc += f(A[(size_t)arow * K + k]) * f(Bg[(size_t)k * N + col]);
    C[(size_t)row * N + col] = to<T>(acc);
}

template <typename T>
__global__ void contiguous(int M, int N, int K, const T* A, const T* B, T* C, const int* group_index) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int g = group_index[row];
    if (g < 0) return;
    dot(row, col, N, K, 0, K, A, B + (size_t)g * K * N, C, row);
}

template <typename T>
__global__ void masked(int M, int N, int K, const T* A, const T* B, T* C, const int* group_rows, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x, g = blockIdx.z;
    if (row >= group_rows[g] || col >= N) return;
    size_t base = (size_t)g * M;
    dot((int)(base + row), col, N, K, 0, K, A, B + (size_t)g * K * N, C, (int)(base + row));
}

template <typename T>
__global__ void k_grouped(int M, int N, int K, const T* A, const T* B, T* C, const int* group_offsets, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x, g = blockIdx.z;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = group_offsets[g]; k < group_offsets[g + 1]; ++k) acc += f(A[(size_t)row * K + k]) * f(B[(size_t)k * N + col]);
    C[((size_t)g * M + row) * N + col] = to<T>(acc);
}

extern "C" __global__ void other_b(int M, int N, int K, const float* A, const float* B, float* C, const int* group_index) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int g = group_index[row];
    if (g < 0) return;
    int h = g > 0 ? g - 1 : 0;
    dot(row, col, N, K, 0, K, A, B + (size_t)h * K * N, C, row);
}

extern "C" __global__ void writes_padding(int M, int N, int K, const float* A, const float* B, float* C, const int* group_index) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int g = group_index[row];
    if (g < 0) { C[(size_t)row * N + col] = 0.f; return; }
    dot(row, col, N, K, 0, K, A, B + (size_t)g * K * N, C, row);
}

extern "C" __global__ void past_end(int M, int N, int K, const float* A, const float* B, float* C, const int* group_rows, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x, g = blockIdx.z;
    if (row >= M || col >= N) return;
    size_t base = (size_t)g * M;
    dot((int)(base + row), col, N, K, 0, K, A, B + (size_t)g * K * N, C, (int)(base + row));
}

extern "C" __global__ void empty_masked(int M, int N, int K, const float* A, const float* B, float* C, const int* group_rows, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x, g = blockIdx.z;
    int rows = group_rows[g] == 0 ? 16 : group_rows[g];
    if (row >= rows || row >= M || col >= N) return;
    size_t base = (size_t)g * M;
    dot((int)(base + row), col, N, K, 0, K, A, B + (size_t)g * K * N, C, (int)(base + row));
}

// Each row takes the first group whose span [start, max(end, start + 16)) holds it: an empty group "owns" 16 rows
// from its start, which are the next group's.
extern "C" __global__ void empty_contiguous(int M, int N, int K, const float* A, const float* B, float* C, const int* group_ends, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int start = 0;
    for (int g = 0; g < G; ++g) {
        int end = group_ends[g];
        int span = end == start ? start + 16 : end;
        if (row >= start && row < span) { dot(row, col, N, K, 0, K, A, B + (size_t)g * K * N, C, row); return; }
        start = end;
    }
}

extern "C" __global__ void reads_padding(int M, int N, int K, const float* A, const float* B, float* C, const int* group_index) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    int g = group_index[row];
    if (g < 0) return;
    int arow = row + 1 < M && group_index[row + 1] != g ? row + 1 : row;  // WRONG: a group's last row reads the next
    dot(row, col, N, K, 0, K, A, B + (size_t)g * K * N, C, arow);
}

/* pytest-gemm
name = "grouped_pointers"
description = "pointer arrays (CUTLASS's pointer-array grouped GEMM): each group's A, B and C by address, its rows group_rows[g]"
entry = "pointers<0>"
args = ["N", "K", "A_ptrs", "B_ptrs", "C_ptrs", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_pointers_masked"
description = "pointer arrays into masked slots: each group's slot of A and C, and its B, by address"
entry = "pointers<0>"
args = ["N", "K", "A_ptrs", "B_ptrs", "C_ptrs", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "masked", align = 16 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

/* pytest-gemm
name = "grouped_pointers_other_b"
description = "WRONG: group g reads B_ptrs[g - 1] (an index off by one into the pointer array)"
entry = "pointers<1>"
args = ["N", "K", "A_ptrs", "B_ptrs", "C_ptrs", "group_rows", "num_groups"]
dtypes = ["fp32"]
groups = { layout = "contiguous", align = 8 }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)", "num_groups"]
*/

// Each group's matrices by address, as CUTLASS's pointer-array grouped GEMM takes them (no base pointers).
template <int OTHER>
__global__ void pointers(int N, int K, const float* const* A_ptrs, const float* const* B_ptrs, float* const* C_ptrs,
                         const int* group_rows, int G) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x, g = blockIdx.z;
    if (row >= group_rows[g] || col >= N) return;
    const float* a = A_ptrs[g];
    const float* b = B_ptrs[OTHER ? max(g - 1, 0) : g];
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += a[(size_t)row * K + k] * b[(size_t)k * N + col];
    C_ptrs[g][(size_t)row * N + col] = acc;
}
