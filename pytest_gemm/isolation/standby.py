"""A pool's standby workers: started ahead of need, so that a lost worker costs the case that lost it and nothing more.

:class:`~.workers.WorkerPool` keeps them: which start when, which one becomes the worker, and what each waits for
(docs/architecture.md#the-boundary). A standby imports ahead the libraries the run's cases may use, and the first case
to use one runs on it, the worker waiting as a standby in its place (:meth:`Standbys._promote`).
"""

from __future__ import annotations

import threading
from typing import Any

from .process import Dying, WorkerProcess

__all__ = ["STANDBY_MOST", "START_TIMEOUT", "Standbys"]

START_TIMEOUT = 180.0  # seconds a new worker may take to start: import CuPy, open the device, warm up
STANDBY_MOST = 3  # standby workers kept at most: as many as crashes that come faster than a worker starts need


class Standbys:
    """The standby workers of a :class:`~.workers.WorkerPool`, which sets the state below."""

    command: list[str]
    pin: str | None  # the CUDA_VISIBLE_DEVICES entry of its GPU, or None (the first visible one)
    facts: dict[str, Any] | None
    standby: bool  # the backend's start is costly (its hello says so): a standby is kept ready
    standbys: int  # how many are kept
    imports: tuple[str, ...]  # libraries its standbys import once started
    _process: WorkerProcess | None
    _standby: list[tuple[WorkerProcess, str | None]]  # started ahead, or waiting in turn, with their pins
    _dying: Dying
    _closed: bool
    _lock: threading.RLock
    gave_up: bool  # no worker will start in this run (the pool's property)

    def _take_standby(self, fresh: bool) -> WorkerProcess | None:
        """The oldest standby worker (it becomes the worker), one that never ran a case when ``fresh``; one not started
        yet means that workers are lost faster than one starts, and one more is kept from now on (not so for a first
        worker started ahead)."""
        for entry in list(self._standby):
            process, pin = entry
            if pin != self.pin:  # started before this pool was pinned to its GPU
                self._standby.remove(entry)
                self._dying.add(process)
                continue
            if fresh and process.served:
                continue
            self._standby.remove(entry)
            if self.facts is not None and not process.settled(0):  # not a first worker started ahead
                self.standbys = min(STANDBY_MOST, self.standbys + 1)
            return process
        return None

    def _promote(self, imports: tuple[str, ...]) -> None:
        """Run a case that imports a library on a standby that has it imported, where the worker has not (it says so
        of a library a case of its own imported): the worker waits as a standby in its place, so no new one starts and
        no timing waits for one."""
        if self._process is None or set(imports) <= self._process.imported:
            return
        for entry in self._standby:
            entry[0].read_news()
            if entry[1] == self.pin and entry[0].greeted and set(imports) <= entry[0].imported:
                self._standby.remove(entry)
                self._standby.append((self._process, self.pin))
                self._process = entry[0]
                return

    def keep_standby(self) -> None:
        """Start standby workers, where this pool keeps them, until it has :attr:`standbys` pinned where it runs, each
        importing :attr:`imports` ahead. They start once a worker of this run has said hello (here, or before
        :meth:`start_ahead`), so they find CuPy's cache warm (``--warmed``: a shorter warm-up); the first worker's own
        standby (:meth:`start_first`) warms up in full."""
        for process, pin in [entry for entry in self._standby if entry[1] != self.pin]:
            self._dying.add(process)
            self._standby.remove((process, pin))
        while self.standby and len(self._standby) < self.standbys and not (self._closed or self.gave_up):
            if not self._start_warmed(self.imports):  # none: the next replacement starts a worker, as without one
                return

    def start_first(self) -> None:
        """Start the run's first worker and its standby side by side, without waiting for them: the standby's start
        goes on beside the worker's, and the first timing, which waits for it, waits no longer. Both warm up in full
        (CuPy's cache may be cold), the standby importing :attr:`imports` ahead."""
        with self._lock:
            try:
                self._standby.append((WorkerProcess(self.command, self.pin), self.pin))
                self._standby.append((WorkerProcess(self.command, self.pin, self.imports), self.pin))
            except OSError:
                return

    def pin_to(self, entry: str) -> None:
        """Pin it to the GPU its unpinned workers run on (the first visible one): a standby started unpinned too."""
        with self._lock:
            self._standby = [(process, entry if pin is None else pin) for process, pin in self._standby]
            self.pin = entry

    def start_ahead(self) -> None:
        """Start this pool's worker and its standbys now, side by side, without waiting for them (``--warmed``): for a
        GPU planned after the run's first worker, of the same architecture, said its start is costly and warmed CuPy's
        cache. Its first timing then waits for no standby started after its worker."""
        with self._lock:
            self.standby = True
            for i in range(1 + self.standbys):  # the worker (the first taken), then its standbys
                if not self._start_warmed(self.imports if i else ()):  # the first case starts one, as without this
                    return

    def _start_warmed(self, imports: tuple[str, ...]) -> bool:
        """Start a worker with ``--warmed`` among the standbys (the first taken is the worker), importing ``imports``
        ahead; False if refused."""
        try:
            self._standby.append((WorkerProcess([*self.command, "--warmed"], self.pin, imports), self.pin))
        except OSError:
            return False
        return True

    def _quiet(self) -> None:
        """Before a case's timing: wait until each standby has started (its hello, or its end, is waiting to be read;
        at most START_TIMEOUT from its start) and every killed worker has gone, so that nothing of the pool's shares
        the GPU with the timing. What a standby imports ahead, after its hello, runs on the CPU alone."""
        for entry in list(self._standby):
            if not entry[0].settled(entry[0].left_of(START_TIMEOUT)):  # not started in time: a new one starts
                self._dying.add(entry[0])
                self._standby.remove(entry)
        self._dying.reap(wait=True)

    def _alone(self) -> None:
        """Give a case the GPU's memory to itself: the standbys killed, every killed worker gone."""
        for process, _ in self._standby:
            self._dying.add(process)
        self._standby = []
        self._dying.reap(wait=True)
