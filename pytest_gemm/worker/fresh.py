"""Fresh inputs for timed launches (docs/verification.md#fresh-inputs-for-timed-launches), used by :mod:`.timer`.

Before each timed launch, the harness's fresh kernel writes the launch's A, B and C afresh from the case's inputs,
each row of A (and of C) and each column of B (and of C) negated or not by a key drawn then from the operating
system's generator (``os.urandom``), so that no two launches see the same values and no kernel can predict them.
Negating rows of A and columns of B negates the same rows and columns of ``alpha A B + beta C``, exactly: every
product and sum only changes sign, and rounding to nearest is symmetric. So a timed output, its signs undone by the
same key, must pass the case's own bound, as its verified output did.

After some launches, chosen after the launch call has returned, the output is copied with its signs undone into a
buffer of the harness's; after each batch those copies are judged against the truth. A wrong one stops the timing,
named by its round, and tried as the output of the round before, of the same buffers' previous and first use and of the
inputs as verified: ``round 3 of 12 returned the previous round's result``.

Not for a fused epilogue (an activation does not commute with a sign), where the timed sets keep the verified
inputs, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..records.dtypes import get_dtype
from ..records.outcome import ErrorStats, TimedCheck
from ..specs.footprint import operand_shape
from .cupti_clock import FRESH_KERNEL

__all__ = ["FRESH_SOURCE", "FreshInputs", "TimedOutputWrong", "key", "negated"]

FRESH_THREADS = 256
_WORDS = 6  # the fresh kernel's words an operand
#: at most this many timed outputs checked each batch (each costs a copy of C and a judgement of it)
CHECKS_PER_BATCH = 1
#: a timed launch's output is copied to be checked with a chance of one in this many (a power of 2, at most 256)
CHECK_ONE_IN = 8
#: the operating system's generator, bound when the worker starts: a kernel file's code that replaces ``os.urandom``,
#: ``random`` or ``secrets`` later does not reach it, and one that rebinds this name changes the harness
#: (docs/verification.md#the-harness-unchanged)
_URANDOM = os.urandom


def key() -> int:
    """A key of signs, never 0 (0 changes no sign)."""
    return int.from_bytes(_URANDOM(4), "little") | 1


FRESH_SOURCE = (
    r"""
typedef unsigned long long u64;
__device__ __forceinline__ unsigned int mix(unsigned int x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16; return x;
}
__device__ __forceinline__ unsigned int negated(unsigned int key, u64 index) {
    return key != 0u && (mix(key ^ mix((unsigned int)index * 0x9e3779b9u ^ (unsigned int)(index >> 32))) & 1u);
}
// ops: 6 words an operand: source, destination, elements, stored rows a matrix, stored columns, flags
// (bits 0-7: bytes an element; 8: an integer (negated by two's complement, else by the sign bit); 9: stored
// transposed; 10: rows negated by row_key; 11: columns by col_key)
extern "C" __global__ void """
    + FRESH_KERNEL
    + r"""(const u64* ops, int count, unsigned int row_key, unsigned int col_key) {
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (int o = 0; o < count; ++o) {
        const u64* d = ops + 6 * o;
        const unsigned char* src = (const unsigned char*)d[0];
        unsigned char* dst = (unsigned char*)d[1];
        const u64 n = d[2], rows = d[3], cols = d[4], f = d[5];
        const int size = (int)(f & 0xff), integer = (f >> 8) & 1, transposed = (f >> 9) & 1;
        const int by_row = (f >> 10) & 1, by_col = (f >> 11) & 1;
        for (u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x; t < n; t += step) {
            const u64 j = t % cols, i = (t / cols) % rows;
            const u64 r = transposed ? j : i, c = transposed ? i : j;
            const unsigned int neg = (by_row ? negated(row_key, r) : 0u) ^ (by_col ? negated(col_key, c) : 0u);
            if (size == 1) {
                unsigned char v = src[t];
                dst[t] = neg ? (integer ? (unsigned char)(0u - v) : (unsigned char)(v ^ 0x80u)) : v;
            } else if (size == 2) {
                unsigned short v = ((const unsigned short*)src)[t];
                ((unsigned short*)dst)[t] = neg ? (unsigned short)(v ^ 0x8000u) : v;
            } else if (size == 4) {
                unsigned int v = ((const unsigned int*)src)[t];
                ((unsigned int*)dst)[t] = neg ? (integer ? 0u - v : v ^ 0x80000000u) : v;
            } else {
                u64 v = ((const u64*)src)[t];
                ((u64*)dst)[t] = neg ? v ^ 0x8000000000000000ull : v;
            }
        }
    }
}
"""
)

_MASK = 0xFFFFFFFF


def _mix(x: np.ndarray) -> np.ndarray:
    """The fresh kernel's ``mix`` on uint32 arrays (wrapping as CUDA's unsigned arithmetic does)."""
    x = x.astype(np.uint64)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & np.uint64(_MASK)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & np.uint64(_MASK)
    x ^= x >> np.uint64(16)
    return x


def negated(key: int, count: int) -> np.ndarray:
    """Which of rows (or columns) 0 .. ``count`` - 1 the fresh kernel negates under ``key`` (bool, as it computes it;
    key 0 negates none)."""
    if key == 0:
        return np.zeros(count, dtype=bool)
    index = np.arange(count, dtype=np.uint64)
    low = (index * np.uint64(0x9E3779B9)) & np.uint64(_MASK)
    inner = _mix(low ^ (index >> np.uint64(32)))
    return (_mix(np.uint64(key) ^ inner) & np.uint64(1)).astype(bool)


class TimedOutputWrong(Exception):
    """A checked timed output failed its bound: timing stops, and the check is the case's finding."""

    def __init__(self, check: TimedCheck) -> None:
        super().__init__(f"timed output wrong in round {check.round}")
        self.check = check


@dataclass
class _Copy:
    """A checked launch's output, its signs undone, in the harness's copy buffer."""

    round: int
    keys: tuple[int, int]


class FreshInputs:
    """The fresh inputs of one case's timed sets: each set's descriptors for the fresh kernel (uploaded before any
    batch: nothing but the harness's kernels runs on the stream between a launch and its span's end), each launch's
    keys, and the launch whose output waits in the copy buffer for its check."""

    def __init__(self, prepared: Any, kernel: Any, sources: tuple[Any, Any, Any], sets: list[Any]) -> None:
        self.prepared, self.kernel, self.sources = prepared, kernel, sources
        self.keys: dict[int, list[tuple[int, int]]] = {id(timed): [] for timed in sets}  # each set's launches' keys
        self.rounds: list[tuple[int, int, tuple[int, int]]] = []  # each kernel launch: its set, which use, its keys
        self.copies: list[_Copy] = []
        self.checked = 0
        c = sets[0].ops.c
        self.copy = replace(c, flat=prepared.cp.empty_like(c.flat))
        # every set's descriptors in one upload: its writes (A, B and C), then the copy of its C
        words = [self.words(timed.ops.c, timed.ops) + self.words(timed.ops.c, None, self.copy) for timed in sets]
        self._descriptors = prepared.cp.asarray(np.array(words, dtype=np.uint64).reshape(-1))
        base, size = self._descriptors.data.ptr, 8 * len(words[0])
        self._writes = {id(t): np.uint64(base + i * size) for i, t in enumerate(sets)}
        self._copies = {id(t): np.uint64(base + i * size + 8 * _WORDS * 3) for i, t in enumerate(sets)}

    def words(self, c_source: Any, ops: Any | None, into: Any = None) -> list[int]:
        """The fresh kernel's descriptor words: with ``ops``, of a set's A, B and C from the case's inputs (C from its
        start); without, of ``c_source`` (a set's C) into ``into``."""
        prepared = self.prepared
        case, data = prepared.case, prepared.data
        words = []
        for op in "ABC" if ops is not None else "C":
            target = into if ops is None else {"A": ops.a, "B": ops.b, "C": ops.c}[op]
            source = c_source.flat if ops is None else self.sources["ABC".index(op)]
            rows, cols = case.storage.stored_shape(op, operand_shape(case.spec, op, case.shape))
            integer = (prepared.out if op == "C" else get_dtype(case.dtype)).exact  # negated, not by a sign bit
            flags = target.flat.itemsize | int(integer) << 8 | int(case.storage.transposed(op)) << 9
            flags |= int(op in "AC") << 10 | int(op in "BC") << 11
            count = data.batch_of(op) * rows * cols
            words += [source.data.ptr, target.flat.data.ptr, count, rows, cols, flags]
        return words

    def write(self, timed: Any, kernel_set: bool = True) -> None:
        """Queue the writing of a set's A, B and C's start afresh (before its prepare kernel): a kernel's set under
        new keys; a peer's with none, the same writes with no sign changed (a peer may copy an operand once, when its
        call is first bound: cuBLASLt's FP8 B, the grouped peers'), only where L2 is not flushed after them, so that
        both sides find what the writes left in L2."""
        keys = (key(), key()) if kernel_set else (0, 0)
        uses = self.keys[id(timed)]
        uses.append(keys)
        if kernel_set:
            self.rounds.append((id(timed), len(uses) - 1, keys))
        self._launch(self._writes[id(timed)], 3, keys)

    def _launch(self, descriptors: Any, count: int, keys: tuple[int, int]) -> None:
        blocks = 4 * self.prepared.device.sm_count
        row_key, col_key = (np.uint32(k) for k in keys)
        self.kernel((blocks,), (FRESH_THREADS,), (descriptors, np.int32(count), row_key, col_key))

    def launched(self, timed: Any) -> None:
        """After a kernel launch call has returned and its closing event is queued: where chosen (drawn now), queue a
        copy of its output with its signs undone, at most :data:`CHECKS_PER_BATCH` a batch."""
        if len(self.copies) >= CHECKS_PER_BATCH or not self.chosen():
            return
        keys = self.rounds[-1][2]
        self._launch(self._copies[id(timed)], 1, keys)
        self.copies.append(_Copy(len(self.rounds), keys))

    def _undone(self, c: Any, keys: tuple[int, int]) -> Any:
        """A new packed matrix holding ``c`` (a set's C, or a copy) with the signs of ``keys`` undone (the fresh
        kernel is its own inverse); outside timed batches."""
        out = replace(c, flat=self.prepared.cp.empty_like(c.flat))
        descriptors = self.prepared.cp.asarray(np.array(self.words(c, None, out), dtype=np.uint64))
        self._launch(descriptors, 1, keys)
        return out

    @staticmethod
    def chosen() -> bool:
        """Whether a launch's output is copied to be checked: drawn after its launch call returned."""
        return _URANDOM(1)[0] < 256 // CHECK_ONE_IN

    def check(self, truth: Any, prior: Any) -> None:
        """Judge the batch's copied outputs against the truth (the stream synchronized); raise
        :class:`TimedOutputWrong` at the first that fails its bound, with what it matches."""
        copies, self.copies = self.copies, []
        for copy in copies:
            self.checked += 1
            if not self.prepared.output_passes(self.copy, truth):  # its figures only when it fails
                stats = self.prepared.judge_output(self.copy, prior, truth)
                raise TimedOutputWrong(self._named(copy, stats, truth, prior))

    def _named(self, copy: _Copy, stats: ErrorStats, truth: Any, prior: Any) -> TimedCheck:
        """What a wrong timed output matches: the previous round's result, its buffers' previous or first use's, or the
        result for the inputs as verified (no sign changed). The copy's signs are redone (the launch's raw output),
        then undone by the other launch's keys."""
        index = copy.round - 1
        tries: list[tuple[str, tuple[int, int]]] = []
        if index >= 1:
            tries.append(("previous round", self.rounds[index - 1][2]))
        set_id, use, _ = self.rounds[index]
        for earlier in sorted({use - 1, 0} if use >= 1 else set(), reverse=True):  # its last use, and its first
            tries.append(("same buffers", self.keys[set_id][earlier]))
        tries.append(("as verified", (0, 0)))
        raw = self._undone(self.copy, copy.keys)  # its signs redone: the launch's output as it wrote it
        for name, keys in tries:
            undone = self._undone(raw, keys) if keys != (0, 0) else raw
            if self.prepared.output_passes(undone, truth):
                return TimedCheck(copy.round, len(self.rounds), stats, name, self.checked)
        return TimedCheck(copy.round, len(self.rounds), stats, "unwritten" if stats.unwritten else "", self.checked)

    def last(self, truth: Any, prior: Any) -> TimedCheck | None:
        """The last kernel launch's output judged, its signs undone (after timing): what it matched when wrong, else
        None."""
        set_id, _use, keys = self.rounds[-1]
        self._launch(self._copies[set_id], 1, keys)
        if self.prepared.output_passes(self.copy, truth):
            return None
        stats = self.prepared.judge_output(self.copy, prior, truth)
        return self._named(_Copy(len(self.rounds), keys), stats, truth, prior)

    def undone(self, timed: Any) -> Any:
        """A set's C after its last launch, with that launch's signs undone (re-verification reads it)."""
        uses = self.keys.get(id(timed))
        return timed.ops.c if not uses else self._undone(timed.ops.c, uses[-1])
