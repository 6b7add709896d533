// A kernel that never returns. The harness must stop waiting after --gemm-timeout, kill the GPU
// worker (which takes the kernel with it), and go on. One shape only: each case costs the timeout.

/* pytest-gemm
name = "spin_forever"
entry = "spin_forever"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32"]
block = [32]
grid = [1]
requires = ["M == 256"]
*/

extern "C" __global__ void spin_forever(int M, int N, int K, const float* A, const float* B, float* C) {
    for (;;) __nanosleep(1000);
}
