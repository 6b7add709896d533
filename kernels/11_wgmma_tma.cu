// Step 11: Hopper tensor cores through wgmma, fed by TMA (the Tensor Memory Accelerator).
//
// Change from step 10 (mma.sync on fragments that every warp loads with ldmatrix, from slices
// that cp.async or, in its second version, TMA copied; one barrier per slice): on Hopper a
// warpgroup of four warps issues one asynchronous wgmma.m64n256k16 that reads both operands
// straight from shared memory, and one thread moves each operand tile with TMA.
// - Block tile 128 x 256, K slice 64, three warpgroups: warpgroup 0 is the producer (one
//   thread issues the copies), warpgroups 1 and 2 each own 64 rows x 256 columns (128 fp32
//   accumulators per thread) and issue 4 wgmma per slice.
// - TMA copies a 128 x 64 box of A and four 64 x 64 boxes of B per slice, described by
//   tensor maps the harness builds on the host (header key tensor_maps). The copies land
//   with the 128-byte swizzle that wgmma's shared-memory descriptors expect, so there is no
//   address arithmetic, no ldmatrix and no bank conflict; rows and columns past the matrix
//   are zero-filled by TMA itself.
// - A ring of STAGES slices is run by mbarriers instead of block barriers: "full" completes
//   when a slice's bytes have landed (the copy counts them), "empty" when both consumer
//   warpgroups have finished the wgmma that read it. Nobody waits at a block-wide barrier.
// Why it is faster: wgmma is specified at 4,096 FLOP per SM per clock (989 TFLOP/s dense bf16
// at 1,830 MHz), where mma.sync measured 2,568 on this GPU (scripts/mma_ceiling.py); operands
// never pass through registers; and copying costs one thread a few instructions per slice.
// Measured on the H100 at 4096^3 (default variant STAGES 4): 648 TFLOP/s, 82.6% of cuBLAS
// bf16 in the same run, 1.56x step 10's cp.async version (415 TFLOP/s in that run); 3 stages:
// 645 TFLOP/s.
// Not done here: clusters with TMA multicast (two blocks sharing one copy of a tile, which
// halves the L2 traffic of that operand), a persistent grid, and an epilogue through TMA.
//
// arch: sm_90a. wgmma is an architecture-specific (sm_90a) instruction: the header pins the
// target, and the harness skips this kernel on any GPU other than compute capability 9.0.
// requires: a TMA tensor map needs the distance between stored rows to be a multiple of 16
// bytes, so K (the row length of A) and N (of B) must be multiples of 8 bf16 elements; C is
// written from registers with 4-byte stores of column pairs, which N % 8 == 0 also covers.
// M, and the M, N and K tails of each tile, may be anything.

/* pytest-gemm
name = "hgemm_wgmma_bf16"
description = "Hopper wgmma m64n256k16 from 128-byte-swizzled shared memory filled by TMA; producer warpgroup and mbarrier ring; bf16 in and out, fp32 accumulation"
entry = "gemm_wgmma"
args = ["M", "N", "K", "alpha", "A_map", "B_map", "beta", "C"]
dtypes = ["bf16"]
arch = "sm_90a"
params = { STAGES = [4, 3] }
block = [384]
grid = ["cdiv(N, 256)", "cdiv(M, 128)"]
shared_mem = "STAGES * (128 * 64 + 64 * 256) * 2 + 1024"
tensor_maps = { A = { box = [64, 128], swizzle = 128 }, B = { box = [64, 64], swizzle = 128 } }
requires = ["K % 8 == 0", "N % 8 == 0"]
*/

#include <cuda_bf16.h>

#define BM 128
#define BN 256
#define BK 64
#define A_STAGE_BYTES (BM * BK * 2)  // 16 KB: 128 rows of 64 elements (128 bytes)
#define B_BOX_BYTES (BK * 64 * 2)    // 8 KB: 64 k-rows of 64 columns; four boxes per slice
#define STAGE_BYTES (A_STAGE_BYTES + 4 * B_BOX_BYTES)

// The driver's CUtensorMap: 128 opaque bytes, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// --- mbarriers -----------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// Arrive, and say how many bytes the copies tied to this phase will bring.
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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

// --- TMA -----------------------------------------------------------------------------------
// One box of a 2-D tensor map (coordinates: inner, outer) into shared memory; the bytes count
// towards the mbarrier's phase.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
        : "memory");
}

// --- wgmma ---------------------------------------------------------------------------------
// Shared-memory matrix descriptor for the 128-byte swizzle: start address, leading and stride
// byte offsets (in 16-byte units), swizzle mode 1 in bits 62-63.
// A (K-major): 8-row groups of 128-byte rows are 1 KB apart (stride); the leading offset is
// unused. B (N-major, read transposed): 8-row k groups are 1 KB apart (stride), and the
// 64-column boxes are B_BOX_BYTES apart (leading).
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading, unsigned stride) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(leading >> 4) << 16) |
           ((unsigned long long)(stride >> 4) << 32) | (1ull << 62);
}
// The 128 accumulators of a thread as read-write asm operands %0 to %127.
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

// d += A (64 x 16, K-major) * B (16 x 256, transposed: N-major), fp32 accumulators.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a, unsigned long long b) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, 1, 1, 1, 0, 1;\n"
        : ACCUMULATORS
        : "l"(a), "l"(b));
}
// Tells the compiler the accumulators may have changed here (after the last wgmma.wait_group),
// so that it reads them only afterwards.
__device__ __forceinline__ void accumulators_settled(float (&d)[128]) {
    asm volatile(""
                 : ACCUMULATORS
                 :
                 : "memory");
}

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgmma(int M, int N, int K, float alpha, const __grid_constant__ TensorMap A_map,
               const __grid_constant__ TensorMap B_map, float beta, __nv_bfloat16* __restrict__ C) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
    const unsigned smem = (smem_addr(smem_raw) + 1023) & ~1023u;  // the 128-byte swizzle repeats every 1 KB
    const int wg = threadIdx.x / 128, row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = (K + BK - 1) / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full_bar[s]), 1);   // the producer's expect_bytes
            mbar_init(smem_addr(&empty_bar[s]), 2);  // one arrival per consumer warpgroup
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {  // producer: slice kt goes to stage kt % STAGES once its last reader is done
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < slices; ++kt) {
                const int s = kt % STAGES;
                if (kt >= STAGES) mbar_wait(smem_addr(&empty_bar[s]), (kt / STAGES - 1) & 1);
                const unsigned bar = smem_addr(&full_bar[s]), dst = smem + s * STAGE_BYTES;
                mbar_expect_bytes(bar, STAGE_BYTES);  // boxes past the matrix still count in full
                tma_load(dst, &A_map, kt * BK, row0, bar);
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    tma_load(dst + A_STAGE_BYTES + j * B_BOX_BYTES, &B_map, col0 + 64 * j, kt * BK, bar);
            }
        }
        return;
    }

    const int consumer = wg - 1, t = threadIdx.x % 128;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < slices; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(smem_addr(&full_bar[s]), (kt / STAGES) & 1);
        const unsigned a_base = smem + s * STAGE_BYTES + consumer * (64 * BK * 2);
        const unsigned b_base = smem + s * STAGE_BYTES + A_STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)  // 16 elements of K: 32 bytes along A's rows, 16 rows of B
            wgmma_m64n256k16(d, smem_desc(a_base + 32 * k, 16, 1024), smem_desc(b_base + 2048 * k, B_BOX_BYTES, 1024));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Wait for this slice's wgmma before handing the stage back. Keeping one slice in flight
        // (wait_group 1, releasing the previous stage) measured the same: 646 vs 648 TFLOP/s.
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (t == 0) mbar_arrive(smem_addr(&empty_bar[s]));
    }
    accumulators_settled(d);

    // Epilogue: the accumulator layout of wgmma m64nN: warp w of the warpgroup holds rows
    // 16 w + lane / 4 (+ 8), and register 4 j + {0, 1} (+ {2, 3} for the lower row) holds
    // columns 8 j + 2 (lane % 4) + {0, 1}. N % 8 == 0, so a pair is wholly inside or outside.
    // With beta, each group of eight pairs of C is read before any of it is written: the
    // compiler cannot tell that a read does not alias an earlier write, so reading and
    // writing pair by pair costs a memory round trip per pair (it doubled the time at 1024^3).
    const int warp = t / 32, lane = t % 32;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = row0 + consumer * 64 + warp * 16 + lane / 4 + half * 8;
        if (row >= M) continue;
        __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(&C[(size_t)row * N + col0 + 2 * (lane % 4)]);
#pragma unroll
        for (int j0 = 0; j0 < BN / 8; j0 += 8) {
            __nv_bfloat162 old[8];
#pragma unroll
            for (int j = j0; j < j0 + 8; ++j)
                old[j - j0] = beta != 0.0f && col0 + 8 * j + 2 * (lane % 4) < N ? out[4 * j] : __floats2bfloat162_rn(0.0f, 0.0f);
#pragma unroll
            for (int j = j0; j < j0 + 8; ++j) {
                if (col0 + 8 * j + 2 * (lane % 4) >= N) continue;
                const float2 c = __bfloat1622float2(old[j - j0]);
                out[4 * j] = __floats2bfloat162_rn(fmaf(beta, c.x, alpha * d[4 * j + 2 * half]),
                                                   fmaf(beta, c.y, alpha * d[4 * j + 2 * half + 1]));
            }
        }
    }
}
