"""The next case's inputs drawn ahead (docs/architecture.md#the-boundary): on the CPU, the store a worker keeps them
in, and the message that names the next case, through a real worker process with a stand-in backend."""

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
from pytest_gemm.worker.ahead import AHEAD_MOST_ELEMENTS, DrawnAhead
from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.inputs import input_strategy
from pytest_gemm.worker.peers import NoPeer
from pytest_gemm.worker.prepared import PreparedCase

from support.host_device import HostKernel, host_case

SMALL = Shape(96, 64, 32)
HEADER = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [16, 16]}


def _case(shape: Shape) -> Case:
    spec = spec_from_mapping({**HEADER, "grid": ["cdiv(N, 16)", "cdiv(M, 16)"]}, path="k.cu")
    return Case(spec, spec.variants()[0], "fp32", shape, AlphaBeta(1.0, 0.0))


def _request(seed: int, shape: Shape = SMALL) -> Request:
    return Request("/k.cu", "k.cu", "k", (), "fp32", shape, 1.0, 0.0, seed)


def test_inputs_drawn_ahead_are_those_the_case_would_draw_and_go_to_its_request_alone():
    ahead, case = DrawnAhead(), _case(SMALL)
    draw = input_strategy(case).draw
    assert ahead.expect(_request(7), case, draw)
    assert ahead.take(_request(8), case) is None  # another request: not its inputs
    drawn, own = ahead.take(_request(7), case), draw(7)
    assert drawn is not None and np.array_equal(drawn.a, own.a) and np.array_equal(drawn.b, own.b)
    assert not drawn.a.flags.writeable  # read-only, as the case's own
    assert ahead.take(_request(7), case) is None  # taken once


def test_the_case_after_next_is_named_before_the_next_runs_and_both_are_held():
    """The pytest process sends 'ahead' (the case after next) before 'run' (the next): the next's inputs, named with
    the case before, are still there to take; a case named that another GPU took is let go of in time."""
    ahead, case = DrawnAhead(), _case(SMALL)
    draw = input_strategy(case).draw
    assert ahead.expect(_request(1), case, draw)  # with case 0: case 1 comes next
    assert ahead.expect(_request(2), case, draw)  # with case 1, before it runs
    assert ahead.take(_request(1), case) is not None
    assert ahead.expect(_request(3), case, draw)  # with case 2; case 2 went to another GPU
    assert ahead.expect(_request(4), case, draw)  # with case 3, before it runs: case 2's are let go of
    assert ahead.take(_request(3), case) is not None and ahead.take(_request(2), case) is None
    assert ahead.take(_request(4), case) is not None


def test_inputs_too_large_or_that_fail_to_draw_are_left_to_the_case():
    ahead = DrawnAhead()
    side = int(AHEAD_MOST_ELEMENTS**0.5)
    big = _case(Shape(side, side, side))
    assert not ahead.expect(_request(1, big.shape), big, lambda seed: pytest.fail("drawn"))
    assert ahead.take(_request(1, big.shape), big) is None

    def broken(seed: int):
        raise MemoryError("no room")

    small = _case(SMALL)
    assert ahead.expect(_request(2), small, broken)
    assert ahead.take(_request(2), small) is None  # the case draws its own and says why if that fails too


def test_inputs_drawn_for_another_version_of_the_header_are_not_taken():
    """The file changed between the message naming the case and the case's own load: its header is read again."""
    ahead, before, after = DrawnAhead(), _case(SMALL), _case(SMALL)  # one file, read twice: two specs
    assert ahead.expect(_request(5), before, input_strategy(before).draw)
    assert ahead.take(_request(5), after) is None


def test_timing_waits_for_a_draw_in_progress():
    ahead, case, started, release = DrawnAhead(), _case(SMALL), threading.Event(), threading.Event()

    def slow(seed: int):
        started.set()
        release.wait(10)
        return input_strategy(case).draw(seed)

    assert ahead.expect(_request(6), case, slow) and started.wait(10)
    settled = threading.Thread(target=ahead.settle)
    settled.start()
    settled.join(0.2)
    assert settled.is_alive()  # waits for the draw
    release.set()
    settled.join(10)
    assert not settled.is_alive() and ahead.take(_request(6), case) is not None


def test_the_backend_draws_the_named_case_and_its_case_is_prepared_with_what_was_drawn():
    """The worker's glue, with a stand-in for the GPU backend's state: the header read, the inputs drawn ahead, and
    the prepared case holding exactly those (read-only) arrays, equal to what it would draw itself."""
    case = _case(SMALL)
    files = types.SimpleNamespace(case=lambda request: case)
    state = types.SimpleNamespace(runner=types.SimpleNamespace(files=files, cannot_run=lambda spec: None),
                                  _ahead=DrawnAhead())  # fmt: skip
    GpuBackend.ahead(state, _request(9))  # type: ignore[arg-type]
    drawn = state._ahead.take(_request(9), case)
    assert drawn is not None
    kernel = HostKernel(case, lambda *args: None)
    prepared = PreparedCase(kernel.runner, case, 9, kernel, kernel.inputs, NoPeer(case, "none"), drawn=drawn)
    own = host_case(kernel, seed=9)
    assert prepared.data.a is drawn.a and np.array_equal(prepared.data.a, own.data.a)
    assert np.array_equal(prepared.data.b, own.data.b)


BACKEND = '''
from pytest_gemm.records.outcome import Outcome


class Told:
    """Says, in each case's outcome, which requests it was told of ahead since the case before."""

    def __init__(self, cubin_cache=None):
        self.told = []

    def facts(self):
        return {"name": "stand-in"}

    def ahead(self, request):
        self.told.append(request.seed)

    def run(self, request, notify):
        notify("load")
        told, self.told = self.told, []
        return Outcome(skip=f"case {request.seed}, told of {told}")


class Deaf:
    """A backend that draws nothing ahead: the message is passed over."""

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
    (tmp_path / "ahead_backend.py").write_text(textwrap.dedent(BACKEND))
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers import what this process can


@pytest.mark.parametrize(("name", "told"), [("Told", "[2]"), ("Deaf", "[]")])
def test_the_worker_hears_of_the_next_case_before_this_one(backend, name, told):
    pool = WorkerPool(f"ahead_backend:{name}", None, timeout=30)
    try:
        assert pool.run(_request(1), ahead=_request(2)).skip == f"case 1, told of {told}"
        assert pool.run(_request(2)).skip == "case 2, told of []"
    finally:
        pool.close()
