"""Standby workers (isolation.workers; docs/architecture.md#the-boundary), through a real pool of real worker processes
with small backends written here: crashes in a row leave no process behind, an interrupt while a standby starts
starts no other worker, a case short of memory while standbys hold some runs again without them, and a worker
started ahead beside its standby becomes the worker."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pytest_gemm.isolation.workers import WorkerPool
from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import FailureKind

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="GPU workers need Linux (and /proc is read here)")

BACKENDS = '''
import os, time
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

    def __init__(self, cubin_cache=None, warmed=False):
        with open(os.environ["STARTS"], "a") as log:
            log.write(f"{os.getpid()} {'warmed' if warmed else 'cold'}\\n")
        time.sleep(1.0)

    def run(self, request, notify):
        if request.seed == 1:
            return super().run(request, notify)
        notify("load")
        return Outcome(skip=f"ran in {os.getpid()}")


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
