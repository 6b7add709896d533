"""pytest-gemm merge: shards run apart and merged give what one run gives; runs that should not be merged
are refused with the reason; the merged run is a saved run like any other. No GPU needed.

The whole-session test runs the real plugin on the H100 recording (tests/replay_backend.py); the rules are
tested on saved runs built from the recording's records.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gemm import __version__
from pytest_gemm.cli import main
from pytest_gemm.report.merge import merge_runs, plan_lines, prunable_files
from pytest_gemm.report.run_data import ItemResult, KernelFileRun, RunData, Shards, read_run, run_json

from conftest import recorded_records, recording

NAIVE = "kernels/01_naive.cu::sgemm_naive"
GONE = "kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
A100 = "NVIDIA A100-SXM4-80GB"


def _run(project, *args):
    """The naive kernel's six recorded cases, timed and gated (compile items left out with -m gpu)."""
    return project.runpytest_subprocess("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", *args)


def _cli(project, *args):
    return subprocess.run(
        [sys.executable, "-m", "pytest_gemm.cli", *args], cwd=project.path, capture_output=True, text=True
    )


def _entries(project) -> dict:
    """The H100 baseline entries, without the day they were recorded."""
    entries = json.loads((project.path / H100_FILE).read_text())["entries"]
    return {key: {**entry, "recorded": {**entry["recorded"], "date": None}} for key, entry in entries.items()}


def _verdicts(path: Path) -> dict[str, str]:
    return {r.test: str(r.gate.verdict) for r in read_run(path).records if r.gate is not None}


def _outcomes(path: Path) -> dict[str, str]:
    return {test: result.outcome for test, result in read_run(path).tests.items()}


def _rows(path: Path) -> list[str]:
    return sorted(line for line in path.read_text().splitlines() if line.startswith("| `"))


@pytest.fixture
def baselined(replay):
    """Baselines that make the cases' verdicts differ: one regressed, one new, four the same; one stale entry."""
    _run(replay, "--gemm-update-baselines").assert_outcomes(passed=6)
    path = replay.path / H100_FILE
    data = json.loads(path.read_text())
    entries = data["entries"]
    del entries[f"{NAIVE}[fp32-512x512x512-a-1.5b0]"]
    faster = entries[f"{NAIVE}[fp32-4096x4096x4096]"]
    for key in ("ratio", "median_s"):
        faster[key] *= 0.8
    for key in ("ratio_ci", "ci_s"):
        faster[key] = [v * 0.8 for v in faster[key]]
    entries[GONE] = dict(entries[f"{NAIVE}[fp32-512x512x512]"], kernel="sgemm_gone")
    path.write_text(json.dumps(data))
    return replay


def test_two_shards_merged_give_the_verdicts_and_the_baseline_update_of_one_run(baselined):
    project, path = baselined, baselined.path / H100_FILE
    before = path.read_text()
    whole = _run(project, "--benchmark-json", "whole.json", "--gemm-summary", "whole.md")
    whole.assert_outcomes(passed=5, failed=1)
    for index in (1, 2):
        _run(project, "--gemm-shard", f"{index}/2", "--benchmark-json", f"shard{index}.json").assert_outcomes(
            passed=2 if index == 2 else 3, failed=1 if index == 2 else 0, deselected=5
        )
    merged = _cli(project, "merge", "shard1.json", "shard2.json", "--out", "merged.json", "--summary", "merged.md")
    assert merged.returncode == 1, merged.stderr  # the regression fails the merge as it fails the run
    assert "merged.json: 2 run(s) merged: 6 tests, 6 timed cases" in merged.stdout
    assert "1 test(s) failed: kernels/01_naive.cu::sgemm_naive[fp32-4096x4096x4096]" in merged.stdout
    assert "plan: 6 tests took" in merged.stdout
    gated = project.path / "merged.json"
    assert _verdicts(gated) == _verdicts(project.path / "whole.json")
    assert sorted(_verdicts(gated).values()) == ["new", "regressed", "same", "same", "same", "same"]
    assert _outcomes(gated) == _outcomes(project.path / "whole.json")
    assert _rows(project.path / "merged.md") == _rows(project.path / "whole.md")
    assert read_run(gated).shard is None  # both shards: a whole suite again

    # The same baseline update: one added, one changed, the stale entry removed (the file was selected whole).
    one = _run(project, "--gemm-update-baselines")
    one.stdout.fnmatch_lines([f"{H100_FILE}: 1 added, 1 changed, 1 removed"])
    by_one_run = _entries(project)
    path.write_text(before)
    update = _cli(project, "merge", "shard1.json", "shard2.json", "--out", "recorded.json", "--update-baselines")
    assert update.returncode == 0, update.stderr
    assert f"{H100_FILE}: 1 added, 1 changed, 1 removed (from recorded.json)" in update.stdout
    assert f"  removed: {GONE}" in update.stdout
    assert _entries(project) == by_one_run

    # The merged run is a saved run: plot, compare, update --from and merge take it.
    plot = _cli(project, "plot", "merged.json", "--out", "report")
    assert plot.returncode == 0 and (project.path / "report" / "index.html").is_file(), plot.stderr
    compare = _cli(project, "compare", "merged.json")
    assert compare.returncode == 0 and "0 regressed, 0 improved, 6 same, 0 new, 0 unstable" in compare.stdout
    again = _cli(project, "update", "--from", "merged.json")
    assert again.returncode == 0 and f"{H100_FILE}: unchanged" in again.stdout
    remerged = _cli(project, "merge", "merged.json", "--out", "again.json", "--report", "again")
    assert remerged.returncode == 0, remerged.stderr  # against the baselines recorded since: all the same
    assert (project.path / "again" / "index.html").is_file()
    assert sorted(_verdicts(project.path / "again.json").values()) == ["same"] * 6


def test_a_missing_shard_is_said_and_prunes_nothing(baselined):
    project = baselined
    _run(project, "--gemm-shard", "1/2", "--benchmark-json", "shard1.json").assert_outcomes(passed=3)
    result = _cli(project, "merge", "shard1.json", "--out", "part.json", "--update-baselines")
    assert result.returncode == 0
    assert "pytest-gemm: warning: the merged run is shard 1 of 2: shards are missing" in result.stderr
    assert f"{H100_FILE}: 0 added, 0 changed, 0 removed" in result.stdout or f"{H100_FILE}: unchanged" in result.stdout
    assert GONE in json.loads((project.path / H100_FILE).read_text())["entries"]


# -- the rules, on saved runs built from recorded records --------------------------------------------
SETTINGS = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "hot-cache": False, "timed": True}


def _save(path: Path, records, **fields) -> str:
    facts = dict(recording()["facts"])
    if records and records[0].gpu != facts["name"]:
        facts["name"] = records[0].gpu
    tests = {r.test: ItemResult("passed", duration_s=2.0, kind="case") for r in records}
    data = RunData(gpu=facts, records=list(records), tests=tests, version=__version__, settings=dict(SETTINGS))
    data = dataclasses.replace(data, **fields)
    path.write_text(json.dumps(run_json(data)))
    return path.name


@pytest.fixture
def two(tmp_path, monkeypatch):
    """Two saved runs that merge: the naive kernel's 512³ case, and its 4096³ case with step 2's."""
    monkeypatch.chdir(tmp_path)
    records = recorded_records()
    return records[:1], records[1:]


def _merge(*args, capsys) -> tuple[int, str, str]:
    status = main(["merge", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": "9.9.9"}, f"the pytest-gemm version differs: a.json: {__version__}; b.json: 9.9.9"),
        (
            {"settings": {**SETTINGS, "threshold": 0.02}},
            "the setting --gemm-threshold differs: a.json: 0.05; b.json: 0.02",
        ),
        (
            {"settings": {**SETTINGS, "hot-cache": True}},
            "the setting --gemm-hot-cache differs: a.json: False; b.json: True",
        ),
        ({"settings": {**SETTINGS, "timed": False}}, "the setting timing (on unless --benchmark-skip"),
        (
            {"files": {"kernels/01_naive.cu": KernelFileRun("f" * 64, True)}},
            f"the kernel source of kernels/01_naive.cu differs: a.json: sha256 {'0' * 12}; b.json: sha256 {'f' * 12}",
        ),
        ({"shard": Shards((2,), 3)}, "the shard count differs: a.json: shard 1 of 2; b.json: shard 2 of 3"),
        ({"version": "", "settings": {}}, "b.json does not say which pytest-gemm made it or with which settings"),
    ],
)
def test_runs_that_differ_are_refused_naming_the_files_and_values_unless_allowed(two, capsys, change, message):
    first, second = two
    _save(Path("a.json"), first, shard=Shards((1,), 2) if "shard" in change else None)
    _save(Path("b.json"), second, **change)
    status, _, err = _merge("a.json", "b.json", "--out", "m.json", capsys=capsys)
    assert status == 2 and not Path("m.json").exists()
    assert "pytest-gemm: error: cannot merge these runs:" in err and message in err, err
    assert "--allow-mismatch merges them anyway" in err
    status, _, err = _merge("a.json", "b.json", "--out", "m.json", "--allow-mismatch", capsys=capsys)
    assert status == 0, err
    assert f"pytest-gemm: warning: {message}" in err
    assert any(note.startswith("merged with --allow-mismatch: ") for note in read_run(Path("m.json")).notes)


def test_a_test_in_two_runs_is_refused_unless_both_say_the_same(two, capsys):
    first, second = two
    changed = dataclasses.replace(first[0], median_s=first[0].median_s * 1.01)
    _save(Path("a.json"), first)
    _save(Path("b.json"), [changed, *second])
    for extra in ((), ("--allow-mismatch",)):
        status, _, err = _merge("a.json", "b.json", "--out", "m.json", *extra, capsys=capsys)
        assert status == 2
        assert "1 test(s) are in more than one run with different results (overlapping shards, or a shard run" in err
        assert f"{NAIVE}[fp32-512x512x512] is in a.json and in b.json" in err
    _save(Path("c.json"), second)
    status, out, _ = _merge("a.json", "a.json", "c.json", "--out", "m.json", capsys=capsys)
    assert status == 0 and "m.json: 3 run(s) merged: 3 tests, 3 timed cases; 1 given twice alike, kept once" in out


def test_runs_of_two_gpu_models_are_gated_and_recorded_each_against_its_own_file(two, capsys):
    first, second = two
    _save(Path("h100.json"), first)
    _save(Path("a100.json"), [dataclasses.replace(r, gpu=A100) for r in second])
    status, out, err = _merge("h100.json", "a100.json", "--out", "m.json", "--report", "rep", capsys=capsys)
    assert status == 0, err
    assert f"m.json against baselines/nvidia-a100-sxm4-80gb.json ({A100}, no such file: every case is new)" in out
    assert "m.json against baselines/nvidia-h100-80gb-hbm3.json (NVIDIA H100 80GB HBM3, no such file" in out
    merged = read_run(Path("m.json"))
    assert set(merged.gpus) == {A100, "NVIDIA H100 80GB HBM3"} and merged.facts(A100)["name"] == A100
    assert {p.name for p in Path("rep").iterdir()} == {"nvidia-a100-sxm4-80gb", "nvidia-h100-80gb-hbm3"}
    status, out, err = _merge("h100.json", "a100.json", "--out", "m.json", "--update-baselines", capsys=capsys)
    assert status == 0, err
    assert (
        "baselines/nvidia-a100-sxm4-80gb.json: 2 added" in out
        and "baselines/nvidia-h100-80gb-hbm3.json: 1 added" in out
    )
    assert main(["compare", "m.json"]) == 0
    assert "0 regressed, 0 improved, 2 same" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["merge", "--out", "m.json"])  # argparse: no runs given
    capsys.readouterr()
    status, _, err = _merge("nope.json", "--out", "m.json", capsys=capsys)
    assert status == 2 and "nope.json: not a pytest-benchmark JSON file" in err


def test_the_merged_run_keeps_what_each_run_said(two):
    first, second = two
    a = RunData({}, first, version="1", settings=SETTINGS, shard=Shards((1,), 2), wall_s=10.0)
    a.files = {"kernels/01_naive.cu": KernelFileRun("0" * 64, True)}
    b = RunData({}, second, version="1", settings=SETTINGS, shard=Shards((2,), 2), wall_s=12.0)
    b.files = {
        "kernels/01_naive.cu": KernelFileRun("0" * 64, True),
        "kernels/02_smem_tiling.cu": KernelFileRun("", False),
    }
    merged = merge_runs([("a.json", a), ("b.json", b)]).data
    assert merged.shard is None and [r.test for r in merged.records] == [r.test for r in first + second]
    assert prunable_files(merged) == ["kernels/01_naive.cu"]  # step 2 was not selected whole
    assert prunable_files(merge_runs([("a.json", a)]).data) == []  # half a suite prunes nothing
    assert any(n.startswith("merged from b.json (shard 2 of 2, 2 tests)") for n in merged.notes)


def test_the_plan_comes_from_the_times_the_runs_measured():
    def run(shard: int, seconds: list[float], wall: float) -> RunData:
        tests = {
            f"k.cu::k[{shard}-{i}]": ItemResult("passed", duration_s=s, kind="case") for i, s in enumerate(seconds)
        }
        return RunData({}, [], tests=tests, version="1", settings=SETTINGS, shard=Shards((shard,), 2), wall_s=wall)

    runs = [("a.json", run(1, [60.0] * 5, 330.0)), ("b.json", run(2, [60.0] * 5, 320.0))]
    lines = plan_lines(runs, merge_runs(runs).data, 600)
    assert lines[0] == (
        "plan: 10 tests took 600.0 s in tests (600.0 s in 10 GPU tests, 60.00 s each on average; "
        "the longest test 60.0 s)"
    )
    assert lines[1] == "  a.json (shard 1 of 2): 300.0 s in 5 tests, 330.0 s from start to saved"
    assert lines[3].startswith(
        "plan: for at most 600 s per shard: 2 shard(s) (600.0 s of tests spread over 570.0 s each"
    )
    assert plan_lines(runs, merge_runs(runs).data, 60)[-1].startswith("plan: no shard count keeps a shard under 60 s")
    assert plan_lines([("c.json", RunData({}, []))], RunData({}, []), 600) == []  # no times saved: no plan


def test_a_run_saved_before_these_keys_existed_is_still_read(tmp_path):
    old = json.loads(json.dumps(run_json(RunData(dict(recording()["facts"]), recorded_records()))))
    for key in ("pytest_gemm", "settings", "shard", "files", "tests", "wall_s"):
        del old["gemm"][key]
    (tmp_path / "old.json").write_text(json.dumps(old))
    data = read_run(tmp_path / "old.json")
    assert len(data.records) == 3 and data.version == "" and data.shard is None and data.tests == {}
