"""The worker unchanged by a kernel file's code (docs/verification.md#the-harness-unchanged): what a call replaces,
rebinds or leaves running is named; what the harness itself changes between calls is not."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

import pytest_gemm.judge.accuracy as accuracy
import pytest_gemm.judge.gate as gate
import pytest_gemm.judge.scaled as scaled
import pytest_gemm.worker.batches as batches
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, Case
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import Variant
from pytest_gemm.worker.integrity import HarnessChanged, HarnessWatch, ThreadLeft
from pytest_gemm.worker.namespaces import KERNEL_MODULES
from pytest_gemm.worker.verify import verify

from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case


@pytest.fixture
def watch() -> HarnessWatch:
    return HarnessWatch()


def _changes(watch: HarnessWatch, call) -> tuple[str, ...]:
    with pytest.raises(HarnessChanged) as raised, watch.watching():
        call()
    return raised.value.details


def test_a_harness_function_replaced_in_a_call_is_named(watch, monkeypatch):
    def faked(*args, **kwargs):
        raise AssertionError("never called")

    details = _changes(watch, lambda: monkeypatch.setattr(accuracy, "error_stats", faked))
    assert details == ("pytest_gemm.judge.accuracy.error_stats replaced",)


def test_a_method_of_a_harness_class_replaced_is_named(watch, monkeypatch):
    details = _changes(watch, lambda: monkeypatch.setattr(batches.Batches, "batch", lambda *a, **k: None))
    assert details == ("pytest_gemm.worker.batches.Batches.batch replaced",)


def test_a_constant_rebound_and_a_table_changed_are_named(watch, monkeypatch):
    def cheat() -> None:
        monkeypatch.setattr(gate, "DEFAULT_THRESHOLD", 10.0)
        monkeypatch.setitem(scaled.FP8_MAX, "fp8_e4m3", 1e9)

    details = set(_changes(watch, cheat))
    assert details == {
        "pytest_gemm.judge.gate.DEFAULT_THRESHOLD rebound",
        "pytest_gemm.judge.scaled.FP8_MAX's contents changed",
    }


def test_a_library_function_the_judge_calls_replaced_is_named(watch, monkeypatch):
    details = _changes(watch, lambda: monkeypatch.setattr(np, "median", lambda *a, **k: 0.0))
    assert details == ("numpy.median replaced",)


def test_code_replaced_between_calls_is_found_before_the_next(watch, monkeypatch):
    """Replaced after a call returned (by a host callback the kernel queued, say): still the kernel file's doing."""
    with watch.watching():
        pass
    monkeypatch.setattr(accuracy, "error_stats", lambda *a, **k: None)
    with pytest.raises(HarnessChanged, match="error_stats replaced"):
        watch.check()


def test_the_harness_own_data_changed_between_calls_is_no_change(watch, monkeypatch):
    with watch.watching():
        pass
    monkeypatch.setattr(gate, "_made_once", {"a": 1}, raising=False)  # as a lazily made cache would be
    with watch.watching():
        pass
    watch.check()


def test_a_submodule_imported_in_a_call_is_no_change(watch, monkeypatch):
    import pytest_gemm.report as report
    import pytest_gemm.report.faults as faults

    monkeypatch.delattr(report, "faults")
    monkeypatch.delitem(sys.modules, "pytest_gemm.report.faults")
    with watch.watching():
        import pytest_gemm.report.faults as again  # binds report.faults again: a new module object
    assert again is not faults and report.faults is again
    monkeypatch.setitem(sys.modules, "pytest_gemm.report.faults", faults)  # the one the rest of the run imported
    monkeypatch.setattr(report, "faults", faults)


def test_a_warning_the_call_made_is_no_change(watch):
    """A warning shown on a harness frame leaves ``__warningregistry__`` in that module: Python's, not a change."""
    import pytest_gemm.worker.integrity as integrity

    with watch.watching():
        integrity.__dict__.setdefault("__warningregistry__", {})  # as warnings.warn does, on its module's frame


def test_a_library_function_replaced_by_another_callable_is_named(watch, monkeypatch):
    """np.median is no Python function: replaced by np.amin (no function either), it is still named."""
    details = _changes(watch, lambda: monkeypatch.setattr(np, "median", np.amin))
    assert details == ("numpy.median replaced",)


def test_a_functions_code_swapped_is_named(watch, monkeypatch):
    details = _changes(watch, lambda: monkeypatch.setattr(accuracy.error_stats, "__code__", (lambda *a: None).__code__))
    assert "pytest_gemm.judge.accuracy.error_stats's code or defaults replaced" in details


def test_a_public_constant_rebound_between_calls_is_named(watch, monkeypatch):
    with watch.watching():
        pass
    monkeypatch.setattr(gate, "DEFAULT_THRESHOLD", 1e9)
    with pytest.raises(HarnessChanged, match="DEFAULT_THRESHOLD rebound"):
        watch.check()


def test_a_tracer_set_in_a_call_is_named(watch):
    previous = sys.getprofile()
    try:
        with pytest.raises(HarnessChanged, match=r"sys\.setprofile changed"), watch.watching():
            sys.setprofile(lambda *args: None)
    finally:
        sys.setprofile(previous)


def test_the_watchs_own_state_changed_is_named(watch):
    with pytest.raises(HarnessChanged, match="HARNESS's own state changed"), watch.watching():
        watch._spaces.clear()


def _kernel_file(source: str) -> types.ModuleType:
    """A module named as the worker names an imported kernel file's, holding ``source``."""
    module = types.ModuleType(KERNEL_MODULES + "test")
    exec(compile(source, "kernel.py", "exec"), module.__dict__)
    return module


def test_a_thread_still_running_the_kernel_files_code_is_named_and_a_librarys_is_not(watch):
    """Work the call left to a thread of its own, or to a pool, runs the kernel file's code after the call returned;
    a library's own idle thread (torch.compile's compile workers) runs none of it."""
    kernel = _kernel_file(
        "import threading\n"
        "release = threading.Event()\n"
        "def later():\n"
        "    release.wait()\n"
        "def call():\n"
        "    threading.Thread(target=later, name='deferred-gemm', daemon=True).start()\n"
        "def finished():\n"
        "    t = threading.Thread(target=lambda: None)\n"
        "    t.start()\n"
        "    t.join()\n"
        "def timer():\n"
        "    t = threading.Timer(30.0, later)\n"
        "    t.name = 'timer-gemm'\n"
        "    t.daemon = True\n"
        "    t.start()\n"
        "    return t\n"
    )
    library = threading.Event()
    threading.Thread(target=library.wait, name="library-pool", daemon=True).start()
    later = []
    try:
        with watch.watching():
            kernel.finished()
        with pytest.raises(ThreadLeft) as raised, watch.watching():
            kernel.call()
        assert raised.value.details == ("deferred-gemm (in later, line 4)",)
        kernel.release.set()
        for thread in threading.enumerate():
            if thread.name == "deferred-gemm":
                thread.join()
        with pytest.raises(ThreadLeft) as raised, watch.watching():
            later.append(kernel.timer())
        assert raised.value.details == ("timer-gemm (to run later)",)
    finally:
        kernel.release.set()
        library.set()
        for timer in later:
            timer.cancel()


def test_a_timed_batch_is_watched_as_one(watch, monkeypatch):
    """Inside a watched batch the calls it makes are not watched one by one: the batch is, before it is read."""
    after_the_call = []
    with pytest.raises(HarnessChanged, match="error_stats replaced"), watch.watching():
        with watch.watching():
            monkeypatch.setattr(accuracy, "error_stats", lambda *a, **k: None)
        after_the_call.append(True)  # the inner call said nothing; the batch says it at its end
    assert after_the_call == [True]


def test_a_python_kernel_that_fakes_the_judge_is_caught_on_the_host(monkeypatch):
    """A Python kernel that writes a wrong C and replaces the judge's statistics so that it passes: its verification
    stops with what it replaced, whatever the faked judge would have said."""

    def cheat(A, B, C, alpha, beta):
        C[...] = 0.0
        monkeypatch.setattr(accuracy, "error_stats", lambda *a, **k: None)

    spec = spec_from_mapping({"dtypes": ["fp32"]}, path="k.py", kind="py", default_name="cheat")
    case = Case(spec, Variant(), "fp32", Shape(32, 32, 32), AB_CASES[0])
    prepared = host_case(FunctionKernel(HostDevice(HostCupy()), case, cheat))
    with pytest.raises(HarnessChanged, match=r"pytest_gemm\.judge\.accuracy\.error_stats replaced"):
        verify(prepared)
