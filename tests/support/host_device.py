"""The GPU worker's prepared case on the host: its buffers, checks, verification and diagnosis re-runs on NumPy arrays
(or NumPy standing for CuPy), run by NumPy 'kernels' or Python kernels, with no device and none pretended."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from pytest_gemm.specs.cases import Case
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.spec import KernelSpec
from pytest_gemm.worker.cublas import stored_operands
from pytest_gemm.worker.inputs import input_strategy
from pytest_gemm.worker.kinds import CudaKernel, KernelStrategy, PythonKernel
from pytest_gemm.worker.operands import Operands
from pytest_gemm.worker.peers import NoPeer, Peer
from pytest_gemm.worker.prepared import PreparedCase


class HostCupy:
    """NumPy in CuPy's place, with the CUDA errors a Python kernel's call is guarded against (none ever raised)."""

    cuda = SimpleNamespace(
        driver=SimpleNamespace(CUDADriverError=OSError),
        runtime=SimpleNamespace(CUDARuntimeError=OSError, deviceSynchronize=lambda: None),
    )

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


class HostStream(contextlib.nullcontext):
    ptr = 0

    def synchronize(self) -> None:
        pass


class HostDevice:
    """What a prepared case and its strategies ask of the worker's GPU runner, on the host."""

    def __init__(self, cp: Any = np) -> None:
        self.cp, self.stream, self.sm_count, self.index = cp, HostStream(), 132, 0  # an H100's SM count


class HostKernel(KernelStrategy):
    """A NumPy 'kernel' ``fn(case, (A, B, C as guarded buffers), a, b, c, n)`` on views of the operands in ``dtype``,
    ``n`` counting its launches."""

    def __init__(self, case: Case, fn: Callable[..., None], dtype: Any = np.float32, cp: Any = np) -> None:
        super().__init__(HostDevice(cp), case, input_strategy(case))  # type: ignore[arg-type]
        self.fn, self.dtype, self.launches = fn, dtype, 0

    def launcher(self, ops: Operands) -> Callable[[], None]:
        def call() -> None:
            self.launches += 1
            a, b, c = (g.matrix(self.dtype) for g in (ops.a, ops.b, ops.c))
            with np.errstate(invalid="ignore", over="ignore"):
                self.fn(self.case, (ops.a, ops.b, ops.c), a, b, c, self.launches)

        return call

    def wait(self) -> None:
        pass

    def captured(self, call: Callable[[], None]) -> Callable[[], None]:
        """The host has no CUDA graphs: a replay is the call again."""
        return call

    def tile(self) -> tuple[int, int] | None:
        """A .cu kernel's tile, from its header's grid, as the worker's strategy for it says."""
        return CudaKernel.tile(self) if self.case.spec.kind.compiled else None  # type: ignore[arg-type]


class FunctionKernel(PythonKernel):
    """A Python kernel's function called as the worker calls it (CuPy's views, or NumPy's standing for them), on
    ``device`` (a GPU runner, or a :class:`HostDevice`), without importing a file."""

    def __init__(self, device: Any, case: Case, fn: Callable[..., None]) -> None:
        KernelStrategy.__init__(self, device, case, input_strategy(case))
        self.fn, self.path = fn, "k.py"

    def captured(self, call: Callable[[], None]) -> Callable[[], None]:
        """The host has no CUDA graphs: a replay is the call again (on a GPU runner, CuPy's capture)."""
        return call if isinstance(self.runner, HostDevice) else super().captured(call)


class HostPeer(Peer):
    """The peer's part of verification as the worker allocates it (the operands as stored, copied from the truth's
    bits, and C's result in fp64: ``worker.cublas.peer_output``), with NumPy's matmul for cuBLAS's GEMM."""

    def result(self, device: Any, data: Any, bits: tuple[Any, Any, Any], dt: Any, out: Any) -> Any:
        case, cp = self.case, device.cp
        stored = stored_operands(cp, data, bits, case.shape, out)
        a, b = (data.logical(stored[name], name).view(x.dtype) for name, x in (("A", data.a), ("B", data.b)))
        c = data.logical(stored["C"], "C").view(data.a.dtype if data.c0 is None else data.c0.dtype)
        product = np.matmul(a, b, dtype=np.float32)
        product *= case.ab.alpha
        if data.c0 is not None:
            product += case.ab.beta * data.c0
        c[...] = product
        del product
        return c.astype(np.float64)


def cu_spec(dtype: str = "fp32", **header: Any) -> KernelSpec:
    """A ``.cu`` kernel's spec from a header of one thread per element of C (``k.cu``, entry ``k``), its keys given
    in ``header`` added or replacing the defaults; an INT8 kernel takes no alpha and beta."""
    scalars = [] if dtype == "int8" else ["alpha", "beta"]
    default = {
        "entry": "k",
        "args": ["M", "N", "K", *scalars, "A", "B", "C"],
        "dtypes": [dtype],
        "block": [16, 16],
        "grid": ["cdiv(N, 16)", "cdiv(M, 16)"],
    }
    return spec_from_mapping({**default, **header}, path="k.cu")


def host_case(kernel: KernelStrategy, seed: int = 3, *, guards: bool = True, peer: Peer | None = None) -> PreparedCase:
    """The kernel's case prepared on the host (its inputs drawn from ``seed``), with no peer unless one is given."""
    peer = peer or NoPeer(kernel.case, "no peer on the host")
    return PreparedCase(kernel.runner, kernel.case, seed, kernel, kernel.inputs, peer, guards=guards)


__all__ = [
    "FunctionKernel",
    "HostCupy",
    "HostDevice",
    "HostKernel",
    "HostPeer",
    "HostStream",
    "cu_spec",
    "host_case",
]
