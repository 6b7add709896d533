"""The worker unchanged by the code of a kernel file (docs/verification.md#the-harness-unchanged).

A Python kernel, its file's import and a ``.cu`` kernel's fill function run in the worker's own process, beside the
timer and the judge. Around each call of them, :data:`HARNESS` compares:

- pytest-gemm's modules and classes: a function or class replaced, added or deleted, a function's code or defaults
  swapped, a public constant rebound, a public table's contents changed;
- the libraries the timer and the judge call (NumPy, CuPy, CUPTI's bindings, ``time``, ``math``): a name rebound;
- the interpreter's hooks (``sys.settrace``, ``sys.setprofile``, threading's) and the kernel file's functions among
  ``gc.callbacks``;
- threads: one that runs the kernel file's code once the call has returned, or that the call started to run it
  later (a thread of its own, a ``threading.Timer``, a pool it handed the work to), does the kernel's work where the
  timer no longer looks. A library's threads that run their own code (torch.compile's compile workers) are not the
  kernel's.

Between two calls the harness runs, and its own private data may change (a cache filled): the comparison takes it
from there. It never replaces code or its public constants, so such a change between calls (by a host function the
kernel queued on the stream) is still the kernel file's doing, found before the next call and at each phase's end.
A module first seen holding a function of a kernel file is a change too. What this cannot see: memory written
through ``ctypes``, objects' own state, native threads, work a pool runs later with none of the file's code in it;
code that sets out to defeat the check can. docs/verification.md says what would catch that.
"""

from __future__ import annotations

import gc
import operator
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain
from typing import Any

from .namespaces import CODE_OF, DEFAULTS_OF, KERNEL_MODULES, Namespace, of_kernel_file, watched_namespaces

__all__ = ["HARNESS", "HarnessChanged", "HarnessWatch", "ThreadLeft", "left_to_threads"]

_VALUES = operator.methodcaller("values")


class HarnessChanged(Exception):
    """Code of the kernel's file changed the worker: ``details`` says what, one line each."""

    def __init__(self, details: list[str]) -> None:
        super().__init__(details[0] + (f" (and {len(details) - 1} more)" if len(details) > 1 else ""))
        self.details = tuple(details)


class ThreadLeft(Exception):
    """Code of the kernel's file left work to another thread: ``details`` names each thread."""

    def __init__(self, details: list[str]) -> None:
        super().__init__(", ".join(details))
        self.details = tuple(details)


def _kernel_frame(frame: Any) -> Any:
    """The innermost frame of a kernel file's code in ``frame``'s stack, or None."""
    while frame is not None and not str(frame.f_globals.get("__name__", "")).startswith(KERNEL_MODULES):
        frame = frame.f_back
    return frame


def left_to_threads(me: int, before: set[threading.Thread]) -> list[str]:
    """The threads besides ``me`` (the calling thread's id) that run a kernel file's code now (each with the function
    it is in), or that started since ``before`` to run it later (a target or a timer's function defined there)."""
    frames, found = sys._current_frames(), []
    for thread in threading.enumerate():
        frame = _kernel_frame(frames.get(thread.ident)) if thread.ident != me else None
        target = getattr(thread, "_target", None) or getattr(thread, "function", None)
        if frame is not None:
            found.append(f"{thread.name} (in {frame.f_code.co_name}, line {frame.f_lineno})")
        elif thread not in before and (of_kernel_file(target) or of_kernel_file(type(thread))):
            found.append(f"{thread.name} (to run {getattr(target, '__name__', type(thread).__name__)})")
    return sorted(found)


def _hooks() -> tuple[Any, ...]:
    """The interpreter's hooks, and the garbage collector's callbacks of a kernel file (a library's may be its own)."""
    return (
        sys.gettrace(),
        sys.getprofile(),
        threading.gettrace(),
        threading.getprofile(),
        tuple(c for c in gc.callbacks if of_kernel_file(c) or of_kernel_file(getattr(c, "__self__", None))),
    )


_HOOKS = ("sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile", "gc.callbacks")


class HarnessWatch:
    """The watched namespaces as the harness left them, compared before and after each call of a kernel file's code."""

    def __init__(self) -> None:
        self._spaces: dict[str, list[Namespace]] = {}  # by module name
        self._seen: set[str] = set()  # the modules looked at (watched or not)
        self._depth = 0  # inside a watched call (a timed batch): the calls it makes are watched as one
        self._state: tuple[Any, ...] = ()  # every watched namespace at once, as it was (:meth:`_unchanged`)
        self._lists: tuple[list[Any], ...] = ([], [], [], [])  # what :meth:`_now` reads

    def _forget(self) -> None:
        """Start again from what is there now (the worker that found a change is replaced; until then)."""
        self._spaces, self._seen, self._state = {}, set(), ()

    def _now(self) -> tuple[Any, ...]:
        """Every watched namespace at once, in a few tuples made at C's speed: their names, their objects, their
        functions' code and defaults, their tables' contents (the namespaces, functions and tables listed once, as
        :meth:`_take` found them)."""
        maps, functions, dicts, others = self._lists
        return (
            tuple(chain.from_iterable(maps)),
            tuple(chain.from_iterable(map(_VALUES, maps))),
            tuple(map(CODE_OF, functions)),
            tuple(map(DEFAULTS_OF, functions)),
            tuple(chain.from_iterable(map(dict.items, dicts))),
            tuple(chain.from_iterable(others)),
        )

    def _take(self) -> None:
        """List the watched namespaces, their functions and tables once, and take them as they are now."""
        spaces = [ns for namespaces in self._spaces.values() for ns in namespaces]
        tables = [ns.space.get(k) for ns in spaces for k in ns.tables]
        self._lists = (
            [ns.space for ns in spaces],
            [f for ns in spaces for f in ns._functions],
            [t for t in tables if isinstance(t, dict)],
            [t for t in tables if isinstance(t, (list, set))],
        )
        self._state = self._now()

    def _unchanged(self) -> bool:
        """Whether no watched namespace changed since :attr:`_state` was taken (one comparison of them all; an object
        equal to itself is never asked, and an exception from one that changed is a change)."""
        try:
            return bool(self._state) and self._now() == self._state
        except Exception:
            return False

    def check(self) -> None:
        """Raise :class:`HarnessChanged` for what the harness never changes, changed since the last look (its private
        data is taken as it now is); modules imported since are taken as they are, unless they hold a kernel file's
        code."""
        code: list[str] = []
        unchanged = self._unchanged()
        for spaces in () if unchanged else self._spaces.values():
            for i, ns in enumerate(spaces):
                if not ns.same():
                    replaced, _ = ns.changes()
                    code += replaced
                    spaces[i] = Namespace(ns.shown, ns.space, ns.ours)
        new = sys.modules.keys() - self._seen
        for name in new:
            self._seen.add(name)
            spaces = watched_namespaces(name, sys.modules.get(name))
            if spaces:
                self._spaces[name] = spaces
                held = [(ns.shown, k) for ns in spaces for k, v in ns.values.items() if of_kernel_file(v)]
                code += [f"{at}.{k} is the kernel file's" for at, k in held]
        if code:
            self._forget()
            raise HarnessChanged(code)
        if new or not unchanged:
            self._take()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Around one call of a kernel file's code (or a timed batch of them): :meth:`check` before it; after it (also
        when it raised), raise :class:`HarnessChanged` for what it changed, or :class:`ThreadLeft` for work it left
        to another thread. Inside another, nothing of its own."""
        if self._depth:
            yield
            return
        self.check()
        threads, hooks, spaces, count = set(threading.enumerate()), _hooks(), self._spaces, len(self._spaces)
        self._depth = 1
        try:
            yield
        finally:
            depth, self._depth = self._depth, 0
            changed = [f"{name} changed" for name, was, now in zip(_HOOKS, hooks, _hooks(), strict=True) if was != now]
            if depth != 1 or self._spaces is not spaces or len(spaces) != count:
                changed.append("pytest_gemm.worker.integrity.HARNESS's own state changed")
            for namespaces in () if self._unchanged() else spaces.values():
                for ns in namespaces:
                    if not ns.same():
                        code, data = ns.changes()
                        changed += code + data
            if changed:
                self._forget()
                raise HarnessChanged(changed)
            left = left_to_threads(threading.get_ident(), threads)
            if left:
                raise ThreadLeft(left)

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, watched (:meth:`watching`); inside a watched batch, called as it is."""
        if self._depth:
            return fn()
        with self.watching():
            return fn()


#: the worker's one watch: the process is what it watches
HARNESS = HarnessWatch()
