"""The host inputs of the case likely to come next, drawn on a thread of the worker's own while the current case runs.

The pytest process names that case before each request it sends (``ahead``, :mod:`..isolation.protocol`): the one
queued after it for the same GPU, which this worker will run unless another GPU takes it first. Drawing inputs is host
work (NumPy's generator and casts let go of the GIL as they fill; an FP8 case's block scales hold it in part), so it
goes on while the current case's verification waits for the GPU, and the case's timing waits for it to end; a case
whose inputs were drawn ahead takes them, one whose were not (or were drawn for another request, or another version of
its header) draws its own. What is drawn is what :meth:`.inputs.InputStrategy.draw` gives for the
request's seed, read-only, so taking it changes nothing a case sees. Part of the worker package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from ..records.request import Request
from ..specs.cases import Case
from ..specs.footprint import storage_dims
from .operands import CaseInputs

__all__ = ["AHEAD_MOST_ELEMENTS", "DrawnAhead"]

#: the most elements (A, B and C's start together) drawn ahead: a larger case's inputs are drawn in its own phase, so
#: that what the worker holds for the cases to come stays small beside the case it runs
AHEAD_MOST_ELEMENTS = 1 << 24


class DrawnAhead:
    """The inputs of the requests named ahead, drawing or drawn: :meth:`expect` starts them, :meth:`take` hands them
    over. The pytest process names the case after next before it sends the next one, so two are held at most: the
    case about to run and the one named after it."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pytest-gemm inputs ahead")
        self._held: dict[Request, tuple[Case, Future[CaseInputs]]] = {}

    def expect(self, request: Request, case: Case, draw: Callable[[int], CaseInputs]) -> bool:
        """Start drawing ``request``'s inputs (``draw(seed)``, for its ``case``), letting go of the oldest held where
        more than two would be; False where they are too large to draw ahead."""
        if request in self._held:  # named again: the newest
            self._held[request] = self._held.pop(request)
            return True
        if sum(math.prod(storage_dims(case.spec, op, case.shape)) for op in "ABC") > AHEAD_MOST_ELEMENTS:
            return False
        self._held[request] = (case, self._pool.submit(draw, request.seed))
        while len(self._held) > 2:  # a case named that another GPU took: never taken here
            self._held.pop(next(iter(self._held)))[1].cancel()
        return True

    def take(self, request: Request, case: Case) -> CaseInputs | None:
        """The inputs drawn ahead for ``request`` (waited for), or None: none were, they were drawn for another version
        of its kernel file's header than ``case``'s, or drawing them failed (the case draws its own, and says why if it
        fails again)."""
        held = self._held.pop(request, None)
        if held is None or held[0].spec is not case.spec:
            return None
        try:
            return held[1].result()
        except Exception:
            return None

    def settle(self) -> None:
        """Wait for the inputs still being drawn: a case's timing starts with the host to itself (part of a draw holds
        the GIL)."""
        wait([drawn for _, drawn in self._held.values()])
