"""pytest-gemm merge: shards run apart and merged give what one run gives; runs that should not be merged
are refused with the reason; the merged run is a saved run like any other. No GPU needed.

The whole-session test runs the real plugin on the H100 recording (tests/replay_backend.py); the rules are
tested on saved runs built from the recording's records.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gemm import __version__
from pytest_gemm.cli import main
from pytest_gemm.records.case_record import GateResult
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.verdicts import GateVerdict
from pytest_gemm.runs.data import KernelFileRun, RunData, SessionEnd, Shards
from pytest_gemm.runs.saved import read_run, run_json

from support import recorded_records, recording
from support.cli import cli

NAIVE = "kernels/01_naive.cu::sgemm_naive"
GONE = "kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
A100 = "NVIDIA A100-SXM4-80GB"


def _run(project, *args):
    """The naive kernel's six recorded cases, timed and gated (compile items left out with -m gpu)."""
    return project.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", *args)


def _cli(project, *args):
    return cli(project.path, *args)


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
    for numbers in (faster, *faster["gpus"].values()):  # the entry, and the record of the GPU it is compared with
        for key in ("ratio", "median_s"):
            numbers[key] *= 0.8
        for key in ("ratio_ci", "ci_s"):
            numbers[key] = [v * 0.8 for v in numbers[key]]
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


def test_a_missing_shard_is_refused_unless_allowed_and_then_prunes_nothing(baselined):
    project = baselined
    _run(project, "--gemm-shard", "1/2", "--benchmark-json", "shard1.json").assert_outcomes(passed=3, deselected=5)
    refused = _cli(project, "merge", "shard1.json", "--out", "part.json", "--update-baselines")
    assert refused.returncode == 2 and not (project.path / "part.json").exists()
    assert refused.stderr == (
        "pytest-gemm: error: the runs are not the whole suite:\n"
        "  - shard 2 of 2 is missing (the runs given hold shard 1 of 2; a shard that saved no run failed or did not "
        "run)\n  --allow-partial merges them anyway\n"
    )
    before = (project.path / H100_FILE).read_text()
    result = _cli(project, "merge", "shard1.json", "--out", "part.json", "--update-baselines", "--allow-partial")
    assert result.returncode == 0, result.stderr
    assert "pytest-gemm: warning: shard 2 of 2 is missing (the runs given hold shard 1 of 2" in result.stderr
    assert f"{H100_FILE}: unchanged (from part.json)" in result.stdout  # its three cases, recorded as they were
    assert (project.path / H100_FILE).read_text() == before and GONE in json.loads(before)["entries"]
    assert any(
        n.startswith("merged with --allow-partial: shard 2 of 2 is missing")
        for n in read_run(project.path / "part.json").notes
    )


def test_every_shard_leaves_its_run_json_also_when_empty_or_nothing_was_timed(baselined, monkeypatch):
    """Shard 1 of 3 holds none of the six cases, and shard 3's one case fails in the worker: neither times a
    case, so pytest-benchmark saves no JSON; --gemm-report's run.json is saved by each, and the three merge."""
    project = baselined
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-4096x4096x4096-a0.7b1.3]=exit:3")
    shards = {
        i: _run(project, "--gemm-shard", f"{i}/3", "--gemm-report", f"report-{i}", "--benchmark-json", f"b{i}.json")
        for i in (1, 2, 3)
    }
    assert shards[1].ret == pytest.ExitCode.OK  # not 5: the shard had nothing to do
    shards[1].stdout.fnmatch_lines(
        [
            "pytest-gemm: shard 1 of 3 holds none of the 6 selected tests (more shards than tests): nothing to run, "
            "exit status 0"
        ]
    )
    shards[2].assert_outcomes(passed=4, failed=1, deselected=3)
    shards[3].assert_outcomes(failed=1, deselected=7)
    assert not (project.path / "b1.json").exists() and not (project.path / "b3.json").exists()
    assert read_run(project.path / "report-1" / "run.json").session == SessionEnd(0, 8, 0, 0, 0)
    assert read_run(project.path / "report-3" / "run.json").session == SessionEnd(1, 8, 1, 1, 0)
    merged = _cli(project, "merge", *(f"report-{i}/run.json" for i in (1, 2, 3)), "--out", "merged.json")
    assert merged.returncode == 1 and merged.stderr == "", merged.stderr
    assert "merged.json: 3 run(s) merged: 6 tests, 5 timed cases" in merged.stdout
    failed = f"2 test(s) failed: {NAIVE}[fp32-4096x4096x4096-a0.7b1.3], {NAIVE}[fp32-4096x4096x4096]"
    assert failed in merged.stdout
    assert read_run(project.path / "merged.json").shard is None  # the whole suite


def test_a_collection_error_is_saved_by_every_shard_and_fails_the_merge_once(replay):
    (replay.path / "kernels" / "bad.cu").write_text("/* pytest-gemm\nentry = \n*/\n")
    for index in (1, 2):
        shard = replay.runpytest(
            "--gemm-kernels", "kernels/01_naive.cu", "kernels/bad.cu", "-m", "gpu", "--gemm-shard", f"{index}/2",
            "--gemm-report", f"report-{index}",
        )  # fmt: skip
        assert shard.ret == pytest.ExitCode.TESTS_FAILED
    merged = _cli(replay, "merge", "report-1/run.json", "report-2/run.json", "--out", "merged.json")
    assert merged.returncode == 1, merged.stderr
    assert "merged.json: 2 run(s) merged: 6 tests, 6 timed cases\n" in merged.stdout  # kept once, not a test
    error = "kernels/bad.cu: kernels/bad.cu:2: the pytest-gemm header is not valid TOML: Invalid value (column 9)"
    assert f"\n1 collection error(s): {error}\n" in merged.stdout
    assert "test(s) failed" not in merged.stdout
    assert read_run(replay.path / "merged.json").tests["kernels/bad.cu"].kind == "collect"


def test_a_shard_stopped_by_x_says_so_and_the_merge_warns(replay, monkeypatch):
    acts = [f"01_naive.cu::sgemm_naive[fp32-{s}]=exit:3" for s in ("512x512x512", "4096x4096x4096-a0.7b1.3")]
    monkeypatch.setenv("REPLAY_ACT", ",".join([*acts, "01_naive.cu::sgemm_naive[fp32-4096x4096x4096-a-1.5b0]=exit:3"]))
    _run(replay, "--gemm-shard", "1/2", "--gemm-report", "report-1", "-x").assert_outcomes(failed=1, deselected=5)
    assert read_run(replay.path / "report-1" / "run.json").session == SessionEnd(1, 8, 3, 1, 1)
    _run(replay, "--gemm-shard", "2/2", "--gemm-report", "report-2").assert_outcomes(passed=3, deselected=5)
    merged = _cli(replay, "merge", "report-1/run.json", "report-2/run.json", "--out", "merged.json")
    assert merged.returncode == 1
    assert (
        "pytest-gemm: warning: report-1/run.json (shard 1 of 2) stopped after 1 failure(s) (-x/--maxfail): 1 of its "
        "3 selected tests ran; the other 2 are in no run"
    ) in merged.stderr


def test_merge_gates_against_the_baseline_folder_the_runs_saved_found_from_root(replay):
    replay.makeini("[pytest]\ngemm_shapes = 512,4096\ngemm_baselines = perf/baselines\n")
    _run(replay, "--gemm-update-baselines").assert_outcomes(passed=6)
    for index in (1, 2):
        _run(replay, "--gemm-shard", f"{index}/2", "--gemm-report", f"report-{index}").assert_outcomes(
            passed=3, deselected=5
        )
    runs = ("report-1/run.json", "report-2/run.json")
    assert read_run(replay.path / runs[0]).settings["baselines"] == "perf/baselines"
    merged = _cli(replay, "merge", *runs, "--out", "merged.json")
    assert merged.returncode == 0, merged.stderr
    assert "merged.json against perf/baselines/nvidia-h100-80gb-hbm3.json (NVIDIA H100 80GB HBM3);" in merged.stdout
    assert sorted(_verdicts(replay.path / "merged.json").values()) == ["same"] * 6

    # From another folder the file the runs' gate used is not found: refused, instead of "every case is new".
    ci = replay.path / "ci"
    ci.mkdir()
    command = [sys.executable, "-m", "pytest_gemm.cli", "merge", *(f"../{r}" for r in runs), "--out", "m.json"]
    lost = subprocess.run(command, cwd=ci, capture_output=True, text=True)
    assert lost.returncode == 2 and not (ci / "m.json").exists()
    assert lost.stderr == (
        "pytest-gemm: error: perf/baselines/nvidia-h100-80gb-hbm3.json: no such baseline file for NVIDIA H100 80GB "
        "HBM3, but the runs were gated against one (perf/baselines/nvidia-h100-80gb-hbm3.json, 6 case(s)); nothing "
        "written: run merge from the project's root folder, or say where it is with --root DIR or --baselines DIR\n"
    )
    found = subprocess.run([*command, "--root", ".."], cwd=ci, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert "m.json against ../perf/baselines/nvidia-h100-80gb-hbm3.json (NVIDIA H100 80GB HBM3);" in found.stdout

    # An explicit --baselines (relative to --root) wins over the runs' folder.
    shutil.copytree(replay.path / "perf" / "baselines", replay.path / "other")
    other = _cli(replay, "merge", *runs, "--out", "o.json", "--baselines", "other")
    assert other.returncode == 0 and "o.json against other/nvidia-h100-80gb-hbm3.json" in other.stdout


# -- the rules, on saved runs built from recorded records --------------------------------------------
SETTINGS = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "hot-cache": False, "timed": True}


def _save(path: Path, records, **fields) -> str:
    facts = dict(recording()["facts"])
    if records and records[0].gpu != facts["name"]:
        facts["name"] = records[0].gpu
    tests = {r.test: CaseResult("passed", duration_s=2.0, kind="case", timing=r) for r in records}
    data = RunData(gpu=facts, tests=tests, version=__version__, settings=dict(SETTINGS))
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
    changed = dataclasses.replace(
        first[0], median_s=first[0].median_s * 1.01, ci_s=tuple(v * 1.01 for v in first[0].ci_s)
    )
    _save(Path("a.json"), first)
    _save(Path("b.json"), [changed, *second])
    for extra in ((), ("--allow-mismatch",)):
        status, _, err = _merge("a.json", "b.json", "--out", "m.json", *extra, capsys=capsys)
        assert status == 2
        assert "1 test(s) are in more than one run with different results (overlapping shards, or a shard run" in err
        assert f"{NAIVE}[fp32-512x512x512] is in a.json and in b.json" in err
    _save(Path("c.json"), second)
    shutil.copy("a.json", "copy.json")  # (one file named twice is refused: tests/integration/test_output_paths.py)
    status, out, _ = _merge("a.json", "copy.json", "c.json", "--out", "m.json", capsys=capsys)
    assert status == 0 and "m.json: 3 run(s) merged: 3 tests, 3 timed cases; 1 given twice alike, kept once" in out


def test_one_suite_on_two_gpu_models_is_refused_naming_the_models(two, capsys):
    first, _ = two
    _save(Path("h100.json"), first)
    _save(Path("a100.json"), [dataclasses.replace(r, gpu=A100) for r in first])
    status, _, err = _merge("h100.json", "a100.json", "--out", "m.json", capsys=capsys)
    assert status == 2 and "overlapping shards" not in err
    assert (
        f"1 test(s) are in more than one run with different results (the same tests run on 2 GPU models ({A100}, "
        "NVIDIA H100 80GB HBM3): merge and gate each model's runs on their own): "
        f"{NAIVE}[fp32-512x512x512] is in h100.json (on NVIDIA H100 80GB HBM3) and in a100.json (on {A100})"
    ) in err


def test_an_interrupted_shard_is_refused_unless_allowed_and_an_early_stop_is_said(two, capsys):
    first, second = two
    _save(Path("a.json"), first, shard=Shards((1,), 2), session=SessionEnd(1, 9, 4, 1, 1))
    _save(Path("b.json"), second, shard=Shards((2,), 2), session=SessionEnd(2, 9, 5, 2, 0))
    status, _, err = _merge("a.json", "b.json", "--out", "m.json", capsys=capsys)
    assert status == 2 and not Path("m.json").exists()
    assert (
        "pytest-gemm: error: the runs are not the whole suite:\n  - b.json (shard 2 of 2) was interrupted (pytest "
        "exit status 2): 2 of its 5 selected tests ran\n  --allow-partial merges them anyway"
    ) in err
    status, _, err = _merge("a.json", "b.json", "--out", "m.json", "--allow-partial", capsys=capsys)
    assert status == 0, err
    assert "pytest-gemm: warning: b.json (shard 2 of 2) was interrupted (pytest exit status 2)" in err
    assert (
        "pytest-gemm: warning: a.json (shard 1 of 2) stopped after 1 failure(s) (-x/--maxfail): 1 of its 4 selected "
        "tests ran; the other 3 are in no run"
    ) in err


def test_other_driver_or_cublas_versions_on_one_gpu_model_are_merged_with_a_warning(two, capsys):
    first, second = two
    _save(Path("a.json"), first)
    _save(
        Path("b.json"), second, gpu={**recording()["facts"], "driver_version": "575.57.08", "cublas_version": "12.9.1"}
    )
    status, _, err = _merge("a.json", "b.json", "--out", "m.json", capsys=capsys)
    assert status == 0, err
    h100 = "NVIDIA H100 80GB HBM3"
    assert f"pytest-gemm: warning: the driver version on {h100} differs: a.json: 580.159.04; b.json: 575.57.08" in err
    assert (
        f"pytest-gemm: warning: the cuBLAS version on {h100} differs: a.json: 13.1.0; b.json: 12.9.1 (the gate's "
        "ratio is against cuBLAS)"
    ) in err


def test_a_baseline_file_the_runs_were_gated_against_must_be_found(two, capsys):
    gate = GateResult(GateVerdict.SAME, "ratio", 0.05, 0.0, baseline_file="baselines/nvidia-h100-80gb-hbm3.json")
    first, _ = two
    _save(Path("a.json"), [dataclasses.replace(r, gate=gate) for r in first])
    for extra in ((), ("--update-baselines",)):
        status, out, err = _merge("a.json", "--out", "m.json", *extra, capsys=capsys)
        assert status == 2 and not Path("m.json").exists() and out == ""
        assert "baselines/nvidia-h100-80gb-hbm3.json: no such baseline file for NVIDIA H100 80GB HBM3, but" in err
    _save(Path("b.json"), first)  # not gated against a file: every case new, as before
    assert _merge("b.json", "--out", "m.json", capsys=capsys)[0] == 0


def test_recording_runs_without_a_timed_case_says_nothing_was_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tests = {f"{NAIVE}[fp32-512x512x512]": CaseResult("passed", duration_s=1.0, kind="case")}
    data = RunData({}, tests=tests, version=__version__, settings={**SETTINGS, "timed": False})
    Path("v.json").write_text(json.dumps(run_json(data)))
    status, out, err = _merge("v.json", "--out", "m.json", "--update-baselines", capsys=capsys)
    assert status == 0, err
    assert "nothing recorded: no timed case in the runs" in out


def test_merge_help_says_the_gate_settings_default_to_the_runs_own(capsys):
    with pytest.raises(SystemExit):
        main(["merge", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: the runs' own --gemm-threshold / gemm_threshold)" in text
    assert "(default: the runs' own --gemm-gate-metric / gemm_gate_metric)" in text
    assert "relative to --root (default: the folder the runs saved" in text
    assert "default '0.05'" not in text and "default 'ratio'" not in text and "default 'baselines'" not in text


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
