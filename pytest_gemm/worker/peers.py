"""The peer strategies: the library GEMM of a case that its output is compared with and its time measured against, or
none and why. :func:`peer_strategy` chooses one per case, the only place the worker does:

* cuBLAS's GEMM in the kernel's own dtypes, storage orders and accumulation (``gemmEx``, or its strided-batched GEMM;
  INT8 with ``CUBLAS_COMPUTE_32I``): :mod:`.cublas`;
* cuBLASLt's FP8 GEMM with the kernel's scales, through torch: :mod:`.fp8_peer`;
* none: the case is verified without a peer and not timed, and the run says why.

Part of the worker package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ..records.dtypes import DType, get_dtype
from ..specs.cases import Case
from ..specs.families import family_of
from .cublas import Bind, gemm_runner, peer_output
from .epilogue_peer import epilogue_runner, no_epilogue_peer
from .fp8_peer import fp8_runner
from .grouped_fp8_peer import grouped_fp8_runner, no_grouped_fp8_peer, one_launch_peer
from .grouped_peer import grouped_result, grouped_runner, no_grouped_peer
from .inputs import InputStrategy, ScaledInputs
from .operands import CaseInputs
from .runner import GpuRunner

__all__ = [
    "CublasLtFp8Peer",
    "CublasPeer",
    "GroupedFp8Peer",
    "NoPeer",
    "Peer",
    "TorchEpiloguePeer",
    "TorchGroupedPeer",
    "launched_alone",
    "peer_strategy",
]

#: the pairs of granularities (A's, B's) cuBLASLt's FP8 GEMM scales by, through torch (its joint scaling modes)
PEER_SCALINGS = (("tensor", "tensor"), ("row", "col"), ("1x128", "128x128"))


class Peer:
    """A case's peer: ``reason`` says why there is none ('' when there is one); ``name``, what its times are of, as the
    timing table names a peer that is not cuBLAS."""

    reason = ""
    name = "cuBLAS"

    def __init__(self, case: Case) -> None:
        self.case = case

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        """The peer's GEMM of the case (inputs of ``dt`` with their declared accumulation, C of ``out``; ``data``: its
        host inputs), on the harness's stream, given the operands it works on."""
        raise NotImplementedError

    def result(self, device: GpuRunner, data: CaseInputs, bits: tuple[Any, Any, Any], dt: DType, out: DType) -> Any:
        """The peer's C of the case (logical order, float64), on copies of the operands as the kernel stores them
        (``bits``: the logical A, B and prior C as uploaded, :func:`.cublas.peer_output`)."""
        return peer_output(device.cp, self.gemm(device, data, dt, out), data, bits, self.case.shape, out)


class CublasPeer(Peer):
    """cuBLAS's GEMM of the kernel's own work, on the bytes it reads (:func:`.cublas.gemm_runner`)."""

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        from cupy_backends.cuda.libs import cublas

        case, handle = self.case, device.cublas_handle()
        cublas.setStream(handle, device.stream.ptr)
        ab = case.ab
        return gemm_runner(cublas, handle, case.storage, case.shape, dt, out, case.spec.accumulate, ab.alpha, ab.beta)


class CublasLtFp8Peer(Peer):
    """cuBLASLt's FP8 GEMM with the kernel's scales, through torch (:func:`.fp8_peer.fp8_runner`)."""

    def __init__(self, case: Case, inputs: ScaledInputs) -> None:
        super().__init__(case)
        self.inputs = inputs

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        values = tuple(self.inputs.values(device.cp, data, op) for op in "AB")
        scales = self.inputs.scales
        return fp8_runner(device.cp, self.case, scales, values, out, device.index, device.stream.ptr)


class TorchGroupedPeer(Peer):
    """torch's ``_grouped_mm`` over a grouped case's groups, on the bytes the kernel reads (:mod:`.grouped_peer`)."""

    name = "torch _grouped_mm"

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        return grouped_runner(device, self.case, dt, out)

    def result(self, device: GpuRunner, data: CaseInputs, bits: tuple[Any, Any, Any], dt: DType, out: DType) -> Any:
        return grouped_result(device, self.case, data, bits, self.gemm(device, data, dt, out))


class GroupedFp8Peer(CublasLtFp8Peer):
    """cuBLASLt's FP8 GEMM a group at a time, each with its own scales (:mod:`.grouped_fp8_peer`)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        plan, scales = self.case.plan, self.inputs.scales
        assert plan is not None
        out = get_dtype(self.case.spec.output_dtype(self.case.dtype))
        return "torch _scaled_grouped_mm" if one_launch_peer(plan, scales, out) else "cuBLASLt FP8 a group"

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        values = tuple(self.inputs.values(device.cp, data, op) for op in "AB")
        scales = self.inputs.scales
        return grouped_fp8_runner(device.cp, self.case, scales, values, out, device.index, device.stream.ptr)

    def result(self, device: GpuRunner, data: CaseInputs, bits: tuple[Any, Any, Any], dt: DType, out: DType) -> Any:
        return grouped_result(device, self.case, data, bits, self.gemm(device, data, dt, out))


class TorchEpiloguePeer(Peer):
    """torch's GEMM with the case's epilogue, cuBLASLt's own where it has it (:mod:`.epilogue_peer`)."""

    name = "torch epilogue"

    def gemm(self, device: GpuRunner, data: CaseInputs, dt: DType, out: DType) -> Bind:
        return epilogue_runner(device, self.case, data, dt, out)


class NoPeer(Peer):
    """No GEMM of cuBLAS's to compare with: the case is verified without one and not timed."""

    def __init__(self, case: Case, reason: str) -> None:
        super().__init__(case)
        self.reason = reason


def _cublas(case: Case, inputs: InputStrategy, capability: tuple[int, int]) -> Peer:
    return CublasPeer(case)


def _int8(case: Case, inputs: InputStrategy, capability: tuple[int, int]) -> Peer:
    if any(n % 4 for n in (case.shape.M, case.shape.N, case.shape.K)):
        return NoPeer(case, "cuBLAS's INT8 GEMM takes M, N and K multiples of 4")
    return CublasPeer(case)


def _fp8(case: Case, inputs: InputStrategy, capability: tuple[int, int]) -> Peer:
    assert isinstance(inputs, ScaledInputs)
    reason = _no_fp8_peer(case, capability)
    return NoPeer(case, reason) if reason else CublasLtFp8Peer(case, inputs)


#: each input family's peer (specs.families), by the family's name
PEERS: dict[str, Callable[[Case, InputStrategy, tuple[int, int]], Peer]] = {
    "float": _cublas,
    "FP8": _fp8,
    "INT8": _int8,
}


def peer_strategy(case: Case, inputs: InputStrategy, capability: tuple[int, int]) -> Peer:
    """The peer of ``case`` (whose inputs ``inputs`` makes) on a GPU of ``capability``: the one place the worker
    chooses it. Where cuBLAS(Lt) has none (measured on an H100, torch 2.11, cuBLAS 13.1): no e5m2 x e5m2 FP8 GEMM; FP8
    wants K and N multiples of 16 (torch: "Expected trailing dimension of mat1 to be divisible by 16"), 1 x 128 blocks
    M a multiple of 4; INT8's gemmEx answered CUBLAS_STATUS_NOT_SUPPORTED at 15 x 16 x 17 and K = 1001. torch writes C
    row-major: a C stored N x M would be a copy inside the timed call, so it has no peer either."""
    if case.plan is not None and isinstance(inputs, ScaledInputs):  # a grouped FP8 case: cuBLASLt's, a group at a time
        reason = _no_fp8_peer(case, capability) or no_grouped_fp8_peer(case, inputs.scales)
        return NoPeer(case, reason) if reason else GroupedFp8Peer(case, inputs)
    if case.plan is not None:  # a grouped case: its groups' peer
        reason = no_grouped_peer(case, capability)
        return NoPeer(case, reason) if reason else TorchGroupedPeer(case)
    if case.spec.epilogue is not None:  # a fused epilogue's, or D written apart from C: torch's
        reason = no_epilogue_peer(case, capability)
        return NoPeer(case, reason) if reason else TorchEpiloguePeer(case)
    return PEERS[family_of(case.dtype).name](case, inputs, capability)


def launched_alone(case: Case) -> Peer:
    """The peer of a case only launched, never judged (under compute-sanitizer): none."""
    return NoPeer(case, "launched alone, under compute-sanitizer")


def _no_fp8_peer(case: Case, capability: tuple[int, int]) -> str | None:
    shape, scales = case.shape, case.spec.scales
    assert scales is not None
    if case.dtype == "fp8_e5m2":
        return "cuBLASLt has no e5m2 x e5m2 FP8 GEMM (torch: two Float8_e5m2 matrices are not supported)"
    if (scales.A, scales.B) not in PEER_SCALINGS:
        return f"cuBLASLt's FP8 GEMM has no mode that scales A {scales.A} with B {scales.B}"
    if shape.K % 16 or shape.N % 16:
        return "cuBLASLt's FP8 GEMM takes K and N multiples of 16"
    if scales.A == "1x128" and shape.M % 4 and case.plan is None:  # a grouped case's groups: no_grouped_fp8_peer
        return (
            "cuBLASLt's FP8 GEMM with 1 x 128 blocks takes M a multiple of 4 (M = 1 and 2: CUBLAS_STATUS_NOT_SUPPORTED)"
        )
    if case.storage.transposed("C"):
        return "cuBLASLt's FP8 GEMM (through torch) writes C row-major, and this C is stored N x M"
    if capability < (9, 0):
        arch = f"sm_{capability[0]}{capability[1]}"
        return f"cuBLASLt's FP8 GEMMs with these scales were measured on Hopper (sm_90) only; this GPU is {arch}"
    if importlib.util.find_spec("torch") is None:
        return "cuBLASLt's FP8 GEMM, the peer, is reached through torch, which is not installed (pip install torch)"
    return None
