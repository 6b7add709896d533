"""A case prepared on a device: its strategies, chosen once (the kernel's kind, the input family, the peer), and its
host inputs, drawn once. It hands the same operands, laid out the same way, to every phase that runs the kernel: the
setup call, verification and its re-runs, timing and the re-verification of the last timed launches; each gets
buffers of its own from it (:meth:`PreparedCase.operands`, :meth:`PreparedCase.packed`), so that what one phase does
to its buffers (an autotuner's trials, a wrong kernel's writes) never reaches another's. The fp64 truth is the one
thing two phases share: verification computes it after the kernel's first launch, and the timing judges by it.
Part of the worker package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..judge.accuracy import Truth
from ..records.dtypes import DType, get_dtype
from ..records.outcome import ErrorStats
from ..specs.cases import Case, precision
from ..specs.families import family_of
from ..specs.footprint import operand_layout, operand_shape
from .buffers import GuardedMatrix, bits_to_float64, guarded_buffer, uint_type, upload_bits
from .epilogues import NoEpilogue, epilogue_strategy
from .inputs import InputStrategy
from .kinds import KernelStrategy
from .layouts import Layout, layout_strategy
from .operands import CaseInputs, Operands
from .peers import Peer
from .runner import GpuRunner

__all__ = ["PreparedCase", "Watch"]

#: a launch watched for GPU work outside the harness's stream: the other streams it used (CUPTI's ids), or why that
#: cannot be told (:meth:`~.timer.Timer.streams_of`)
Watch = Callable[[Callable[[], None]], "tuple[int, ...] | str"]


class PreparedCase:
    """One case on one device: its kernel, input and peer strategies and its host inputs. ``device`` is the worker's
    GPU runner (the CPU tests give a stand-in with ``cp``, ``stream`` and what the strategies ask of it);
    ``guards``: operands sit in guarded buffers (not under compute-sanitizer); ``watch``: how a launch is watched
    for work on other streams (None: it cannot be); ``data``: its host inputs, given (None: drawn from ``seed``);
    ``graph_room``: the device has room for a CUDA graph's replay besides; ``drawn``: what ``inputs.draw(seed)``
    gives, drawn while the case before ran (worker.next_inputs)."""

    def __init__(
        self,
        device: GpuRunner,
        case: Case,
        seed: int,
        kernel: KernelStrategy,
        inputs: InputStrategy,
        peer: Peer,
        *,
        guards: bool = True,
        watch: Watch | None = None,
        data: CaseInputs | None = None,
        graph_room: bool = True,
        drawn: CaseInputs | None = None,
    ) -> None:
        self.device, self.case, self.seed = device, case, seed
        self.kernel, self.inputs, self.peer = kernel, inputs, peer
        self.guards, self.watch = guards, watch
        #: the device has room for a CUDA graph's replay on a set of its own (worker.graphs)
        self.graph_room = graph_room
        #: how the case's GEMMs lie in its operands (one, a batch, a grouped GEMM's groups), chosen once
        self.layout: Layout = layout_strategy(case)
        #: what the kernel writes, and from what (C in place, or a fused epilogue's D), chosen once
        self.epilogue: NoEpilogue = epilogue_strategy(case)
        self.data: CaseInputs = data or self.epilogue.inputs(self.layout.inputs(drawn or inputs.draw(seed)), seed)
        data = self.data
        #: A, B and the output's start (C's prior data; None: the poison) in their storage order, laid out once for
        #: every phase
        self.stored: dict[str, np.ndarray | None] = {
            "A": data.stored(data.a, "A", self.cp),
            "B": data.stored(data.b, "B", self.cp),
            "C": None if self.prior is None else data.stored(self.prior, "C", self.cp),
        }
        self._grids: dict[str, GuardedMatrix] | None = None  # what timed sets read besides A, B and C (made once)
        self._groups: dict[str, GuardedMatrix] | None = None  # timed sets' group arrays (once; pointer arrays: each)
        self._epilogue: dict[str, GuardedMatrix] | None = None  # the epilogue's operands of timed sets (made once)
        self._truth: Truth | None = None  # the fp64 truth, once computed (verification's, kept for the timing)

    @property
    def cp(self) -> Any:
        return self.device.cp

    @property
    def dtypes(self) -> tuple[DType, DType]:
        """The inputs' dtype with the accumulation the kernel declares, and C's: what its output is judged by."""
        return precision(self.case)

    @property
    def out(self) -> DType:
        return get_dtype(self.case.spec.output_dtype(self.case.dtype))

    @property
    def prior(self) -> np.ndarray | None:
        """What the output holds before a launch (logical): C's prior data; None for the poison (beta = 0, or a
        kernel that writes D apart from C)."""
        return None if self.epilogue.d else self.data.c0

    def prior_bits(self, bits: tuple[Any, Any, Any] | None = None) -> Any | None:
        """The output's start among the inputs' bits on the device (:meth:`uploaded`; uploaded alone when no bits are
        given): C's, or None for the poison."""
        if self.epilogue.d:
            return None
        if bits is not None:
            return bits[2]
        return None if self.data.c0 is None else upload_bits(self.cp, self.data.c0)

    # -- operands -----------------------------------------------------------------------------------------------
    def operands(self, c: np.ndarray | None = None, c_input: np.ndarray | None = None) -> Operands:
        """A fresh set of operands in guarded buffers of their stored shape, ld padding and batch (each a stride's
        gap apart where the kernel takes its stride): A and B, C holding ``c`` (logical; None: C's start, its prior
        data or the poison), and what else the kernel reads (``c_input``: what a C apart from D holds instead of its
        own start)."""
        stored, dt = self.stored, get_dtype(self.case.dtype)
        a, b = self._guarded("A", dt, stored["A"]), self._guarded("B", dt, stored["B"])
        c_ = self._guarded("C", self.out, stored["C"] if c is None else self.data.stored(c, "C", self.cp))
        return Operands(
            a,
            b,
            c_,
            self.inputs.grids(self.cp, self.data, self.guards),
            self.layout.arrays(self.cp, self.guards, {"A": a, "B": b, "C": c_}),
            self.epilogue.arrays(self.cp, self.data, self._like_c, self.guards, c_input),
        )

    def _like_c(self, fill: np.ndarray | None) -> GuardedMatrix:
        """A guarded buffer laid out as C's holding ``fill`` (logical; None: the poison)."""
        return self._guarded("C", self.out, None if fill is None else self.data.stored(fill, "C", self.cp))

    def _guarded(self, name: str, dt: DType, fill: np.ndarray | None) -> GuardedMatrix:
        """Operand ``name`` in a buffer of the layout the case's memory was counted by (specs.footprint)."""
        case = self.case
        layout = operand_layout(case.spec, name, case.shape, case.storage, dt.itemsize, self.guards)
        shape = case.storage.stored_shape(name, operand_shape(case.spec, name, case.shape))
        return guarded_buffer(self.cp, dt, layout, shape, fill, guards=self.guards)

    def packed(self, uploaded: tuple[Any, Any]) -> Operands:
        """A set of operands for a timed launch: copies of ``uploaded`` (A's and B's stored bits on the device), a C of
        its own, packed and unguarded; the scales' grids, made once for every set."""
        cp, case, data = self.cp, self.case, self.data
        dt = get_dtype(case.dtype)
        rows, cols = data.storage.stored_shape("C", operand_shape(case.spec, "C", case.shape))
        c = cp.empty((data.batch_of("C") * rows, cols), dtype=uint_type(cp, self.out.itemsize))
        if self._grids is None:
            self._grids = self.inputs.grids(cp, self.data, self.guards)
        if self._epilogue is None:
            self._epilogue = self.epilogue.arrays(cp, data, self._packed_like_c, self.guards)
        a, b = (_plain(x.copy(), dt, data.batch_of(op)) for op, x in zip("AB", uploaded))
        c_ = _plain(c, self.out, data.batch_of("C"))
        groups = self._groups
        if groups is None:  # made once, or for each set where they point into its operands
            groups = self.layout.arrays(cp, self.guards, {"A": a, "B": b, "C": c_})
            self._groups = None if self.layout.per_set else groups
        return Operands(a, b, c_, self._grids, groups, self._epilogue)

    def _packed_like_c(self, fill: np.ndarray | None) -> GuardedMatrix:
        """A packed, unguarded buffer laid out as a timed set's C holding ``fill`` (logical; None: uninitialised)."""
        cp, data = self.cp, self.data
        rows, cols = data.storage.stored_shape("C", operand_shape(self.case.spec, "C", self.case.shape))
        bits = cp.empty((rows, cols), dtype=uint_type(cp, self.out.itemsize))
        if fill is not None:
            bits[...] = data.stored_bits(cp, fill, "C")
        return _plain(bits, self.out, 1)

    # -- launches -----------------------------------------------------------------------------------------------
    def launch(self, ops: Operands, watch: bool = False) -> tuple[int, ...] | str:
        """Run the kernel once on ``ops`` and wait for it (CUDA errors propagate to the worker, which classifies them).
        With ``watch``, a launch the kernel's strategy watches is watched (:attr:`watch`): the other streams it put
        work on, or why that cannot be told (nothing where it is not watched)."""
        call = self.kernel.launcher(ops)
        streams: tuple[int, ...] | str = ()
        if watch and self.kernel.watched and self.watch is not None:
            streams = self.watch(call)
        else:
            call()
            if watch and self.kernel.watched:
                streams = "this worker has no stream check"
        self.kernel.wait()
        return streams

    def setup_call(self) -> tuple[str, ...]:
        """The kernel's first call for the case, on operands of its own that are then thrown away: the autotuned
        Triton kernels it called, each with its choice. On the harness's stream, as every launch of the case."""
        with self.device.stream:
            ops = self.operands()
            return self.kernel.autotuned(lambda: self.launch(ops))

    # -- the truth and judging outputs --------------------------------------------------------------------------
    def uploaded(self) -> tuple[Any, Any, Any]:
        """The logical A, B and prior C (None when beta = 0) as their bits on the device, uploaded again: the
        truth's and the peer's own copies."""
        cp, data = self.cp, self.data
        return upload_bits(cp, data.a), upload_bits(cp, data.b), None if data.c0 is None else upload_bits(cp, data.c0)

    def truth(self, bits: tuple[Any, Any, Any] | None = None) -> Truth:
        """The fp64 result and the scales of its bounds, from the inputs' bits (:meth:`uploaded`, uploaded here when
        not given): the product of exactly the operands the input family computes with (an FP8 case's, dequantised).
        Computed at the first call (verification's, after the kernel's first launch) and kept: the timing judges its
        outputs by the same truth, and later calls' bits, the same inputs', are not read."""
        if self._truth is None:
            self._truth = self._computed_truth(bits if bits is not None else self.uploaded())
        return self._truth

    def _computed_truth(self, bits: tuple[Any, Any, Any]) -> Truth:
        cp, case = self.cp, self.case
        dt = get_dtype(case.dtype)
        a64, b64 = self.inputs.exact(cp, self.data, bits_to_float64(cp, bits[0], dt), bits_to_float64(cp, bits[1], dt))
        c064 = None if bits[2] is None else bits_to_float64(cp, bits[2], self.out)
        truth = self.epilogue.truth(cp, self.layout.truth(cp, a64, b64, c064, self.out), self.data, self.out)
        truth.figures = family_of(case.dtype).figures
        return truth

    def output(self, gc: GuardedMatrix, c0_bits: Any) -> tuple[Any, Any]:
        """C (logical order, float64), and where it still holds, bit for bit, what it started as."""
        cp, data, out = self.cp, self.data, self.out
        got = data.logical(gc.as_float64(cp, out), "C")
        c_bits = data.logical(gc.matrix(uint_type(cp, out.itemsize)), "C")
        unchanged = c_bits == out.poison_bits if c0_bits is None else c_bits == c0_bits
        return got, unchanged

    def judge_output(self, gc: GuardedMatrix, c0_bits: Any, truth: Truth) -> ErrorStats:
        """Error statistics of the C held in ``gc`` (unwritten = still bitwise equal to what it started as)."""
        dt, out = self.dtypes
        got, unchanged = self.output(gc, c0_bits)
        return truth.judge(self.cp, got, self.case.shape.K, dt, out, unchanged)

    def output_passes(self, gc: GuardedMatrix, truth: Truth) -> bool:
        """Whether the C held in ``gc`` passes (what :meth:`judge_output` would say of it, without its figures)."""
        dt, out = self.dtypes
        got = self.data.logical(gc.as_float64(self.cp, self.out), "C")
        return truth.passes(self.cp, got, self.case.shape.K, dt, out)

    def peer_stats(self, truth: Truth, bits: tuple[Any, Any, Any]) -> ErrorStats | None:
        """The peer's output on the kernel's work, judged by the same bound (None where there is no peer)."""
        if self.peer.reason:
            return None
        dt, out = self.dtypes
        result = self.peer.result(self.device, self.data, bits, dt, out)
        return truth.judge(self.cp, result, self.case.shape.K, dt, out)


def _plain(bits: Any, dt: DType, batch: int) -> GuardedMatrix:
    """A stacked operand (a batch's matrices one after the other) as a batch of packed matrices, unguarded."""
    rows, cols = bits.shape
    return GuardedMatrix(bits.reshape(-1), 0, rows // batch, cols, cols, dt.guard_bits, batch)
