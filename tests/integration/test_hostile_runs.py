"""Saved runs and baseline files are untrusted input: hostile ones are refused, every read is bounded.

Each hostile file (a dtype or test id that leaves the project, an interval that does not hold its estimate, an
impossible count or time, a link to ``/dev/zero``, a FIFO, a file past the size limit, a folder) is answered by the
``pytest-gemm`` command or the plugin with one line naming the file, its key path and the rule, status 2 (the plugin:
a usage error), and nothing written: every file of the project keeps its bytes and mode. A file that a regression
would read for ever (a device, a FIFO, a file past the size limit) is given to the command in a process of its own,
with a time limit, so that the regression fails its test and does not hang the suite; the others in this process
(``support.cli``). A damaged baseline file is replaced only with ``--force``, keeping its mode, a copy kept aside.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support import TIMED, recorded_record, recording
from support.cli import cli as _cli

H100 = "NVIDIA H100 80GB HBM3"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
CLI = [sys.executable, "-m", "pytest_gemm.cli"]
LIMIT_S = 60
FIRST = "benchmarks[0].extra_info.gemm"


def _bounded(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own, with a time limit: for a file a regression would read for ever."""
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=LIMIT_S)


def _records(count: int) -> list:
    """``count`` timed cases with distinct keys: the recorded naive case at M = 1000, 1001, ..."""
    from pytest_gemm.records.shapes import Shape

    base = recorded_record(TIMED[0])  # kernels/01_naive.cu::sgemm_naive[fp32-512x512x512]
    base = dataclasses.replace(base, raw=None)  # its raw samples (--benchmark-save-data) are no hostile run's subject
    out = []
    for m in range(1000, 1000 + count):
        shape = Shape(m, 512, 512)
        out.append(dataclasses.replace(base, test=base.test.replace("512x512x512", shape.id), shape=shape, gpu=H100))
    return out


def _run(records: list) -> dict:
    """A saved run of these timed cases, as pytest-gemm writes it."""
    from pytest_gemm import __version__
    from pytest_gemm.runs.data import RunData, SessionEnd, Shards
    from pytest_gemm.runs.saved import run_json

    settings = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "timed": True, "baselines": "baselines"}
    data = RunData.of_timed(dict(recording()["facts"]), records, version=__version__, settings=settings, wall_s=9.0)
    data.shard, data.session = Shards((1,), 1), SessionEnd(0, len(records), len(records), len(records), 0)
    return json.loads(json.dumps(run_json(data)))


def _spoilt(**fields) -> dict:
    """A saved run of two cases whose first timing record has these fields."""
    run = _run(_records(2))
    run["benchmarks"][0]["extra_info"]["gemm"].update(fields)
    return run


def _save(path: Path, run: dict) -> str:
    path.write_text(json.dumps(run))  # NaN as NaN, as Python's json writes it
    return path.name


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder whose H100 baseline file (mode 0664) holds 3 entries, and a good saved run of 2 other cases."""
    from pytest_gemm import __version__
    from pytest_gemm.baselines.store import BaselineFile, entry_from_record, recorded_info, save

    records = _records(5)
    recorded = recorded_info(recording()["facts"], records, __version__)
    entries = {r.test: entry_from_record(r, recorded) for r in records[2:]}
    save(BaselineFile(tmp_path / H100_FILE, H100, entries))
    (tmp_path / H100_FILE).chmod(0o664)
    _save(tmp_path / "run.json", _run(records[:2]))
    return tmp_path


def _tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``, by path: its kind and mode, and a regular file's bytes (a large one's size and
    time instead, so a sparse file is never read), a link's target, a folder's mode. A baseline file's lock file
    (hidden, empty, made by any change of it: docs/baselines.md) is no data."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if name.startswith(".") and name.endswith(".json.lock"):
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[str(path.relative_to(root))] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):  # (its entries are in the tree)
                found[str(path.relative_to(root))] = (st.st_mode, "folder")
            elif stat.S_ISREG(st.st_mode) and st.st_size <= 1 << 20:
                found[str(path.relative_to(root))] = (st.st_mode, path.read_bytes())
            else:
                found[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def _refused(result: subprocess.CompletedProcess, message: str) -> None:
    """Status 2 and the one line ``pytest-gemm: error: <message>``, no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr == f"pytest-gemm: error: {message}\n"
    assert "Traceback" not in result.stdout


def _each_command(project: Path, run: str, message: str, bounded: bool = False) -> None:
    """``update --from``, ``compare``, ``plot`` and ``merge`` of the hostile run: each refused in the same words,
    nothing written or changed (``bounded``: each in a process of its own, with a time limit)."""
    before = _tree(project)
    for command in (
        ["update", "--from", run],
        ["compare", run],
        ["plot", run, "--out", "report"],
        ["merge", run, "--out", "merged.json", "--update-baselines"],
    ):
        _refused((_bounded if bounded else _cli)(project, *command), message)
        assert _tree(project) == before, command


# -- saved runs whose fields would name files outside the project ----------------------------------------------
def test_a_dtype_with_dot_dots_is_refused_before_any_picture_is_drawn(project):
    """A dtype of ``x/../../docs/images/mine`` (a chart is named after it)."""
    run = _save(project / "evil.json", _spoilt(dtype="x/../../docs/images/mine"))
    test = _records(1)[0].test
    message = (
        f"evil.json: {FIRST}.dtype must be one of fp32, tf32, fp16, bf16, fp64, fp8_e4m3, fp8_e5m2, int8, got "
        f"'x/../../docs/images/mine' (case {test})"
    )
    _each_command(project, run, message)


@pytest.mark.parametrize(
    "where", ["/tmp/w13/PWNED_abs.cu", "../../../../tmp/w13/PWNED_file.cu", "kernels/../../x.cu", "C:\\k.cu"]
)
def test_a_test_id_outside_the_project_is_never_recorded(project, where):
    """An absolute test id, one with ``..`` (``update --from`` recorded them as keys), a drive."""
    test = f"{where}::sgemm_naive[fp32-1000x512x512]"
    run = _save(project / "evil.json", _spoilt(test=test, file=where))
    message = (
        f"evil.json: {FIRST}.test must name a file inside the project (a relative path without '..'), got {test!r} "
        f"(case {test})"
    )
    _each_command(project, run, message)


def test_a_kernel_file_key_outside_the_project_is_refused(project):
    """A ``gemm.files`` key with ``..`` (merge reads and prunes kernel files by it)."""
    run = _run(_records(2))
    run["gemm"]["files"] = {"../outside.cu": {"sha256": "0" * 64, "whole": True}}
    name = _save(project / "evil.json", run)
    message = (
        'evil.json: gemm.files["../outside.cu"]: the key must name a file inside the project (a relative path '
        "without '..'), got '../outside.cu'"
    )
    _each_command(project, name, message)


# -- text that no terminal or file name can hold -----------------------------------------------------------------
UNPRINTABLE = [
    ("\ud800", "must be text UTF-8 can encode, got {test!r} (a lone surrogate at character 33)"),
    ("\x1b[2J", "must hold no control characters, got {test!r} ('\\x1b' at character 33)"),
]


@pytest.mark.parametrize(("inserted", "rule"), UNPRINTABLE, ids=["lone-surrogate", "terminal-escape"])
def test_a_test_id_no_terminal_can_print_is_refused_by_every_command(project, inserted, rule):
    """A test id holding a lone surrogate (``update --from`` wrote it into the baseline file, then crashed printing
    it, and ``show`` and ``compare`` crashed on that file ever after) or a terminal's escape sequence."""
    test = _records(1)[0].test.replace("[fp32", f"[{inserted}fp32")
    run = _save(project / "evil.json", _spoilt(test=test))
    _each_command(project, run, f"evil.json: {FIRST}.test {rule.format(test=test)} (case {test!r})")


def test_a_baseline_key_holding_a_lone_surrogate_is_refused_naming_the_entry(project):
    """A baseline file that holds such a key (as an update wrote it before it was refused): ``show`` and ``compare``
    name the entry, status 2, instead of crashing as they print it."""
    path = project / H100_FILE
    data = json.loads(path.read_text())
    key = sorted(data["entries"])[0].replace("[fp32", "[\ud800fp32")
    data["entries"][key] = next(iter(data["entries"].values()))
    path.write_text(json.dumps(data))
    before = _tree(project)
    message = (
        f"{H100_FILE}: entry {key!r}: its key must be text UTF-8 can encode, got {key!r} (a lone surrogate at "
        "character 33); fix or delete that entry, or restore the file from version control"
    )
    _refused(_cli(project, "show"), message)
    _refused(_cli(project, "compare", "run.json"), message)
    assert _tree(project) == before


LONG_NAME = "G" * 5000
SAID_LONG = f"'{'G' * 56}... (5000 characters)"


@pytest.mark.parametrize("where", ["record", "machine"])
def test_a_gpu_name_too_long_to_name_a_file_is_refused_by_every_command(project, where):
    """A GPU model named with 5000 characters, in the timing records or in the run's facts: ``update`` and ``merge
    --update-baselines`` crashed making its baseline file's lock file, a name too long for the file system."""
    run = _run(_records(2))
    if where == "record":
        for bench in run["benchmarks"]:
            bench["extra_info"]["gemm"]["gpu"] = LONG_NAME
        problem = f"{FIRST}.gpu must be at most 200 characters, got 5000: {SAID_LONG} (case {_records(1)[0].test})"
    else:
        run["machine_info"]["gpu"]["name"] = LONG_NAME
        problem = f"machine_info.gpu.name must be at most 200 characters, got 5000: {SAID_LONG}"
    name = _save(project / "evil.json", run)
    _each_command(project, name, f"evil.json: {problem}")


def test_a_baseline_file_whose_gpu_name_is_too_long_is_refused(project):
    path = project / H100_FILE
    data = json.loads(path.read_text())
    data["gpu"] = LONG_NAME
    path.write_text(json.dumps(data))
    _refused(
        _cli(project, "show"),
        f"{H100_FILE}: 'gpu' must be at most 200 characters, got 5000: {SAID_LONG}; fix it by hand, or restore it "
        "from version control",
    )


def test_a_baseline_folder_whose_name_is_too_long_is_an_error_not_a_traceback(project):
    """A baseline file whose path the file system refuses (a folder name of 300 characters): its lock file cannot be
    made, and the update says so, changing nothing."""
    folder = "b" * 300
    before = _tree(project)
    _refused(
        _cli(project, "update", "--from", "run.json", "--baselines", folder),
        f"{folder}/nvidia-h100-80gb-hbm3.json: cannot be read (File name too long); nothing changed; the run stays in "
        "run.json: run this again once that is fixed",
    )
    assert _tree(project) == before


# -- intervals, counts and times no timing makes ---------------------------------------------------------------
BAD_FIGURES = [
    ({"ratio_ci": [100, 200]}, "ratio_ci [100.0, 200.0] does not contain ratio {ratio!r}"),  # far from its ratio
    ({"ci_s": [1.0, 2.0]}, "ci_s [1.0, 2.0] does not contain median_s {median_s!r}"),
    ({"ci_s": [2e-3, 1e-3]}, "ci_s must be [low, high] with low <= high, got [0.002, 0.001]"),  # reversed
    ({"samples": -5}, "samples must be a whole number of at least 1, got -5"),  # a negative count
    ({"median_s": 1e308, "ci_s": [1.0, 1e308]}, "median_s must be at most 86400 s (a day), got 1e+308"),  # no timing's
    ({"ratio_ci": [math.nan, 2.0]}, "ratio_ci must be a list of two positive numbers, got [nan, 2.0]"),  # NaN
    ({"pct_cublas_ci": [1.0, 2.0]}, "pct_cublas_ci [1.0, 2.0] does not contain pct_cublas {pct_cublas!r}"),
]


@pytest.mark.parametrize(("fields", "problem"), BAD_FIGURES, ids=[str(f) for f, _ in BAD_FIGURES])
def test_a_figure_no_timing_makes_is_refused_naming_its_key_path(project, fields, problem):
    """An interval that does not hold its estimate or is reversed, a negative count, a time of 1e308, NaN: each
    refused by every command (``update --from`` recorded them, and a run twice as slow then passed the gate)."""
    record = _records(1)[0]
    run = _save(project / "evil.json", _spoilt(**fields))
    message = f"evil.json: {FIRST}.{problem.format(**dataclasses.asdict(record))} (case {record.test})"
    _each_command(project, run, message)


def _entry_spoilt(project: Path, **fields) -> str:
    path = project / H100_FILE
    data = json.loads(path.read_text())
    key = sorted(data["entries"])[0]
    data["entries"][key].update(fields)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return key


def test_a_baseline_entry_whose_interval_misses_its_ratio_is_refused_by_the_same_rule(project):
    """A baseline entry whose interval misses its ratio, by the rule of saved runs; ``update`` will not replace the
    file without ``--force``."""
    key = _entry_spoilt(project, ratio_ci=[100.0, 200.0])
    ratio = json.loads((project / H100_FILE).read_text())["entries"][key]["ratio"]
    problem = f"entry {key!r}: ratio_ci [100.0, 200.0] does not contain ratio {ratio!r}"
    before = _tree(project)
    _refused(
        _cli(project, "show"),
        f"{H100_FILE}: {problem}; fix or delete that entry, or restore the file from version control",
    )
    _refused(
        _cli(project, "update", "--from", "run.json"),
        f"{H100_FILE}: {problem}; nothing changed: fix it, restore it from version control, or pass --force to keep "
        "it aside as nvidia-h100-80gb-hbm3.unreadable-DATE.json and record the run in a new file",
    )
    assert _tree(project) == before


def test_a_baseline_key_outside_the_project_is_refused(project):
    path = project / H100_FILE
    data = json.loads(path.read_text())
    data["entries"]["/etc/passwd::x[fp32-1x1x1]"] = next(iter(data["entries"].values()))
    path.write_text(json.dumps(data))
    before = _tree(project)
    _refused(
        _cli(project, "show"),
        f"{H100_FILE}: entry '/etc/passwd::x[fp32-1x1x1]': its key must name a file inside the project (a relative "
        "path without '..'), got '/etc/passwd::x[fp32-1x1x1]'; fix or delete that entry, or restore the file from "
        "version control",
    )
    assert _tree(project) == before


# -- files that are not regular files, or too large ------------------------------------------------------------
def test_a_baseline_file_linked_to_dev_zero_is_refused_at_once(project):
    """``baselines/zero.json -> /dev/zero`` (every command and run read it until memory ran out)."""
    (project / "baselines" / "zero.json").symlink_to("/dev/zero")
    before = _tree(project)
    zero = "baselines/zero.json: is a symlink to /dev/zero, a character device, not a regular file"
    _refused(_bounded(project, "show"), zero)
    _refused(_bounded(project, "prune"), zero)
    _refused(_bounded(project, "show", "/dev/zero"), "/dev/zero: is a character device, not a regular file")
    _refused(
        _bounded(project, "compare", "run.json", "/dev/zero"), "/dev/zero: is a character device, not a regular file"
    )
    assert _tree(project) == before


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("command", [["update", "--from"], ["compare"], ["merge", "--out", "m.json"], ["plot"]])
def test_a_device_given_as_a_saved_run_is_refused_without_reading_it(project, device, command):
    before = _tree(project)
    extra = ["--out", "report"] if command == ["plot"] else []
    _refused(_bounded(project, *command, device, *extra), f"{device}: is a character device, not a regular file")
    assert _tree(project) == before


def test_a_fifo_baseline_file_never_hangs_a_command(project):
    """A FIFO ``baselines/fifo.json`` (``show`` and ``prune`` waited for a writer for ever)."""
    os.mkfifo(project / "baselines" / "fifo.json")
    before = _tree(project)
    fifo = "baselines/fifo.json: is a FIFO, not a regular file"
    _refused(_bounded(project, "show"), fifo)
    _refused(_bounded(project, "prune"), fifo)
    _refused(_bounded(project, "show", "baselines/fifo.json"), fifo)
    assert _tree(project) == before


def test_a_saved_run_past_the_size_limit_is_refused_without_reading_it(project):
    """A 1.2 GB saved run (sparse: it costs no disk) is refused by its size, before it is read."""
    huge = project / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(1_200_000_000)
    _each_command(project, "huge.json", "huge.json: is 1.2 GB; a saved run may be at most 1 GB", bounded=True)


def test_a_baseline_file_past_the_size_limit_is_refused_and_never_replaced(project):
    path = project / H100_FILE
    with open(path, "r+b") as handle:
        handle.truncate(300_000_000)
    before = _tree(project)
    too_large = f"{H100_FILE}: is 300 MB; a baseline file may be at most 256 MB"
    _refused(_bounded(project, "show"), too_large)
    update = _bounded(project, "update", "--from", "run.json", "--force")
    _refused(update, f"{too_large}; nothing changed; the run stays in run.json: run this again once that is fixed")
    assert _tree(project) == before


def test_a_saved_run_that_is_a_folder_is_refused(project):
    """A folder named like a saved run."""
    (project / "folder.json").mkdir()
    _each_command(project, "folder.json", "folder.json: is a folder, not a regular file")


# -- a damaged baseline file is replaced only with --force ----------------------------------------------------
def _truncate(path: Path) -> bytes:
    text = path.read_bytes()
    path.write_bytes(text[: len(text) // 2])
    return path.read_bytes()


def test_update_never_replaces_a_truncated_baseline_file_without_force(project):
    """A baseline file cut in half: ``update --from`` replaced it (status 0) and changed its mode."""
    _truncate(project / H100_FILE)
    before = _tree(project)
    result = _cli(project, "update", "--from", "run.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: not valid JSON (")
    assert result.stderr.endswith(
        "; nothing changed: fix it, restore it from version control, or pass --force to keep it aside as "
        "nvidia-h100-80gb-hbm3.unreadable-DATE.json and record the run in a new file\n"
    )
    merge = _cli(project, "merge", "run.json", "--out", "merged.json", "--update-baselines")
    assert merge.returncode == 2 and merge.stderr == result.stderr
    assert _tree(project) == before  # merged.json not written either


@pytest.mark.parametrize("command", [["update", "--from", "run.json"], ["merge", "run.json", "--out", "m.json"]])
def test_force_keeps_a_truncated_baseline_file_aside_and_its_mode(project, command):
    path = project / H100_FILE
    damaged = _truncate(path)
    merge = command[0] == "merge"
    result = _cli(project, *command, *(["--update-baselines"] * merge), "--force")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith(f"{H100_FILE}: 2 added"))
    assert lines[summary + 1].startswith("  note: the unreadable file was kept as nvidia-h100-80gb-hbm3.unreadable-")
    (kept,) = [p for p in (project / "baselines").iterdir() if ".unreadable-" in p.name]
    assert kept.read_bytes() == damaged and stat.S_IMODE(kept.stat().st_mode) == 0o664
    assert stat.S_IMODE(path.stat().st_mode) == 0o664  # the new file keeps the old one's mode
    assert len(json.loads(path.read_text())["entries"]) == 2
    assert _cli(project, "show").returncode == 0  # the kept copy is not read as a baseline file


def test_a_baseline_file_of_a_newer_format_is_never_replaced_even_with_force(project):
    """A file a newer pytest-gemm wrote (schema 2) was set aside and overwritten by ``--force``, losing what the
    newer version keeps: it is refused by every command, ``--force`` or not, and left as it is."""
    path = project / H100_FILE
    data = json.loads(path.read_text())
    data["schema"] = 2
    path.write_text(json.dumps(data))
    before = _tree(project)
    newer = (
        f"{H100_FILE}: schema version 2 is not one this pytest-gemm reads (1): a newer pytest-gemm wrote it; upgrade "
        "pytest-gemm to use or update it (this version never replaces it, not even with --force or "
        "--gemm-update-baselines)"
    )
    _refused(_cli(project, "show"), newer)
    _refused(_cli(project, "compare", "run.json"), newer)
    for command in (["update", "--from", "run.json"], ["merge", "run.json", "--out", "m.json", "--update-baselines"]):
        _refused(_cli(project, *command, "--force"), f"{newer}; nothing changed")
    assert _tree(project) == before


def test_a_gpu_model_with_no_case_to_record_keeps_its_damaged_file(project):
    """A run none of whose timed cases is recorded (here each a Python kernel's, its streams unchecked): ``update
    --force`` set its model's damaged baseline file aside and replaced it with an empty one. Now that file is neither
    read nor changed, and the command says nothing was recorded for that model."""
    damaged = _truncate(project / H100_FILE)
    records = [dataclasses.replace(r, unchecked_streams="CUPTI is not available") for r in _records(2)]
    _save(project / "unchecked.json", _run(records))
    before = _tree(project)
    why = "none of its 2 timed case(s) passed with times to believe"
    said = f"{H100_FILE}: unchanged: nothing recorded for {H100} ({why})"
    for command in (["update", "--from", "unchecked.json"], ["merge", "unchecked.json", "--out", "m.json"]):
        result = _cli(project, *command, *(["--update-baselines"] * (command[0] == "merge")), "--force")
        assert result.returncode == 0, result.stderr
        assert said in result.stdout.splitlines()
    (project / "m.json").unlink()
    assert _tree(project) == before and (project / H100_FILE).read_bytes() == damaged


def test_merge_force_needs_update_baselines_and_its_advice_names_merges_options(project):
    """``merge --force`` without ``--update-baselines`` was silently ignored, and a damaged file stopped a merge with
    advice naming other commands."""
    _truncate(project / H100_FILE)
    before = _tree(project)
    _refused(
        _cli(project, "merge", "run.json", "--out", "m.json", "--force"),
        "--force needs --update-baselines: it replaces a damaged baseline file as the runs are recorded",
    )
    result = _cli(project, "merge", "run.json", "--out", "m.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: not valid JSON (")
    assert result.stderr.endswith(
        "; nothing changed: fix it, restore it from version control, or pass --update-baselines --force to keep it "
        "aside as nvidia-h100-80gb-hbm3.unreadable-DATE.json and record the run in a new file\n"
    )
    assert _tree(project) == before


def test_merge_refuses_a_baseline_folder_the_runs_place_outside_the_project(project, tmp_path_factory):
    """A saved run's ``gemm.settings.baselines`` would say where merge writes: it must be under --root."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    run = _run(_records(2))
    run["gemm"]["settings"]["baselines"] = str(elsewhere)
    _save(project / "away.json", run)
    before = _tree(project)
    result = _cli(project, "merge", "away.json", "--out", "m.json", "--update-baselines")
    _refused(
        result,
        f"the runs saved their baseline folder as {str(elsewhere)!r}, which is not a folder under --root; nothing "
        "written: name the baseline folder with --baselines DIR",
    )
    assert _tree(project) == before and not list(elsewhere.iterdir())


# -- the plugin ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_a_run_stops_with_a_usage_error_on_a_baseline_that_is_no_regular_file(replay, kind):
    """``baselines/zero.json -> /dev/zero`` stopped every run with INTERNALERROR MemoryError; a FIFO
    hung it with no output. Both are a usage error naming the file (the run in a process with a time limit)."""
    folder = replay.path / "baselines"
    folder.mkdir()
    if kind == "zero":
        (folder / "zero.json").symlink_to("/dev/zero")
        said = "baselines/zero.json: is a symlink to /dev/zero, a character device, not a regular file"
    else:
        os.mkfifo(folder / "fifo.json")
        said = "baselines/fifo.json: is a FIFO, not a regular file"
    result = replay.runpytest_subprocess("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", timeout=LIMIT_S)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stderr.str() and "passed" not in result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: pytest-gemm: {said}"])


def test_text_no_encoding_can_print_is_shown_escaped_not_a_traceback(project):
    """An entry's recorded date holding a lone surrogate (JSON's ``\\ud800``) is not a key and is kept as data, but
    printing it raised UnicodeEncodeError: the command's output escapes it instead."""
    path = project / H100_FILE
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        entry["recorded"]["date"] = "2026\ud800"
    path.write_text(json.dumps(data))  # ensure_ascii: the surrogate travels as \ud800
    result = _cli(project, "show")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0 and "2026\\ud800" in result.stdout, (result.stdout, result.stderr)
