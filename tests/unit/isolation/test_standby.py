"""Standby workers (isolation.workers; docs/architecture.md#the-boundary), through a real pool of real worker processes
with small backends written here: crashes in a row leave no process behind, an interrupt while a standby starts
starts no other worker, a case short of memory while standbys hold some runs again without them, a worker
started ahead beside its standby becomes the worker, and a case that imports a library runs on a standby that imported
it ahead."""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_gemm.isolation.workers import WorkerPool
from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import FailureKind

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="GPU workers need Linux (and /proc is read here)")

BACKENDS = '''
import os, sys, time
from pathlib import Path
from pytest_gemm.records.outcome import Failure, Outcome
from pytest_gemm.records.verdicts import FailureKind


class Crashing:
    """Every case leaves its worker unusable, as a sticky CUDA error does."""
    standby = True

    def __init__(self, cubin_cache=None, warmed=False):
        pass

    def facts(self):
        return {"name": "stand-in"}

    def run(self, request, notify):
        notify("load")
        lost = Failure(FailureKind.CUDA_ERROR, "cudaErrorIllegalAddress", "verify", replace_worker=True)
        return Outcome(failure=lost)


class SlowStandby(Crashing):
    """A standby takes 3 s to start; seed 1 crashes, other cases run."""

    def __init__(self, cubin_cache=None, warmed=False):
        time.sleep(3.0 if warmed else 0.0)

    def run(self, request, notify):
        notify("load")
        if request.seed == 1:
            return super().run(request, notify)
        return Outcome(skip=f"ran in {os.getpid()}")


class Announced(Crashing):
    """Says in a file when it starts (warmed or not), takes a second to start; seed 1 crashes, other cases run."""

    start_s = 1.0

    def __init__(self, cubin_cache=None, warmed=False):
        with open(os.environ["STARTS"], "a") as log:
            log.write(f"{os.getpid()} {'warmed' if warmed else 'cold'}\\n")
        time.sleep(self.start_s)

    def run(self, request, notify):
        if request.seed == 1:
            return super().run(request, notify)
        notify("load")
        return Outcome(skip=f"ran in {os.getpid()}")


class Importing(Announced):
    """Says whether the library it may be asked to import ahead is imported, and when it sets up before the import;
    its start is short (what it tests is the import's order, not a start's length)."""

    start_s = 0.2

    def run(self, request, notify):
        if request.seed == 1:
            return super().run(request, notify)
        notify("load")
        if request.seed == 3:  # a kernel file that imports the library itself
            import torch  # noqa: F401
        return Outcome(skip=f"ran in {os.getpid()} with{'' if 'torch' in sys.modules else 'out'} torch")

    def before_imports(self):
        with open(os.environ["IMPORTS"], "a") as log:
            log.write(f"{os.getpid()} before\\n")


class ShortOfMemory(Crashing):
    """Refused for want of memory while a standby is alive (a file says so), else run."""

    def __init__(self, cubin_cache=None, warmed=False):
        if warmed:
            Path(os.environ["STANDBY_ALIVE"]).write_text(str(os.getpid()))

    def run(self, request, notify):
        notify("load")
        with open(os.environ["ATTEMPTS"], "a") as log:
            log.write("attempt\\n")
        alive = Path(os.environ["STANDBY_ALIVE"])
        if alive.exists() and Path(f"/proc/{alive.read_text()}").exists():
            return Outcome(failure=Failure(FailureKind.TOO_BIG, "needs at least 2 GB", "verify"))
        return Outcome(skip="ran with the memory to itself")
'''


@pytest.fixture
def backends(tmp_path, monkeypatch):
    (tmp_path / "standby_backends.py").write_text(textwrap.dedent(BACKENDS))
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers import what this process can
    return tmp_path


def _request(seed: int = 0) -> Request:
    return Request("/x.py", "x.py", "k", (), "fp32", Shape(64, 64, 64), 1.0, 0.0, seed)


def _zombies() -> int:
    """This process's children that have exited and were never waited for."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            count += state == "Z" and int(parent) == os.getpid()
    return count


def test_crashes_in_a_row_with_nothing_timed_leave_no_worker_unreaped(backends):
    pool = WorkerPool("standby_backends:Crashing", None, timeout=30)
    try:
        assert pool.probe() is None
        for _ in range(12):
            failure = pool.run(_request()).failure
            assert failure is not None and failure.kind == FailureKind.CUDA_ERROR
        time.sleep(0.5)  # the last killed ones go
        pool.run(_request())
        assert _zombies() <= 2  # the last crash's worker, and at most one before it not yet gone
    finally:
        pool.close()
    assert _zombies() == 0


def test_an_interrupt_while_a_standby_starts_starts_no_other_worker(backends):
    pool = WorkerPool("standby_backends:SlowStandby", None, timeout=30)
    try:
        assert pool.probe() is None
        assert pool.run(_request(1)).failure is not None  # the crash: the next case takes the standby, still starting
        done: dict = {}
        case = threading.Thread(target=lambda: done.setdefault("outcome", pool.run(_request(2))))
        case.start()
        time.sleep(0.5)
        pool.interrupt(final=True)
        case.join(timeout=30)
        outcome = done["outcome"]
        assert outcome.skip is None and outcome.failure is not None  # it never ran
        assert outcome.failure.message == "the run is ending: no GPU worker is started"
    finally:
        pool.close()


def test_a_case_short_of_memory_beside_a_standby_runs_again_without_it(backends, tmp_path, monkeypatch):
    monkeypatch.setenv("STANDBY_ALIVE", str(tmp_path / "standby.pid"))
    monkeypatch.setenv("ATTEMPTS", str(tmp_path / "attempts.txt"))
    pool = WorkerPool("standby_backends:ShortOfMemory", None, timeout=30)
    try:
        assert pool.probe() is None
        pool.keep_standby()
        for _ in range(100):  # the standby has started
            if (tmp_path / "standby.pid").exists():
                break
            time.sleep(0.05)
        outcome = pool.run(_request())
        assert outcome.skip == "ran with the memory to itself"
        assert (tmp_path / "attempts.txt").read_text().count("attempt") == 2
    finally:
        pool.close()


def _starts(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_a_gpu_planned_after_the_first_hello_starts_its_worker_and_standby_at_once(backends, tmp_path, monkeypatch):
    monkeypatch.setenv("STARTS", str(tmp_path / "starts.txt"))
    pool = WorkerPool("standby_backends:Announced", None, timeout=30)
    try:
        pool.start_ahead()
        deadline = time.monotonic() + 20
        while len(_starts(tmp_path / "starts.txt")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = _starts(tmp_path / "starts.txt")
        assert [kind for _, kind in started] == ["warmed", "warmed"]  # both before any case, neither waiting
        pids = {pid for pid, _ in started}
        ran = {pool.run(_request(seed)).skip for seed in (0, 2, 3)}
        assert len(ran) == 1 and (worker := ran.pop()).removeprefix("ran in ") in pids  # one became the worker
        assert pool.standbys == 1  # a first worker still starting is no sign of crashes faster than a start
        assert pool.run(_request(1)).failure is not None  # a crash: the next case runs on the standby started ahead
        assert pool.run(_request(0)).skip == f"ran in {(pids - {worker.removeprefix('ran in ')}).pop()}"
    finally:
        pool.close()


#: a stand-in for the library a standby imports ahead (the real one is not needed to test who imports it when)
LIBRARY = "import os\nwith open(os.environ['IMPORTS'], 'a') as log:\n    log.write(f'{os.getpid()} {__name__}\\n')\n"


def _wait_for(check, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the workers did not get there in time"
        time.sleep(0.05)


@contextmanager
def _importing(tmp_path: Path, monkeypatch, text: str = LIBRARY, timeout: float = 30) -> Iterator[WorkerPool]:
    """A pool of :class:`Importing` workers whose standbys import the stand-in library ``text`` ahead, its first
    worker started (probed); closed after."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(text)
    for name in ("STARTS", "IMPORTS"):
        monkeypatch.setenv(name, str(tmp_path / f"{name.lower()}.txt"))
    pool = WorkerPool("standby_backends:Importing", None, timeout=timeout)
    pool.imports = ("torch",)
    try:
        assert pool.probe() is None
        yield pool
    finally:
        pool.close()


def _imported_ahead(tmp_path: Path) -> None:
    """Wait until the standby has set up and imported the library (the worker, started first, has not)."""
    _wait_for(lambda: len(_starts(tmp_path / "imports.txt")) == 2)


def test_a_case_that_imports_a_library_runs_on_a_standby_that_imported_it_and_the_worker_waits_in_its_place(
    backends, tmp_path, monkeypatch
):
    uses = dataclasses.replace(_request(), imports=("torch",))
    with _importing(tmp_path, monkeypatch) as pool:
        worker = pool.run(_request()).skip
        assert worker is not None and worker.endswith("without torch")
        _imported_ahead(tmp_path)
        [[standby, _]] = _starts(tmp_path / "starts.txt")[1:]
        assert _starts(tmp_path / "imports.txt") == [[standby, "before"], [standby, "torch"]]  # set up, then imported
        assert pool.run(_request(2)).skip == worker  # a case that needs nothing of it stays on the worker
        assert pool.run(uses).skip == f"ran in {standby} with torch"
        assert pool.run(_request()).skip == f"ran in {standby} with torch"
        time.sleep(0.5)
        assert len(_starts(tmp_path / "starts.txt")) == 2  # no worker started for it: none for a timing to wait for
        assert len(_starts(tmp_path / "imports.txt")) == 2  # the worker waits as a standby, as it is
        assert pool.run(_request(1)).failure is not None  # a crash: the next case runs on the worker in waiting
        assert pool.run(uses).skip == worker


def test_a_standby_that_cannot_import_the_library_is_not_waited_for(backends, tmp_path, monkeypatch):
    uses = dataclasses.replace(_request(), imports=("torch",))
    with _importing(tmp_path, monkeypatch, "raise ImportError('broken on purpose')\n") as pool:
        worker = pool.run(_request()).skip
        _wait_for(lambda: len(_starts(tmp_path / "imports.txt")) == 1)  # its set-up, before the import that fails
        time.sleep(0.5)
        assert pool.run(uses).skip == worker  # the standby has no torch: the worker keeps the case
        assert pool.run(_request(1)).failure is not None
        started = time.monotonic()
        assert pool.run(uses).skip not in (None, worker)  # the standby takes over at once
        assert time.monotonic() - started < 10


def test_a_fresh_worker_is_never_one_that_ran_cases(backends, tmp_path, monkeypatch):
    with _importing(tmp_path, monkeypatch) as pool:
        first = pool.run(_request()).skip
        _imported_ahead(tmp_path)
        second = pool.run(dataclasses.replace(_request(), imports=("torch",))).skip  # the first waits in its place
        again = pool.run(dataclasses.replace(_request(), fresh_worker=True)).skip
        assert again is not None and again.split()[2] not in {first.split()[2], second.split()[2]}


def test_the_first_worker_and_its_standby_start_side_by_side(backends, tmp_path, monkeypatch):
    monkeypatch.setenv("STARTS", str(tmp_path / "starts.txt"))
    pool = WorkerPool("standby_backends:Announced", None, timeout=30)
    try:
        pool.start_first()
        _wait_for(lambda: len(_starts(tmp_path / "starts.txt")) == 2)
        started = _starts(tmp_path / "starts.txt")
        assert [kind for _, kind in started] == ["cold", "cold"]  # before any case, each warming up in full
        assert pool.probe() is None
        worker = pool.run(_request()).skip
        pool.pin_to("0")  # the GPU it runs on, planned once it said hello: its standby started unpinned runs there
        pool.keep_standby()
        assert pool.run(_request(1)).failure is not None
        standby = pool.run(_request()).skip
        assert {worker, standby} == {f"ran in {pid}" for pid, _ in started}
    finally:
        pool.close()


def test_a_worker_that_imported_the_library_in_a_case_keeps_the_cases_that_use_it(backends, tmp_path, monkeypatch):
    with _importing(tmp_path, monkeypatch) as pool:
        worker = pool.run(_request()).skip
        _imported_ahead(tmp_path)
        assert pool.run(_request(3)).skip == worker.replace("without", "with")  # the worker imported it itself
        assert pool.run(dataclasses.replace(_request(), imports=("torch",))).skip == worker.replace("without", "with")


def test_what_a_standby_imports_ahead_is_not_charged_to_the_case_that_takes_it(backends, tmp_path, monkeypatch):
    slow = "import os, time\ntime.sleep(1.5)\n" + LIBRARY  # longer than the cases' time limit
    with _importing(tmp_path, monkeypatch, slow, timeout=1) as pool:
        assert pool.run(_request(1)).failure is not None  # a crash while the standby imports: the next case takes it
        outcome = pool.run(_request())
        assert outcome.failure is None and outcome.skip is not None and outcome.skip.endswith("with torch")


def test_a_standby_that_dies_as_it_imports_is_a_failed_start_not_the_case_s_fault(backends, tmp_path, monkeypatch):
    with _importing(tmp_path, monkeypatch, "import os\nos._exit(3)\n") as pool:
        assert pool.run(_request(1)).failure is not None  # a crash: the next case would take the standby
        outcome = pool.run(_request())
        assert outcome.failure is None and outcome.skip is not None and outcome.skip.startswith("ran in")
