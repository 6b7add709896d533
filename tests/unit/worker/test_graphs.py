"""CUDA graphs (docs/verification.md#cuda-graphs): the worker's own verification, on NumPy arrays standing for
CuPy's, captures one launch through the kernel's strategy and judges each replay; a replay over the bound fails the
case, named; a launch that capture refuses is the kernel's answer, not a failure."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.outcome import GraphReplay, Outcome
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Check
from pytest_gemm.report.failure import diagnosis_lines
from pytest_gemm.report.tables import NO_GRAPH_FLAG, row_flags, timing_tables
from pytest_gemm.specs.cases import AB_CASES, Case
from pytest_gemm.specs.spec import KernelSpec, Variant
from pytest_gemm.worker.graphs import graphed, negate_rows
from pytest_gemm.worker.kinds import KernelStrategy
from pytest_gemm.worker.verify import verify

from support import recorded_records, recording
from support.host_device import FunctionKernel, HostCupy, HostDevice, HostKernel, cu_spec, host_case


def _gemm(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


class _Refused(FunctionKernel):
    """A launch that capture refuses, as CUDA does a copy to the host while capturing."""

    def captured(self, call):
        raise RuntimeError("cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing\nmore")


class _Empty(FunctionKernel):
    """A graph that captured none of the launch's work (it went to another stream while capturing): its replays
    write nothing."""

    def captured(self, call):
        call()
        return lambda: None


def _case(ab=AB_CASES[0]) -> Case:
    spec = KernelSpec(path="k.py", name="k", dtypes=("fp32",), kind="py", attr="k")
    return Case(spec, Variant(), "fp32", Shape(128, 96, 64), ab)


def _verified(kind, case):
    return verify(host_case(kind(HostDevice(HostCupy()), case, _gemm), 1))


def test_a_right_replay_passes_judged_each_time():
    verification = _verified(FunctionKernel, _case())
    assert verification.passed and verification.graph == GraphReplay(replays=2)  # on the verified values, on new


def test_a_launch_capture_refuses_passes_with_the_reason():
    verification = _verified(_Refused, _case())
    assert verification.passed and verification.graph is not None
    assert verification.graph.refused == (
        "RuntimeError: cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"
    )


def test_a_replay_over_the_bound_fails_the_case_named():
    case = _case()
    verification = _verified(_Empty, case)
    assert not verification.passed
    (fault,) = verification.faults
    assert fault.kind == Check.GRAPH_REPLAY and fault.count == 128 * 96
    result = judge_outcome(case, "k.py::k", Outcome(verification=verification), recording()["facts"])
    assert result.failed
    assert (
        "wrong when replayed from a CUDA graph: 12288 element(s) over the bound in C after replay 1 of a CUDA graph "
        "of one launch (its own launches are right)"
    ) in diagnosis_lines(result.diagnosis)


class _Baked(FunctionKernel):
    """A graph that baked its first output in (as a copy of data the host computed while capturing would): every
    replay writes it again, whatever A holds now."""

    def captured(self, call):
        kept = []

        def replay():
            if not kept:
                call()
                kept.append(_SEEN["C"].copy())
            _SEEN["C"][...] = kept[0]

        return replay


_SEEN: dict = {}


def _seen(A, B, C, alpha, beta):
    _SEEN["C"] = C
    _gemm(A, B, C, alpha, beta)


def test_a_graph_that_replays_its_first_output_fails_on_new_values():
    case = _case()
    verification = verify(host_case(_Baked(HostDevice(HostCupy()), case, _seen), 1))
    assert not verification.passed and verification.graph.replays == 2
    (fault,) = verification.faults
    assert fault.kind == Check.GRAPH_REPLAY
    said = "C after replay 2 of a CUDA graph of one launch, A's rows negated (new values in the same buffers)"
    assert fault.where == said


def test_a_launch_as_wrong_without_a_graph_is_left_to_timing():
    """A launcher called again on new values in its buffers is as wrong as its graph (a cache keyed by the buffer):
    not the graph's fault; timing's fresh inputs name it."""
    kept: dict[int, object] = {}

    def keeps(A, B, C, alpha, beta):
        address = A.__array_interface__["data"][0]
        if address not in kept:
            kept[address] = alpha * (A @ B)
        C[...] = kept[address]

    verification = verify(host_case(FunctionKernel(HostDevice(HostCupy()), _case(), keeps), 1))
    assert verification.passed and verification.graph == GraphReplay(replays=2)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64", "int8"])
@pytest.mark.parametrize("order", ["MxK", "KxM"])
@pytest.mark.parametrize("operand", ["A", "C"])
def test_negated_rows_are_the_logical_rows_whatever_the_storage_and_type(dtype, order, operand):
    """A's rows in its dtype, C's in the output's (INT8's int32): stored either way, one row in three negated and
    then back."""
    spec = cu_spec(dtype, storage={operand: order if operand == "A" else order.replace("K", "N")})
    case = Case(spec, spec.variants()[0], dtype, Shape(40, 24, 32), AB_CASES[0])
    prepared = host_case(HostKernel(case, lambda *args: None), 1)
    held = (
        prepared.data.a
        if operand == "A"
        else (prepared.data.a[:, :24] * 3).astype(np.int32 if dtype == "int8" else prepared.data.a.dtype)
    )
    ops = prepared.operands(c=held if operand == "C" else None)
    g = ops.a if operand == "A" else ops.c
    before = prepared.data.logical(g.matrix(held.dtype), operand).copy()
    rows = np.arange(40) % 3 == 0
    negate_rows(prepared, g, operand, rows)
    after = prepared.data.logical(g.matrix(before.dtype), operand)
    assert np.array_equal(after[rows], -before[rows]) and np.array_equal(after[~rows], before[~rows])
    negate_rows(prepared, g, operand, rows)
    assert np.array_equal(prepared.data.logical(g.matrix(before.dtype), operand), before)


def test_cases_at_other_scalars_are_not_captured():
    assert _verified(_Empty, _case(AB_CASES[1])).graph is None


def test_the_table_flags_a_refused_capture_and_its_footer_counts_the_answers():
    row = recorded_records()[0]
    assert row_flags(dataclasses.replace(row, graph_refused="")) == ""
    assert row_flags(dataclasses.replace(row, graph_refused="RuntimeError: no")) == NO_GRAPH_FLAG
    rows = [
        dataclasses.replace(r, graph_refused="" if i else "RuntimeError: no")
        for i, r in enumerate(recorded_records()[:3])
    ]
    lines = timing_tables(rows, recording()["facts"], width=120)
    assert (
        f"CUDA graphs: 2 case(s) captured into one and replayed right; 1 could not be captured ({NO_GRAPH_FLAG}: "
        "1: RuntimeError: no)"
    ) in lines
    saved = dataclasses.replace(recorded_records()[0], graph_refused="RuntimeError: no")
    assert type(saved).from_dict(saved.to_dict()).graph_refused == "RuntimeError: no"


class _Stream:
    """A stream's capture as CUDA does it: an invalidated capture raises when ended, and is over."""

    def __init__(self, invalidates: bool) -> None:
        self.invalidates, self.capturing, self.launched = invalidates, False, []

    def begin_capture(self):
        assert not self.capturing
        self.capturing = True

    def end_capture(self):
        self.capturing = False
        if self.invalidates:
            raise RuntimeError("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error")
        return SimpleNamespace(launch=self.launched.append)


def _strategy(stream: _Stream) -> KernelStrategy:
    pools = SimpleNamespace(MemoryPool=lambda: SimpleNamespace(malloc=None), using_allocator=lambda _: nullcontext())
    runner = SimpleNamespace(cp=SimpleNamespace(cuda=pools), stream=stream)
    return KernelStrategy(runner, _case(), None)  # type: ignore[arg-type]


def test_a_capture_the_call_refuses_ends_with_the_calls_own_error():
    stream = _Stream(invalidates=True)

    def syncs():
        raise RuntimeError("cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing")

    with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureUnsupported"):
        _strategy(stream).captured(syncs)
    assert not stream.capturing


def test_a_captured_call_replays_on_the_harness_stream():
    stream, calls = _Stream(invalidates=False), []
    replay = _strategy(stream).captured(lambda: calls.append(1))
    replay()
    replay()
    assert calls == [1] and stream.launched == [stream, stream] and not stream.capturing


class _Replayed(FunctionKernel):
    """A capture that gives back a replay of its own, counting what was captured."""

    def captured(self, call):
        def replay():
            call()

        self.count = getattr(self, "count", 0) + 1
        return replay


def test_the_graph_timer_replaces_each_timed_launch_with_its_graphs_replay():
    prepared = host_case(_Replayed(HostDevice(HostCupy()), _case(), _gemm), 1)
    calls = [lambda: None, lambda: None]
    sets = [SimpleNamespace(call=call) for call in calls]
    assert graphed(prepared, sets) == ""
    assert prepared.kernel.count == 2 and all(s.call is not c for s, c in zip(sets, calls, strict=True))


def test_a_launch_capture_refuses_keeps_every_set_launched_and_says_why():
    prepared = host_case(_Refused(HostDevice(HostCupy()), _case(), _gemm), 1)
    calls = [lambda: None, lambda: None]
    sets = [SimpleNamespace(call=call) for call in calls]
    said = graphed(prepared, sets)
    assert said == (
        "its launch could not be captured: RuntimeError: cudaErrorStreamCaptureUnsupported: operation not permitted "
        "when stream is capturing"
    )
    assert [s.call for s in sets] == calls
