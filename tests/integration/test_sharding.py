"""--gemm-shard I/N through pytester: the shards of a suite, on kernel files that need no GPU to collect, and on the
H100 recording (tests/replay_backend.py) for runs, xdist and baselines. The rule itself is tested in
tests/unit/specs/test_shard_rule.py."""

from __future__ import annotations

import json

import pytest

from pytest_gemm.specs.sharding import shard_of

from support import KERNELS, small_project

NAIVE = "kernels/01_naive.cu::sgemm_naive"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"


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
    xdist = project.runpytest(
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
    alone = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-shard", "2/2", "-rA")
    alone.assert_outcomes(passed=3, deselected=5)  # 3 of the other shard, 2 compile items (-m gpu)
    spread = replay.runpytest(
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
    replay.runpytest(*run).assert_outcomes(passed=6)
    path = replay.path / H100_FILE
    data = json.loads(path.read_text())
    gone = f"{NAIVE.replace('sgemm_naive', 'sgemm_gone')}[fp32-512x512x512]"
    data["entries"][gone] = dict(next(iter(data["entries"].values())), kernel="sgemm_gone")
    path.write_text(json.dumps(data))
    # Shard 1 of 1 holds the whole file, and still counts as part of a suite: nothing removed.
    shard = replay.runpytest(*run, "--gemm-shard", "1/1")
    shard.assert_outcomes(passed=6)
    shard.stdout.fnmatch_lines(["*pytest-gemm: shard 1 of 1 of the selected tests*", f"{H100_FILE}: unchanged"])
    assert gone in json.loads(path.read_text())["entries"]
    replay.runpytest(*run).stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 0 changed, 1 removed"])
