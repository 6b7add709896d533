"""CUPTI's activity buffers read raw: libcupti through ctypes, the records' fields gathered with numpy.

cupti-python hands its callback one object per record, whose every field read goes through numpy's
``recarray``; here CUPTI's buffers are ours (``cuptiActivityRegisterCallbacks``), the records are walked with
``cuptiActivityGetNextRecord`` (one C call each) and their fields are gathered for all records of a buffer at
once, at the offsets of cupti-python's own dtypes. Each kernel name (a ``const char *`` CUPTI shares between the
records of one kernel) is read once per buffer.

The records' kinds, fields and rows are :mod:`.cupti_records`'.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .cupti_records import CuptiError, Layouts, Row, check_kinds, layouts_from, parse_records

__all__ = ["ActivityBuffers", "activity_buffers", "libcupti_path", "read_c_string"]

# CUptiResult
SUCCESS = 0
ERROR_MAX_LIMIT_REACHED = 12  # cuptiActivityGetNextRecord: no more records in the buffer
ERROR_INVALID_KIND = 21  # cuptiActivityGetNextRecord: an incomplete or invalid record
FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also the buffers holding incomplete records

# void requested(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
_REQUESTED = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
# void completed(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize)
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)


def libcupti_path(load: Callable[[], object], maps: str = "/proc/self/maps") -> str:
    """The path of the one libcupti this process has loaded. ``load`` is called first (cupti-python opens its
    library on its first call; what it raises is part of the reason given if none is loaded). Two different
    copies loaded (a Python kernel's framework may bring its own) is an error: which one cupti-python set up
    cannot be told from here."""
    reason = ""
    try:
        load()
    except Exception as exc:
        reason = f": {type(exc).__name__}: {exc}"
    found: list[str] = []
    with open(maps, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].rstrip("\n").rsplit("/", 1)[-1].startswith("libcupti.so"):
                path = parts[5].rstrip("\n")
                if path not in found:
                    found.append(path)
    if not found:
        raise CuptiError(f"cupti-python loaded no libcupti.so* (none in {maps}){reason}")
    if len(found) > 1:
        copies = ", ".join(found)
        raise CuptiError(f"{len(found)} copies of libcupti are loaded ({copies}): cannot tell which one to use")
    return found[0]


def read_c_string(address: int) -> str:
    """The NUL-terminated string at ``address``."""
    return ctypes.string_at(address).decode("utf-8", "replace")


class ActivityBuffers:
    """libcupti's activity API: the buffer callbacks (registered once; CUPTI takes one registration a process),
    enable, disable and flush. Each completed buffer's rows go to ``sink``."""

    def __init__(self, lib: ctypes.CDLL, layouts: Layouts, buffer_bytes: int) -> None:
        self.lib = lib
        self.layouts = layouts
        self.buffer_bytes = buffer_bytes
        self.sink: Callable[[list[Row]], None] | None = None
        self.error: BaseException | None = None  # raised by the callbacks, which cannot raise into CUPTI
        self._owned: dict[int, np.ndarray] = {}  # the buffers CUPTI holds, by address, kept alive until completed
        self._free: list[np.ndarray] = []  # buffers CUPTI gave back, for its next requests
        c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        for name, argtypes in (
            ("cuptiActivityRegisterCallbacks", [_REQUESTED, _COMPLETED]),
            ("cuptiActivityEnable", [c_int]),
            ("cuptiActivityDisable", [c_int]),
            ("cuptiActivityFlushAll", [ctypes.c_uint32]),
            ("cuptiActivityGetNextRecord", [c_void_p, c_size_t, ctypes.POINTER(c_void_p)]),
            ("cuptiGetResultString", [c_int, ctypes.POINTER(ctypes.c_char_p)]),
        ):
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, c_int  # every one returns a CUptiResult
        # one call a record: a copy without argtypes, given ctypes objects of the declared types, skips their checks
        self._step = lib["cuptiActivityGetNextRecord"]
        self._step.restype = c_int
        self._callbacks = (_REQUESTED(self._requested), _COMPLETED(self._completed))  # alive as long as self
        self._check(lib.cuptiActivityRegisterCallbacks(*self._callbacks), "cuptiActivityRegisterCallbacks")

    def enable(self, kinds: Iterable[int]) -> None:
        """Enable each kind; when one fails, those enabled before it are disabled again, then it raises."""
        done: list[int] = []
        for kind in kinds:
            result = self.lib.cuptiActivityEnable(kind)
            if result != SUCCESS:
                for other in done:
                    self.lib.cuptiActivityDisable(other)
                self._check(result, f"cuptiActivityEnable({kind})")
            done.append(kind)

    def disable(self, kinds: Iterable[int]) -> None:
        for kind in kinds:
            self._check(self.lib.cuptiActivityDisable(kind), f"cuptiActivityDisable({kind})")

    def flush(self) -> None:
        """Deliver every buffer, incomplete records and all, to the completion callback (blocking)."""
        self._check(self.lib.cuptiActivityFlushAll(FLUSH_FORCED), "cuptiActivityFlushAll")

    def release(self) -> None:
        """Stop collecting, hand every buffer back and stop passing rows on (at exit: no callback once Python is
        gone)."""
        self.sink = None
        with contextlib.suppress(Exception):
            for kind in self.layouts:
                self.lib.cuptiActivityDisable(kind)
            self.lib.cuptiActivityFlushAll(FLUSH_FORCED)

    def raise_error(self) -> None:
        """Raise (and forget) what a callback raised since the last call."""
        error, self.error = self.error, None
        if error is not None:
            raise CuptiError(f"reading CUPTI's buffers failed: {type(error).__name__}: {error}") from error

    def _check(self, result: int, call: str) -> None:
        if result != SUCCESS:
            raise CuptiError(f"{call}: {self._describe(result)}")

    def _describe(self, result: int) -> str:
        text = ctypes.c_char_p()
        if self.lib.cuptiGetResultString(result, ctypes.byref(text)) != SUCCESS or not text.value:
            return f"CUptiResult {result}"
        return f"{text.value.decode('utf-8', 'replace')} (CUptiResult {result})"

    def _requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        """CUPTI wants an empty buffer: one of ours, 8-byte aligned, filled with as many records as fit."""
        try:
            try:  # CUPTI may ask from two threads at once: pop, not look then pop
                array = self._free.pop()
            except IndexError:
                array = _aligned(self.buffer_bytes)
            address = array.ctypes.data
            self._owned[address] = array
            buffer[0], size[0], max_records[0] = address, array.size, 0
        except BaseException as exc:  # none: CUPTI drops records, and the spans() that follows says why
            self.error = self.error or exc
            buffer[0], size[0], max_records[0] = None, 0, 0

    def _completed(self, context: Any, stream: int, buffer: int | None, size: int, valid: int) -> None:
        """CUPTI hands a buffer back: its rows go to the sink, the buffer to the free list."""
        array = self._owned.pop(buffer or 0, None)
        try:
            if array is None:
                raise CuptiError(f"CUPTI completed a buffer it was not given ({buffer})")
            if valid and self.sink is not None:
                rows = parse_records(array[:valid], self._walk(buffer or 0, valid), self.layouts, read_c_string)
                self.sink(rows)
        except BaseException as exc:
            self.error = self.error or exc
        finally:
            if array is not None:
                self._free.append(array)

    def _walk(self, buffer: int, valid: int) -> np.ndarray:
        """The offsets of the records in a buffer's first ``valid`` bytes."""
        record = ctypes.c_void_p()  # null: the first record
        step, start, length, pointer = self._step, ctypes.c_void_p(buffer), ctypes.c_size_t(valid), ctypes.byref(record)
        addresses: list[int] = []
        append = addresses.append
        while (result := step(start, length, pointer)) == SUCCESS:
            append(record.value)
        if result == ERROR_INVALID_KIND:  # the batch's stream was synchronized: every record should be complete
            raise CuptiError(
                f"CUPTI's buffer holds an incomplete or invalid record after {len(addresses)} record(s) "
                f"({self._describe(result)}): the rest of the buffer cannot be read"
            )
        if result != ERROR_MAX_LIMIT_REACHED:
            raise CuptiError(f"cuptiActivityGetNextRecord: {self._describe(result)}")
        return np.asarray(addresses, dtype=np.int64) - buffer


def _aligned(size: int) -> np.ndarray:
    """``size`` bytes starting at an 8-byte aligned address (CUPTI requires it)."""
    raw = np.empty(size + 8, dtype=np.uint8)
    skip = -raw.ctypes.data % 8
    return raw[skip : skip + size]


_SHARED: ActivityBuffers | None = None


def activity_buffers(cupti: Any, buffer_bytes: int) -> ActivityBuffers:
    """The process's one ActivityBuffers (``buffer_bytes`` a buffer, as first asked), on the libcupti that the
    ``cupti.cupti`` module (cupti-python) loads."""
    global _SHARED
    if _SHARED is None:
        check_kinds(cupti.ActivityKind)
        layouts = layouts_from(cupti)
        path = libcupti_path(cupti.get_thread_id_type)  # a harmless call, for cupti-python to open its libcupti
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise CuptiError(f"cannot open {path}: {exc}") from None
        _SHARED = ActivityBuffers(lib, layouts, buffer_bytes)
        atexit.register(_SHARED.release)
    return _SHARED
