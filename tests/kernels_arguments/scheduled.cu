// Kernels for the GPU test of arguments as public kernels take them (tests/gpu/test_gpu_arguments.py): a header
// included from beside the file, a schedule computed on the host by a Python function and uploaded as a buffer, a
// debug buffer of zeros. One thread block a tile, the tile read from the schedule.
#include "tile.cuh"

extern "C" __global__ void scheduled(int M, int N, int K, const float* A, const float* B, float* C, const int* tiles,
                                     int* debug) {
    int tile = tiles[blockIdx.x];
    int row = (tile >> 16) * TILE + threadIdx.y, col = (tile & 0xffff) * TILE + threadIdx.x;
    if (debug[0] != 0 || row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

/* pytest-gemm
name = "scheduled"
entry = "scheduled"
args = ["M", "N", "K", "A", "B", "C", "tiles", "debug"]
dtypes = ["fp32"]
buffers = { tiles = { type = "int32", size = "cdiv(M, 16) * cdiv(N, 16)", fill = "schedule.py:reversed_tiles" }, debug = { size = 1 } }
block = [16, 16]
grid = ["cdiv(M, 16) * cdiv(N, 16)"]
*/

/* pytest-gemm
name = "scheduled_short"
description = "WRONG: its schedule function gives one tile too few"
entry = "scheduled"
args = ["M", "N", "K", "A", "B", "C", "tiles", "debug"]
dtypes = ["fp32"]
buffers = { tiles = { type = "int32", size = "cdiv(M, 16) * cdiv(N, 16)", fill = "schedule.py:one_short" }, debug = { size = 1 } }
block = [16, 16]
grid = ["cdiv(M, 16) * cdiv(N, 16)"]
*/
