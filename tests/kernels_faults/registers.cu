// A kernel that needs more registers than an SM has for one block: 1024 threads of about 255
// registers each. CUDA refuses such a launch ("too many resources requested for launch"); the
// harness must say so with the numbers, before launching, and keep its GPU worker.

/* pytest-gemm
name = "register_hog"
entry = "register_hog"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [1024]
grid = ["cdiv(M * N, 1024)"]
options = ["-maxrregcount=255"]
*/

#define LIVE 200

extern "C" __global__ void register_hog(int M, int N, int K, const float* A, const float* B, float* C) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= M * N) return;
    const int row = idx / N, col = idx % N;
    float acc[LIVE];
#pragma unroll
    for (int i = 0; i < LIVE; ++i) acc[i] = 0.0f;
    for (int k = 0; k < K; ++k) {
        const float a = A[row * K + k], b = B[k * N + col];
#pragma unroll
        for (int i = 0; i < LIVE; ++i) acc[i] = fmaf(a, b + (float)i, acc[i]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LIVE; ++i) sum += acc[i] * (i == 0 ? 1.0f : 0.0f);
    C[idx] = sum;
}
