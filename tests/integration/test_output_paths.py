"""Output paths never overwrite an input or a user's files, and are checked before any work (docs/bad-input.md).

``merge`` refuses an output that is one of its runs and a run named twice; a report folder holding files
pytest-gemm did not write is refused unless ``--gemm-overwrite-report`` / ``--overwrite-report`` is given; the
report, summary and baseline paths of a run are checked as it starts (a usage error, exit 4); a write error at the
end names the path and whose it is; a saved run that lacks a field names it; and the command's small items
(``--help``, the options each subcommand takes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pytest_gemm.report.outputs import MARKER

from support import BROKEN, ROOT, recorded_outcome, recorded_records, recording
from support.cli import cli
from support.shared import made_once

NAIVE = "kernels/01_naive.cu::sgemm_naive"
CASE_512 = f"{NAIVE}[fp32-512x512x512]"
OOB = "oob_write[fp32-100x100x64]"
FAILED = f"kernels/faults.cu::{OOB}"
USER_PAGE = "<html>my own page</html>\n"


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return cli(cwd, *args, env=env)


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "Error:" not in text.replace("pytest-gemm: error:", ""), text


def _failed_result():
    """The judged result of a recorded wrong output (an out-of-bounds write): a diagnosis with an error map."""
    from pytest_gemm.judge.case import judge_outcome
    from pytest_gemm.records.shapes import parse_shapes
    from pytest_gemm.specs.cases import expand
    from pytest_gemm.specs.files import load_specs

    specs = load_specs(BROKEN / "faults.cu", "kernels/faults.cu")
    case = next(c for s in specs for c in expand(s, parse_shapes("100x100x64")) if c.name == OOB)
    outcome = recorded_outcome(f"faults.cu::{OOB}")
    return judge_outcome(case, FAILED, outcome, recording()["facts"], source_sha256="0" * 64, save_raw=False)


def _saved_run(shard: tuple[int, int] = (1, 1)) -> dict:
    """A saved run as pytest-gemm writes it: recorded timed cases (one gated) and a failed case with its diagnosis."""
    from pytest_gemm import __version__
    from pytest_gemm.records.case_record import GateResult
    from pytest_gemm.records.result import CaseResult
    from pytest_gemm.records.verdicts import GateVerdict
    from pytest_gemm.runs.data import KernelFileRun, RunData, SessionEnd, Shards
    from pytest_gemm.runs.saved import run_json

    records = recorded_records()
    records[0] = records[0].with_gate(GateResult(GateVerdict.NEW, "ratio", 0.05, baseline_file_missing=True))
    tests = {r.test: CaseResult("passed", duration_s=2.0, kind="case", timing=r) for r in records}
    tests[FAILED] = _failed_result()
    settings = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "timed": True, "baselines": "baselines"}
    data = RunData(dict(recording()["facts"]), tests=tests, version=__version__, settings=settings, wall_s=9.0)
    data.shard, data.session = Shards((shard[0],), shard[1]), SessionEnd(1, 4, 4, 4, 0)
    data.files = {"kernels/01_naive.cu": KernelFileRun("0" * 64, True)}
    return json.loads(json.dumps(run_json(data)))


def _write(path: Path, run: dict) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run))
    return path.read_bytes()


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# -- merge: no output over an input, no run named twice ------------------------------------------------
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["s1/run.json", "s2/run.json", "--out", "s1/run.json"], "--out s1/run.json: is s1/run.json, one of the runs"),
        (["s1/run.json", "s2/run.json", "--out", "./s1/../s1/run.json"], "--out ./s1/../s1/run.json: is s1/run.json"),
        (["s1/run.json", "s2/run.json", "--out", "link.json"], "--out link.json: is s1/run.json, one of the runs"),
        (["s1/run.json", "s2/run.json", "--out", "m.json", "--summary", "s2/run.json"], "--summary s2/run.json: is"),
        (["s1/run.json", "s2/run.json", "--out", "m.json", "--summary", "m.json"], "--summary m.json: is --out's path"),
        (["s1/run.json", "s2/run.json", "--out", "m.json", "--report", "s2/run.json"], "--report s2/run.json: is s2"),
    ],
    ids=["out", "out-spelled-otherwise", "out-hard-link", "summary", "summary-is-out", "report"],
)
def test_merge_refuses_an_output_that_is_one_of_its_runs(tmp_path, args, said):
    """merge --out (or --summary, --report) naming one of its runs is refused, exit 2, nothing written."""
    before = {name: _write(tmp_path / name, _saved_run((i, 2))) for i, name in ((1, "s1/run.json"), (2, "s2/run.json"))}
    os.link(tmp_path / "s1/run.json", tmp_path / "link.json")
    result = _cli(tmp_path, "merge", *args)
    assert result.returncode == 2, result
    assert result.stderr.startswith(f"pytest-gemm: error: {said}"), result.stderr
    assert "nothing written" in result.stderr and result.stdout == ""
    _no_traceback(result.stderr)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "s1", "s2"]
    assert _cli(tmp_path, "merge", "s1/run.json", "s2/run.json", "--out", "m.json").returncode == 1  # a failed case


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (["s1.json", "s1.json"], "s1.json is given twice: name each saved run once; nothing merged"),
        (["s1.json", "./s1.json"], "./s1.json is given twice (as s1.json and as ./s1.json): name each saved run once"),
        (["s1.json", "s2.json", "sub/../s2.json"], "sub/../s2.json is given twice (as s2.json and as sub/../s2.json)"),
    ],
    ids=["alike", "spelled-otherwise", "third"],
)
def test_merge_says_a_run_was_given_twice(tmp_path, names, said):
    """merge a.json a.json says the file was given twice (not that a shard is missing), however spelled."""
    _write(tmp_path / "s1.json", _saved_run((1, 2)))
    _write(tmp_path / "s2.json", _saved_run((2, 2)))
    (tmp_path / "sub").mkdir()
    result = _cli(tmp_path, "merge", *names, "--out", "m.json")
    assert result.returncode == 2
    assert result.stderr.startswith(f"pytest-gemm: error: {said}") and "missing" not in result.stderr
    assert not (tmp_path / "m.json").exists()


# -- a report folder of the user's own files ------------------------------------------------------------
def _user_folder(path: Path) -> Path:
    path.mkdir()
    (path / "index.html").write_text(USER_PAGE)
    (path / "notes.txt").write_text("mine\n")
    return path


def test_plot_refuses_a_folder_of_the_users_own_files_unless_told(tmp_path):
    """plot --out DIR holding the user's index.html is refused (exit 2), unless --overwrite-report."""
    _write(tmp_path / "run.json", _saved_run())
    folder = _user_folder(tmp_path / "mine")
    refused = _cli(tmp_path, "plot", "run.json", "--out", "mine")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        "pytest-gemm: error: --out: mine holds files pytest-gemm did not write (index.html, notes.txt); name a new or "
        "empty folder, or pass --overwrite-report to write the report over them\n"
    )
    assert _files(folder) == {"index.html", "notes.txt"} and (folder / "index.html").read_text() == USER_PAGE
    told = _cli(tmp_path, "plot", "run.json", "--out", "mine", "--overwrite-report")
    assert told.returncode == 0, told.stderr
    assert (folder / "index.html").read_text() != USER_PAGE
    assert (folder / MARKER).is_file() and (folder / "notes.txt").read_text() == "mine\n"  # others left alone
    again = _cli(tmp_path, "plot", "run.json", "--out", "mine")  # pytest-gemm's folder now: no switch needed
    assert again.returncode == 0, again.stderr


def test_plot_writes_a_new_an_empty_or_its_own_folder_and_marks_it_first(tmp_path):
    """A new or empty folder needs no switch; the marker is written, and a marked folder is rewritten."""
    _write(tmp_path / "run.json", _saved_run())
    (tmp_path / "empty").mkdir()
    for name in ("new/deeper", "empty"):
        result = _cli(tmp_path, "plot", "run.json", "--out", name)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name / MARKER).is_file() and (tmp_path / name / "index.html").is_file()
    assert _cli(tmp_path, "plot", "run.json", "--out", "empty").returncode == 0


def test_merge_report_refuses_a_folder_of_the_users_own_files_before_writing_anything(tmp_path):
    """merge --report DIR holding the user's files is refused before the merged run is written."""
    _write(tmp_path / "run.json", _saved_run())
    folder = _user_folder(tmp_path / "mine")
    refused = _cli(tmp_path, "merge", "run.json", "--out", "m.json", "--report", "mine")
    assert refused.returncode == 2
    assert refused.stderr.startswith("pytest-gemm: error: --report: mine holds files pytest-gemm did not write")
    assert refused.stderr.endswith("pass --overwrite-report to write the report over them; nothing written\n")
    assert not (tmp_path / "m.json").exists() and _files(folder) == {"index.html", "notes.txt"}
    told = _cli(tmp_path, "merge", "run.json", "--out", "m.json", "--report", "mine", "--overwrite-report")
    assert told.returncode == 1, told.stderr  # the failed case
    assert (folder / MARKER).is_file() and (folder / "index.html").read_text() != USER_PAGE


def _bad_outputs(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "file.txt").write_text("x\n")
    return [
        ("file.txt", "file.txt is a file, not a folder"),
        ("file.txt/report", "file.txt is a file, not a folder"),
        ("/dev/full", "/dev/full is not a folder"),
        ("/sys/report", "cannot create a file in /sys (Permission denied)"),
    ]


def test_plot_out_that_cannot_be_a_folder_is_a_clear_error(tmp_path):
    """plot --out an existing file, a path under a file, /dev/full: the path named, exit 2, no traceback."""
    _write(tmp_path / "run.json", _saved_run())
    for out, said in _bad_outputs(tmp_path):
        if out.startswith("/sys") and os.access("/sys", os.W_OK) and os.geteuid() != 0:
            continue
        result = _cli(tmp_path, "plot", "run.json", "--out", out)
        assert result.returncode == 2, result
        assert result.stderr == f"pytest-gemm: error: --out: {said}\n"
        _no_traceback(result.stderr)
    assert (tmp_path / "file.txt").read_text() == "x\n"


# -- the plugin: paths checked as the run starts -----------------------------------------------------------
def _run(project, *options: str, inprocess: bool = True):
    args = ("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--benchmark-skip", "-p", "no:randomly", *options)
    return project.runpytest(*args) if inprocess else project.runpytest_subprocess(*args)


def _usage_error(result, line: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert f"ERROR: {line}" in result.stderr.lines, result.stderr.str()
    assert "passed" not in result.stdout.str() and "collected" not in result.stdout.str()  # nothing ran
    _no_traceback(result.stdout.str(), result.stderr.str())


def test_gemm_report_refuses_a_folder_of_the_users_own_files_at_the_start(replay):
    """--gemm-report DIR holding the user's index.html: a usage error as the run starts, the files kept;
    --gemm-overwrite-report writes there; afterwards the folder is pytest-gemm's and needs no switch."""
    folder = _user_folder(replay.path / "mine")
    _usage_error(
        _run(replay, "--gemm-report", "mine"),
        "--gemm-report / gemm_report: mine holds files pytest-gemm did not write (index.html, notes.txt); name a new "
        "or empty folder, or pass --gemm-overwrite-report to write the report over them",
    )
    assert _files(folder) == {"index.html", "notes.txt"} and (folder / "index.html").read_text() == USER_PAGE
    _run(replay, "--gemm-report", "mine", "--gemm-overwrite-report").assert_outcomes(passed=6)
    assert (folder / MARKER).is_file() and (folder / "index.html").read_text() != USER_PAGE
    assert (folder / "notes.txt").read_text() == "mine\n"
    _run(replay, "--gemm-report", "mine").assert_outcomes(passed=6)


def test_the_report_folder_beside_pytest_html_is_not_a_users_folder_either(replay):
    """The folder the pictures go in beside pytest-html's --html is checked the same way."""
    pytest.importorskip("pytest_html", reason="pytest-html is not installed")
    _user_folder(replay.path / "html")
    _user_folder(replay.path / "html" / "gemm-report")
    result = _run(replay, "--html", "html/page.html")
    _usage_error(
        result,
        "the report folder beside pytest-html's --html (gemm-report/): html/gemm-report holds files pytest-gemm did "
        "not write (index.html, notes.txt); name a new or empty folder, or pass --gemm-overwrite-report to write the "
        "report over them",
    )


@pytest.fixture
def read_only(request):
    """Makes a folder unwritable (chmod; for root, whom chmod does not stop, the immutable attribute); undone after."""
    undo = []

    def block(folder: Path) -> str:
        folder.mkdir(exist_ok=True)
        folder.chmod(0o555)
        undo.append(lambda: folder.chmod(0o755))
        if os.geteuid() != 0:
            return "Permission denied"
        if (
            shutil.which("chattr")
            and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        ):
            undo.append(lambda: subprocess.run(["chattr", "-i", str(folder)], check=True))
            return "Operation not permitted"
        pytest.skip("nothing here stops root writing to a folder (no chattr +i)")

    yield block
    for step in reversed(undo):
        step()


def test_a_report_path_that_cannot_be_written_is_a_usage_error_at_the_start(replay, read_only):
    """--gemm-report naming a file, a path under a file, or a folder that cannot be written is a
    usage error before anything runs (not an internal error after the run)."""
    (replay.path / "file.txt").write_text("x\n")
    label = "--gemm-report / gemm_report"
    _usage_error(_run(replay, "--gemm-report", "file.txt"), f"{label}: file.txt is a file, not a folder")
    _usage_error(_run(replay, "--gemm-report", "file.txt/rep"), f"{label}: file.txt is a file, not a folder")
    why = read_only(replay.path / "locked")
    _usage_error(_run(replay, "--gemm-report", "locked/rep"), f"{label}: cannot create a file in locked ({why})")
    assert not (replay.path / "locked" / "rep").exists()


def test_a_summary_path_that_cannot_be_written_is_a_usage_error_at_the_start(replay, read_only, monkeypatch):
    """Checked when the run starts: --gemm-summary naming a folder or in a folder that cannot be written, and
    $GITHUB_STEP_SUMMARY that cannot be written, are usage errors naming whose path it is."""
    (replay.path / "folder").mkdir()
    _usage_error(_run(replay, "--gemm-summary", "folder"), "--gemm-summary: folder is a folder, not a file")
    why = read_only(replay.path / "locked")
    _usage_error(
        _run(replay, "--gemm-summary", "locked/s.md"), f"--gemm-summary: cannot create a file in locked ({why})"
    )
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(replay.path / "locked" / "step.md"))
    _usage_error(
        _run(replay, "--gemm-summary", "s.md"),
        f"$GITHUB_STEP_SUMMARY (where the summary is appended): cannot create a file in {replay.path / 'locked'} "
        f"({why})",
    )
    assert not (replay.path / "s.md").exists()


def test_a_summary_write_error_at_the_end_names_the_path_and_whose_it_is(replay, monkeypatch):
    """--gemm-summary /dev/full (which the start's check cannot tell) and $GITHUB_STEP_SUMMARY on a full
    disk: the error names the path and says whether it is --gemm-summary's or $GITHUB_STEP_SUMMARY's."""
    result = _run(replay, "--gemm-summary", "/dev/full")
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "pytest-gemm: cannot write the summary to /dev/full (--gemm-summary): No space left on device" in (
        result.stdout.lines
    )
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "/dev/full")
    result = _run(replay, "--gemm-summary", "s.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "pytest-gemm: cannot append the summary to /dev/full ($GITHUB_STEP_SUMMARY): No space left on device"
        in result.stdout.lines
    )
    assert (replay.path / "s.md").read_text().startswith("## pytest-gemm")  # its own file was written
    _no_traceback(result.stdout.str())


def test_the_baseline_folder_is_never_a_file_and_is_writable_when_recording(replay, read_only):
    """--gemm-baselines naming a file is refused as the run starts; so is recording into a folder that
    cannot be written; gating reads a read-only folder."""
    label = "--gemm-baselines / gemm_baselines"
    _usage_error(
        _run(replay, "--gemm-baselines", "kernels/01_naive.cu"), f"{label}: kernels/01_naive.cu is a file, not a folder"
    )
    (replay.path / "README.md").write_text("# mine\n")
    _usage_error(_run(replay, "--gemm-baselines", "README.md"), f"{label}: README.md is a file, not a folder")
    why = read_only(replay.path / "locked")
    _run(replay, "--gemm-baselines", "locked").assert_outcomes(passed=6)  # gating only reads it
    _usage_error(
        _run(replay, "--gemm-baselines", "locked", "--gemm-update-baselines"),
        f"{label}: cannot create a file in locked ({why}) (--gemm-update-baselines records there)",
    )
    assert (replay.path / "README.md").read_text() == "# mine\n"


class _BlockDuringTheRun:
    """A plugin for the inner run: once collection is done (after the start's checks), make a folder unwritable."""

    def __init__(self, block, folder: Path) -> None:
        self.block, self.folder, self.reason = block, folder, ""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.reason = self.block(self.folder)


@pytest.mark.parametrize("how", ["folder is a file", "read-only folder"])
def test_a_baseline_folder_blocked_during_an_update_run_keeps_its_results(replay, read_only, monkeypatch, how):
    """A baseline folder that passed the start's check but cannot be written at the end fails the run in
    one line, and the run's timed cases are kept in a file of their own; the baseline file is unchanged."""
    if how == "read-only folder" and os.geteuid() == 0 and not shutil.which("chattr"):
        pytest.skip("nothing here stops root writing to a folder (no chattr +i)")
    monkeypatch.setattr(tempfile, "tempdir", str(replay.path))  # where a failed update (in this process) keeps them
    timed = ("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-update-baselines")
    replay.runpytest(*timed).assert_outcomes(passed=6)
    folder, name = replay.path / "baselines", "baselines/nvidia-h100-80gb-hbm3.json"
    before = (replay.path / name).read_bytes()

    def as_file(path: Path) -> str:
        path.rename(path.with_name("baselines.kept"))
        path.write_text("not a folder\n")
        return "baselines is a file, not a folder"

    blocker = _BlockDuringTheRun(as_file if how == "folder is a file" else read_only, folder)
    monkeypatch.setenv("REPLAY_SCALE", "1.1")
    result = replay.runpytest(*timed, plugins=[blocker])
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and blocker.reason
    (error,) = [line for line in result.stdout.lines if line.startswith("error:")]
    assert error.startswith(f"error: {name}: ") and blocker.reason in error
    assert "; nothing written there. This run's 6 timed case(s) are kept in " in error
    kept = Path(error.split(" are kept in ")[1].split(" (")[0])
    assert kept.parent == replay.path and kept.name.startswith("pytest-gemm-nvidia-h100-80gb-hbm3-")
    assert len(json.loads(kept.read_text())["entries"]) == 6
    what = "(this run's entries alone): add them to" if how == "folder is a file" else "(the whole file as it would"
    assert error.endswith(f"{name} once that is fixed") and what in error
    saved = replay.path / ("baselines.kept" if how == "folder is a file" else "baselines") / Path(name).name
    assert saved.read_bytes() == before


def test_only_the_controlling_process_checks_and_claims_under_xdist(replay):
    """Under pytest-xdist the controlling process refuses a bad folder at the start, before workers
    start; a good one is claimed (marked) and holds the report the run wrote, heatmaps of its workers included."""
    pytest.importorskip("xdist")
    _user_folder(replay.path / "mine")
    refused = _run(replay, "--gemm-report", "mine", "-n", "2", inprocess=False)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --gemm-report / gemm_report: mine holds files pytest-gemm did not write*"])
    ran = _run(replay, "--gemm-report", "rep", "-n", "2", inprocess=False)
    ran.assert_outcomes(passed=6)
    assert {MARKER, "index.html", "run.json"} <= _files(replay.path / "rep")


# -- a saved run that lacks a field ----------------------------------------------------------------------
def _required(cls: type) -> list[str]:
    none = dataclasses.MISSING
    return [f.name for f in dataclasses.fields(cls) if f.default is none and f.default_factory is none]


def _lacking() -> list[tuple[tuple, str, str, str]]:
    """(key path of a record in a saved run, a field it needs, the message's place, an id) for every field a record
    needs (one without a default)."""
    from pytest_gemm.records.case_record import CaseRecord, GateResult
    from pytest_gemm.records.diagnosis import Diagnosis, Finding
    from pytest_gemm.records.outcome import ErrorMap, ErrorStats
    from pytest_gemm.records.result import CaseResult
    from pytest_gemm.runs.data import SessionEnd, Shards

    record = ("benchmarks", 0, "extra_info", "gemm")
    whose = f"the timing record of {CASE_512}"
    tests = ("gemm", "tests")
    failed = f'gemm.tests["{FAILED}"].diagnosis'
    places = [
        (record, CaseRecord, f"benchmarks[0].extra_info.gemm: {whose}"),
        ((*record, "gate"), GateResult, f"benchmarks[0].extra_info.gemm.gate: {whose}"),
        ((*tests, CASE_512), CaseResult, f'gemm.tests["{CASE_512}"]:'),
        ((*tests, FAILED, "diagnosis"), Diagnosis, f"{failed}:"),
        ((*tests, FAILED, "diagnosis", "findings", 0), Finding, f"{failed}.findings[0]:"),
        ((*tests, FAILED, "diagnosis", "kernel"), ErrorStats, f"{failed}.kernel:"),
        ((*tests, FAILED, "diagnosis", "error_map"), ErrorMap, f"{failed}.error_map:"),
        (("gemm", "shard"), Shards, "gemm.shard:"),
        (("gemm", "session"), SessionEnd, "gemm.session:"),
    ]
    return [(path, name, place, f"{cls.__name__}.{name}") for path, cls, place in places for name in _required(cls)]


LACKING = _lacking()


@pytest.mark.parametrize(("path", "name", "place"), [row[:3] for row in LACKING], ids=[row[3] for row in LACKING])
def test_a_saved_run_that_lacks_a_field_names_the_field_the_file_and_the_test(
    tmp_path, monkeypatch, capsys, path, name, place
):
    """A saved run with a record's field removed (the timing record's 'gpu', and every other field a record
    needs) names the file, the place (the test) and the field; never a Python signature."""
    from pytest_gemm.cli import main

    run = _saved_run()
    value = run
    for step in path:
        value = value[step]
    assert name in value, (path, name)
    del value[name]
    (tmp_path / "run.json").write_text(json.dumps(run))
    monkeypatch.chdir(tmp_path)
    for command in (["merge", "run.json", "--out", "m.json"], ["plot", "run.json", "--out", "rep"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err == f"pytest-gemm: error: run.json: {place} lacks {name!r}\n", err
        assert "positional argument" not in err and "__init__" not in err
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "rep").exists()


def test_a_timing_record_without_its_gpu_names_the_field(tmp_path):
    """The very case of the report, through the command: a timing record without its 'gpu' key."""
    run = _saved_run()
    del run["benchmarks"][0]["extra_info"]["gemm"]["gpu"]
    (tmp_path / "run.json").write_text(json.dumps(run))
    result = _cli(tmp_path, "plot", "run.json", "--out", "rep")
    assert result.returncode == 2
    assert result.stderr == (
        f"pytest-gemm: error: run.json: benchmarks[0].extra_info.gemm: the timing record of {CASE_512} lacks 'gpu'\n"
    )


# -- the command's small items -----------------------------------------------------------------------------
def test_help_describes_the_command_in_a_whole_sentence():
    """pytest-gemm --help was cut mid-sentence (reST backticks, a trailing comma)."""
    result = _cli(ROOT, "--help")
    assert result.returncode == 0
    description = result.stdout.split("\n\n")[1].replace("\n", " ")
    assert description == (
        "Look at baseline files, compare saved runs with them, record or prune them, and draw or merge saved runs."
    )
    assert "`" not in result.stdout


@pytest.mark.parametrize(
    ("command", "takes"),
    [
        (["show"], {"--baselines"}),
        (["update", "--from", "run.json"], {"--baselines"}),
        (["prune"], {"--baselines"}),
        (["compare", "run.json"], {"--baselines", "--threshold", "--gate-metric"}),
        (["plot", "run.json", "--out", "rep"], {"--baselines", "--threshold", "--gate-metric", "--overwrite-report"}),
        (
            ["merge", "run.json", "--out", "m.json"],
            {"--baselines", "--threshold", "--gate-metric", "--overwrite-report"},
        ),
    ],
    ids=["show", "update", "prune", "compare", "plot", "merge"],
)
def test_each_subcommand_takes_only_the_options_it_uses(tmp_path, command, takes):
    """show, update and prune accepted --threshold and --gate-metric and ignored them."""
    shared = {"--baselines": "b", "--threshold": "0.1", "--gate-metric": "time", "--overwrite-report": None}
    helped = _cli(tmp_path, command[0], "--help").stdout
    for option, value in shared.items():
        assert (f" {option}" in helped) == (option in takes), (command[0], option)
        if option in takes:
            continue
        result = _cli(tmp_path, *command, *[a for a in (option, value) if a is not None])
        assert result.returncode == 2 and f"unrecognized arguments: {option}" in result.stderr, result.stderr


# -- earlier reports adopted, the step summary's folder, merge into a run's folder, --co ---------------------------
def _draw(folder: Path, run: dict) -> None:
    """The report folder write_report draws at ``folder`` for ``run``, read from a saved copy (removed after)."""
    from pytest_gemm.report.folder import write_report
    from pytest_gemm.runs.saved import read_run

    source = folder.parent / f".{folder.name}-source.json"
    _write(source, run)
    write_report(read_run(source), folder)
    source.unlink()


def _draw_old_report(outer: Path) -> None:
    """A report folder as the release before the marker wrote it, at ``outer/report``: write_report's files (page,
    run, charts, a failed case's heatmap) and no marker; and a file manager's hidden file, which is nobody's."""
    folder = outer / "report"
    _draw(folder, _saved_run())
    (folder / MARKER).unlink()
    (folder / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    files = _files(folder)
    assert {"index.html", "run.json", "tflops-fp32.png", "errors"} <= files and any(
        name.startswith("errors/") and name.endswith(".png") for name in files
    ), files


@pytest.fixture(scope="session")
def old_report_template(pytestconfig, tmp_path_factory) -> Path:
    """The earlier release's report folder (:func:`_draw_old_report`), drawn once for the run (its pictures were most
    of these tests' time) and copied by each test: its files do not depend on the folder's name or place."""
    return made_once(pytestconfig, tmp_path_factory, "old-report", _draw_old_report) / "report"


def _copy(template: Path, folder: Path) -> Path:
    """A copy of a report folder drawn once (its links kept as links) made at ``folder``."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(template, folder, symlinks=True))


@pytest.fixture
def old_report(old_report_template):
    """``old_report(folder)``: a copy of the earlier release's report folder made at ``folder``."""
    return lambda folder: _copy(old_report_template, folder)


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_plot_adopts_a_report_folder_written_before_the_marker_to_redraw_it(tmp_path, old_report):
    """`pytest-gemm plot s1/run.json --out s1`, the documented redraw, into a folder the
    previous release wrote (no marker): adopted and marked, its run.json kept; a marked one is redrawn as well."""
    folder = old_report(tmp_path / "s1")
    run = (folder / "run.json").read_bytes()
    result = _cli(tmp_path, "plot", "s1/run.json", "--out", "s1")
    assert result.returncode == 0, result.stderr
    assert (folder / MARKER).is_file() and (folder / "run.json").read_bytes() == run
    assert "s1/run.json" in (folder / "index.html").read_text()  # the page names the run it was drawn from
    assert _cli(tmp_path, "plot", "s1/run.json", "--out", "s1").returncode == 0


def test_gemm_report_adopts_a_report_folder_written_before_the_marker(replay, old_report):
    """--gemm-report DIR naming a folder the previous release wrote runs and writes there."""
    folder = old_report(replay.path / "rep")
    _run(replay, "--gemm-report", "rep").assert_outcomes(passed=6)
    assert (folder / MARKER).is_file()
    assert len(json.loads((folder / "run.json").read_text())["gemm"]["tests"]) == 6  # this run's


def test_the_folder_beside_pytest_html_written_before_the_marker_is_adopted(replay, old_report):
    """pytest-html users' automatic gemm-report/ folder, as the previous release left it."""
    pytest.importorskip("pytest_html", reason="pytest-html is not installed")
    folder = old_report(replay.path / "html" / "gemm-report")
    result = _run(replay, "--html", "html/page.html")
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK and (folder / MARKER).is_file()


def _spoil(folder: Path, how: str) -> None:
    if how == "notes.txt":
        (folder / "notes.txt").write_text("mine\n")
    elif how == "index.html":
        (folder / "index.html").write_text(USER_PAGE)
    elif how == "run.json":  # pytest-benchmark's own JSON: pytest-gemm's section, and more
        run = json.loads((folder / "run.json").read_text())
        (folder / "run.json").write_text(json.dumps({**run, "commit_info": {}, "version": "5.1.0"}))
    elif how == "run.json-not-json":
        (folder / "run.json").write_text("not JSON\n")
    elif how == "gate.png":  # a PNG pytest-gemm did not draw, under a name it draws
        (folder / "gate.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    elif how == "errors/photo.png":
        (folder / "errors" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    elif how == "data/":
        (folder / "data").mkdir()
    elif how == "index.html-link":  # a link is followed when written: never pytest-gemm's
        page = folder / "index.html"
        page.rename(folder.parent / "elsewhere.html")
        page.symlink_to(folder.parent / "elsewhere.html")


@pytest.mark.parametrize(
    ("how", "listed"),
    [
        ("notes.txt", "notes.txt"),
        ("index.html", "index.html"),
        ("run.json", "run.json"),
        ("run.json-not-json", "run.json"),
        ("gate.png", "gate.png"),
        ("errors/photo.png", "errors/photo.png"),
        ("data/", "data/"),
        ("index.html-link", "index.html"),
    ],
)
def test_an_unmarked_folder_is_adopted_only_when_all_of_it_is_pytest_gemms(tmp_path, how, listed, old_report):
    """An unmarked folder with anything pytest-gemm does not write there (a user's file, page,
    JSON or picture, a folder, a link) is refused, naming only that; nothing in it changes."""
    _write(tmp_path / "run.json", _saved_run())
    folder = old_report(tmp_path / "s1")
    _spoil(folder, how)
    before = _contents(folder)
    result = _cli(tmp_path, "plot", "run.json", "--out", "s1")
    assert result.returncode == 2, result
    assert result.stderr == (
        f"pytest-gemm: error: --out: s1 holds files pytest-gemm did not write ({listed}); name a new or empty folder, "
        "or pass --overwrite-report to write the report over them\n"
    )
    assert _contents(folder) == before and not (folder / MARKER).exists()


def test_step_summary_in_a_folder_that_does_not_exist_is_refused_at_the_start(replay, monkeypatch):
    """$GITHUB_STEP_SUMMARY in a missing folder is a usage error as the run starts (it was
    an error at the end), and no folder is made for it; --gemm-summary's folders are made, so a missing one is fine."""
    step = replay.path / "nope" / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    _usage_error(
        _run(replay, "--gemm-summary", "new/deeper/s.md"),
        f"$GITHUB_STEP_SUMMARY (where the summary is appended): no such folder: {step.parent} (none is created for it)",
    )
    assert not step.parent.exists() and not (replay.path / "new").exists()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(replay.path / "step.md"))
    result = _run(replay, "--gemm-summary", "new/deeper/s.md")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert (replay.path / "new/deeper/s.md").read_text() == (replay.path / "step.md").read_text() != ""


def test_merge_refuses_a_step_summary_in_a_folder_that_does_not_exist_before_writing(tmp_path):
    """merge --summary checks $GITHUB_STEP_SUMMARY by the same rule, before the merged run
    is written."""
    _write(tmp_path / "run.json", _saved_run())
    result = _cli(
        tmp_path,
        "merge",
        "run.json",
        "--out",
        "m.json",
        "--summary",
        "s.md",
        env={"GITHUB_STEP_SUMMARY": "nope/step.md"},
    )
    assert result.returncode == 2
    assert result.stderr == (
        "pytest-gemm: error: $GITHUB_STEP_SUMMARY (where the summary is appended): no such folder: nope (none is "
        "created for it)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


@pytest.fixture(scope="session")
def shard_report(pytestconfig, tmp_path_factory) -> Path:
    """Shard 1 of 2's report folder as pytest --gemm-report writes it (marked), holding the shard's run.json; drawn
    once for the run, and copied where a test wants it."""
    folder = made_once(
        pytestconfig, tmp_path_factory, "shard-report", lambda outer: _draw(outer / "report", _saved_run((1, 2)))
    )
    return folder / "report"


@pytest.mark.parametrize(
    ("report", "said"),
    [("s1", "--report s1: holds s1/run.json"), ("./s1/", "--report ./s1/: holds s1/run.json"), (".", "--report .:")],
)
def test_merge_report_refuses_a_folder_that_holds_one_of_its_runs(tmp_path, report, said, shard_report):
    """merge --report s1, where s1 holds shard 1's run.json, would put the merged page beside shard
    1's run: refused before anything is written (the folder being pytest-gemm's is no excuse)."""
    _copy(shard_report, tmp_path / "s1")
    _write(tmp_path / "s2" / "run.json", _saved_run((2, 2)))
    before = _contents(tmp_path / "s1")
    result = _cli(tmp_path, "merge", "s1/run.json", "s2/run.json", "--out", "m.json", "--report", report)
    assert result.returncode == 2, result
    assert result.stderr.startswith(f"pytest-gemm: error: {said}"), result.stderr
    assert result.stderr.endswith(
        ", one of the runs to merge; nothing written: name a folder of its own for the merged report\n"
    )
    assert _contents(tmp_path / "s1") == before and not (tmp_path / "m.json").exists()
    merged = _cli(tmp_path, "merge", "s1/run.json", "s2/run.json", "--out", "m.json", "--report", "merged")
    assert merged.returncode == 1, merged.stderr  # the failed case; a folder of its own is fine
    assert (tmp_path / "merged" / "index.html").is_file()


def test_plot_may_redraw_a_report_folder_from_its_own_run(tmp_path, shard_report):
    """The other way round: plotting a report's own run.json into its folder redraws the same run (kept)."""
    _copy(shard_report, tmp_path / "s1")
    run = (tmp_path / "s1" / "run.json").read_bytes()
    result = _cli(tmp_path, "plot", "s1/run.json", "--out", "s1")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s1" / "run.json").read_bytes() == run


@pytest.mark.parametrize("option", ["--co", "--help", "--fixtures"])
def test_a_run_that_runs_no_test_checks_the_report_folder_but_creates_nothing(replay, option, old_report):
    """--collect-only (and --help, --fixtures) with --gemm-report DIR create no folder
    and mark none (an earlier report stays unmarked), but a folder that would be refused still is; a run that runs
    tests creates and marks it."""
    old = old_report(replay.path / "old")
    before = _contents(old)
    for folder in ("rep", "old"):
        result = _run(replay, "--gemm-report", folder, option)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert not (replay.path / "rep").exists() and _contents(old) == before and not (old / MARKER).exists()
    _user_folder(replay.path / "mine")
    refused = _run(replay, "--gemm-report", "mine", option)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "mine holds files pytest-gemm did not write" in refused.stderr.str()
    _run(replay, "--gemm-report", "rep").assert_outcomes(passed=6)
    assert (replay.path / "rep" / MARKER).is_file()


def test_the_report_folder_is_shown_relative_to_the_rootdir(replay, monkeypatch):
    """Run from a folder below the rootdir, the report folder is shown relative to the rootdir, as
    every other path (the baseline folder's message, the test ids) is."""
    (replay.path / "sub").mkdir()
    _user_folder(replay.path / "sub" / "mine")
    (replay.path / "file.txt").write_text("x\n")
    monkeypatch.chdir(replay.path / "sub")
    args = ("--gemm-kernels", "../kernels/01_naive.cu", "-m", "gpu", "--benchmark-skip", "-p", "no:randomly")
    result = replay.runpytest(*args, "--gemm-report", "mine", "--gemm-baselines", "file.txt")
    _usage_error(result, "--gemm-baselines / gemm_baselines: file.txt is a file, not a folder")
    assert result.stderr.lines[1] == (  # the usage error's next line
        "--gemm-report / gemm_report: sub/mine holds files pytest-gemm did not write (index.html, notes.txt); name a "
        "new or empty folder, or pass --gemm-overwrite-report to write the report over them"
    )


class _FillDuringCollection:
    """A plugin for the inner run: once collection is done (after the start's check), put a user's file in a folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        _user_folder(self.folder)


def test_a_report_folder_filled_after_the_start_is_refused_before_the_first_test(replay):
    """The folder is claimed as tests are about to run, checked again then: one that became
    a user's since the start ends the run (exit 4) before any test, its files kept."""
    result = replay.runpytest(
        "--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--benchmark-skip", "-p", "no:randomly",
        "--gemm-report", "rep", plugins=[_FillDuringCollection(replay.path / "rep")],
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*Exit: --gemm-report / gemm_report: rep holds files pytest-gemm did not write*"])
    assert "passed" not in result.stdout.str() and not (replay.path / "rep" / MARKER).exists()
    assert (replay.path / "rep" / "index.html").read_text() == USER_PAGE


# -- outputs never replace a kernel file or a baseline file ------------------------------------------------
def _baseline_copy(folder: Path) -> Path:
    target = folder / "baselines" / "nvidia-h100-80gb-hbm3.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "baselines" / "nvidia-h100-80gb-hbm3.json", target)
    return target


@pytest.mark.parametrize("option", ["--gemm-summary", "--gemm-summary-step"], ids=["summary", "step-summary"])
@pytest.mark.parametrize("target", ["kernel", "baseline"])
def test_the_summary_never_replaces_a_kernel_file_or_a_baseline_file(replay, monkeypatch, option, target):
    """Beyond the table (found re-running it): --gemm-summary (or $GITHUB_STEP_SUMMARY) naming the kernel file under
    test, or a baseline file, replaced it with markdown and passed: now a usage error as the run starts, file kept."""
    path = replay.path / "kernels" / "01_naive.cu" if target == "kernel" else _baseline_copy(replay.path)
    before = path.read_bytes()
    shown = "kernels/01_naive.cu" if target == "kernel" else "baselines/nvidia-h100-80gb-hbm3.json"
    kind = "a kernel file" if target == "kernel" else "a baseline file"
    if option == "--gemm-summary":
        result, label = _run(replay, "--gemm-summary", shown), "--gemm-summary"
    else:
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
        result, label = _run(replay, "--gemm-summary", "summary.md"), "$GITHUB_STEP_SUMMARY"
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    error = result.stderr.str()
    assert label in error and f"is {kind}, which pytest-gemm never writes over" in error, error
    assert path.read_bytes() == before
    _no_traceback(result.stdout.str(), error)


@pytest.mark.parametrize("option", ["--out", "--summary"])
@pytest.mark.parametrize("target", ["kernel", "baseline"])
def test_merge_never_writes_over_a_kernel_file_or_a_baseline_file(tmp_path, option, target):
    """Beyond the table: `merge s1 s2 --out baselines/<gpu>.json` (or a kernel file) replaced it and exited 0; now
    refused with status 2 before anything is written."""
    for i in (1, 2):
        _write(tmp_path / f"s{i}" / "run.json", _saved_run((i, 2)))
    if target == "kernel":
        path = tmp_path / "kernels" / "01_naive.cu"
        path.parent.mkdir()
        shutil.copy(ROOT / "kernels" / "01_naive.cu", path)
    else:
        path = _baseline_copy(tmp_path)
    before = path.read_bytes()
    shown = str(path.relative_to(tmp_path))
    extra = ["--out", "m.json"] if option == "--summary" else []
    result = _cli(tmp_path, "merge", "s1/run.json", "s2/run.json", option, shown, *extra)
    assert result.returncode == 2, result
    kind = "a kernel file" if target == "kernel" else "a baseline file"
    assert f"{option}: {shown} is {kind}, which pytest-gemm never writes over; name another file" in result.stderr
    assert path.read_bytes() == before and not (tmp_path / "m.json").exists()
    _no_traceback(result.stderr)
