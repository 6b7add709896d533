"""The host inputs of the case likely to come next, drawn on a thread of the worker's own while the current case runs.

The pytest process names that case before each request it sends (``next``, :mod:`..isolation.protocol`): the one
queued after it for the same GPU, left to this worker unless the case's item waits for it first. Drawing inputs is
host work (NumPy's generator and casts let go of the GIL as they fill; an FP8 case's block scales hold it in part), so
it goes on while the current case's verification waits for the GPU; an autotuner's trials and the case's timing wait
for it to end. A case whose inputs were drawn early takes them; one whose were not (or were drawn for another request,
or another version of its header) draws its own. What is drawn is what :meth:`.inputs.InputStrategy.draw` gives for
the request's seed, read-only, so taking it changes nothing a case sees. Part of the worker package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from ..records.request import Request
from ..specs.cases import Case
from ..specs.footprint import storage_dims
from .operands import CaseInputs

__all__ = ["NEXT_MOST_ELEMENTS", "NextInputs"]

#: the most elements (A, B and C's start together) drawn early: a larger case's inputs are drawn in its own phase, so
#: that what the worker holds for the cases to come stays small beside the case it runs
NEXT_MOST_ELEMENTS = 1 << 24


class NextInputs:
    """The inputs of the requests named next, drawing or drawn: :meth:`expect` starts them, :meth:`take` hands them
    over. The pytest process names the case after next before it sends the next one, so two are held at most: the
    case about to run and the one named after it."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pytest-gemm next inputs")
        self._held: dict[Request, tuple[Case, Future[CaseInputs]]] = {}
        self._left: list[Future[CaseInputs]] = []  # draws let go of that may still run: settle() waits for them too

    def expect(self, request: Request, case: Case, draw: Callable[[int], CaseInputs]) -> bool:
        """Start drawing ``request``'s inputs (``draw(seed)``, for its ``case``), letting go of the oldest held where
        more than two would be; False where they are too large to draw early."""
        if request in self._held:  # named again: the newest
            self._held[request] = self._held.pop(request)
            return True
        if sum(math.prod(storage_dims(case.spec, op, case.shape)) for op in "ABC") > NEXT_MOST_ELEMENTS:
            return False
        self._held[request] = (case, self._pool.submit(draw, request.seed))
        while len(self._held) > 2:  # a case named that another GPU took: never taken here
            self._let_go(self._held.pop(next(iter(self._held)))[1])
        return True

    def take(self, request: Request, case: Case) -> CaseInputs | None:
        """The inputs drawn for ``request`` (waited for), or None: none were, they were drawn for another version of
        its kernel file's header than ``case``'s, or drawing them failed (the case draws its own, and says why if it
        fails again)."""
        held = self._held.pop(request, None)
        if held is None:
            return None
        if held[0].spec is not case.spec:
            self._let_go(held[1])
            return None
        try:
            return held[1].result()
        except Exception:
            return None

    def settle(self) -> None:
        """Wait for the inputs still being drawn: an autotuner's trials and a case's timing start with the host to
        themselves (part of a draw holds the GIL)."""
        wait([*self._left, *(drawn for _, drawn in self._held.values())])
        self._left.clear()

    def _let_go(self, drawn: Future[CaseInputs]) -> None:
        if not drawn.cancel():  # drawing: it ends on its own
            self._left.append(drawn)
