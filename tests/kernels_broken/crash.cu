// A kernel that writes through a wild pointer: the launch fails with an illegal-address error.

/* pytest-gemm
name = "wild_write"
entry = "wild_write"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [32]
grid = [1]
*/

extern "C" __global__ void wild_write(int M, int N, int K, const float* A, const float* B, float* C) {
    float* wild = C + ((size_t)1 << 40);
    wild[threadIdx.x] = 1.0f;
}
