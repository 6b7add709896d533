"""What a batch of timed rounds is made of (used by :mod:`.timer`): the harness's own kernels, how long the
spin ahead of a batch lasts, and how a batch's CUPTI records become its times.

The harness's kernels are all named with the ``pytest_gemm_`` prefix, so that CUPTI's records tell them from
the timed work (:mod:`.cupti_clock`):

- the prepare kernel, before every timed launch: restores C to its starting content and flushes L2 by
  writing (or, for research only, reading) a buffer of twice its size. One kernel, one CUPTI record, and the
  opening of the launch's span;
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
# Each thread restores its share of C before it writes its share of the flush buffer, and the grid's threads
# all run at once, so C is written in the first moments and the flush's 2 x L2 of writes that follow evict it.
PREPARE_SOURCE = (
    """
typedef unsigned long long u64;
extern "C" __global__ void """
    + PREPARE_KERNEL
    + r"""(const unsigned char* c_init, unsigned char* c, u64 c_bytes, uint4* flush, u64 flush_words,
                                     int read_flush, unsigned int* sink) {
    const u64 first = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u64 step = (u64)gridDim.x * blockDim.x;
    const u64 c_words = c_bytes / 16;
    for (u64 i = first; i < c_words; i += step) ((uint4*)c)[i] = ((const uint4*)c_init)[i];
    for (u64 i = 16 * c_words + first; i < c_bytes; i += step) c[i] = c_init[i];
    if (read_flush) {
        unsigned int acc = 0;
        for (u64 i = first; i < flush_words; i += step) {
            uint4 v = flush[i];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        if (acc == 0x9e3779b9u) *sink = acc;  // never true for the zeroed buffer; keeps the loads
    } else {
        for (u64 i = first; i < flush_words; i += step) flush[i] = make_uint4(0, 0, 0, 0);
    }
}
"""
)
BATCH_DEVICE_S = 0.02  # aim for this much device time per batch of rounds
MAX_BATCH = 64
# With CUPTI each batch also pays the flush of its records (on an H100 about 1 to 1.4 ms a batch, four or five
# records a round, read raw by cupti_buffers), and the samples are steadier, so its batches are larger.
CUPTI_BATCH_DEVICE_S = 0.05
MAX_CUPTI_BATCH = 256
FIRST_CUPTI_BATCH = 32  # then 64, 128... up to the batch that CUPTI_BATCH_DEVICE_S gives
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
