"""Compile items compiled ahead in threads: each item gets its own result or compile error, in any order."""

from __future__ import annotations

import threading

import pytest

from pytest_gemm.compiler.nvrtc import CompileError
from pytest_gemm.plugin import compile_ahead
from pytest_gemm.plugin.compile_ahead import CompileAhead, jobs_of, threads_for


def test_threads_leave_two_cores_and_stop_at_sixteen():
    assert threads_for(84, 16) == 14
    assert threads_for(84, 128) == 16
    assert threads_for(3, 128) == 3
    assert threads_for(84, 2) == 0  # CI's two cores: compiled one by one, as before
    assert threads_for(84, None) == 0


@pytest.fixture
def fake_compile(monkeypatch):
    """compile_kernel stand-in: records the thread of each compile; 'bad' fails as NVRTC would, 'broken' with
    another error, 'slow' waits for ``release``."""
    calls: list[tuple[str, str]] = []
    release = threading.Event()

    def compile_kernel(spec, variant, arch, cubins):
        calls.append((spec, threading.current_thread().name))
        if spec == "slow":
            release.wait(5)
            calls.append(("slow done", threading.current_thread().name))
        if spec == "bad":
            raise CompileError("bad.cu", arch, 'bad.cu(3): error: identifier "Q" is undefined')
        if spec == "broken":
            raise RuntimeError("an internal error")
        return f"{spec}@{arch}"

    monkeypatch.setattr(compile_ahead, "compile_kernel", compile_kernel)
    monkeypatch.setattr(compile_ahead, "load_nvrtc", lambda: True)
    return calls, release


def test_each_item_takes_its_own_result_or_error(fake_compile):
    calls, release = fake_compile
    ahead = CompileAhead(None)
    jobs = [("a", "slow", None, "sm_90"), ("b", "bad", None, "sm_90"), ("c", "good", None, "sm_80")]
    jobs.append(("e", "broken", None, "sm_90"))
    assert ahead.start(jobs, cores=8) == 4
    with pytest.raises(RuntimeError, match="an internal error"):  # any other error reaches its item as it was
        ahead.result("e", "broken", None, "sm_90")
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
    assert calls and all(spec.startswith("slow") for spec, _ in calls)  # none of the waiting ones ran
    started = [thread for spec, thread in calls if spec == "slow"]
    assert sorted(thread for spec, thread in calls if spec == "slow done") == sorted(started)  # and were waited for
    assert ahead.pending == 0


class _Item:
    def __init__(self, nodeid: str, skip: bool = False) -> None:
        self.nodeid, self.spec, self.variant, self.arch, self.skip = nodeid, "s", None, "sm_90", skip

    def get_closest_marker(self, name: str):
        return object() if name == "skip" and self.skip else None


def test_items_marked_skip_are_not_compiled_ahead():
    items = [_Item("a"), _Item("b", skip=True), "not a compile item", _Item("c")]
    assert [job[0] for job in jobs_of(items, _Item)] == ["a", "c"]


def test_nothing_starts_when_nvrtc_cannot_load(fake_compile, monkeypatch):
    calls, _ = fake_compile
    monkeypatch.setattr(compile_ahead, "load_nvrtc", lambda: False)
    ahead = CompileAhead(None)
    assert ahead.start([("a", "good", None, "sm_90"), ("b", "good", None, "sm_90")], cores=8) == 0
    assert ahead.result("a", "good", None, "sm_90") == "good@sm_90"  # compiled (or refused) where it is run
    assert calls == [("good", threading.current_thread().name)]
