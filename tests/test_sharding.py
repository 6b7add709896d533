"""--gemm-shard I/N: deterministic shards, whatever the collection order, the other tests or the process.

The rule (specs/sharding.py) is tested directly; the option through pytester, on kernel files that need no
GPU to collect, and on the H100 recording (tests/replay_backend.py) for runs, xdist and baselines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys

import pytest

from pytest_gemm.cli import _parser
from pytest_gemm.options import OPTIONS
from pytest_gemm.specs.sharding import in_shard, shard_of, split

from conftest import KERNELS, ROOT, small_project

NAIVE = "kernels/01_naive.cu::sgemm_naive"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
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


# -- the option ------------------------------------------------------------------------------------
TILED = (KERNELS / "02_smem_tiling.cu").read_text()  # a kernel with two variants

ORDINARY = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_ordinary(n):
    pass
"""


@pytest.fixture
def project(pytester, naive_source):
    small_project(pytester, naive_source, TILED)
    pytester.makepyfile(test_plain=ORDINARY)
    return pytester


def _collected(project, *args):
    result = project.runpytest("--gemm-kernels", "kernels", "test_plain.py", "--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return result, [line for line in result.outlines if "::" in line]


def test_the_shards_of_a_suite_split_it_and_pytest_says_how_many_were_deselected(project):
    _, whole = _collected(project)
    assert len(whole) == 30 and any("test_ordinary" in t for t in whole)  # kernel items and ordinary tests
    shards = []
    for index in (1, 2, 3):
        result, ids = _collected(project, "--gemm-shard", f"{index}/3")
        result.stdout.fnmatch_lines([f"{len(ids)}/30 tests collected ({30 - len(ids)} deselected)*"])
        shards.append(ids)
    assert sorted(t for ids in shards for t in ids) == sorted(whole)  # each test in exactly one shard
    assert all(any("test_ordinary" in t for t in ids) for ids in shards)  # ordinary tests are shared out too
    assert all(ids == [t for t in whole if t in ids] for ids in shards)  # in collection order


def test_membership_does_not_depend_on_collection_order_or_on_added_tests(project):
    _, before = _collected(project, "--gemm-shard", "2/3")
    project.makeconftest(
        "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_collection_modifyitems(items):\n"
        "    items.reverse()\n"
    )
    _, reversed_ = _collected(project, "--gemm-shard", "2/3")
    assert reversed_ == before[::-1]
    (project.path / "kernels" / "more.cu").write_text(TILED)
    _, grown = _collected(project, "--gemm-shard", "2/3")
    assert [t for t in grown if "more.cu" not in t] == reversed_ and len(grown) > len(reversed_)


@pytest.mark.parametrize("value", ["0/2", "3/2", "x", "2", "", " "])
def test_a_bad_shard_is_a_usage_error_naming_the_option(project, value):
    result = project.runpytest("--gemm-kernels", "kernels", "--gemm-shard", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--gemm-shard: expected I/N with 1 <= I <= N, such as 1/4, got {value!r}" in result.stderr.str()


def test_an_empty_shard_exits_0_and_says_why_but_selecting_nothing_still_exits_5(project):
    _, whole = _collected(project)
    count = 64
    index = next(i for i in range(1, count + 1) if all(shard_of(t, count) != i for t in whole))
    empty = project.runpytest("--gemm-kernels", "kernels", "test_plain.py", "--gemm-shard", f"{index}/{count}")
    assert empty.ret == pytest.ExitCode.OK
    empty.stdout.fnmatch_lines(
        [
            f"pytest-gemm: shard {index} of {count} holds none of the 30 selected tests (more shards than tests): "
            "nothing to run, exit status 0",
            "*30 deselected*",
        ]
    )
    xdist = project.runpytest_subprocess(
        "--gemm-kernels", "kernels", "test_plain.py", "--gemm-shard", f"{index}/{count}", "-n", "2"
    )  # fmt: skip
    assert xdist.ret == pytest.ExitCode.OK  # its workers select, and tell
    xdist.stdout.fnmatch_lines([f"pytest-gemm: shard {index} of {count} holds none of the 30 selected tests*"])
    args = ("--gemm-kernels", "kernels", "test_plain.py", "-k", "no_such_test", "--gemm-shard", f"{index}/{count}")
    nothing = project.runpytest(*args)  # -k chose nothing: the shard did not empty the run
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "holds none" not in nothing.stdout.str()


def test_a_shard_without_gemm_kernels_is_a_usage_error(project):
    result = project.runpytest("test_plain.py", "--gemm-shard", "1/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-shard: only with --gemm-kernels" in result.stderr.str()


def _passed(result) -> set[str]:
    return {line.split()[1] for line in result.outlines if line.startswith("PASSED ")}


def test_under_xdist_every_worker_takes_the_same_shard(replay):
    alone = replay.runpytest_subprocess(
        "--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-shard", "2/2", "-rA"
    )
    alone.assert_outcomes(passed=3, deselected=5)  # 3 of the other shard, 2 compile items (-m gpu)
    spread = replay.runpytest_subprocess(
        "--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-shard", "2/2", "-rA", "-n", "2"
    )
    spread.assert_outcomes(passed=3)
    assert (
        _passed(spread)
        == _passed(alone)
        == {f"{NAIVE}[fp32-{s}]" for s in ("512x512x512-a0.7b1.3", "512x512x512-a-1.5b0", "4096x4096x4096")}
    )


def test_a_shard_run_records_baselines_but_never_removes_entries(replay):
    run = ("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-update-baselines")
    replay.runpytest_subprocess(*run).assert_outcomes(passed=6)
    path = replay.path / H100_FILE
    data = json.loads(path.read_text())
    gone = f"{NAIVE.replace('sgemm_naive', 'sgemm_gone')}[fp32-512x512x512]"
    data["entries"][gone] = dict(next(iter(data["entries"].values())), kernel="sgemm_gone")
    path.write_text(json.dumps(data))
    # Shard 1 of 1 holds the whole file, and still counts as part of a suite: nothing removed.
    shard = replay.runpytest_subprocess(*run, "--gemm-shard", "1/1")
    shard.assert_outcomes(passed=6)
    shard.stdout.fnmatch_lines(["*pytest-gemm: shard 1 of 1 of the selected tests*", f"{H100_FILE}: unchanged"])
    assert gone in json.loads(path.read_text())["entries"]
    replay.runpytest_subprocess(*run).stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 0 changed, 1 removed"])


# -- the guide -------------------------------------------------------------------------------------
def test_the_scaling_guide_names_only_real_options_and_its_workflow_is_valid_yaml():
    text = (ROOT / "docs" / "scaling.md").read_text()
    plugin = {f"--gemm-{option.name}" for option in OPTIONS} | {"--gemm-kernels"}
    named = set(re.findall(r"--gemm-[a-z][a-z-]*[a-z]", text))
    assert "--gemm-report" in named and named <= plugin, named - plugin
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    merge_options = {o for action in sub.choices["merge"]._actions for o in action.option_strings}
    commands = re.findall(r"pytest-gemm merge [^`\"\n]*(?:\n +[\[-][^\n]*)*", text)
    used = {o for command in commands for o in re.findall(r"(?<![\w-])--[a-z][a-z-]*", command)}
    assert {"--out", "--allow-partial", "--root"} <= used <= merge_options, used - merge_options
    assert all("report-" in c or "run.json" in c or "RUN.json" in c for c in commands)  # never --benchmark-json's
    assert "mkdir -p logs runs" in text  # Slurm writes --output=logs/... only into a folder that exists
    block = re.search(r"```yaml\n(.*?)```", text, re.S)[1]
    assert "{" not in block.replace("${{", "").replace("}}", "")  # block mappings: ${{ }} in a flow mapping breaks
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load(block)["jobs"]
    upload = jobs["gemm"]["steps"][-1]["with"]
    assert upload == {"name": "gemm-shard-${{ matrix.shard }}", "path": "report-${{ matrix.shard }}/"}
    download = next(step for step in jobs["merge"]["steps"] if "download-artifact" in step.get("uses", ""))
    assert "merge-multiple" not in download["with"]  # each shard's run.json in a folder of its own
