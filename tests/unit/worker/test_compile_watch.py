"""A case's time limit is for the kernel: the worker reports progress while CuPy compiles its own kernels, and while
Triton or torch compiles a Python kernel's."""

from __future__ import annotations

import importlib.util
import threading
import time

from pytest_gemm.worker.compile_watch import CUPY_COMPILER, CompileWatch

from support import TESTS

FAKE = TESTS / "data" / "fake_cupy" / CUPY_COMPILER
FAKE_TRITON = TESTS / "data" / "fake_triton" / "triton" / "compiler" / "compiler.py"


def _fake_compiler(path=FAKE):
    spec = importlib.util.spec_from_file_location(f"fake_compiler_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _locked(watch):
    enter = watch.enter

    def locked(phase):
        with watch.lock:
            enter(phase)

    return locked


def _watch(**kw):
    calls: list[tuple[float, str]] = []
    watch = CompileWatch(lambda phase: calls.append((time.monotonic(), phase)), interval=0.05,
                         thread_id=threading.get_ident(), **kw)  # fmt: skip
    watch.enter = _locked(watch)
    return watch.start(), calls


def test_progress_is_reported_while_cupy_compiles_and_not_otherwise():
    compiler = _fake_compiler()
    watch, calls = _watch()
    try:
        watch.enter("verify")
        time.sleep(0.4)  # a kernel running, or hanging: no progress
        quiet = len(calls)
        compiler.compile(0.5)
        compiling = len(calls) - quiet
        time.sleep(0.3)
        after = len(calls) - quiet - compiling
    finally:
        watch.stop()
    assert quiet == 0 and after <= 1  # at most the tick that saw the compile's last moment
    assert compiling >= 4 and {phase for _, phase in calls} == {"verify"}


def test_no_progress_between_cases_and_a_compile_that_never_ends_is_still_stopped():
    compiler = _fake_compiler()
    watch, calls = _watch(cap=0.2)
    try:
        compiler.compile(0.3)  # no phase yet: between cases
        assert calls == []
        watch.enter("verify")
        compiler.compile(0.8)
    finally:
        watch.stop()
    assert 2 <= len(calls) <= 6  # about cap / interval, then nothing more in this phase


def test_progress_is_reported_while_triton_compiles_a_python_kernels_kernel():
    """Triton's compiler is watched as CuPy's is (a recompile outside the setup call, say)."""
    compiler = _fake_compiler(FAKE_TRITON)
    watch, calls = _watch()
    try:
        watch.enter("time")
        compiler.compile(0.5)
    finally:
        watch.stop()
    assert len(calls) >= 4 and {phase for _, phase in calls} == {"time"}
