"""The rule of --gemm-shard I/N (specs/sharding.py): deterministic shards, whatever the collection order, the other
tests or the process."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from pytest_gemm.specs.sharding import in_shard, shard_of, split

NAIVE = "kernels/01_naive.cu::sgemm_naive"
IDS = [
    f"kernels/k{k}.cu::kernel{k}[fp32-{s}x{s}x{s}{ab}]"
    for k in range(5)
    for s in (64, 512, 4096)
    for ab in ("", "-a0.7b1.3")
]


# -- the rule --------------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_are_disjoint_and_together_hold_every_test_once(count):
    shards = [split(IDS, (index, count))[0] for index in range(1, count + 1)]
    assert sorted(t for shard in shards for t in shard) == sorted(IDS)
    assert all(shard_of(t, count) == i + 1 for i, shard in enumerate(shards) for t in shard)


def test_membership_does_not_depend_on_the_order_or_on_the_other_tests():
    before = {t: shard_of(t, 4) for t in IDS}
    for seed in range(5):
        order = random.Random(seed).sample(IDS, len(IDS))
        assert {t: i for i in range(1, 5) for t in split(order, (i, 4))[0]} == before
    grown = IDS + [f"kernels/new.cu::added[fp32-{s}x{s}x{s}]" for s in range(8, 80, 8)]
    assert {t: i for i in range(1, 5) for t in split(grown, (i, 4))[0] if t in before} == before  # nothing moved


def test_the_rule_is_the_sha256_of_the_id_not_pythons_hash():
    """Pinned: the same shard on every machine, Python and hash seed (a changed rule would split CI differently)."""
    assert [shard_of(f"{NAIVE}[fp32-512x512x512{ab}]", 2) for ab in ("", "-a0.7b1.3", "-a-1.5b0")] == [1, 2, 2]
    code = "from pytest_gemm.specs.sharding import shard_of; print(shard_of('kernels/x.cu::k[fp32-64x64x64]', 5))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert seen == {f"{shard_of('kernels/x.cu::k[fp32-64x64x64]', 5)}\n"}


def test_shards_are_roughly_equal():
    ids = [f"kernels/k{i % 11}.cu::k[fp32-{i}x{i}x{i}]" for i in range(1, 2001)]
    sizes = [len(split(ids, (i, 4))[0]) for i in range(1, 5)]
    assert sum(sizes) == 2000 and max(sizes) - min(sizes) < 100, sizes


#: shards recorded for fixed ids, for counts 1, 2, 3, 4, 7, 16 and 1000: a change of the hash, of the bytes
#: of the digest taken or of the formula (such as counting from 0) moves tests between CI jobs, and fails here
PINNED = {
    "kernels/k0.cu::kernel0[fp32-64x64x64]": [1, 1, 1, 3, 2, 7, 527],
    "kernels/k3.cu::kernel3[fp32-4096x4096x4096-a0.7b1.3]": [1, 1, 3, 3, 4, 11, 299],
    "tests/test_plain.py::test_ordinary[5]": [1, 2, 2, 2, 6, 6, 894],
    "": [1, 1, 2, 1, 2, 5, 653],
}


@pytest.mark.parametrize("test_id", PINNED)
def test_a_tests_shard_is_the_recorded_one(test_id):
    counts = (1, 2, 3, 4, 7, 16, 1000)
    assert [shard_of(test_id, count) for count in counts] == PINNED[test_id]
    for count, shard in zip(counts, PINNED[test_id]):
        assert [i for i in range(1, count + 1) if in_shard(test_id, (i, count))] == [shard]
    with pytest.raises(ValueError, match="at least 1 shard"):
        shard_of(test_id, 0)
