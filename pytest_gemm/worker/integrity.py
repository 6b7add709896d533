"""The worker unchanged by the code of a kernel file (docs/verification.md#the-harness-unchanged).

A Python kernel, its file's import and a ``.cu`` kernel's fill function run in the worker's own process, beside the
timer and the judge. Around each call of them, :data:`HARNESS` compares:

- every attribute of pytest-gemm's modules and of their classes (a function replaced, a constant rebound, a name
  added) and the contents of their public constant tables (``METRICS``, ``FP8_MAX``);
- the functions and classes of the libraries the timer and the judge call (NumPy, CuPy, CUPTI's bindings, ``time``,
  ``math``): one replaced (``cupy.cuda.get_elapsed_time``);
- Python's threads: one still running the kernel file's code when the call has returned does the kernel's work
  where the timer no longer looks (a thread of its own, or a library's pool it handed the work to). A library's
  threads that run their own code (torch.compile's compile workers) are not the kernel's.

Between two calls the harness runs, and its own data may change (a cache filled, a table made once): the comparison
takes it from there. A function, class or module it holds is never replaced by the harness, so one replaced between
calls (by a host callback the kernel queued, say) is still the kernel file's doing, found before the next call and
at the end of each phase. What this cannot see: memory written through ``ctypes``, objects' own state, threads of
native code; docs/verification.md says what would.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HARNESS", "HarnessChanged", "HarnessWatch", "ThreadLeft"]

#: the harness's package: its modules are watched whole
PACKAGE = "pytest_gemm"
#: how the worker names the modules it imports kernel files as (``pytest_gemm_kernels_`` and a hash of the path)
KERNEL_MODULES = "pytest_gemm_kernels_"
#: the libraries the timer and the judge call, watched for a function or class replaced (where imported)
LIBRARIES = (
    "numpy",
    "cupy",
    "cupy.cuda",
    "cupy.cuda.runtime",
    "cupy.cuda.driver",
    "cupti",
    "cupti.cupti",
    "time",
    "math",
)
#: the most elements of a constant table whose contents are compared (a larger one is a cache)
TABLE_MOST = 256
#: what the harness never replaces once it holds it: code, types and modules
_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, types.ModuleType)
_MISSING = object()


class HarnessChanged(Exception):
    """Code of the kernel's file changed the worker: ``details`` says what, one line each."""

    def __init__(self, details: list[str]) -> None:
        super().__init__(details[0] + (f" (and {len(details) - 1} more)" if len(details) > 1 else ""))
        self.details = tuple(details)


class ThreadLeft(Exception):
    """Code of the kernel's file left a thread running: ``details`` names each."""

    def __init__(self, details: list[str]) -> None:
        super().__init__(", ".join(details))
        self.details = tuple(details)


@dataclass
class _Namespace:
    """One watched namespace (a module's or a class's attributes) as it was."""

    shown: str  # "pytest_gemm.judge.accuracy" or "pytest_gemm.judge.accuracy.Truth"
    space: Any  # the live mapping
    ours: bool  # pytest-gemm's own: every change counts; a library's: code replaced only
    values: dict[str, Any] = field(init=False)  # what it held (the objects themselves: an id could be reused)
    tables: dict[str, Any] = field(init=False)  # its public constant tables' contents

    def __post_init__(self) -> None:
        self.values = dict(self.space)
        self._keys, self._objects = tuple(self.values), tuple(self.values.values())
        self.tables = {k: _contents(v) for k, v in self.values.items() if self.ours and _is_table(k, v)}

    def same(self) -> bool:
        """Whether nothing changed since, compared at C's speed: the names, then their objects (an object is equal
        to itself without its ``__eq__`` being called; one that differs is looked at one by one, in :meth:`changes`)."""
        space = self.space
        try:
            return (
                tuple(space) == self._keys
                and tuple(space.values()) == self._objects
                and all(_contents(space.get(k)) == was for k, was in self.tables.items())
            )
        except Exception:  # an object whose comparison raises (an array): a change, looked at one by one
            return False

    def changes(self) -> tuple[list[str], bool]:
        """What changed since: code replaced or added (always counted), and whether its data changed too."""
        code, data, space = [], False, self.space
        for name, value in self.values.items():
            now = space.get(name, _MISSING)
            if now is not value:
                if isinstance(value, _CODE) or isinstance(now, _CODE):
                    code.append(f"{self.shown}.{name} {'deleted' if now is _MISSING else 'replaced'}")
                data = data or self.ours
        if len(space) != len(self.values):
            for name in [n for n in list(space) if n not in self.values]:
                if self.ours and isinstance(space[name], _CODE) and not _submodule(self.shown, name, space[name]):
                    code.append(f"{self.shown}.{name} added")
                data = data or self.ours
        for name, was in self.tables.items():
            if _contents(space.get(name)) != was:
                data = True
        return code, data

    def data_changes(self) -> list[str]:
        """Its data that changed since, by name (a kernel's call must change none)."""
        if not self.ours:
            return []
        space = self.space
        found = [
            f"{self.shown}.{n} {'deleted' if n not in space else 'rebound'}"
            for n, v in self.values.items()
            if space.get(n, _MISSING) is not v and not isinstance(v, _CODE)
        ]
        found += [
            f"{self.shown}.{n} added"
            for n in list(space)
            if n not in self.values and not _submodule(self.shown, n, space[n])
        ]
        found += [
            f"{self.shown}.{n}'s contents changed" for n, was in self.tables.items() if _contents(space.get(n)) != was
        ]
        return found


def _submodule(shown: str, name: str, value: Any) -> bool:
    """Whether ``value`` is the package ``shown``'s submodule ``name``, bound by its import."""
    return isinstance(value, types.ModuleType) and value.__name__ == f"{shown}.{name}"


def _contents(value: Any) -> Any:
    """A constant table's contents: its keys and elements (compared as :meth:`_Namespace.same` compares)."""
    if isinstance(value, dict):
        return tuple(value), tuple(value.values())
    return tuple(value) if isinstance(value, (list, set)) else None


def _is_table(name: str, value: Any) -> bool:
    return name.isupper() and isinstance(value, (dict, list, set)) and len(value) <= TABLE_MOST


def _watched(name: str, module: Any) -> list[_Namespace]:
    """Module ``name``'s namespaces to watch: its own and (pytest-gemm's) its classes'; none where it is not watched."""
    ours = name == PACKAGE or name.startswith(PACKAGE + ".")
    if not (ours or name in LIBRARIES) or not isinstance(module, types.ModuleType):
        return []
    found = [_Namespace(name, module.__dict__, ours)]
    if ours:
        classes = [v for v in list(module.__dict__.values()) if isinstance(v, type) and v.__module__ == name]
        found += [_Namespace(f"{name}.{c.__qualname__}", c.__dict__, True) for c in classes]
    return found


def running_kernel_code(me: int) -> list[str]:
    """The threads besides ``me`` (the calling thread's id) that are running a kernel file's code now: each named,
    with the function of that file it is in."""
    frames, found = sys._current_frames(), []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident != me else None
        while frame is not None and not str(frame.f_globals.get("__name__", "")).startswith(KERNEL_MODULES):
            frame = frame.f_back
        if frame is not None:
            found.append(f"{thread.name} (in {frame.f_code.co_name}, line {frame.f_lineno})")
    return sorted(found)


class HarnessWatch:
    """The watched namespaces as the harness left them, compared before and after each call of a kernel file's code."""

    def __init__(self) -> None:
        self._spaces: dict[str, list[_Namespace]] = {}  # by module name
        self._seen: set[str] = set()  # the modules looked at (watched or not)
        self._depth = 0  # inside a watched call (a timed batch): the calls it makes are watched as one

    def check(self) -> None:
        """Raise :class:`HarnessChanged` for code replaced since the last look (the harness's own data changes are
        taken as they now are); modules imported since are taken as they are."""
        code = []
        for spaces in self._spaces.values():
            for i, ns in enumerate(spaces):
                if ns.same():
                    continue
                replaced, data = ns.changes()
                code += replaced
                if data and not replaced:
                    spaces[i] = _Namespace(ns.shown, ns.space, ns.ours)
        if len(sys.modules) != len(self._seen):
            for name, module in list(sys.modules.items()):
                if name not in self._seen:
                    self._seen.add(name)
                    spaces = _watched(name, module)
                    if spaces:
                        self._spaces[name] = spaces
        if code:
            self._spaces, self._seen = {}, set()  # the worker is replaced; until then, compared from here
            raise HarnessChanged(code)

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Around one call of a kernel file's code (or a timed batch of them): :meth:`check` before it; after it (also
        when it raised), raise :class:`HarnessChanged` for anything it changed, or :class:`ThreadLeft` for another
        thread still running its file's code. Inside another, nothing of its own."""
        if self._depth:
            yield
            return
        self.check()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            changed = []
            for spaces in self._spaces.values():
                for ns in spaces:
                    if ns.same():
                        continue
                    code, data = ns.changes()
                    changed += code + (ns.data_changes() if data else [])
            if changed:
                self._spaces, self._seen = {}, set()
                raise HarnessChanged(changed)
            left = running_kernel_code(threading.get_ident())
            if left:
                raise ThreadLeft(left)

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, watched (:meth:`watching`)."""
        with self.watching():
            return fn()


#: the worker's one watch: the process is what it watches
HARNESS = HarnessWatch()
