"""A persisting L2 window (the cheat catalogue's row 19; docs/verification.md#persisting-l2): host code can set aside
part of L2 for lines that survive other traffic (``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)``) and mark a
range of memory to be kept there (a stream's access-policy window), so that a timed launch finds its inputs in L2
whatever the harness's flush wrote. Only host code sets them: a Python kernel's (read here), or a ``.cu`` kernel's fill
function (not read yet).

Before a Python kernel's case's first timed call the worker reads both and resets what is set, unreported: what
the timed calls did not set (a library's, an earlier case's, or this case's own untimed calls', which then gain
nothing in its timing). After each call it reads both again; what it finds set is reset
before the next launch (the set-aside to 0,
the persisting lines made normal, the harness stream's window cleared) and reported. Read through ``cuda-bindings``'
runtime API; without it the check says why it cannot run. Part of the worker package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PersistingL2"]


class PersistingL2:
    """The device's persisting-L2 set-aside and a stream's access-policy window: read, and reset."""

    def __init__(self, stream_ptr: int) -> None:
        self.stream_ptr = stream_ptr
        self.why_not = ""  # why the check cannot run here ('' when it can)
        self.found = 0  # the most bytes found set aside or in a window, over the calls read
        try:
            from cuda.bindings import runtime
        except ImportError as exc:
            self.rt: Any = None
            self.why_not = f"cuda-bindings cannot be imported ({exc}): persisting L2 not checked"
            return
        self.rt = runtime

    def _stream(self) -> Any:
        return self.rt.cudaStream_t(self.stream_ptr)

    def _ok(self, result: tuple[Any, ...]) -> Any:
        err = result[0]
        if int(err) != 0:
            raise RuntimeError(f"CUDA runtime error {int(err)} reading the persisting L2 state")
        return result[1] if len(result) > 1 else None

    def used(self) -> int:
        """Bytes set aside for persisting lines, or covered by the stream's window with a persisting hit property:
        the larger (0: neither)."""
        if self.rt is None:
            return 0
        rt = self.rt
        limit = int(self._ok(rt.cudaDeviceGetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize)))
        attr = self._ok(rt.cudaStreamGetAttribute(self._stream(), rt.cudaStreamAttributeAccessPolicyWindow))
        window = attr.accessPolicyWindow
        persisting = rt.cudaAccessProperty.cudaAccessPropertyPersisting
        covered = int(window.num_bytes) if window.hitProp == persisting and window.hitRatio > 0 else 0
        return max(limit, covered)

    def reset(self) -> None:
        """Once the stream's work is done (the launch that used them): the set-aside to 0, every persisting line made
        normal, the stream's window cleared."""
        rt = self.rt
        self._ok(rt.cudaStreamSynchronize(self._stream()))
        self._ok(rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize, 0))
        self._ok(rt.cudaCtxResetPersistingL2Cache())
        value = rt.cudaStreamAttrValue()
        value.accessPolicyWindow.num_bytes = 0
        value.accessPolicyWindow.hitRatio = 0.0
        self._ok(rt.cudaStreamSetAttribute(self._stream(), rt.cudaStreamAttributeAccessPolicyWindow, value))

    def start(self) -> None:
        """Before the first call watched: what is already set reset, not counted (no call of this case set it)."""
        try:
            if self.used():
                self.reset()
        except RuntimeError as exc:
            self.rt, self.why_not = None, f"{exc}: persisting L2 not checked"

    def after_call(self) -> None:
        """Read the state a call left; reset what it set, and remember how much. Where the runtime cannot be read
        (a driver older than cuda-bindings), the check stops, saying why."""
        try:
            found = self.used()
        except RuntimeError as exc:
            self.rt, self.why_not = None, f"{exc}: persisting L2 not checked"
            return
        if found:
            self.found = max(self.found, found)
            self.reset()
