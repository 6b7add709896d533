"""Cases sent to the GPU workers ahead of their items, so that every GPU has work while pytest reports.

pytest runs items one at a time; as a GPU case starts, the next ``AHEAD_PER_GPU`` x (number of GPUs) items' cases are
queued (under xdist, where only the next item is known, that one). Only items pytest will run with
nothing else on the GPU are sent ahead: the lookahead stops at any item that is not a GEMM case or a
compile item (a user's own GPU test, a compute-sanitizer run), and passes over items with a skip,
skipif or xfail marker. An item whose setup fails drops its case (killing it if it is running), and
an item that waits moves its own case to the front of the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future

import pytest

from ..isolation.devices import timing_model
from ..isolation.dispatch import Done, GpuWorkers
from ..records.request import Request
from ..settings import Settings
from ..specs.archs import arch_runs_on
from ..specs.cases import launch_geometry, to_request
from ..specs.spec import KernelFileError
from .items import GemmCaseItem, GemmCompileItem, GemmFailure

__all__ = ["AHEAD_PER_GPU", "Lookahead", "left_to"]

_MARKS_THAT_SKIP = ("skip", "skipif", "xfail")

#: items whose cases are queued ahead, per GPU: enough that a GPU finds work while another runs a long case (a queue of
#: 2 a GPU left one idle behind each long case: 42.6 s against 41.0 s for the main job's GPU cases on two GPUs, by
#: research/dispatch_sim.py from an H200 run's own case times); with ``-x``, at most this many cases a GPU run past
#: the first failure
AHEAD_PER_GPU = 8


def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() else (0, 0)


def left_to(
    test: str,
    models: Sequence[str],
    identities: Sequence[str],
    candidates: Sequence[int],
    recorded_on: Callable[[str, str], frozenset[str]],
    recording: bool,
) -> list[int] | None:
    """The GPUs among ``candidates`` (indices into ``models`` and ``identities``, each GPU's model and gpu_identity) a
    timed case is left to (docs/baselines.md#gpus-of-one-model): those whose records its baseline entry holds
    (``recorded_on``), when some do and others do not, so that it is held to its own GPU's record and not to the
    range of the others'; when ``recording``, those that hold none, so that each GPU gains its own. None: any."""
    if len(candidates) < 2 or len(identities) != len(models) or not all(identities[i] for i in candidates):
        return None  # one GPU, or a GPU NVML does not name (its records are not told apart)
    recorded = [identities[i] in recorded_on(test, models[i]) for i in candidates]
    if all(recorded) or not any(recorded):
        return None
    return [i for i, has in zip(candidates, recorded, strict=True) if has != recording]


class Lookahead:
    """The cases queued for items that have not run yet."""

    def __init__(
        self,
        settings: Settings,
        timed: bool,
        workers: Callable[[], GpuWorkers],
        recorded_on: Callable[[str, str], frozenset[str]] = lambda test, model: frozenset(),
    ) -> None:
        self.settings, self.timed, self._workers = settings, timed, workers
        self._recorded_on = recorded_on  # the GPUs whose records a case's baseline entry holds (Gate.recorded_on)
        self._ahead: dict[str, tuple[Request, Future[Done]]] = {}  # node id -> its case, submitted ahead
        self._items: list[pytest.Item] = []
        self._order: dict[str, int] = {}  # node id -> its place in the run (without xdist)

    def order(self, items: Sequence[pytest.Item]) -> None:
        """The run's items, in the order pytest runs them (after every plugin chose and sorted them)."""
        self._items = list(items)
        self._order = {item.nodeid: i for i, item in enumerate(self._items)}
        cases = [item.case for item in self._items if isinstance(item, GemmCaseItem) and not item.case.skip_reason]
        self._workers().expect({name for case in cases for name in case.imports})

    def request(self, item: GemmCaseItem, timed: bool) -> Request:
        """The case's request; raises GemmFailure for a launch CUDA would refuse (it never leaves here)."""
        case = item.case
        try:
            launch_geometry(case.spec, case.variant, case.shape, sm_count=None)  # the worker checks SM_COUNT
        except KernelFileError as exc:
            raise GemmFailure(str(exc)) from None
        timing = self.settings.timing if timed else None
        return to_request(case, str(item.path), item.gemm_seed, timing, self.settings.compile_timeout)

    def _submit(self, item: GemmCaseItem, request: Request) -> Future[Done]:
        """Queue a case for the GPUs that can run it; a timed case on a host of mixed models, for one model."""
        workers = self._workers()
        arch = item.case.spec.arch
        gpus = workers.capable(lambda cap: arch_runs_on(arch, _capability(cap))) if arch else list(workers.gpus)
        if request.timing is not None:
            model = timing_model(item.nodeid, [gpu.model for gpu in gpus])
            gpus = [gpu for gpu in gpus if model is None or gpu.model == model]
        chosen = [i for i, gpu in enumerate(workers.gpus) if gpu in gpus]
        allowed = chosen if gpus and len(chosen) < len(workers.gpus) else None  # none can run it: its skip says why
        preferred = None
        if request.timing is not None:
            models = [gpu.model for gpu in workers.gpus]
            recording = self.settings.gate.update
            preferred = left_to(item.nodeid, models, workers.identities, chosen, self._recorded_on, recording)
        return workers.submit(request, allowed, preferred)

    def run_ahead(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Queue the cases of the items after this one (and this one's)."""
        if not isinstance(item, GemmCaseItem):
            return
        if self._order:
            at = self._order.get(item.nodeid, len(self._items))
            ahead = self._items[at : at + AHEAD_PER_GPU * max(1, len(self._workers().pools))]
        else:  # an xdist worker knows only its next item
            ahead = [item, nextitem] if nextitem is not None else [item]
        for later in ahead:
            if isinstance(later, GemmCompileItem):
                continue
            if not isinstance(later, GemmCaseItem):
                break  # it may use the GPU itself: nothing is queued beside it
            if later.nodeid in self._ahead or later.case.skip_reason:
                continue
            if any(later.get_closest_marker(name) for name in _MARKS_THAT_SKIP):
                continue  # it may not run: its case is sent when (if) it does
            try:
                request = self.request(later, "benchmark" in later.fixturenames and self.timed)
            except GemmFailure:
                continue
            self._ahead[later.nodeid] = (request, self._submit(later, request))

    def take(self, item: GemmCaseItem, request: Request) -> Future[Done]:
        """The item's case: the one sent ahead when it was asked the same way, else sent now; first in line."""
        submitted, future = self._ahead.pop(item.nodeid, (None, None))
        if future is not None and submitted == request:
            self._workers().hurry(future)
            return future
        if future is not None:
            self._workers().drop(future)
        future = self._submit(item, request)
        self._workers().hurry(future)  # its item waits now: any GPU takes it
        return future

    def drop(self, nodeid: str) -> None:
        """The item will not run its case (its setup failed or skipped)."""
        submitted = self._ahead.pop(nodeid, None)
        if submitted is not None:
            self._workers().drop(submitted[1])
