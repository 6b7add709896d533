"""Compile items compiled ahead in threads: each item gets its own result or compile error, in any order."""

from __future__ import annotations

import threading

import pytest

from pytest_gemm.compiler.nvrtc import CompileError
from pytest_gemm.plugin import compile_ahead
from pytest_gemm.plugin.compile_ahead import CompileAhead, threads_for


def test_threads_leave_two_cores_and_stop_at_sixteen():
    assert threads_for(84, 16) == 14
    assert threads_for(84, 128) == 16
    assert threads_for(3, 128) == 3
    assert threads_for(84, 2) == 0  # CI's two cores: compiled one by one, as before
    assert threads_for(84, None) == 0


@pytest.fixture
def fake_compile(monkeypatch):
    """compile_kernel stand-in: records the thread of each compile; 'bad' fails as NVRTC would."""
    calls: list[tuple[str, str]] = []
    release = threading.Event()

    def compile_kernel(spec, variant, arch, cubins):
        calls.append((spec, threading.current_thread().name))
        if spec == "slow":
            release.wait(5)
        if spec == "bad":
            raise CompileError("bad.cu", arch, 'bad.cu(3): error: identifier "Q" is undefined')
        return f"{spec}@{arch}"

    monkeypatch.setattr(compile_ahead, "compile_kernel", compile_kernel)
    return calls, release


def test_each_item_takes_its_own_result_or_error(fake_compile):
    calls, release = fake_compile
    ahead = CompileAhead(None)
    jobs = [("a", "slow", None, "sm_90"), ("b", "bad", None, "sm_90"), ("c", "good", None, "sm_80")]
    assert ahead.start(jobs, cores=8) == 3
    assert ahead.result("c", "good", None, "sm_80") == "good@sm_80"  # ready before the slow one ahead of it
    with pytest.raises(CompileError, match='identifier "Q" is undefined'):
        ahead.result("b", "bad", None, "sm_90")
    release.set()
    assert ahead.result("a", "slow", None, "sm_90") == "slow@sm_90"
    assert all(thread.startswith("gemm-compile") for _, thread in calls)
    # an item that was not started ahead compiles where it is asked for, as without this
    assert ahead.result("d", "other", None, "sm_90") == "other@sm_90"
    assert calls[-1] == ("other", threading.current_thread().name)
    assert ahead.pending == 0
    ahead.close()


def test_too_few_cores_or_jobs_start_nothing(fake_compile):
    calls, _ = fake_compile
    assert CompileAhead(None).start([("a", "good", None, "sm_90"), ("b", "good", None, "sm_90")], cores=2) == 0
    assert CompileAhead(None).start([("a", "good", None, "sm_90")], cores=16) == 0
    assert calls == []


def test_close_drops_the_compiles_no_item_asked_for(fake_compile):
    calls, release = fake_compile
    ahead = CompileAhead(None)
    waiting = [(f"n{i}", "good", None, "sm_90") for i in range(50)]
    assert ahead.start([("a", "slow", None, "sm_90"), ("b", "slow", None, "sm_90"), *waiting], cores=4) == 2
    threading.Timer(0.2, release.set).start()  # the two running compiles end only after close() has begun
    ahead.close()  # -x stopped the run: what had not started is cancelled, what runs is waited for
    assert calls and all(spec == "slow" for spec, _ in calls)
    assert ahead.pending == 0
