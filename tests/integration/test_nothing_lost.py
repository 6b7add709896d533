"""Data is never lost: baseline updates at once, file modes, and runs checked before recording.

Covers the concurrent updates, a NaN ratio, a negative median and the file modes of docs/bad-input.md. The saved
runs are built from the H100 recording through the public runs/ API (no GPU); the commands run as a user runs them:
in processes of their own where processes meet (updates at once, a lock held, a umask), else in this one
(``support.cli``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import KERNELS, ROOT, TESTS, TIMED, recorded_record, recording
from support.cli import cli

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
H100_FILE = "baselines/nvidia-h100-80gb-hbm3.json"
LOCK_FILE = "baselines/.nvidia-h100-80gb-hbm3.json.lock"
CLI = [sys.executable, "-m", "pytest_gemm.cli"]


def _cli(cwd: Path, *args: str, umask: int = -1, process: bool = False) -> subprocess.CompletedProcess:
    """The command in this process, or (``process``, or a ``umask`` of its own) in a process of its own."""
    if not process and umask == -1:
        return cli(cwd, *args)
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, umask=umask, timeout=120)


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "Error:" not in text.replace("pytest-gemm: error:", ""), text


@functools.lru_cache(maxsize=1)
def _naive_512():
    """kernels/01_naive.cu::sgemm_naive[fp32-512x512x512] as recorded, without its raw samples (what a run saves only
    with --benchmark-save-data: 78 KB a case, which every command here would read again)."""
    return dataclasses.replace(recorded_record(TIMED[0]), raw=None)


def _records(first: int, count: int, gpu: str = H100) -> list:
    """``count`` timed cases with distinct keys: the recorded naive case at M = first, first + 1, ..."""
    from pytest_gemm.records.shapes import Shape

    base, out = _naive_512(), []
    for m in range(first, first + count):
        shape = Shape(m, 512, 512)
        test = base.test.replace("512x512x512", shape.id)
        out.append(dataclasses.replace(base, test=test, shape=shape, gpu=gpu))
    return out


def _run(records: list) -> dict:
    """A saved run of these timed cases, as pytest-gemm writes it (every key merge reads)."""
    from pytest_gemm import __version__
    from pytest_gemm.runs.data import RunData, SessionEnd, Shards
    from pytest_gemm.runs.saved import run_json

    settings = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "timed": True, "baselines": "baselines"}
    data = RunData.of_timed(dict(recording()["facts"]), records, version=__version__, settings=settings, wall_s=9.0)
    models = sorted({r.gpu for r in records})
    if len(models) > 1:
        data.gpus = {m: {**data.gpu, "name": m} for m in models}
    data.shard, data.session = Shards((1,), 1), SessionEnd(0, len(records), len(records), len(records), 0)
    return json.loads(json.dumps(run_json(data)))


def _save(path: Path, run: dict) -> Path:
    path.write_text(json.dumps(run))  # a NaN is written as NaN, as Python's json does for a run
    return path


def _entries(path: Path) -> dict:
    return json.loads(path.read_text())["entries"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder whose H100 baseline file holds 600 entries."""
    from pytest_gemm import __version__
    from pytest_gemm.baselines.store import BaselineFile, entry_from_record, recorded_info, save

    records = _records(1000, 600)
    recorded = recorded_info(recording()["facts"], records, __version__)
    save(BaselineFile(tmp_path / H100_FILE, H100, {r.test: entry_from_record(r, recorded) for r in records}))
    return tmp_path


# -- updates at once -------------------------------------------------------------------------------
def test_eight_updates_at_once_onto_one_file_keep_every_entry(project):
    """Eight ``update --from`` at once, each adding 100 distinct cases to a 600-entry file: all 1400 kept."""
    runs = [_save(project / f"run{i}.json", _run(_records(2000 + 1000 * i, 100))) for i in range(8)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen([*CLI, "update", "--from", run.name], cwd=project, **pipes) for run in runs]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0 and err == "", err
        assert f"{H100_FILE}: 100 added, 0 changed, 0 removed" in out
    entries = _entries(project / H100_FILE)
    expected = {
        r.test for first in [1000, *range(2000, 10000, 1000)] for r in _records(first, 600 if first == 1000 else 100)
    }
    assert len(entries) == 1400 and set(entries) == expected
    # the lock file stays hidden: never listed, shown or pruned as a baseline file
    assert (project / LOCK_FILE).exists()
    show = _cli(project, "show")
    assert show.returncode == 0 and show.stdout.splitlines()[0] == f"{H100_FILE}: {H100}, 1400 entries"
    assert ".lock" not in show.stdout


#: a ``pytest-gemm`` process whose update stops for good just before its file replaces the baseline file
_STUCK = """
import os, sys, time
def stuck(src, dst):
    print("holding", flush=True)
    time.sleep(600)
os.replace = stuck
from pytest_gemm.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _stuck_update(project: Path, run: str) -> subprocess.Popen:
    """An update of ``run`` that holds the baseline file's lock (its new text written, not yet in place)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK, "update", "--from", run], cwd=project, stdout=subprocess.PIPE, text=True
    )
    from filelock import FileLock, Timeout

    try:
        assert proc.stdout.readline() == "holding\n"
        with pytest.raises(Timeout):  # it does hold the lock, under the hidden name beside the file
            FileLock(project / LOCK_FILE, timeout=0).acquire()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc


def test_an_update_killed_while_holding_the_lock_loses_nothing_and_leaves_no_stale_lock(project):
    """A process killed while holding the lock: the next update goes ahead at once."""
    before = (project / H100_FILE).read_bytes()
    _save(project / "killed.json", _run(_records(5000, 50)))
    _save(project / "next.json", _run(_records(6000, 50)))
    proc = _stuck_update(project, "killed.json")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    proc.stdout.close()
    assert (project / H100_FILE).read_bytes() == before  # killed before its write: the file is whole, unchanged
    start = time.monotonic()
    result = _cli(project, "update", "--from", "next.json")
    assert time.monotonic() - start < 20  # no waiting for a stale lock (the limit is far longer)
    assert result.returncode == 0 and f"{H100_FILE}: 50 added, 0 changed, 0 removed" in result.stdout
    entries = _entries(project / H100_FILE)
    assert len(entries) == 650 and {r.test for r in _records(6000, 50)} <= set(entries)
    # what the killed process left beside the file (its lock file, a half-done temporary file) is never a baseline
    show = _cli(project, "show")
    assert show.returncode == 0 and show.stdout.splitlines()[0] == f"{H100_FILE}: {H100}, 650 entries"
    assert [p.name for p in (project / "baselines").glob("*.json")] == ["nvidia-h100-80gb-hbm3.json"]


def test_a_lock_held_too_long_is_a_clear_error_naming_the_lock_file(project, monkeypatch, capsys):
    """An update that cannot get the lock in time changes nothing and says which lock file it waited for."""
    from pytest_gemm.baselines import update
    from pytest_gemm.cli import main

    before = (project / H100_FILE).read_bytes()
    _save(project / "mine.json", _run(_records(5000, 5)))
    _save(project / "theirs.json", _run(_records(6000, 5)))
    proc = _stuck_update(project, "theirs.json")
    try:
        monkeypatch.chdir(project)
        monkeypatch.setattr(update, "LOCK_TIMEOUT_S", 0.5)
        assert main(["update", "--from", "mine.json"]) == 2
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-gemm: error: {H100_FILE}: is being changed by another process, which has held ")
    assert f"its lock file {LOCK_FILE} for over 0.5 s" in err
    assert err.rstrip().endswith("; nothing changed; the run stays in mine.json: run this again once that is fixed")
    assert (project / H100_FILE).read_bytes() == before


@pytest.fixture
def locked_out(project):
    """The baseline file's lock file made unopenable: read-only, or for root (whom that does not stop) immutable."""
    lock = project / LOCK_FILE
    lock.touch()
    lock.chmod(0o444)
    undo = [lambda: lock.chmod(0o644)]
    if os.geteuid() == 0:
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(lock)], capture_output=True).returncode:
            pytest.skip("nothing here stops root opening a file (no chattr +i)")
        undo.append(lambda: subprocess.run(["chattr", "-i", str(lock)], check=True))
    yield "Operation not permitted" if os.geteuid() == 0 else "Permission denied"
    for step in reversed(undo):
        step()


def test_a_lock_file_that_cannot_be_opened_is_a_clear_error_and_changes_nothing(project, locked_out):
    """A lock that cannot be taken is the file's access error naming the lock file, never a traceback."""
    before = (project / H100_FILE).read_bytes()
    _save(project / "mine.json", _run(_records(5000, 5)))
    result = _cli(project, "update", "--from", "mine.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"pytest-gemm: error: {H100_FILE}: cannot be locked: its lock file {LOCK_FILE} cannot be opened "
        f"({locked_out}); nothing changed; the run stays in mine.json: run this again once that is fixed\n"
    )
    assert (project / H100_FILE).read_bytes() == before


def test_prune_keeps_what_another_process_recorded_while_it_looked(project, monkeypatch, capsys):
    """Prune's write: entries recorded between prune's reading and its writing are kept, the gone removed."""
    from pytest_gemm.baselines import update
    from pytest_gemm.cli import main

    kernels = project / "kernels"
    kernels.mkdir()
    (kernels / "01_naive.cu").write_text((KERNELS / "01_naive.cu").read_text())
    path = project / H100_FILE
    data = json.loads(path.read_text())
    for key in sorted(data["entries"])[:200]:  # 200 entries of a kernel file that is gone
        entry = data["entries"].pop(key)
        data["entries"][key.replace("01_naive.cu", "gone.cu")] = {**entry, "file": "kernels/gone.cu"}
    path.write_text(json.dumps(data))
    _save(project / "meanwhile.json", _run(_records(7000, 10)))
    seen = []
    real = update.KernelCases.gone_reason

    def looking(self, key, entry):
        if not seen:  # another process records while prune reads the kernel files
            seen.append(_cli(project, "update", "--from", "meanwhile.json", process=True))
        return real(self, key, entry)

    monkeypatch.setattr(update.KernelCases, "gone_reason", looking)
    monkeypatch.chdir(project)
    assert main(["prune"]) == 0
    assert seen[0].returncode == 0, seen[0].stderr
    assert f"{H100_FILE}: 200 of 600 entries stale" in capsys.readouterr().out
    entries = _entries(path)
    assert len(entries) == 410 and not any("gone.cu" in key for key in entries)
    assert {r.test for r in _records(7000, 10)} <= set(entries)


def _many_variants(project: Path) -> Path:
    """kernels/01_naive.cu, edited to declare six params of 100 values each: 10^12 variants."""
    many = "params = { " + ", ".join(f"P{i} = [{', '.join(map(str, range(100)))}]" for i in range(6)) + " }\n"
    source = (KERNELS / "01_naive.cu").read_text()
    (project / "kernels").mkdir()
    path = project / "kernels" / "01_naive.cu"
    path.write_text(source.replace('dtypes = ["fp32"]\n', 'dtypes = ["fp32"]\n' + many, 1))
    return path


def test_prune_of_a_kernel_edited_to_declare_very_many_variants_is_quick(project):
    """Prune: each entry's case was looked for among every variant x dtype x alpha/beta case of
    its kernel, without --gemm-max-variants, so a kernel file edited to declare 10^12 variants hung prune while it
    held the baseline file's lock; each entry's case is now found from its key. The entries of a declared variant
    are kept, the others (the 600 recorded without params, one of a value no longer declared) removed."""
    from pytest_gemm import __version__
    from pytest_gemm.baselines.store import entry_from_record, recorded_info

    _many_variants(project)
    kept = []
    for values in ([0, 1, 2, 3, 4, 5], [99, 0, 99, 0, 99, 0], [7, 7, 7, 7, 7, 100]):  # the last: P5 = 100 is gone
        variant = "-".join(f"P{i}{v}" for i, v in enumerate(values))
        base = _records(1000, 1)[0]
        kept.append(
            dataclasses.replace(
                base, test=base.test.replace("[", f"[{variant}-"), kernel=f"sgemm_naive[{variant}]", variant=variant
            )
        )
    path = project / H100_FILE
    data = json.loads(path.read_text())
    recorded = recorded_info(recording()["facts"], kept, __version__)
    data["entries"].update({r.test: entry_from_record(r, recorded) for r in kept})
    path.write_text(json.dumps(data))
    start = time.monotonic()
    result = _cli(project, "prune", process=True)  # a regression here took for ever: a time limit
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 30
    assert f"{H100_FILE}: 601 of 603 entries stale" in result.stdout
    assert sorted(_entries(path)) == sorted(r.test for r in kept[:2])


def test_an_entrys_case_is_found_as_expanding_every_case_finds_it():
    """Prune: finding an entry's case from its key gives what looking among every expanded case
    gave, for every kernel of the repository (params, dtypes, alpha/beta, `requires` rules, shapes past the int
    arguments), and a dtype a kernel does not declare is gone."""
    from pytest_gemm.baselines.update import KernelCases
    from pytest_gemm.records.shapes import Shape
    from pytest_gemm.specs.cases import expand
    from pytest_gemm.specs.files import load_specs

    shapes = [Shape(64, 64, 64), Shape(100, 30, 6), Shape(3_000_000_000, 1, 1)]
    cases, checked = KernelCases(ROOT), 0
    for path in sorted((ROOT / "kernels").glob("*.cu")):
        file = f"kernels/{path.name}"
        for spec in load_specs(path, file):
            for case in expand(spec, shapes):
                entry = {"file": file, "kernel": spec.label(case.variant), "dtype": case.dtype, "shape": case.shape.id}
                key = f"{file}::{case.name}"
                assert (cases.gone_reason(key, entry) is None) == (case.skip_reason is None), key
                undeclared = {**entry, "dtype": "fp64"} if "fp64" not in spec.dtypes else None
                if undeclared is not None:
                    assert cases.gone_reason(key.replace(case.dtype, "fp64"), undeclared), key
                checked += 1
    assert checked > 400


# -- the file-mode row -----------------------------------------------------------------------------
def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o664])
def test_an_update_keeps_the_baseline_files_mode(project, mode):
    """File-mode row: ``update`` replaces the file atomically and keeps its mode (it made it 0600)."""
    (project / H100_FILE).chmod(mode)
    _save(project / "more.json", _run(_records(5000, 3)))
    assert _cli(project, "update", "--from", "more.json", umask=0o077).returncode == 0
    assert len(_entries(project / H100_FILE)) == 603 and _mode(project / H100_FILE) == mode


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_baseline_file_gets_the_mode_the_umask_gives(tmp_path, umask, mode):
    """File-mode row: a new baseline file gets what a plain open() would give it (0o666 less the umask)."""
    _save(tmp_path / "run.json", _run(_records(1000, 3)))
    assert _cli(tmp_path, "update", "--from", "run.json", umask=umask).returncode == 0
    assert _mode(tmp_path / H100_FILE) == mode


def test_merge_update_baselines_keeps_the_mode(project):
    """File-mode row: ``merge --update-baselines`` writes through the same path and keeps the mode."""
    (project / H100_FILE).chmod(0o644)
    _save(project / "shard.json", _run(_records(5000, 3)))
    result = _cli(project, "merge", "shard.json", "--out", "merged.json", "--update-baselines", umask=0o077)
    assert result.returncode == 0, result.stderr
    assert len(_entries(project / H100_FILE)) == 603 and _mode(project / H100_FILE) == 0o644


def test_the_plugins_update_keeps_the_mode(replay, monkeypatch):
    """File-mode row: ``--gemm-update-baselines`` keeps an existing baseline file's mode."""
    first = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-update-baselines")
    first.assert_outcomes(passed=6)
    path = replay.path / H100_FILE
    assert _mode(path) == 0o666 & ~_umask()
    path.chmod(0o640)
    monkeypatch.setenv("REPLAY_SCALE", "1.2")  # slower: every entry changes
    again = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-update-baselines")
    again.assert_outcomes(passed=6)
    again.stdout.fnmatch_lines([f"{H100_FILE}: 0 added, 6 changed, 0 removed"])
    assert _mode(path) == 0o640


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


@pytest.fixture
def umask():
    """Sets this process's umask for a test, and restores it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_compile_cache_entries_get_the_umasks_mode_and_keep_their_own(tmp_path, umask, mask, mode):
    """File-mode row: the compile cache's two files per entry, new and written again."""
    from pytest_gemm.compiler.cache import CubinCache

    umask(mask)
    cache = CubinCache(tmp_path / "cubins")
    cache.put("k", "lowered", "log", b"cubin")
    files = [tmp_path / "cubins" / "k.cubin", tmp_path / "cubins" / "k.json"]
    assert [_mode(f) for f in files] == [mode, mode]
    for f in files:
        f.chmod(0o640)
    cache.put("k", "lowered", "log", b"cubin2")
    assert [_mode(f) for f in files] == [0o640, 0o640]
    assert cache.get("k") == ("lowered", "log", b"cubin2")
    assert sorted(p.name for p in (tmp_path / "cubins").iterdir()) == ["k.cubin", "k.json"]  # no temporary left


# -- the whole run checked before anything is recorded -----------------------------------------------
def _spoilt(records: list, index: int, field: str, value: float) -> dict:
    run = _run(records)
    run["benchmarks"][index]["extra_info"]["gemm"][field] = value
    return run


BAD = [
    ("median_s", -1.0),
    ("median_s", 0.0),
    ("median_s", math.nan),
    ("median_s", math.inf),
    ("ratio", math.nan),
    ("ratio", -1.0),
    ("ratio", 0.0),
    ("ratio", math.inf),
    ("ratio_ci", [0.0, 1.0]),
    ("ci_s", [-1.0, 1.0]),
    ("cublas_ci_s", [1.0, math.inf]),
    ("tflops", -1.0),
    ("tflops", math.nan),
]


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v}" for f, v in BAD])
def test_update_from_a_run_with_an_impossible_number_records_nothing(project, field, value):
    """A negative, zero, NaN or infinite median, ratio or interval bound, or a negative or NaN
    TFLOP/s: exit 2 naming the run, the case and the field; nothing recorded, the other (valid) cases of the run
    neither."""
    records = _records(5000, 5)
    _save(project / "bad.json", _spoilt(records, 2, field, value))
    before = (project / H100_FILE).read_bytes()
    result = _cli(project, "update", "--from", "bad.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("pytest-gemm: error: bad.json: ")
    assert records[2].test in result.stderr and f"{field}" in result.stderr
    assert sum(r.test in result.stderr for r in records) == 1  # the one case, not the good ones
    _no_traceback(result.stderr)
    assert (project / H100_FILE).read_bytes() == before


def test_a_run_whose_bad_case_is_on_another_gpu_records_nothing_on_either(project):
    """Every GPU's cases are checked before any file is written: all of the run, or none of it."""
    good, bad = _records(5000, 3), _records(6000, 2, gpu=A100)
    run = _run([*good, *bad])
    last = max(i for i, b in enumerate(run["benchmarks"]) if b["extra_info"]["gemm"]["gpu"] == A100)
    run["benchmarks"][last]["extra_info"]["gemm"]["median_s"] = 0.0
    _save(project / "two.json", run)
    before = (project / H100_FILE).read_bytes()
    result = _cli(project, "update", "--from", "two.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"pytest-gemm: error: two.json: benchmarks[{last}].extra_info.gemm.median_s must be a positive number, got "
        f"0.0 (case {bad[1].test})\n"
    )
    assert (project / H100_FILE).read_bytes() == before
    assert sorted(p.name for p in (project / "baselines").iterdir() if not p.name.startswith(".")) == [
        "nvidia-h100-80gb-hbm3.json"
    ]


def test_merge_update_baselines_from_a_run_with_a_zero_median_records_nothing(project):
    """``merge --update-baselines`` checks the merged run the same way (exit 2, baselines unchanged)."""
    records = _records(5000, 3)
    _save(project / "shard.json", _spoilt(records, 1, "median_s", 0.0))
    before = (project / H100_FILE).read_bytes()
    result = _cli(project, "merge", "shard.json", "--out", "merged.json", "--update-baselines")
    assert result.returncode == 2
    assert (
        f"shard.json: benchmarks[1].extra_info.gemm.median_s must be a positive number, got 0.0 (case "
        f"{records[1].test})" in result.stderr
    )
    assert not (project / "merged.json").exists()
    _no_traceback(result.stderr)
    assert (project / H100_FILE).read_bytes() == before


def test_the_plugins_update_checks_every_gpus_cases_before_writing(tmp_path):
    """``--gemm-update-baselines`` (the end of the run's update) records none of a run with a bad case."""
    from pytest_gemm.plugin.gating import write_baselines
    from pytest_gemm.settings import GateSettings

    bad = _records(6000, 2, gpu=A100)
    records = [*_records(5000, 3), bad[0], dataclasses.replace(bad[1], ratio=math.nan)]
    settings = GateSettings(tmp_path / "baselines", update=True)
    recorded = write_baselines(settings, records, {H100: dict(recording()["facts"])}, {}, tmp_path)
    assert not (tmp_path / "baselines").exists() and not recorded.written
    (error,) = recorded.errors
    assert error.startswith("1 timed case(s) cannot be recorded as baselines: ")
    assert f"{bad[1].test}: ratio must be a positive number, got nan" in error and error.endswith("nothing written")


@pytest.mark.parametrize("command", [["compare", "bad.json"], ["plot", "bad.json", "--out", "report"]])
def test_compare_and_plot_refuse_a_run_with_a_negative_median_naming_the_case(project, command):
    """Reading a saved run refuses a negative time, naming its key path and case, as for any wrong value."""
    records = _records(1000, 3)
    _save(project / "bad.json", _spoilt(records, 1, "median_s", -1.0))
    result = _cli(project, *command)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "pytest-gemm: error: bad.json: benchmarks[1].extra_info.gemm.median_s must be a positive number, got -1.0 "
        f"(case {records[1].test})\n"
    )
    assert not (project / "report").exists()


ONE_RULE = [
    ("median_s", 0.0, "median_s must be a positive number, got 0.0"),
    ("ratio", math.inf, "ratio must be a positive number, got inf"),
    ("ratio_ci", [0.0, 1.1], "ratio_ci must be a list of two positive numbers, got [0.0, 1.1]"),
    ("ci_s", [-0.001, 0.001], "ci_s must be a list of two positive numbers, got [-0.001, 0.001]"),
    ("tflops", -1.0, "tflops must be a finite number of at least 0, got -1.0"),
]


@pytest.mark.parametrize(("field", "value", "problem"), ONE_RULE, ids=[f"{f}={v}" for f, v, _ in ONE_RULE])
def test_a_saved_run_and_a_baseline_file_are_read_by_one_rule(project, field, value, problem):
    """A time, a ratio and each bound of their intervals finite and above 0,
    TFLOP/s finite and at least 0, in a saved run as in a baseline file (a saved run took a time of 0, a baseline
    file a negative interval bound); each refusal names the file, the case and the field, in the same words."""
    records = _records(1000, 2)
    _save(project / "bad.json", _spoilt(records, 1, field, value))
    run = _cli(project, "compare", "bad.json")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (
        f"pytest-gemm: error: bad.json: benchmarks[1].extra_info.gemm.{problem} (case {records[1].test})\n"
    )
    path = project / H100_FILE
    data = json.loads(path.read_text())
    key = sorted(data["entries"])[0]
    data["entries"][key][field] = value
    path.write_text(json.dumps(data))
    shown = _cli(project, "show")
    assert shown.returncode == 2
    assert shown.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: entry {key!r}: {problem}")
    _no_traceback(run.stderr, shown.stderr)


def test_a_baseline_file_holding_nan_is_refused_naming_the_entry(project):
    """A NaN in a baseline file (Python's json reads it) is refused when read, never written again."""
    path = project / H100_FILE
    data = json.loads(path.read_text())
    key = sorted(data["entries"])[0]
    data["entries"][key]["ratio"] = math.nan
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    result = _cli(project, "show")
    assert result.returncode == 2
    assert result.stderr.startswith(f"pytest-gemm: error: {H100_FILE}: entry {key!r}: ratio must be a positive number")
    _no_traceback(result.stderr)
    assert path.read_bytes() == before


def test_a_baseline_folder_where_no_lock_file_can_be_made_is_refused_at_once(tmp_path):
    """`update --baselines /proc` (a folder where no file can be created) is refused at once as a folder
    that cannot be written, not after waiting a minute for a lock nobody holds."""
    shutil.copy(TESTS / "data" / "h100_run.json", tmp_path / "run.json")
    start = time.monotonic()
    result = _cli(tmp_path, "update", "--from", "run.json", "--baselines", "/proc")
    assert result.returncode == 2, result
    assert "/proc/nvidia-h100-80gb-hbm3.json: cannot be written in /proc/ (" in result.stderr
    assert "nothing changed" in result.stderr and "another process" not in result.stderr
    assert time.monotonic() - start < 30  # the lock's wait is 60 s: reaching it would mean it was waited for
