"""The next case's inputs, drawn while a case runs (docs/architecture.md#the-boundary): on the CPU, the store a worker
keeps them in, and the message that names the next case, through a real worker process with a stand-in backend."""

from __future__ import annotations

import textwrap
import threading
import types

import numpy as np
import pytest

from pytest_gemm.isolation.workers import WorkerPool
from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.inputs import input_strategy
from pytest_gemm.worker.next_inputs import NEXT_MOST_ELEMENTS, NextInputs
from pytest_gemm.worker.peers import NoPeer

from support.host_device import HostKernel, host_case

SMALL = Shape(96, 64, 32)
HEADER = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [16, 16]}


def _case(shape: Shape) -> Case:
    spec = spec_from_mapping({**HEADER, "grid": ["cdiv(N, 16)", "cdiv(M, 16)"]}, path="k.cu")
    return Case(spec, spec.variants()[0], "fp32", shape, AlphaBeta(1.0, 0.0))


def _request(seed: int, shape: Shape = SMALL) -> Request:
    return Request("/k.cu", "k.cu", "k", (), "fp32", shape, 1.0, 0.0, seed)


def test_inputs_drawn_early_are_those_the_case_would_draw_and_go_to_its_request_alone():
    store, case = NextInputs(), _case(SMALL)
    draw = input_strategy(case).draw
    assert store.expect(_request(7), case, draw)
    assert store.take(_request(8), case) is None  # another request: not its inputs
    drawn, own = store.take(_request(7), case), draw(7)
    assert drawn is not None and np.array_equal(drawn.a, own.a) and np.array_equal(drawn.b, own.b)
    assert not drawn.a.flags.writeable  # read-only, as the case's own
    assert store.take(_request(7), case) is None  # taken once


def test_the_case_after_next_is_named_before_the_next_runs_and_both_are_held():
    """The pytest process sends 'next' (the case after next) before 'run' (the next): the next's inputs, named with
    the case before, are still there to take; a case named that another GPU took is let go of in time."""
    store, case = NextInputs(), _case(SMALL)
    draw = input_strategy(case).draw
    assert store.expect(_request(1), case, draw)  # with case 0: case 1 comes next
    assert store.expect(_request(2), case, draw)  # with case 1, before it runs
    assert store.take(_request(1), case) is not None
    assert store.expect(_request(3), case, draw)  # with case 2; case 2 went to another GPU
    assert store.expect(_request(4), case, draw)  # with case 3, before it runs: case 2's are let go of
    assert store.take(_request(3), case) is not None and store.take(_request(2), case) is None
    assert store.take(_request(4), case) is not None


def test_inputs_too_large_or_that_fail_to_draw_are_left_to_the_case():
    store = NextInputs()
    side = int(NEXT_MOST_ELEMENTS**0.5)
    big = _case(Shape(side, side, side))
    assert not store.expect(_request(1, big.shape), big, lambda seed: pytest.fail("drawn"))
    assert store.take(_request(1, big.shape), big) is None

    def broken(seed: int):
        raise MemoryError("no room")

    small = _case(SMALL)
    assert store.expect(_request(2), small, broken)
    assert store.take(_request(2), small) is None  # the case draws its own and says why if that fails too


def test_inputs_drawn_for_another_version_of_the_header_are_not_taken():
    """The file changed between the message naming the case and the case's own load: its header is read again."""
    store, before, after = NextInputs(), _case(SMALL), _case(SMALL)  # one file, read twice: two specs
    assert store.expect(_request(5), before, input_strategy(before).draw)
    assert store.take(_request(5), after) is None


def test_timing_waits_for_a_draw_in_progress():
    store, case, started, release = NextInputs(), _case(SMALL), threading.Event(), threading.Event()

    def slow(seed: int):
        started.set()
        release.wait(10)
        return input_strategy(case).draw(seed)

    assert store.expect(_request(6), case, slow) and started.wait(10)
    settled = threading.Thread(target=store.settle)
    settled.start()
    settled.join(0.2)
    assert settled.is_alive()  # waits for the draw
    release.set()
    settled.join(10)
    assert not settled.is_alive() and store.take(_request(6), case) is not None


def test_a_draw_let_go_of_while_it_runs_is_still_waited_for_before_timing():
    """Inputs drawn for an older version of the header are not taken, and their draw, still going, ends before the
    case's timing starts."""
    store, before, after = NextInputs(), _case(SMALL), _case(SMALL)
    started, release = threading.Event(), threading.Event()

    def slow(seed: int):
        started.set()
        release.wait(10)
        return input_strategy(before).draw(seed)

    assert store.expect(_request(6), before, slow) and started.wait(10)
    assert store.take(_request(6), after) is None
    settled = threading.Thread(target=store.settle)
    settled.start()
    settled.join(0.2)
    assert settled.is_alive()  # waits for the draw let go of
    release.set()
    settled.join(10)
    assert not settled.is_alive()


def test_the_backend_draws_the_named_case_and_prepares_its_case_with_what_was_drawn():
    """The worker's glue (GpuBackend.expect_next and _prepare), with a stand-in for the GPU backend's state: the header
    read, the inputs drawn, and the prepared case holding exactly those (read-only) arrays, equal to what it would draw
    itself; a case not named draws its own."""
    case = _case(SMALL)
    kernel = HostKernel(case, lambda *args: None)
    runner = kernel.runner
    runner.files, runner.cannot_run = types.SimpleNamespace(case=lambda request: case), lambda spec: None
    store, taken = NextInputs(), []
    take = store.take
    store.take = lambda request, case: taken.append(take(request, case)) or taken[-1]  # type: ignore[method-assign]
    state = types.SimpleNamespace(runner=runner, _next=store, _watch=None, _check_memory=lambda case, timing: True)
    GpuBackend.expect_next(state, _request(9))  # type: ignore[arg-type]
    peer = NoPeer(case, "none")
    prepared = GpuBackend._prepare(state, case, _request(9), kernel, kernel.inputs, peer)  # type: ignore[arg-type]
    own, drawn = host_case(kernel, seed=9), taken[0]
    assert drawn is not None and prepared.data.a is drawn.a and np.array_equal(prepared.data.a, own.data.a)
    assert np.array_equal(prepared.data.b, own.data.b)
    other = GpuBackend._prepare(state, case, _request(10), kernel, kernel.inputs, peer)  # type: ignore[arg-type]
    assert taken[1] is None and np.array_equal(other.data.a, host_case(kernel, seed=10).data.a)


BACKEND = '''
from pytest_gemm.records.outcome import Outcome


class Told:
    """Says, in each case's outcome, which requests it was told come next since the case before."""

    def __init__(self, cubin_cache=None):
        self.told = []

    def facts(self):
        return {"name": "stand-in"}

    def expect_next(self, request):
        self.told.append(request.seed)

    def run(self, request, notify):
        notify("load")
        told, self.told = self.told, []
        return Outcome(skip=f"case {request.seed}, told of {told}")


class Deaf:
    """A backend that draws nothing early: the message is passed over."""

    def __init__(self, cubin_cache=None):
        pass

    def facts(self):
        return {"name": "stand-in"}

    def run(self, request, notify):
        notify("load")
        return Outcome(skip=f"case {request.seed}, told of []")
'''


@pytest.fixture
def backend(tmp_path, monkeypatch):
    (tmp_path / "next_backend.py").write_text(textwrap.dedent(BACKEND))
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers import what this process can


@pytest.mark.parametrize(("name", "told"), [("Told", "[2]"), ("Deaf", "[]")])
def test_the_worker_hears_of_the_next_case_before_this_one(backend, name, told):
    pool = WorkerPool(f"next_backend:{name}", None, timeout=30)
    try:
        assert pool.run(_request(1), next_request=_request(2)).skip == f"case 1, told of {told}"
        assert pool.run(_request(2)).skip == "case 2, told of []"
    finally:
        pool.close()
