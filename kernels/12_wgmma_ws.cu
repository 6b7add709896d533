// Step 12: step 11's wgmma main loop in a persistent, warp-specialised kernel whose epilogue
// goes through shared memory and TMA.
//
// Change from step 11 (one block per 128 x 256 tile, consumers storing C from registers while
// the tensor cores wait):
// - Epilogue through TMA (EPI = 1): each consumer warpgroup writes its 64 x 256 results into its
//   32 KB half of a 64 KB buffer in the 128-byte swizzle (each store instruction conflict-free), and one thread
//   hands four 64 x 64 boxes to TMA, which writes them out, clipped at M and N, while the
//   warpgroup goes on to its next tile. The buffer takes one stage's room: 3 stages, not 4.
// - Persistent grid: one block per SM (SM_COUNT in the grid expression: 132 on an H100 SXM or
//   H200) walks a list of tiles, so the producer copies the next tile's first slices while the
//   consumers are still in the epilogue.
// - Register reallocation (setmaxnreg): the producer warpgroup keeps 40 registers a thread and
//   the consumers take 232. Consumers keep one slice of wgmma in flight (wait_group 1) and
//   hand each stage back as soon as the wgmma that read it is done.
// - Tiles go out in bands of 16 tile rows, column by column within a band, so blocks running
//   at once share rows of A and columns of B in L2.
// - CLUSTER = 2 (a variant): two blocks of a cluster own vertically adjacent tiles, each copies
//   half of their common slice of B and TMA multicasts it into both, so each block reads 32 KB
//   of L2 per slice instead of 48 KB. Stages are released to the producers of both blocks
//   (remote mbarrier arrivals through mapa).
// Why it is faster: with the epilogue handed to TMA the tensor cores idle only while 64 KB
// goes into shared memory, not while it goes out to global memory.
// Measured on the H100 at 4096^3 and 8192^3 (research/kernel-speed.sh: 3 separate runs of the
// default variant, CLUSTER 1, EPI 1, against cuBLAS in the same run; docs/results.md): bf16 766
// TFLOP/s, 96.8% of cuBLAS (96.7-97.0%), and 101.4% (101.1-101.7%); fp16 97.3% and 101.4%. Step
// 11 in the same runs: 82.0% and 93.2% (bf16). On an H200: 97.3-97.7% and 101.5%.
// What each part gave (single runs, bf16 4096^3): the persistent, setmaxnreg, wait_group-1
// kernel with step 11's epilogue made 87.5% (step 11: 82.9% in that run; without the
// persistent grid 87.3%, with wait_group 0 85.9%); the TMA epilogue took it to 97.2%. Band
// heights of 8 and 4 tile rows made 90.5% and 93.4%. Multicast made 90.2% against 97.2%: the
// L2 traffic it saves is not what limits this kernel, and every stage now waits for the
// slower block of the pair. A first version released stages with
// "mbarrier.arrive.release.cluster", which compiles to a GPU-wide memory barrier per arrival,
// and ran at 51% of cuBLAS; the CTA-scope arrive is enough, since what it orders (the wgmma's
// reads of the stage) has completed.
//
// B stored N x K (hgemm_wgmma_ws_nxk_*, header key storage = { B = "NxK" }): C = A @ B^T, B's rows
// K contiguous elements, as PyTorch keeps a Linear layer's weights. Why: it is the layout FP8 needs.
// FP8 wgmma (e4m3, e5m2) takes B only K-major (its transpose immediates are for 16-bit types), and
// cuBLASLt's FP8 GEMM runs only in that layout ("TN": A and B both K-major), so an FP8 successor of
// this kernel starts from this variant, and its peer is cuBLAS in the same order. What changes: B's
// tiles are copied as A's are, four 64 x 64 boxes of 64 rows of N by 64 of k (inner dimension K), so
// a stage holds B as 256 rows of 128 bytes in the 128-byte swizzle, read with A's kind of descriptor
// (8-row groups 1 KB apart, a 16-element k step 32 bytes on) and the instruction's tnspB = 0: K-major
// is wgmma's own layout for B, so nothing is transposed. The multicast, the barriers and both
// epilogues are the same code; the K x N kernels compile to the same machine code as before.
// Measured on an H200 (research/reach-gpu.sh: 3 separate runs, CLUSTER 1, EPI 1, against cuBLAS in the same
// run, cuBLAS with B in the same order; docs/data/h200-2026-11-26-reach-gpu.txt): B stored N x K, bf16 96.9% of
// cuBLAS at 4096^3 (96.6-97.4%) and 101.4% at 8192^3 (101.3-101.5%); fp16 97.5% (97.2-97.5%) and 101.3%
// (101.1-101.4%). The K x N kernels in the same runs: bf16 97.3% and 101.4%, fp16 97.8% and 101.4%.
//
// arch: sm_90a (wgmma, setmaxnreg). The grid follows the GPU's SM count, so a GPU with fewer
// SMs gets one block per SM too.
// requires: as step 11 (TMA's 16-byte row pitch: K % 8 for A, and for B stored N x K; N % 8 for
// C, and for B stored K x N); M may be anything.

/* pytest-gemm
name = "hgemm_wgmma_ws_bf16"
description = "persistent warp-specialised wgmma m64n256k16 with setmaxnreg, clusters of CLUSTER blocks sharing B through TMA multicast; bf16 in and out, fp32 accumulation"
entry = "gemm_wgmma_ws<__nv_bfloat16, B_NxK>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["bf16"]
arch = "sm_90a"
params = { CLUSTER = [1, 2], EPI = [1, 0] }
block = [384]
grid = ["CLUSTER * min(cdiv(cdiv(M, 128), CLUSTER) * cdiv(N, 256), SM_COUNT // CLUSTER)"]
shared_mem = "(4 - EPI) * (128 * 64 + 64 * 256) * 2 + EPI * 2 * 128 * 256 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_wgmma_ws_fp16"
description = "persistent warp-specialised wgmma m64n256k16 with setmaxnreg, clusters of CLUSTER blocks sharing B through TMA multicast; fp16 in and out, fp32 accumulation"
entry = "gemm_wgmma_ws<__half, B_NxK>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["fp16"]
arch = "sm_90a"
params = { CLUSTER = [1, 2], EPI = [1, 0] }
block = [384]
grid = ["CLUSTER * min(cdiv(cdiv(M, 128), CLUSTER) * cdiv(N, 256), SM_COUNT // CLUSTER)"]
shared_mem = "(4 - EPI) * (128 * 64 + 64 * 256) * 2 + EPI * 2 * 128 * 256 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_wgmma_ws_nxk_bf16"
description = "hgemm_wgmma_ws_bf16 with B stored N x K (K-major, C = A @ B^T), the layout FP8 wgmma needs: B's tiles copied and read as A's are; bf16 in and out, fp32 accumulation"
entry = "gemm_wgmma_ws<__nv_bfloat16, B_NxK>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["bf16"]
arch = "sm_90a"
storage = { B = "NxK" }
params = { CLUSTER = [1, 2], EPI = [1, 0] }
block = [384]
grid = ["CLUSTER * min(cdiv(cdiv(M, 128), CLUSTER) * cdiv(N, 256), SM_COUNT // CLUSTER)"]
shared_mem = "(4 - EPI) * (128 * 64 + 64 * 256) * 2 + EPI * 2 * 128 * 256 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

/* pytest-gemm
name = "hgemm_wgmma_ws_nxk_fp16"
description = "hgemm_wgmma_ws_fp16 with B stored N x K (K-major, C = A @ B^T), the layout FP8 wgmma needs: B's tiles copied and read as A's are; fp16 in and out, fp32 accumulation"
entry = "gemm_wgmma_ws<__half, B_NxK>"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C", "C_map"]
dtypes = ["fp16"]
arch = "sm_90a"
storage = { B = "NxK" }
params = { CLUSTER = [1, 2], EPI = [1, 0] }
block = [384]
grid = ["CLUSTER * min(cdiv(cdiv(M, 128), CLUSTER) * cdiv(N, 256), SM_COUNT // CLUSTER)"]
shared_mem = "(4 - EPI) * (128 * 64 + 64 * 256) * 2 + EPI * 2 * 128 * 256 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 }, C = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BM 128
#define BN 256
#define BK 64
#define BAND 16                      // tile rows per band of the tile order
#define A_STAGE_BYTES (BM * BK * 2)  // 16 KB: 128 rows of 64 elements (128 bytes)
#define B_BOX_BYTES (BK * 64 * 2)    // 8 KB: 64 k-rows of 64 columns (B K x N) or 64 rows of 64 k (N x K); four per slice
#define STAGE_BYTES (A_STAGE_BYTES + 4 * B_BOX_BYTES)
#define CONSUMER_WARPS 8
#define STAGES (4 - EPI)             // the epilogue's 64 KB buffer takes the place of one stage
#define C_BOX_BYTES (64 * 64 * 2)  // 8 KB: 64 rows of 64 columns, four boxes per consumer

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ unsigned special_reg_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// --- mbarriers -----------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrive on the barrier at the same place in block `cta` of the cluster (this block included).
// The default (CTA-scope) release: what is ordered before it is the wgmma's reads of the stage,
// already complete; ".release.cluster" compiled to a GPU-wide memory barrier per arrival and
// ran at half speed.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile(
        "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
        " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
        "r"(cta)
        : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// --- TMA -----------------------------------------------------------------------------------
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}
// The same box into the same place of every block in `mask`; each one's barrier counts the bytes.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar,
                                                   unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar), "h"(mask)
        : "memory");
}

// One box of shared memory to global through C's tensor map; TMA leaves out what lies past M or N.
__device__ __forceinline__ void tma_store(const TensorMap* map, unsigned src, int inner, int outer) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(inner), "r"(outer), "r"(src)
                 : "memory");
}
// The 128 threads of consumer warpgroup c meet at barrier 1 + c (0 is __syncthreads'); the id is an
// immediate so that ptxas reserves only these barriers.
__device__ __forceinline__ void consumer_barrier(int c) {
    if (c == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// --- wgmma ---------------------------------------------------------------------------------
// Descriptors as in step 11: 128-byte swizzle, 8-row groups 1 KB apart, B's boxes B_BOX_BYTES apart.
// B stored N x K is K-major like A: 256 rows of 128 bytes (the four boxes end to end), read with A's descriptor.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading, unsigned stride) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(leading >> 4) << 16) |
           ((unsigned long long)(stride >> 4) << 32) | (1ull << 62);
}
#define ACCUMULATORS \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// The immediates after the descriptors: scale-d, scale-a, scale-b, tnspA = 0 (A K-major), then tnspB, which each
// instruction below appends: 1 for B stored K x N (N-major, transposed from wgmma's native K-major), 0 for N x K.
#define WGMMA_OPERANDS \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
    "}, %128, %129, 1, 1, 1, 0, "

// The element type's instruction and its pair conversions.
template <typename E> struct Elem;
template <> struct Elem<__nv_bfloat16> {
    using Pair = __nv_bfloat162;
    template <int B_NXK>
    static __device__ __forceinline__ void wgmma(float (&d)[128], unsigned long long a, unsigned long long b) {
        if constexpr (B_NXK)
            asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_OPERANDS "0;\n" : ACCUMULATORS : "l"(a), "l"(b));
        else
            asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_OPERANDS "1;\n" : ACCUMULATORS : "l"(a), "l"(b));
    }
    static __device__ __forceinline__ Pair pack(float x, float y) { return __floats2bfloat162_rn(x, y); }
    static __device__ __forceinline__ float2 unpack(Pair p) { return __bfloat1622float2(p); }
};
template <> struct Elem<__half> {
    using Pair = __half2;
    template <int B_NXK>
    static __device__ __forceinline__ void wgmma(float (&d)[128], unsigned long long a, unsigned long long b) {
        if constexpr (B_NXK)
            asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGMMA_OPERANDS "0;\n" : ACCUMULATORS : "l"(a), "l"(b));
        else
            asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGMMA_OPERANDS "1;\n" : ACCUMULATORS : "l"(a), "l"(b));
    }
    static __device__ __forceinline__ Pair pack(float x, float y) { return __floats2half2_rn(x, y); }
    static __device__ __forceinline__ float2 unpack(Pair p) { return __half22float2(p); }
};
__device__ __forceinline__ void accumulators_settled(float (&d)[128]) {
    asm volatile("" : ACCUMULATORS : : "memory");
}

// Tile `t` of the order: bands of BAND tile rows (BAND / CLUSTER cluster rows), column by column
// within a band. Returns the cluster row (its first tile row is CLUSTER times it) and the column.
__device__ __forceinline__ void tile_of(int t, int rows, int cols, int& row, int& col) {
    const int band_rows = BAND / CLUSTER, band = t / (band_rows * cols);
    const int in_band = min(band_rows, rows - band * band_rows), local = t - band * band_rows * cols;
    row = band * band_rows + local % in_band;
    col = local / in_band;
}

// B_NXK: 0 for B stored K x N, 1 for N x K (the entry passes the header's B_NxK).
template <typename E, int B_NXK>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(384, 1)
    gemm_wgmma_ws(int M, int N, int K, float alpha, const __grid_constant__ TensorMap A_map,
                  const __grid_constant__ TensorMap B_map, float beta, E* __restrict__ C,
                  const __grid_constant__ TensorMap C_map) {
    using Pair = typename Elem<E>::Pair;
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
    const unsigned smem = (smem_addr(smem_raw) + 1023) & ~1023u;  // same offset in every block of the cluster
    const int wg = threadIdx.x / 128;
    const unsigned rank = CLUSTER > 1 ? special_reg_cluster_rank() : 0;
    const int slices = (K + BK - 1) / BK;
    const int rows = (((M + BM - 1) / BM) + CLUSTER - 1) / CLUSTER, cols = (N + BN - 1) / BN;
    const int tiles = rows * cols, first = blockIdx.x / CLUSTER, stride = gridDim.x / CLUSTER;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);                          // this block's producer
            mbar_init(smem_addr(&empty_bar[s]), CONSUMER_WARPS * CLUSTER);  // every consumer warp of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (CLUSTER > 1) cluster_sync();  // no block copies into or arrives at another before that one's init

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            int it = 0;  // slices issued so far, over all tiles: stage it % STAGES, phase it / STAGES
            for (int t = first; t < tiles; t += stride) {
                int row, col;
                tile_of(t, rows, cols, row, col);
                const int row0 = (row * CLUSTER + rank) * BM, col0 = col * BN;
                for (int kt = 0; kt < slices; ++kt, ++it) {
                    const int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(smem_addr(&empty_bar[s]), (it / STAGES - 1) & 1);
                    const unsigned bar = smem_addr(&full_bar[s]), dst = smem + s * STAGE_BYTES;
                    mbar_expect_bytes(bar, STAGE_BYTES);  // A, and all four boxes of B whoever copies them
                    tma_load(dst, &A_map, kt * BK, row0, bar);
                    // B's box j: n from col0 + 64 j, k from kt * BK, 64 of each; TMA's (inner, outer) coordinates
                    // are (n, k) for B stored K x N, (k, n) for N x K (as A's box is placed)
                    const int k0 = kt * BK;
                    if (CLUSTER == 1) {
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int n0 = col0 + 64 * j;
                            tma_load(dst + A_STAGE_BYTES + j * B_BOX_BYTES, &B_map, B_NXK ? k0 : n0, B_NXK ? n0 : k0, bar);
                        }
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int n0 = col0 + 64 * j;
                            if (j % CLUSTER == (int)rank)
                                tma_load_multicast(dst + A_STAGE_BYTES + j * B_BOX_BYTES, &B_map, B_NXK ? k0 : n0,
                                                   B_NXK ? n0 : k0, bar, (unsigned short)((1u << CLUSTER) - 1));
                        }
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int consumer = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
        // Hand stage s back to the producers of every block that copies into it.
        auto release = [&](int s) {
            if (lane == 0)
                for (int c = 0; c < CLUSTER; ++c) mbar_arrive_cluster(smem_addr(&empty_bar[s]), c);
        };
        int it = 0;
        float d[128];
        for (int t = first; t < tiles; t += stride) {
            int row, col;
            tile_of(t, rows, cols, row, col);
            const int row0 = (row * CLUSTER + rank) * BM, col0 = col * BN;
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.0f;
            int previous = -1;
            for (int kt = 0; kt < slices; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_addr(&full_bar[s]), (it / STAGES) & 1);
                const unsigned a_base = smem + s * STAGE_BYTES + consumer * (64 * BK * 2);
                const unsigned b_base = smem + s * STAGE_BYTES + A_STAGE_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int k = 0; k < BK / 16; ++k) {
                    // k-step k: 16 k-columns, 32 bytes into each 128-byte row of K-major A (and of N x K B), or
                    // 16 k-rows, 2 KB on, of K x N B
                    const unsigned long long b_desc = B_NXK ? smem_desc(b_base + 32 * k, 16, 1024)
                                                            : smem_desc(b_base + 2048 * k, B_BOX_BYTES, 1024);
                    Elem<E>::template wgmma<B_NXK>(d, smem_desc(a_base + 32 * k, 16, 1024), b_desc);
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                if (previous >= 0) {  // the previous slice's wgmma are done: its stage can be refilled
                    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                    release(previous);
                }
                previous = s;
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (previous >= 0) release(previous);  // K >= 1 always; no arrival on a stage never filled
            accumulators_settled(d);

#if EPI
            // Epilogue through shared memory and TMA: each thread writes its pairs (alpha * acc, plus
            // beta * C read from global memory only when beta != 0) into this consumer's 64 x 256
            // buffer, laid out as four 64 x 64 boxes with the 128-byte swizzle (16-byte piece p of row
            // r at p ^ (r % 8): the 32 lanes of each store hit 32 different banks); then one thread
            // hands the boxes to TMA and the warpgroup goes on to its next tile while they drain.
            const unsigned cbuf = smem + STAGES * STAGE_BYTES + consumer * 4 * C_BOX_BYTES;
            if (t128 == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // last tile's boxes read
            consumer_barrier(consumer);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int rl = warp * 16 + lane / 4 + half * 8, r = row0 + consumer * 64 + rl;
                const Pair* in = reinterpret_cast<const Pair*>(&C[(size_t)r * N + col0 + 2 * (lane % 4)]);
#pragma unroll
                for (int j0 = 0; j0 < BN / 8; j0 += 8) {
                    Pair old[8];
#pragma unroll
                    for (int j = j0; j < j0 + 8; ++j)
                        old[j - j0] = beta != 0.0f && r < M && col0 + 8 * j + 2 * (lane % 4) < N ? in[4 * j] : Elem<E>::pack(0.0f, 0.0f);
#pragma unroll
                    for (int j = j0; j < j0 + 8; ++j) {
                        const float2 c = Elem<E>::unpack(old[j - j0]);
                        Pair v = Elem<E>::pack(fmaf(beta, c.x, alpha * d[4 * j + 2 * half]), fmaf(beta, c.y, alpha * d[4 * j + 2 * half + 1]));
                        const unsigned at = cbuf + (j / 8) * C_BOX_BYTES + rl * 128 + (((j % 8) ^ (rl % 8)) << 4) + 4 * (lane % 4);
                        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(*reinterpret_cast<unsigned*>(&v)) : "memory");
                    }
                }
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the writes, visible to TMA
            consumer_barrier(consumer);
            if (t128 == 0) {
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    if (row0 + consumer * 64 < M && col0 + 64 * b < N)
                        tma_store(&C_map, cbuf + b * C_BOX_BYTES, col0 + 64 * b, row0 + consumer * 64);
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
#else
            // Epilogue from registers, as step 11: warp w holds rows 16 w + lane / 4 (+ 8); register 4 j + {0, 1}
            // (+ {2, 3} for the lower row) holds columns 8 j + 2 (lane % 4) + {0, 1}. Each group of
            // eight pairs of C is read (only when beta != 0) before any of it is written.
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int r = row0 + consumer * 64 + warp * 16 + lane / 4 + half * 8;
                if (r >= M) continue;
                Pair* out = reinterpret_cast<Pair*>(&C[(size_t)r * N + col0 + 2 * (lane % 4)]);
#pragma unroll
                for (int j0 = 0; j0 < BN / 8; j0 += 8) {
                    Pair old[8];
#pragma unroll
                    for (int j = j0; j < j0 + 8; ++j)
                        old[j - j0] = beta != 0.0f && col0 + 8 * j + 2 * (lane % 4) < N ? out[4 * j] : Elem<E>::pack(0.0f, 0.0f);
#pragma unroll
                    for (int j = j0; j < j0 + 8; ++j) {
                        if (col0 + 8 * j + 2 * (lane % 4) >= N) continue;
                        const float2 c = Elem<E>::unpack(old[j - j0]);
                        out[4 * j] = Elem<E>::pack(fmaf(beta, c.x, alpha * d[4 * j + 2 * half]),
                                                   fmaf(beta, c.y, alpha * d[4 * j + 2 * half + 1]));
                    }
                }
            }
#endif
        }
#if EPI
        if (t128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // no box left unwritten
#endif
    }
    if (CLUSTER > 1) cluster_sync();  // a block leaves only when no other block will arrive at its barriers
}
