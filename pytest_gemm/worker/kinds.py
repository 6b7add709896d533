"""The kernel strategies: how a kernel of each kind is loaded, checked before its first launch, launched on a set of
operands and described when a launch fails. :func:`kernel_strategy` chooses one per case, the only place the worker
tells the kinds apart:

* :class:`CudaKernel`: CUDA C compiled by NVRTC (cached), its arguments packed as the header's ``args`` say;
* :class:`PythonKernel`: a Python function called with CuPy arrays; its first call for a case is a setup call of its
  own, and its first verification launch is watched for GPU work on other streams;
* :class:`TorchKernel`: the same, called with torch tensors on the same memory and the harness's stream.

Part of the worker package.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from ..records.dtypes import get_dtype
from ..records.shapes import Shape
from ..specs.cases import Case, launch_geometry
from ..specs.errors import KernelFileError
from ..specs.footprint import kernel_sizes
from ..specs.header_keys import DEVICE_NAMES
from ..specs.limits import launch_problems
from ..specs.signature import signature_problems
from ..specs.tensor_maps import MAP_ARGS
from .buffers_fill import buffer_contents
from .errors import LaunchRefused
from .inputs import InputStrategy
from .operands import Operands
from .python_calls import autotune_choices, python_launcher
from .runner import GpuRunner
from .tma import parameter_sizes

__all__ = ["CudaKernel", "KernelStrategy", "PythonKernel", "TorchKernel", "kernel_strategy"]

_MAX_DYNAMIC_SMEM_ATTR = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class KernelStrategy:
    """How one case's kernel is run: made once per case, in the phase that loads it."""

    #: its first call for a case is a setup call, in a phase of its own (Triton's JIT, autotuning, torch.compile)
    setup_call = False
    #: its first verification launch is watched for GPU work outside the harness's stream
    watched = False
    #: its launch calls' host time is its own code's (a Python kernel's), reported beside its device time
    host_timed = False
    #: its launch runs its file's Python code in the worker, watched for what it changes there (worker.integrity)
    file_code = False
    #: it may be launched at other shapes than its case's between verification and timing (worker.batch_rows): not a
    #: Python kernel, which a call at another shape could compile or autotune again
    other_shapes = True

    def __init__(self, runner: GpuRunner, case: Case, inputs: InputStrategy) -> None:
        self.runner, self.case, self.inputs = runner, case, inputs

    def for_case(self, case: Case, inputs: InputStrategy) -> KernelStrategy:
        """The same kernel, as loaded, for another case of its variant and dtype (another shape)."""
        other = copy.copy(self)
        other.case, other.inputs = case, inputs
        return other

    def check(self, signature: bool = True) -> None:
        """Refuse a launch that cannot happen on this device, before the first (the compile phase)."""

    def launcher(self, ops: Operands) -> Callable[[], None]:
        """A function that launches the kernel on ``ops`` on the current stream, without waiting; what it passes is
        worked out once, here, not per launch."""
        raise NotImplementedError

    def wait(self) -> None:
        """Wait for what a launch queued (CUDA errors surface here)."""
        self.runner.stream.synchronize()

    def captured(self, call: Callable[[], None]) -> Callable[[], None]:
        """``call`` captured into a CUDA graph on the harness's stream: a function that replays it there, without
        waiting (docs/verification.md#cuda-graphs). What capture refuses raises its own error, the stream out of
        capture. What the call allocates comes from a pool of the graph's own, kept while it is: a replay writes
        its temporaries again, where nothing else may lie."""
        cp, stream = self.runner.cp, self.runner.stream
        pool = cp.cuda.MemoryPool()
        stream.begin_capture()  # CuPy's default, relaxed: the pool may grow while capturing
        try:
            with cp.cuda.using_allocator(pool.malloc):
                call()
        except BaseException:
            with contextlib.suppress(Exception):  # the call's error says why; ending an invalidated capture raises
                stream.end_capture()
            raise
        graph = stream.end_capture()

        def replay() -> None:
            _ = pool
            graph.launch(stream)

        return replay

    def autotuned(self, call: Callable[[], object]) -> tuple[str, ...]:
        """Make the setup call ``call`` and say what each autotuner it ran chose: nothing to say."""
        call()
        return ()

    def launch_details(self) -> list[str]:
        """The numbers behind a launch CUDA refused."""
        return []

    def tile(self) -> tuple[int, int] | None:
        """The output tile of one thread block (rows, columns of C), for the error map's outlines; None when unknown."""
        return None


class CudaKernel(KernelStrategy):
    """A ``.cu`` kernel: compiled (or found) and loaded in the compile phase, launched with its grid, block and the
    arguments its header lists, tensor maps and buffers included (``path``: its file, absolute, beside which a
    buffer's fill function lies)."""

    def __init__(self, runner: GpuRunner, case: Case, inputs: InputStrategy, path: str = "") -> None:
        super().__init__(runner, case, inputs)
        self.path = path
        self._fills: dict[str, np.ndarray] | None = None  # each buffer's contents, made once a case
        self._geom: tuple[Case, Any] | None = None  # the case's launch geometry, evaluated once, not once a launcher

    def for_case(self, case: Case, inputs: InputStrategy) -> KernelStrategy:
        other = super().for_case(case, inputs)
        other._fills = None  # type: ignore[attr-defined]  # a buffer's contents are a case's
        return other

    def _buffers(self) -> dict[str, Any]:
        """A fresh device copy of each of the header's buffers (specs.buffers), by argument name."""
        if not self.case.spec.buffers:
            return {}
        if self._fills is None:
            self._fills = {
                b.name: buffer_contents(self.runner, self.case, b, self.path) for b in self.case.spec.buffers
            }
        return {name: self.runner.cp.asarray(host) for name, host in self._fills.items()}

    def check(self, signature: bool = True) -> None:
        """Compile (or find) and load the kernel, and refuse a launch that cannot happen on this device: one whose
        header's arguments differ from the compiled kernel's parameters (unless not ``signature``), or that needs more
        than the device has."""
        runner, case = self.runner, self.case
        fn = runner.function(case)
        sizes = parameter_sizes(fn.ptr) if signature else None
        wrong = signature_problems(case.spec, case.dtype, sizes) if sizes is not None else []
        if wrong:
            raise KernelFileError(case.spec.path, "; ".join(wrong), line=case.spec.line, key="args")
        geom = self._geometry()
        problems = launch_problems(geom.threads, geom.shared_mem, runner.resources(fn), runner.limits)
        if problems:
            raise LaunchRefused("it needs more than this GPU has (checked before launching)", problems)

    def _geometry(self) -> Any:
        case = self.case
        if self._geom is None or self._geom[0] is not case:
            self._geom = (case, launch_geometry(case.spec, case.variant, case.shape, sm_count=self.runner.sm_count))
        return self._geom[1]

    def launcher(self, ops: Operands) -> Callable[[], None]:
        """The function's dynamic shared memory limit is set here too: use the launcher before another case's."""
        runner, case, fn, geom = self.runner, self.case, self.runner.function(self.case), self._geometry()
        spec, cp, dt, out = case.spec, runner.cp, get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        # past 48 KB of shared memory a block, static and dynamic together, a launch needs the kernel's opt-in
        if geom.shared_mem and geom.shared_mem + runner.resources(fn).static_smem > 48 * 1024:
            cp.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SMEM_ATTR, geom.shared_mem)
        scalar = np.float16 if spec.scalars == "fp16" else np.dtype(dt.scalar).type
        size = np.dtype(spec.size_ctype.numpy).type  # a shape past it is skipped at collection
        stride = np.dtype(spec.stride_ctype.numpy).type
        ga, gb, gc = ops.a, ops.b, ops.c
        values = {
            "batch": size(case.shape.batch),
            "stride_a": stride(ga.batch_stride),
            "stride_b": stride(gb.batch_stride),
            "stride_c": stride(gc.batch_stride),
            **{name: size(value) for name, value in kernel_sizes(spec, case.shape).items()},
            "alpha": scalar(case.ab.alpha),
            "beta": scalar(case.ab.beta),
            "A": ga.pointer(),
            "B": gb.pointer(),
            "C": gc.pointer(),
            "lda": size(ga.ld),
            "ldb": size(gb.ld),
            "ldc": size(gc.ld),
            **{name: np.int32(value) for name, value in case.variant.as_dict().items()},  # params taken as arguments
        }
        for operand, grid in ops.grids.items():  # what else it reads: an FP8 kernel's scales
            values.update({f"scale_{operand.lower()}": grid.pointer(), f"ld_scale_{operand.lower()}": size(grid.ld)})
        values.update({name: array.pointer() for name, array in ops.groups.items()})  # a grouped kernel's arrays
        values.update({name: array.pointer() for name, array in ops.epilogue.items()})  # an epilogue's, C if input
        if spec.epilogue is not None and spec.epilogue.d:
            values["D"] = gc.pointer()  # the output: C is an input of its own
        held = []  # what the arguments point to: kept as long as the launcher
        for arg, (operand, g, gdt) in zip(MAP_ARGS, (("A", ga, dt), ("B", gb, dt), ("C", gc, out))):
            if arg in spec.args:
                values[arg] = runner.tensor_map(case, operand, g, gdt)
                if spec.tensor_map(operand).pointer:  # a const CUtensorMap*: the map in device memory
                    held.append(cp.asarray(values[arg].view(np.uint8)))
                    values[arg] = np.uint64(held[-1].data.ptr)
        for name, buffer in self._buffers().items():  # the header's buffers, a set of their own per launcher
            held.append(buffer)
            values[name] = buffer
        args = tuple(values[a] for a in spec.args)
        grid, block, shared_mem = geom.grid, geom.block, geom.shared_mem

        def launch() -> None:
            _ = held
            fn(grid, block, args, shared_mem=shared_mem)

        return launch

    def launch_details(self) -> list[str]:
        """The kernel's needs and the launch's geometry (within this device's limits as :meth:`check` checks them,
        or it would have refused the launch itself)."""
        res, geom = self.runner.resources(self.runner.function(self.case)), self._geometry()
        return [
            f"the kernel uses {res.registers} registers per thread and {res.static_smem} bytes of static shared "
            f"memory, launches at most {res.max_threads} threads per block; this launch: grid {geom.grid}, block "
            f"{geom.block} ({geom.threads} threads), {geom.shared_mem} bytes of dynamic shared memory"
        ]

    def tile(self) -> tuple[int, int] | None:
        """The grid at a large power-of-two shape, assuming grid.x spans C's contiguous dimension (columns, or rows for
        a column-major C); None when that does not divide, or when the grid names the GPU's SM count (a persistent
        block walks many tiles)."""
        case, probe = self.case, 1 << 16
        if any(e.names & DEVICE_NAMES for e in case.spec.grid):
            return None
        try:
            shape = Shape(probe, probe, case.shape.K)
            grid = launch_geometry(case.spec, case.variant, shape, sm_count=self.runner.sm_count).grid
        except KernelFileError:  # an expression that cannot take the probe shape: no outlines
            return None
        if len(grid) < 2 or grid[0] < 1 or grid[1] < 1 or probe % grid[0] or probe % grid[1] or grid[0] * grid[1] == 1:
            return None
        across, down = probe // grid[0], probe // grid[1]
        return (across, down) if case.storage.transposed("C") else (down, across)


class PythonKernel(KernelStrategy):
    """A Python kernel called with CuPy arrays: its function, imported from its file (``path``, absolute) when it
    changed, in the load phase."""

    setup_call = watched = host_timed = file_code = True
    other_shapes = False

    def __init__(self, runner: GpuRunner, case: Case, inputs: InputStrategy, path: str) -> None:
        super().__init__(runner, case, inputs)
        self.path = path
        self.fn = runner.files.function(case.spec, path)

    def _device(self) -> tuple[int, int] | None:  # CuPy's arrays: no torch device
        return None

    def launcher(self, ops: Operands) -> Callable[[], None]:
        extra = self.inputs.kernel_views(ops.grids)
        extra += [(array.matrix(self.runner.cp.int32)[0], get_dtype("int32")) for array in ops.groups.values()]
        return python_launcher(self.runner.cp, self.case, ops, extra, self.fn, self.path, self._device())

    def wait(self) -> None:
        """For the whole device, so that what it queued on a stream of its own is finished before its output is read."""
        super().wait()
        self.runner.cp.cuda.runtime.deviceSynchronize()

    def autotuned(self, call: Callable[[], object]) -> tuple[str, ...]:
        """The autotuned Triton kernels the call ran, each with its choice (:func:`.python_calls.autotune_choices`)."""
        return autotune_choices(self.fn, call)


class TorchKernel(PythonKernel):
    """A Python kernel called with torch tensors (``arrays = "torch"``) on the harness's stream and device."""

    def _device(self) -> tuple[int, int] | None:
        return self.runner.stream.ptr, self.runner.index

    def captured(self, call: Callable[[], None]) -> Callable[[], None]:
        """By torch's own capture, on the harness's stream, its allocations from one pool kept for every graph this
        worker captures (a capture that fails leaves its pool behind in torch: one, not one a case)."""
        import torch

        global _TORCH_POOL
        stream = torch.cuda.ExternalStream(self.runner.stream.ptr, device=torch.device("cuda", self.runner.index))
        graph = torch.cuda.CUDAGraph()
        _TORCH_POOL = _TORCH_POOL or torch.cuda.graph_pool_handle()
        raised: list[BaseException] = []
        try:
            with torch.cuda.graph(graph, pool=_TORCH_POOL, stream=stream, capture_error_mode="thread_local"):
                try:
                    call()
                except BaseException as exc:
                    raised.append(exc)
                    raise
        except BaseException:
            if raised:  # the call's error says why, not the invalidated capture's that ending it raises
                raise raised[0] from None
            raise

        def replay() -> None:
            with torch.cuda.stream(stream):
                graph.replay()

        return replay


#: the memory pool of the CUDA graphs torch captures in this worker (TorchKernel.captured)
_TORCH_POOL: Any = None

#: a Python kernel's strategy by what it is given (its header's ``arrays``)
PYTHON: dict[str, type[PythonKernel]] = {"cupy": PythonKernel, "torch": TorchKernel}


def kernel_strategy(runner: GpuRunner, case: Case, inputs: InputStrategy, path: str) -> KernelStrategy:
    """The strategy of ``case``'s kernel (its file: ``path``, absolute): the one place the worker chooses it."""
    if case.spec.kind.compiled:
        return CudaKernel(runner, case, inputs, path)
    return PYTHON[case.spec.arrays](runner, case, inputs, path)
