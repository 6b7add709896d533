"""Deterministic shards of a test suite (``--gemm-shard I/N``): which of N shards a test id belongs to.

A test's shard is a function of its id alone (the SHA-256 of the id, modulo N), never of the order in
which tests were collected, of which other tests exist, of the machine or of Python's hash seed. So every
job of a CI matrix or Slurm array, and every xdist worker inside one, agrees on the split; the shards
are disjoint and together hold every test once; and adding or removing a test moves no other test.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["in_shard", "shard_of", "split"]


def shard_of(test_id: str, count: int) -> int:
    """The shard, from 1 to ``count``, that the test ``test_id`` (its pytest node id) belongs to."""
    if count < 1:
        raise ValueError(f"a suite splits into at least 1 shard, not {count}")
    digest = hashlib.sha256(test_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def in_shard(test_id: str, shard: tuple[int, int]) -> bool:
    """Whether ``test_id`` belongs to shard ``(I, N)``: the I-th of N, counted from 1."""
    index, count = shard
    return shard_of(test_id, count) == index


def split(test_ids: Iterable[str], shard: tuple[int, int]) -> tuple[list[str], list[str]]:
    """``test_ids`` divided into those of shard ``(I, N)`` and the rest, each in the order given."""
    kept: list[str] = []
    dropped: list[str] = []
    for test_id in test_ids:
        (kept if in_shard(test_id, shard) else dropped).append(test_id)
    return kept, dropped
