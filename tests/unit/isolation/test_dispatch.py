"""The queue in front of the GPU workers, with stand-in workers: no case waits for ever, whatever goes wrong."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import types

import pytest

from pytest_gemm.isolation.devices import Gpu
from pytest_gemm.isolation.dispatch import GpuWorkers, _Job
from pytest_gemm.records.outcome import Outcome
from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape


class StandIn:
    """A worker pool that answers at once (or raises), and records what it ran."""

    def __init__(self, name: str, fail_on: str | None = None) -> None:
        self.name, self.fail_on, self.ran = name, fail_on, []
        self.named_next: list[str | None] = []  # with each case run, the case named as likely to come next
        self.facts = {"name": name}
        self.unavailable = None
        self.running = self.gave_up = self.start_failed = False

    def probe(self) -> None:
        return None

    def run(self, request: Request, next_request: Request | None = None) -> Outcome:
        if request.kernel == self.fail_on:
            raise ValueError(f"a bug in {self.name}")
        self.ran.append(request.kernel)
        self.named_next.append(next_request.kernel if next_request is not None else None)
        time.sleep(0.01)
        return Outcome()

    def interrupt(self, final: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def _workers(*pools: StandIn) -> GpuWorkers:
    workers = GpuWorkers("unused:Backend", None, 60.0, wanted=None, worker_id=None)
    workers.pools = list(pools)
    workers.gpus = [Gpu(i, str(i), "NVIDIA H200") for i in range(len(pools))]
    workers._capability = ["9.0"] * len(pools)
    return workers


def _request(kernel: str) -> Request:
    return Request("/k.cu", "k.cu", kernel, (), "fp32", Shape(64, 64, 64), 1.0, 0.0, 0)


def test_a_fault_in_one_gpus_thread_fails_that_case_and_the_other_gpu_runs_the_rest():
    good, bad = StandIn("good"), StandIn("bad", fail_on="k1")
    workers = _workers(bad, good)
    try:
        futures = [workers.submit(_request(f"k{i}"), allowed=[0] if i == 1 else None) for i in range(1, 7)]
        with pytest.raises(ValueError, match="a bug in bad"):
            futures[0].result(timeout=10)
        assert all(f.result(timeout=10).outcome == Outcome() for f in futures[1:])
        assert workers.retired == {0: "internal error: ValueError: a bug in bad"}
        assert sorted(bad.ran + good.ran) == ["k2", "k3", "k4", "k5", "k6"]
    finally:
        workers.close()


def test_each_case_is_sent_with_the_case_queued_next_for_its_gpu():
    """docs/architecture.md#the-boundary: the worker draws the next case's inputs while it runs this one."""
    only = StandIn("only")
    workers = _workers(only)
    gate, taken = threading.Event(), threading.Event()
    original = only.run
    only.run = lambda request, next_request=None: (taken.set(), gate.wait(10), original(request, next_request))[2]
    try:
        first = workers.submit(_request("k0"))
        assert taken.wait(10)  # k0 taken before the others are queued: nothing was next
        futures = [first] + [workers.submit(_request(f"k{i}")) for i in range(1, 4)]
        gate.set()
        assert all(f.result(timeout=10).outcome == Outcome() for f in futures)
        assert only.ran == ["k0", "k1", "k2", "k3"]
        assert only.named_next == [None, "k2", "k3", None]
    finally:
        workers.close()


def _gated(pool: StandIn) -> tuple[dict[str, threading.Event], dict[str, threading.Event]]:
    """``pool``'s runs of k0, k1 and b0, each held until its gate is set: the events set as each case is taken, and
    the gates."""
    taken = {name: threading.Event() for name in ("k0", "k1", "k2", "k3", "b0")}
    gates = {name: threading.Event() for name in ("k0", "k1", "b0")}
    original = pool.run

    def run(request: Request, next_request: Request | None = None) -> Outcome:
        taken[request.kernel].set()
        if request.kernel in gates:
            gates[request.kernel].wait(10)
        return original(request, next_request)

    pool.run = run
    return taken, gates


@contextlib.contextmanager
def _two_busy_gpus():
    """GPU 0 running k1, having named k2 next (k0 before it), GPU 1 running b0; k2 and k3 queued for either. Every
    gate is opened and the workers closed on the way out."""
    one, two = StandIn("one"), StandIn("two")
    workers = _workers(one, two)
    (taken0, gates0), (taken1, gates1) = _gated(one), _gated(two)
    try:
        futures = [workers.submit(_request("k0"), allowed=[0]), workers.submit(_request("b0"), allowed=[1])]
        assert taken0["k0"].wait(10) and taken1["b0"].wait(10)
        futures += [workers.submit(_request(f"k{i}")) for i in (1, 2, 3)]
        gates0["k0"].set()
        assert taken0["k1"].wait(10)  # GPU 0 took k1 and named k2 next; GPU 1 still runs b0
        yield types.SimpleNamespace(workers=workers, one=one, two=two, futures=futures, gates0=gates0,
                                    gates1=gates1, taken1=taken1)  # fmt: skip
    finally:
        for gate in (*gates0.values(), *gates1.values()):
            gate.set()
        workers.close()


def test_with_two_gpus_a_case_named_next_is_left_to_the_gpu_drawing_its_inputs():
    """docs/architecture.md#the-boundary: GPU 1, free first, passes over k2 (its inputs drawn on GPU 0) for k3."""
    with _two_busy_gpus() as run:
        run.gates1["b0"].set()
        assert run.taken1["k3"].wait(10)
        run.gates0["k1"].set()
        assert all(f.result(timeout=10).outcome == Outcome() for f in run.futures)
        assert run.one.ran == ["k0", "k1", "k2"] and run.two.ran == ["b0", "k3"]
        assert dict(zip(run.one.ran, run.one.named_next, strict=True))["k1"] == "k2"


def test_a_case_named_next_goes_to_any_gpu_once_its_item_waits():
    """An item never waits for a busy GPU because its inputs are drawn there."""
    with _two_busy_gpus() as run:
        run.workers.hurry(run.futures[3])  # k2's item waits for it
        run.gates1["b0"].set()
        assert run.taken1["k2"].wait(10)
        run.gates0["k1"].set()
        assert all(f.result(timeout=10).outcome == Outcome() for f in run.futures)
        assert "k2" in run.two.ran and "k2" not in run.one.ran


def test_a_case_named_next_by_a_gpu_out_of_service_goes_to_any_gpu():
    """GPU 0 named k2, which GPU 1 passes over while GPU 0 serves; once GPU 0 is out of service, GPU 1 takes it."""
    with _two_busy_gpus() as run:
        with run.workers._cond:
            assert [job.named for job in run.workers._queue] == [0, None]  # k2 named by GPU 0, k3 by none
        run.workers.retired[0] = "its worker cannot start"
        run.gates1["b0"].set()
        assert run.taken1["k2"].wait(10)


def test_a_gpu_names_only_one_case_at_a_time_and_never_a_fresh_workers_or_one_left_to_other_gpus():
    """The case a GPU named before is left to any GPU once it names another; a case that asks for a fresh worker, or
    that is left to the GPUs that recorded its baseline, is not named (nor left to the GPU that would name it)."""
    one, two = StandIn("one"), StandIn("two")
    workers = _workers(one, two)
    fresh = dataclasses.replace(_request("f"), fresh_worker=True)
    with workers._cond:
        named, other = _Job(_request("a"), None), _Job(_request("b"), None)
        workers._queue = [named, other]
        assert workers._name_next(0).kernel == "a" and named.named == 0
        workers._queue.insert(0, _Job(_request("h"), None, hurried=True))  # an item waits for h: GPU 0 takes it
        workers._queue.pop(0)
        workers._queue.insert(0, _Job(_request("h2"), None, hurried=True))  # and then the next one waits
        assert workers._name_next(0).kernel == "h2" and named.named is None  # a is any GPU's again
        workers._queue = [_Job(fresh, None), other]
        assert workers._name_next(0) is None and workers._queue[0].named is None
        left = [_Job(_request(f"c{i}"), None, frozenset({1})) for i in range(3)]  # more than LEFT_PER_GPU for GPU 1
        workers._queue = left
        assert workers._name_next(0) is None  # GPU 0 may take c0 while GPU 1 is busy, but c0 is not left to it
        assert workers._name_next(1).kernel == "c0"


def test_when_no_gpu_serves_any_more_queued_and_later_cases_fail_at_once():
    workers = _workers(StandIn("only", fail_on="k1"))
    try:
        first = workers.submit(_request("k1"))
        with pytest.raises(ValueError):
            first.result(timeout=10)
        later = workers.submit(_request("k2"))
        with pytest.raises(RuntimeError, match="no GPU worker serves any more"):
            later.result(timeout=10)
    finally:
        workers.close()


def test_a_case_for_gpus_out_of_service_goes_to_any_gpu_and_a_waiting_case_goes_first():
    one, two = StandIn("one"), StandIn("two")
    workers = _workers(one, two)
    workers.retired[1] = "its worker cannot start"
    gate, taken = threading.Event(), threading.Event()
    original = one.run
    one.run = lambda request, next_request=None: (taken.set(), gate.wait(10), original(request, next_request))[2]
    try:
        futures = [workers.submit(_request(f"k{i}"), allowed=[1]) for i in range(4)]
        assert taken.wait(10)  # GPU 0's thread holds k0 before k3 is hurried
        workers.hurry(futures[3])
        gate.set()
        assert all(f.result(timeout=10).gpu.index == 0 for f in futures)
        assert one.ran[1] == "k3"  # k0 was already taken; k3 was moved to the front of what waited
    finally:
        workers.close()


def test_a_case_left_to_the_gpus_that_recorded_it_waits_for_them_until_its_item_waits():
    """A timed case whose baseline one GPU recorded is left to that GPU while it is busy (another GPU takes the
    cases it may run), and taken by the first GPU free once its item waits for it."""
    one, two = StandIn("one"), StandIn("two")
    workers = _workers(one, two)
    gate, busy = threading.Event(), threading.Event()
    original = two.run
    two.run = lambda request, next_request=None: (busy.set(), gate.wait(10), original(request, next_request))[2]
    try:
        first = workers.submit(_request("k0"), preferred=[1])
        assert busy.wait(10)  # GPU 1 holds k0
        left = workers.submit(_request("k1"), preferred=[1])
        anyone = workers.submit(_request("k2"))
        assert anyone.result(timeout=10).gpu.index == 0
        time.sleep(0.2)
        assert not left.running() and not left.done()  # GPU 0 was free, and left it to GPU 1
        workers.hurry(left)
        assert left.result(timeout=10).gpu.index == 0
        gate.set()
        assert first.result(timeout=10).gpu.index == 1
        workers.retired[1] = "its worker cannot start"
        assert workers.submit(_request("k3"), preferred=[1]).result(timeout=10).gpu.index == 0  # its GPU is out
    finally:
        gate.set()
        workers.close()


def test_a_gpu_with_nothing_to_do_takes_cases_left_to_a_busy_gpu_past_the_few_it_may_wait_for():
    """All the cases left to GPU 0 (it recorded every baseline, say with --gemm-gpus 1): while it is busy, the other
    GPUs take them until only LEFT_PER_GPU wait for it, so that a preference never leaves the others idle."""
    busy_one, one, two = StandIn("zero"), StandIn("one"), StandIn("two")
    workers = _workers(busy_one, one, two)
    gate, busy = threading.Event(), threading.Event()
    original = busy_one.run
    busy_one.run = lambda request, next_request=None: (busy.set(), gate.wait(10), original(request, next_request))[2]
    try:
        futures = [workers.submit(_request("k0"), preferred=[0])]
        assert busy.wait(10)  # GPU 0 holds k0
        futures += [workers.submit(_request(f"k{i}"), preferred=[0]) for i in range(1, 6)]
        assert all(f.result(timeout=10).gpu.index in (1, 2) for f in futures[1:4])
        time.sleep(0.2)
        assert not any(f.running() or f.done() for f in futures[4:])  # LEFT_PER_GPU = 2 wait for GPU 0
        gate.set()
        assert [f.result(timeout=10).gpu.index for f in futures[4:]] == [0, 0]
    finally:
        gate.set()
        workers.close()


def test_cases_sent_ahead_at_once_go_first_to_their_own_idle_gpu():
    """The lookahead queues many cases in a row: a GPU with nothing to do leaves the first to their own GPU, idle
    too, rather than take it because more than LEFT_PER_GPU are queued for it (it may take a later one)."""
    workers = _workers(StandIn("zero"), StandIn("one"))
    try:
        for _ in range(20):
            while workers._idle != {0, 1}:  # both GPUs wait for work
                workers.submit(_request("warm")).result(timeout=10)
                time.sleep(0.01)
            with workers._cond:  # queued together, as run_ahead does between two waits of a GPU
                futures = [workers.submit(_request(f"k{i}"), preferred=[1]) for i in range(4)]
            assert futures[0].result(timeout=10).gpu.index == 1
            for f in futures:
                f.result(timeout=10)
    finally:
        workers.close()
