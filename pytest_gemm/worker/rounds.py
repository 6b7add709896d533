"""What a batch of timed rounds is made of (used by :mod:`.timer`): the harness's own kernels, how long the
spin ahead of a batch lasts, and how a batch's CUPTI records become its times.

The harness's kernels are all named with the ``pytest_gemm_`` prefix, so that CUPTI's records tell them from
the timed work (:mod:`.cupti_clock`):

- the prepare kernel, before every timed launch: restores C to its starting content, flushes L2 by
  writing a buffer of twice its size, and pushes earlier kernels' code out of every SM's instruction caches.
  One kernel, one CUPTI record, and the opening of the launch's span;
- the mark kernel, after a batch's last launch: closes its span;
- the spin kernel, ahead of an events-timed batch: keeps the GPU busy while Python queues the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cupti_clock import MARK_KERNEL, PREPARE_KERNEL, SPIN_KERNEL, Span

SPIN_SOURCE = (
    'extern "C" __global__ void '
    + SPIN_KERNEL
    + r"""(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
)
# The sweep: more code than an SM's instruction caches hold, as straight-line FFMAs (16 bytes each on sm_70 and
# later) in four independent chains, so that a warp issues one a cycle. ptxas schedules each basic block as a
# whole, and its time grows faster than the block, so the code is cut into blocks of SWEEP_CHUNK (measured:
# docs/measurements.md#the-timers-kernels). Each of the sweeping block's SWEEP_WARPS warps runs its own part, so
# that the SM fetches them at once.
SWEEP_INSTRUCTIONS = 16384
SWEEP_CHUNK = 256
SWEEP_WARPS = 8
PREPARE_THREADS = 32 * SWEEP_WARPS  # the prepare kernel's block: one warp per part of the sweep
SM_EPOCH_SLOTS = 1024  # one per %smid value; an SM whose id is past them sweeps in every block
_SWEEP_STEP = "".join(f'asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3C23D70A;" : "+f"(x{i}));' for i in range(4))
_CHUNK = (
    "                if (x0 != -1.0f) {\n#pragma unroll\n"
    f"                    for (int i = 0; i < {SWEEP_CHUNK // 4}; ++i) {{ {_SWEEP_STEP} }}\n"
    "                }\n"
)


def prepare_source() -> str:
    """The prepare kernel's source, with a sweep of ``SWEEP_INSTRUCTIONS`` (a multiple of
    ``SWEEP_CHUNK * SWEEP_WARPS``).

    Each thread restores its share of C before it writes its share of the flush buffer, and the grid's threads
    all run at once, so C is written in the first moments and the flush's 2 x L2 of writes that follow evict it.
    The flush evicts code from L2 as well, but each SM keeps recent code in its own instruction caches, which
    survive it: a kernel then starts faster when the one before it left its code there (cuBLAS after a kernel of
    little code) than after one that pushed it out. So, when ``epoch`` is not 0, the first block to reach each
    SM (the one that finds an older epoch in ``sm_epochs``) also runs the sweep, between its share of C and its
    share of the flush, and counts itself in ``sink[1]``: every launch then finds only the prepare kernel's code
    in the SM, as under Nsight Compute's ``--cache-control all``. That every SM gets one of the grid's 4 blocks
    per SM is how GPUs schedule an idle device, not a CUDA promise; tests/gpu/test_gpu_prepare_kernel.py checks it.
    """
    per_warp = max(1, SWEEP_INSTRUCTIONS // SWEEP_CHUNK // SWEEP_WARPS)
    sweep = "".join(f"            if (warp == {w}) {{\n{_CHUNK * per_warp}            }}\n" for w in range(SWEEP_WARPS))
    return (
        """
typedef unsigned long long u64;
extern "C" __global__ void """
        + PREPARE_KERNEL
        + r"""(const unsigned char* c_init, unsigned char* c, u64 c_bytes, uint4* flush, u64 flush_words,
                                     unsigned int* sink, unsigned int* sm_epochs, unsigned int epoch) {
    const u64 first = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 step = (u64)gridDim.x * blockDim.x;
    const u64 c_words = c_bytes / 16;
    for (u64 i = first; i < c_words; i += step) ((uint4*)c)[i] = ((const uint4*)c_init)[i];
    for (u64 i = 16 * c_words + first; i < c_bytes; i += step) c[i] = c_init[i];
    if (epoch != 0) {
        __shared__ int sweeper;
        if (threadIdx.x == 0) {
            unsigned int sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            sweeper = sm >= """
        + str(SM_EPOCH_SLOTS)
        + r""" || atomicExch(&sm_epochs[sm], epoch) != epoch;
        }
        __syncthreads();
        if (sweeper) {
            const int warp = threadIdx.x / 32;
            float x0 = threadIdx.x, x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
"""
        + sweep
        + r"""            if (x0 + x1 + x2 + x3 == -1.0f) *sink = 1u;  // never true; keeps the chains
            if (threadIdx.x == 0) atomicAdd(&sink[1], 1u);
        }
    }
    for (u64 i = first; i < flush_words; i += step) flush[i] = make_uint4(0, 0, 0, 0);
}
"""
    )


PREPARE_SOURCE = prepare_source()
BATCH_DEVICE_S = 0.02  # aim for this much device time per batch of rounds
MAX_BATCH = 64
# With CUPTI each batch also pays the flush of its records (four or five records a round, read raw by cupti_buffers;
# measured: docs/measurements.md#cuptis-records), and the samples are steadier, so its batches are larger.
CUPTI_BATCH_DEVICE_S = 0.05
MAX_CUPTI_BATCH = 256
FIRST_CUPTI_BATCH = 32  # then 64, 128... up to the batch that CUPTI_BATCH_DEVICE_S gives
#: the rounds at the start of each batch whose launch calls are timed on the host: later in a batch, a
#: launch call can wait for room in CUDA's launch queue (the GPU's pace, not the host's cost); 16 rounds queue about
#: 130 operations (prepare kernels, launches, events), well within its 1024 or so entries
HOST_TIMED_ROUNDS = 16
#: the fewest warm-up rounds after the first two (one a set of inputs, where more): what a round costs is their mean
WARM_ROUNDS = 8
MARK_SOURCE = 'extern "C" __global__ void ' + MARK_KERNEL + "() {}"
MAX_SPIN_S = 0.02


@dataclass
class Batch:
    """One batch's times: by the events always, by CUPTI when it timed the batch (or why it could not)."""

    events_k: list[float]
    events_r: list[float]
    host_s: float
    kernel_s: list[float] = field(default_factory=list)
    reference_s: list[float] = field(default_factory=list)
    problem: str = ""
    other_streams: tuple[int, ...] = ()  # CUPTI's ids of streams besides the harness's that the launches used
    host_k: list[float] = field(default_factory=list)  # the host's time to make each launch call: the kernel's
    host_r: list[float] = field(default_factory=list)  # and cuBLAS's


@dataclass
class Measured:
    """The samples of one clock's timed batches, and why they stopped (or why CUPTI could not go on)."""

    kernel_s: list[float] = field(default_factory=list)
    reference_s: list[float] = field(default_factory=list)
    events_k: list[float] = field(default_factory=list)
    events_r: list[float] = field(default_factory=list)
    rounds: int = 0
    reason: str = ""
    problem: str = ""
    other_streams: tuple[int, ...] = ()
    host_k: list[float] = field(default_factory=list)
    host_r: list[float] = field(default_factory=list)


def disagree(cupti_s: list[float], events_s: list[float]) -> str:
    """Why CUPTI's times cannot be right, judged against the events that bracket the same launches: a
    launch cannot take longer than the time between its two events."""
    cupti_median, events_median = float(np.median(cupti_s)), float(np.median(events_s))
    if cupti_median > events_median * 1.01 + 0.5e-6:
        return (
            f"CUPTI's median ({cupti_median * 1e6:.2f} us) is longer than the events' ({events_median * 1e6:.2f} us) "
            "around the same launches"
        )
    return ""


def read_spans(done: Batch, spans: list[Span | None], rounds: int) -> None:
    """Fill a batch's CUPTI times from what CUPTI saw, or say why it cannot be used."""
    missing = sum(span is None for span in spans)
    if len(spans) != 2 * rounds:
        done.problem = f"CUPTI recorded {len(spans)} of the {2 * rounds} launches of a batch"
    elif missing:
        done.problem = f"CUPTI recorded no GPU work for {missing} of {2 * rounds} launches"
    else:
        done.kernel_s = [span.seconds for span in spans[0::2] if span is not None]
        done.reference_s = [span.seconds for span in spans[1::2] if span is not None]
