"""The host inputs of the case likely to come next, drawn on a thread of the worker's own while the current case runs.

The pytest process names that case with each request it sends (``ahead``, :mod:`..isolation.protocol`): the next
one queued for the same GPU, which this worker will run unless another GPU takes it first. Drawing inputs is host
work (NumPy's generator and casts let go of the GIL as they fill), so it goes on while the current case's
verification and timing wait for the GPU; a case whose inputs were drawn ahead takes them, one whose were not (or
were drawn for another request) draws its own. What is drawn is what :meth:`.inputs.InputStrategy.draw` gives for the
request's seed, read-only, so taking it changes nothing a case sees. Part of the worker package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..records.request import Request
from ..specs.cases import Case
from ..specs.footprint import storage_dims
from .operands import CaseInputs

__all__ = ["AHEAD_MOST_ELEMENTS", "DrawnAhead"]

#: the most elements (A, B and C's start together) drawn ahead: a larger case's inputs are drawn in its own phase, so
#: that the worker never holds two large cases' host inputs at once
AHEAD_MOST_ELEMENTS = 1 << 24


class DrawnAhead:
    """At most one request's inputs, drawing or drawn: :meth:`expect` starts them, :meth:`take` hands them over."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="pytest-gemm inputs ahead")
        self._request: Request | None = None
        self._drawn: Future[CaseInputs] | None = None

    def expect(self, request: Request, case: Case, draw: Callable[[int], CaseInputs]) -> bool:
        """Start drawing ``request``'s inputs (``draw(seed)``, for its ``case``) in place of any not taken; False
        where they are too large to draw ahead."""
        self._request, self._drawn = None, None
        elements = sum(math.prod(storage_dims(case.spec, op, case.shape)) for op in "ABC")
        if elements > AHEAD_MOST_ELEMENTS:
            return False
        self._request, self._drawn = request, self._pool.submit(draw, request.seed)
        return True

    def take(self, request: Request) -> CaseInputs | None:
        """The inputs drawn ahead for ``request`` (waited for), or None: none were, they were for another request, or
        drawing them failed (the case draws its own, and says why if it fails again)."""
        drawn, self._request, self._drawn = (self._drawn if self._request == request else None), None, None
        if drawn is None:
            return None
        try:
            return drawn.result()
        except Exception:
            return None
