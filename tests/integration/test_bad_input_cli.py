"""Every bad input answered: a message naming the file and the fault, nothing lost, the right exit code.

Covers ``pytest-gemm prune`` from the wrong folder, baseline folders that cannot be written (the
command and ``--gemm-update-baselines``), schema faults in baseline files, a closed pipe and the
shared option checks. The runs that need timed cases replay the H100 recording (no GPU).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import KERNELS, ROOT
from support.cli import cli

H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
NAIVE = "kernels/01_naive.cu::sgemm_naive"


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return cli(cwd, *args)


def _small_project(path: Path) -> Path:
    """Steps 1 and 2 with a baseline file of a few of their real H100 entries; returns the baseline file."""
    (path / "kernels").mkdir(parents=True)
    for name in ("01_naive.cu", "02_smem_tiling.cu"):
        shutil.copy(KERNELS / name, path / "kernels" / name)
    data = json.loads((ROOT / H100_FILE).read_text())
    keep = [k for f in ("01_naive", "02_smem") for k in sorted(data["entries"]) if k.startswith(f"kernels/{f}")]
    keep = keep[:3] + keep[-3:]  # three of each file
    data["entries"] = {k: data["entries"][k] for k in keep}
    target = path / H100_FILE
    target.parent.mkdir()
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return target


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "Error:" not in text.replace("pytest-gemm: error:", ""), text


# -- prune from the wrong folder -----------------------------------------------------------------
def test_prune_refuses_when_none_of_the_kernel_files_is_found_and_says_where_it_looked(tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    baseline = _small_project(project)
    elsewhere.mkdir()
    before = baseline.read_bytes()
    folder = str(project / "baselines")
    for cwd, args in (
        (elsewhere, ["--baselines", folder]),  # run from the wrong folder
        (project, ["--root", str(elsewhere)]),  # a wrong --root
        (project, ["--root", str(elsewhere), "--dry-run"]),
    ):
        result = _cli(cwd, "prune", *args)
        assert result.returncode == 2, result
        shown = f"{folder}/nvidia-h100-80gb-hbm3.json" if cwd == elsewhere else H100_FILE
        assert result.stderr.startswith(f"pytest-gemm: error: {shown}: ")
        assert (
            f"none of the 2 kernel file(s) its entries name is under {elsewhere} "
            "(looked for kernels/01_naive.cu, kernels/02_smem_tiling.cu); nothing removed: run prune from the "
            "project's root folder, or name that folder with --root DIR"
        ) in result.stderr
        assert result.stdout == ""
        _no_traceback(result.stderr)
    assert baseline.read_bytes() == before
    # from the right folder, named with --root, nothing is stale
    right = _cli(elsewhere, "prune", "--baselines", folder, "--root", str(project))
    assert right.returncode == 0 and f"{folder}/nvidia-h100-80gb-hbm3.json: 0 of 6 entries stale" in right.stdout
    # and one kernel file gone among those still there is pruned as before
    (project / "kernels" / "02_smem_tiling.cu").unlink()
    pruned = _cli(project, "prune")
    assert pruned.returncode == 0 and f"{H100_FILE}: 3 of 6 entries stale" in pruned.stdout
    assert all(k.startswith(NAIVE) for k in json.loads(baseline.read_text())["entries"])


def test_prune_without_baselines_says_where_it_looked(tmp_path):
    result = _cli(tmp_path, "prune")
    assert result.returncode == 2
    assert result.stderr == f"pytest-gemm: error: no baseline files in baselines/ (looked in {tmp_path}/baselines)\n"


def test_prune_keeps_the_entries_of_a_kernel_file_whose_header_is_not_valid_toml(tmp_path):
    baseline = _small_project(tmp_path)
    before = baseline.read_bytes()
    naive = tmp_path / "kernels" / "01_naive.cu"
    naive.write_text(naive.read_text().replace('entry = "sgemm_naive"', 'entry = = "sgemm_naive"'))
    result = _cli(tmp_path, "prune")
    assert result.returncode == 0, result
    lines = [line for line in result.stdout.splitlines() if "kept" in line]
    assert len(lines) == 1 and lines[0].startswith("  kept 3 entries of kernels/01_naive.cu: cannot read it (")
    assert "the pytest-gemm header is not valid TOML" in lines[0] and lines[0].endswith("; fix it, then prune again")
    assert baseline.read_bytes() == before


# -- a baseline folder that cannot be written ------------------------------------------------------
def _writable(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.write_text("")
    except OSError:
        return False
    probe.unlink()
    return True


@pytest.fixture(params=["read-only folder", "folder is a file"])
def blocked(request, tmp_path_factory):
    """Makes a project's baselines folder unwritable; returns the reason the message must give.

    Read-only: chmod, or for root (whom chmod does not stop) the immutable attribute. Where neither
    stops a write that case is skipped; the folder-is-a-file case stops everyone, everywhere.
    """
    undo = []

    def block(folder: Path) -> str:
        if request.param == "folder is a file":
            folder.rename(folder.with_name("baselines.kept"))
            folder.write_text("not a folder\n")
            return "baselines is a file, not a folder"
        folder.chmod(0o555)
        undo.append(lambda: folder.chmod(0o755))
        if not _writable(folder) and os.geteuid() != 0:
            return "Permission denied"
        if (
            shutil.which("chattr")
            and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        ):
            undo.append(lambda: subprocess.run(["chattr", "-i", str(folder)], check=True))
            if not _writable(folder):
                return "Operation not permitted"
        pytest.skip("nothing here stops root writing to a folder (no chattr +i); 'folder is a file' covers it")

    yield block
    for step in reversed(undo):
        step()


def _replay_run(project, *options: str, scale: float = 1.0):
    os.environ["REPLAY_SCALE"] = str(scale)
    try:
        return project.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", *options)
    finally:
        os.environ.pop("REPLAY_SCALE", None)


@pytest.fixture
def recorded_runs(replay, monkeypatch):
    """A replay project with baselines recorded from run.json and a slower saved run, slow.json."""
    monkeypatch.setenv("TMPDIR", str(replay.path))  # where a failed update keeps its results
    _replay_run(replay, "--benchmark-json", "run.json").assert_outcomes(passed=6)
    _replay_run(replay, "--benchmark-json", "slow.json", scale=1.1).assert_outcomes(passed=6)
    assert _cli(replay.path, "update", "--from", "run.json").returncode == 0
    return replay


def _saved(project) -> bytes:
    kept = project.path / "baselines.kept" / Path(H100_FILE).name
    return (kept if kept.exists() else project.path / H100_FILE).read_bytes()


def test_the_command_says_the_folder_cannot_be_written_and_changes_nothing(recorded_runs, blocked):
    project = recorded_runs
    before = _saved(project)
    reason = blocked(project.path / "baselines")
    update = _cli(project.path, "update", "--from", "slow.json")
    assert update.returncode == 2 and update.stdout == ""
    problem = "cannot be written in baselines/" if "Permission" in reason or "Operation" in reason else "cannot be read"
    assert update.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: {problem}")
    assert reason in update.stderr
    assert update.stderr.rstrip().endswith(
        "; nothing changed; the run stays in slow.json: run this again once that is fixed"
    )
    _no_traceback(update.stderr)
    assert _saved(project) == before


def test_prune_in_a_folder_that_cannot_be_written_removes_nothing(recorded_runs, blocked):
    project = recorded_runs
    data = json.loads((project.path / H100_FILE).read_text())
    gone = "kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]"
    data["entries"][gone] = data["entries"][f"{NAIVE}[fp32-512x512x512]"] | {"kernel": "sgemm_gone"}
    (project.path / H100_FILE).write_text(json.dumps(data))
    before = _saved(project)
    folder = project.path / "baselines"
    reason = blocked(folder)
    result = _cli(project.path, "prune")
    assert result.returncode == 2
    if "is a file" in reason:
        assert result.stderr == f"pytest-gemm: error: no baseline files in baselines/ (looked in {folder}, a file)\n"
    else:
        assert f"removed {gone}: the file no longer has this case" in result.stdout
        assert result.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: cannot be written in baselines/ ({reason})")
        assert result.stderr.endswith("; nothing removed from it\n")
    _no_traceback(result.stderr)
    assert _saved(project) == before


def test_an_update_run_that_cannot_write_is_refused_as_it_starts(recorded_runs, blocked):
    """A baseline folder that an update cannot write is a usage error before any GPU work; one
    that becomes unwritable during the run keeps its results (tests/integration/test_output_paths.py)."""
    project = recorded_runs
    before = _saved(project)
    reason = blocked(project.path / "baselines")
    result = _replay_run(project, "--gemm-update-baselines", scale=1.1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "passed" not in result.stdout.str()
    _no_traceback(result.stdout.str(), result.stderr.str())
    (error,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert error.startswith("ERROR: --gemm-baselines / gemm_baselines: ") and reason in error
    assert _saved(project) == before


# -- schema faults -------------------------------------------------------------------------------
NOT_BASELINES = "restore it from version control, or record it again with --gemm-update-baselines"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{}", f"no 'schema' field, so not a pytest-gemm baseline file (it is an empty object); {NOT_BASELINES}"),
        ('{"gpu": "x"}', "no 'schema' field, so not a pytest-gemm baseline file (its fields are 'gpu')"),
        (
            '{"schema": "1", "gpu": "x", "entries": {}}',
            """'schema' must be the integer 1, found a string "1"; write it as "schema": 1 if the rest""",
        ),
        ('{"schema": true}', "'schema' must be the integer 1, found a boolean true"),
        (
            '{"schema": 2, "gpu": "x", "entries": {}}',
            "schema version 2 is not one this pytest-gemm reads (1): a newer pytest-gemm wrote it; upgrade pytest-gemm",
        ),
        ('{"schema": 0}', f"schema version 0 is not one this pytest-gemm reads (1) and none writes it; {NOT_BASELINES}"),  # noqa: E501
        ('{"schema": 1, "gpu": "x", "entries": {', "not valid JSON (Expecting property name enclosed in double quotes"),
        ("[1]", f"expected a JSON object with 'schema', 'gpu' and 'entries', found a list; {NOT_BASELINES}"),
        ('{"schema": 1, "gpu": 3, "entries": []}', "found 'gpu': 3, 'entries': []; fix it by hand"),
        (
            '{"schema": 1, "gpu": "x", "entries": {"k": []}}',
            "entry 'k': expected an object; fix or delete that entry, or restore the file from version control",
        ),
        ("\udcff", f"not UTF-8 text (byte 0), so not a baseline file; {NOT_BASELINES}"),
    ],
    ids=["empty", "no-schema", "schema-string", "schema-bool", "newer", "older", "bad-json", "list", "fields",
         "entry", "binary"],
)  # fmt: skip
def test_each_schema_fault_gets_advice_that_fits(tmp_path, text, message):
    path = tmp_path / "baselines" / "nvidia-h100-80gb-hbm3.json"
    path.parent.mkdir()
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = path.read_bytes()
    result = _cli(tmp_path, "show")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: ") and message in result.stderr
    assert ("upgrade" in result.stderr) == (text.startswith('{"schema": 2'))  # advice to upgrade only when newer
    _no_traceback(result.stderr)
    assert path.read_bytes() == before


def test_a_run_stops_on_a_baseline_file_without_a_schema_with_the_same_advice(replay):
    (replay.path / "baselines").mkdir()
    (replay.path / H100_FILE).write_text("{}")
    result = _replay_run(replay)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*pytest-gemm: *{H100_FILE}: no 'schema' field, so not a pytest-gemm baseline file*"])
    assert "upgrade" not in result.stderr.str()
    assert (replay.path / H100_FILE).read_text() == "{}"


# -- small command-line faults -------------------------------------------------------------------
def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    (tmp_path / "baselines").mkdir()
    shutil.copy(ROOT / H100_FILE, tmp_path / H100_FILE)  # hundreds of entries: more than a pipe holds
    entries = len(json.loads((ROOT / H100_FILE).read_text())["entries"])
    command = [sys.executable, "-m", "pytest_gemm.cli", "show"]
    with subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        first = proc.stdout.readline()  # `pytest-gemm show | head -1`
        proc.stdout.close()
        err = proc.stderr.read()
    assert first == f"{H100_FILE}: NVIDIA H100 80GB HBM3, {entries} entries\n"
    assert err == "" and proc.returncode == 128 + 13  # as a process ended by SIGPIPE


def test_the_threshold_is_checked_the_same_in_the_command_and_the_plugin(replay):
    expected = "expected a number from 0 to 10, got '-1'"
    for args in (["--threshold", "-1"], ["--threshold=-1"]):
        result = _cli(replay.path, "compare", "run.json", *args)
        assert result.returncode == 2 and f"argument --threshold: {expected}" in result.stderr
    plugin = _replay_run(replay, "--gemm-threshold", "-1")
    assert plugin.ret == pytest.ExitCode.USAGE_ERROR
    plugin.stderr.fnmatch_lines([f"*--gemm-threshold / gemm_threshold: {expected}"])


# -- saved runs that are not what they say ---------------------------------------------------------
CASE_512 = f"{NAIVE}[fp32-512x512x512]"


def _saved_run() -> dict:
    """A saved run as pytest-gemm writes it: the recorded timed cases, with every key merge reads."""
    from pytest_gemm import __version__
    from pytest_gemm.records.result import CaseResult
    from pytest_gemm.runs.data import RunData, SessionEnd, Shards
    from pytest_gemm.runs.saved import run_json

    from support import recorded_records, recording

    records = recorded_records()
    tests = {r.test: CaseResult("passed", duration_s=2.0, kind="case", timing=r) for r in records}
    settings = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "timed": True, "baselines": "baselines"}
    data = RunData(dict(recording()["facts"]), tests=tests, version=__version__, settings=settings, wall_s=9.0)
    data.shard, data.session = Shards((1,), 1), SessionEnd(0, 3, 3, 3, 0)
    return json.loads(json.dumps(run_json(data)))


def _set(run: dict, path: tuple, value) -> None:
    for name in path[:-1]:
        run = run[name]
    run[path[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ("gemm", "tests", CASE_512, "duration_s"),
            "x",
            f"gemm.tests[\"{CASE_512}\"].duration_s: expected a number, got 'x'",
        ),
        (
            ("gemm", "tests", CASE_512, "outcome"),
            "error",
            f'gemm.tests["{CASE_512}"].outcome: expected one of "passed", "failed", "skipped", got \'error\'',
        ),
        (
            ("gemm", "tests", CASE_512, "duration_s"),
            -1.0,
            f'gemm.tests["{CASE_512}"].duration_s: expected a finite number of at least 0, got -1.0',
        ),
        (
            ("gemm", "tests", CASE_512, "duration_s"),
            float("nan"),
            f'gemm.tests["{CASE_512}"].duration_s: expected a finite number of at least 0, got nan',
        ),
        (
            ("gemm", "settings", "threshold"),
            "0.05",
            "gemm.settings.threshold: expected a number from 0 to 10, got '0.05'",
        ),
        (
            ("gemm", "settings", "gate-metric"),
            "speed",
            'gemm.settings.gate-metric: expected one of "ratio", "time", got \'speed\'',
        ),
        (("gemm", "settings", "timed"), "yes", "gemm.settings.timed: expected true or false, got 'yes'"),
        (("gemm", "settings"), [], "gemm.settings: expected an object, got a list of 0"),
        (("gemm", "notes"), None, "gemm.notes: expected a list, got null"),
        (("gemm", "notes"), [1], "gemm.notes[0]: expected a string, got 1"),
        (("gemm", "failures"), None, "gemm.failures: expected a list, got null"),
        (
            ("gemm", "tests", CASE_512, "diagnosis"),
            {"kind": "bad luck", "dtype": "fp32", "shape": "512x512x512", "alpha": 1.0, "beta": 0.0},
            f"gemm.tests[\"{CASE_512}\"]: 'bad luck' is not one of fault, no result, wrong output, timing",
        ),
        (
            ("gemm", "tests", CASE_512, "diagnosis"),
            {"kind": "wrong output", "dtype": "fp32", "shape": "512x512", "alpha": 1.0, "beta": 0.0},
            f"gemm.tests[\"{CASE_512}\"]: expected a shape MxNxK such as 4096x4096x1024, got '512x512'",
        ),
        (
            ("gemm", "tests", CASE_512, "diagnosis"),
            {
                "kind": "wrong output",
                "dtype": "fp32",
                "shape": "512x512x512",
                "alpha": 1.0,
                "beta": 0.0,
                "error_map": {"rows": 512, "cols": 512, "cell": [512, 512], "ratio": ["!!"], "cause": ["."]},
            },
            f"gemm.tests[\"{CASE_512}\"]: ErrorMap.ratio: '!!' is not a stored ratio",
        ),
        (("gemm", "wall_s"), True, "gemm.wall_s: expected a number or null, got true"),
        (
            ("gemm", "shard"),
            {"index": [3], "count": 2},
            "gemm.shard.index: expected distinct shards from 1 to 2, got [3]",
        ),
        (
            ("gemm", "shard"),
            {"index": [1], "count": 0},
            "gemm.shard.count: expected a finite number of at least 1, got 0",
        ),
        (("gemm", "shard", "count"), "2", "gemm.shard.count: expected an integer, got '2'"),
        (("gemm", "session", "exit_status"), "ok", "gemm.session.exit_status: expected an integer, got 'ok'"),
        (("gemm", "files"), {"k.cu": {"sha256": 5}}, 'gemm.files["k.cu"].sha256: expected a string, got 5'),
        (("gemm",), "x", "gemm: expected an object, got 'x'"),
        (("machine_info", "gpu"), "H100", "machine_info.gpu: expected an object, got 'H100'"),
        (("benchmarks", 0, "extra_info"), "x", "benchmarks[0].extra_info: expected an object, got 'x'"),
        (("benchmarks", 1), 7, "benchmarks[1]: expected an object, got 7"),
        (
            ("benchmarks", 0, "extra_info", "gemm", "median_s"),
            "fast",
            "benchmarks[0].extra_info.gemm.median_s: expected a number, got 'fast'",
        ),
        (
            ("benchmarks", 0, "extra_info", "gemm", "ci_s"),
            [1.0],
            "benchmarks[0].extra_info.gemm.ci_s: expected a list of 2, got a list of 1",
        ),
        (
            ("benchmarks", 0, "extra_info", "gemm", "gate"),
            {"verdict": "worse", "metric": "ratio", "threshold": 0.05},
            "benchmarks[0].extra_info.gemm: 'worse' is not one of regressed, improved, same, new, unstable",
        ),
    ],
)
def test_a_saved_run_with_a_wrong_value_is_refused_naming_its_key_path(tmp_path, path, value, message):
    run = _saved_run()
    _set(run, path, value)
    (tmp_path / "run.json").write_text(json.dumps(run))
    for command in (["merge", "run.json", "--out", "m.json"], ["plot", "run.json", "--out", "rep"]):
        result = _cli(tmp_path, *command)
        assert result.returncode == 2, result
        assert result.stderr.startswith(f"pytest-gemm: error: run.json: {message}"), result.stderr
        _no_traceback(result.stderr)
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "rep").exists()


def test_a_saved_run_that_breaks_the_reader_is_exit_2_naming_the_file(tmp_path, monkeypatch, capsys):
    """A fault nobody foresaw while reading is the input's problem (status 2, the file named), not a traceback."""
    from pytest_gemm.cli import common, main

    (tmp_path / "run.json").write_text(json.dumps(_saved_run()))
    monkeypatch.chdir(tmp_path)

    def broken(path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(common, "read_run", broken)
    assert main(["merge", "run.json", "--out", "m.json"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "pytest-gemm: error: run.json: cannot be read as a saved run (RecursionError: maximum recursion depth "
        "exceeded)\n"
    )


def test_a_plan_target_that_is_not_a_positive_number_is_a_usage_error(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(_saved_run()))
    for value in ("nan", "0", "-5", "inf", "soon"):
        result = _cli(tmp_path, "merge", "run.json", "--out", "m.json", "--target-wall", value)
        assert result.returncode == 2 and f"expected a number of seconds above 0, got {value!r}" in result.stderr
        _no_traceback(result.stderr)
    assert not (tmp_path / "m.json").exists()


def test_a_baseline_file_nested_too_deeply_is_refused_in_one_line(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    result = _cli(tmp_path, "show", "deep.json")
    assert result.returncode == 2 and "deep.json: nested too deeply to be a baseline file" in result.stderr
    _no_traceback(result.stderr)
