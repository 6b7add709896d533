"""One CUDA device: load compiled kernels, build guarded buffers, launch, and judge the output.

Its entry point takes a :class:`~pytest_gemm.specs.cases.Case` and a seed and returns a
:class:`~pytest_gemm.records.outcome.Verification`. Part of the worker package, the only one that
imports CuPy; it runs in worker processes only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..compiler.cache import CubinCache
from ..compiler.nvrtc import compile_kernel
from ..judge.accuracy import Truth, count_changed
from ..judge.causes import outside_cells
from ..records.dtypes import DType, get_dtype
from ..records.outcome import ErrorStats, Fault, Verification
from ..records.verdicts import Check
from ..specs.archs import arch_runs_on
from ..specs.cases import Case, launch_geometry, precision
from ..specs.limits import DeviceLimits, KernelResources, launch_problems
from ..specs.signature import signature_problems
from ..specs.spec import KernelFileError, KernelSpec
from ..specs.storage import SIZE_TYPES
from ..specs.tensor_maps import MAP_ARGS
from .buffers import (
    CaseInputs,
    GuardedMatrix,
    bits_to_float64,
    case_inputs,
    guarded,
    uint_type,
    upload_bits,
    where_landed,
)
from .cublas import gemm_runner, peer_output
from .diagnose import determinism_fault, trace, which_misreading
from .environment import cupy_environment, device_facts
from .errors import DeviceUnavailable, LaunchRefused
from .fp8_peer import fp8_runner, no_peer
from .python_calls import python_launcher
from .scaled import ScaledCase, scaled_case
from .tma import operand_map, parameter_sizes

__all__ = ["GpuRunner", "device_name", "open_device"]

_MAX_DYNAMIC_SMEM_ATTR = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_FUNC_MAX_THREADS, _FUNC_STATIC_SMEM, _FUNC_NUM_REGS = 0, 1, 4  # CU_FUNC_ATTRIBUTE_*
_DEV_REGS_PER_BLOCK, _DEV_SMEM_OPTIN = 12, 97  # cudaDevAttrMaxRegistersPerBlock, ...SharedMemoryPerBlockOptin


def device_name(props: dict[str, Any]) -> str:
    """A device's name from CUDA's properties (CuPy gives bytes or str, by version)."""
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def open_device(index: int = 0, cubins: CubinCache | None = None, python_kernel=None) -> GpuRunner:
    """Open the GPU, or raise :class:`DeviceUnavailable` with the reason."""
    cupy_environment()
    try:
        import cupy
    except ImportError:
        raise DeviceUnavailable("CuPy is not installed (pip install 'pytest-gemm[cu13]' or '[cu12]')") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise DeviceUnavailable(f"the CUDA driver reports no device ({exc})") from None
    if count <= index:
        raise DeviceUnavailable(f"the CUDA driver sees {count} device(s)")
    return GpuRunner(cupy, index, cubins, python_kernel)


class GpuRunner:
    """One CUDA device: verifies cases on it."""

    def __init__(
        self,
        cupy: Any,
        index: int,
        cubins: CubinCache | None = None,
        python_kernel: Callable[[KernelSpec, str], Callable[..., Any]] | None = None,
    ) -> None:
        self.cp = cupy
        self.index = index
        self.cubins = cubins
        self.python_kernel = python_kernel  # finds a Python kernel's function: (spec, absolute path)
        self._python: tuple[Case, Callable[..., Any], str] | None = None  # the case's, its function, absolute path
        cupy.cuda.Device(index).use()
        props = cupy.cuda.runtime.getDeviceProperties(index)
        self.name = device_name(props)
        self.capability = (int(props["major"]), int(props["minor"]))
        self.arch = f"sm_{props['major']}{props['minor']}"
        self.sm_count = int(props["multiProcessorCount"])
        self.l2_bytes = int(props["l2CacheSize"])
        self.max_clock_mhz = int(props["clockRate"]) / 1000  # CUDA reports kHz
        self.pci_bus_id = cupy.cuda.runtime.deviceGetPCIBusId(index)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._functions: dict[tuple, Any] = {}
        self.guards = True  # guard regions around each matrix (off under compute-sanitizer)
        self.compiles = {"nvrtc": 0, "cache": 0}  # kernels this worker compiled, and found compiled
        self._tensor_maps: dict[tuple, np.ndarray] = {}
        self._cublas: int | None = None  # a cuBLAS handle for the peer and the timed reference, made on first use
        self.scaled: ScaledCase | None = None  # the current FP8 case's grids of scales (made with its A)
        # runs a Python kernel's launch and says on which other streams it put work, or why it cannot (the timer's)
        self.stream_check: Callable[[Callable[[], None]], tuple[int, ...] | str] | None = None
        attribute = cupy.cuda.runtime.deviceGetAttribute
        self.limits = DeviceLimits(
            f"this {self.name}",
            registers_per_block=int(attribute(_DEV_REGS_PER_BLOCK, index)),
            shared_per_block=int(attribute(_DEV_SMEM_OPTIN, index)),
        )

    def cannot_run(self, spec: KernelSpec) -> str | None:
        """Why this device cannot run a kernel pinned to another architecture (None when it can)."""
        if not spec.arch or arch_runs_on(spec.arch, self.capability):
            return None
        return (
            f"{spec.name} is built for {spec.arch} (its header's arch), which this {self.name} ({self.arch}) cannot run"
        )

    def facts(self) -> dict[str, Any]:
        """What CUDA and CuPy say about this device and its software (NVML adds the rest)."""
        return device_facts(self)

    # -- kernels ---------------------------------------------------------------------------------
    def load(self, case: Case, path: str) -> None:
        """Find a Python kernel's function, importing its file (``path``, absolute) when it changed: once per case."""
        self._python = None
        if case.spec.kind == "py":
            assert self.python_kernel is not None
            self._python = (case, self.python_kernel(case.spec, path), path)

    def python_function(self, case: Case) -> tuple[Callable[..., Any], str]:
        """The Python kernel's function :meth:`load` found for this case, and its file's absolute path."""
        if self._python is None or self._python[0] is not case:
            raise RuntimeError(f"{case.spec.name}: the Python kernel was not loaded for this case (load() first)")
        return self._python[1], self._python[2]

    def prepare(self, case: Case, signature: bool = True) -> None:
        """Compile (or find) and load a ``.cu`` kernel, and refuse a launch that cannot happen on this device: one
        whose header's arguments differ from the compiled kernel's parameters (unless not ``signature``)."""
        if case.spec.kind != "cu":
            return
        fn = self._function(case)
        sizes = parameter_sizes(fn.ptr) if signature else None
        wrong = signature_problems(case.spec, case.dtype, sizes) if sizes is not None else []
        if wrong:
            raise KernelFileError(case.spec.path, "; ".join(wrong), line=case.spec.line, key="args")
        geom = launch_geometry(case.spec, case.variant, case.shape, sm_count=self.sm_count)
        problems = launch_problems(geom.threads, geom.shared_mem, self.resources(fn), self.limits)
        if problems:
            raise LaunchRefused("it needs more than this GPU has (checked before launching)", problems)

    def resources(self, fn: Any) -> KernelResources:
        """What the loaded kernel needs, from its function attributes."""
        get = self.cp.cuda.driver.funcGetAttribute
        return KernelResources(
            registers=int(get(_FUNC_NUM_REGS, fn.ptr)),
            static_smem=int(get(_FUNC_STATIC_SMEM, fn.ptr)),
            max_threads=int(get(_FUNC_MAX_THREADS, fn.ptr)),
        )

    def launch_details(self, case: Case) -> list[str]:
        """The numbers behind a launch CUDA refused: the kernel's needs and the launch's geometry (within this
        device's limits as :meth:`prepare` checks them, or it would have refused the launch itself)."""
        if case.spec.kind != "cu":
            return []
        res, geom = (
            self.resources(self._function(case)),
            launch_geometry(case.spec, case.variant, case.shape, sm_count=self.sm_count),
        )
        return [
            f"the kernel uses {res.registers} registers per thread and {res.static_smem} bytes of static shared "
            f"memory, launches at most {res.max_threads} threads per block; this launch: grid {geom.grid}, block "
            f"{geom.block} ({geom.threads} threads), {geom.shared_mem} bytes of dynamic shared memory"
        ]

    def _function(self, case: Case) -> Any:
        arch = case.spec.arch or self.arch
        key = (case.spec.path, case.spec.name, case.variant, arch, hash(case.spec.source))
        if key not in self._functions:
            compiled = compile_kernel(case.spec, case.variant, arch, self.cubins)
            self.compiles["cache" if compiled.from_cache else "nvrtc"] += 1
            module = self.cp.cuda.function.Module()
            module.load(compiled.cubin)
            self._functions[key] = (module, module.get_function(compiled.lowered_name))
        return self._functions[key][1]

    # -- buffers ---------------------------------------------------------------------------------
    def guarded_input(self, case: Case, name: str, data: CaseInputs) -> GuardedMatrix:
        """Operand ``name`` ("A" or "B") of the case in a fresh guarded buffer; with A, an FP8 case's grids of scales in
        fresh ones too (:attr:`scaled`, which every launch of the case reads)."""
        if name == "A":
            self.scaled = scaled_case(self.cp, case, data, self.guards)
        return self._guarded(case, name, get_dtype(case.dtype), data.stored(data.a if name == "A" else data.b, name))

    def guarded_output(self, case: Case, data: CaseInputs, fill: np.ndarray | None) -> GuardedMatrix:
        """C in a fresh guarded buffer, holding ``fill`` (storage order) or the NaN poison when it is None."""
        return self._guarded(case, "C", get_dtype(case.spec.output_dtype(case.dtype)), fill)

    def _guarded(self, case: Case, name: str, dt: DType, fill: np.ndarray | None) -> GuardedMatrix:
        """Operand ``name`` in a guarded buffer of its stored shape, ld padding and batch (its stride's gaps)."""
        low, shape = name.lower(), case.storage.stored_shape(name, case.shape)
        padded, gap = f"ld{low}" in case.spec.args, f"stride_{low}" in case.spec.args
        return guarded(self.cp, dt, padded, shape, fill, guards=self.guards, batch=case.shape.batch, gap=gap)

    # -- one case --------------------------------------------------------------------------------
    def verify(self, case: Case, seed: int) -> Verification:
        """Run the kernel on fresh guarded buffers (3 times: it must be deterministic), judge it against the
        fp64 truth, and trace each wrong element to its source."""
        cp = self.cp
        k = case.shape.K
        dt, out = precision(case)
        data = case_inputs(case, seed)
        c_transposed = data.storage.transposed("C")

        with self.stream:
            ga, gb = self.guarded_input(case, "A", data), self.guarded_input(case, "B", data)
            c0 = None if data.c0 is None else data.stored(data.c0, "C")
            gc = self.guarded_output(case, data, c0)
            streams = self.launch(case, ga, gb, gc, watch=True)

            # The reference starts only now, on buffers of its own.
            a_bits, b_bits = upload_bits(cp, data.a), upload_bits(cp, data.b)
            c0_bits = None if data.c0 is None else upload_bits(cp, data.c0)
            c_faults = gc.guard_faults(cp, "C")
            strays = gc.stray_writes(cp) if c_faults else None  # where the writes outside C landed (storage order)
            if strays is not None:
                c_faults = where_landed(c_faults, strays, gc.rows, gc.cols, c_transposed)
            faults = ga.guard_faults(cp, "A") + gb.guard_faults(cp, "B") + c_faults
            faults += self.scaled.faults(cp) if self.scaled else []
            for name, g, bits in (("A", ga, a_bits), ("B", gb, b_bits)):
                changed = count_changed(cp, bits, data.logical(g.matrix(bits.dtype), name))
                if changed:
                    faults.append(Fault(Check.INPUT_MODIFIED, f"{name} (inputs must be read-only)", changed))

            truth = self.truth(case, a_bits, b_bits, c0_bits)
            got, unwritten = self.output(case, gc, data, c0_bits)
            ratio = truth.ratios(cp, got, k, dt, out)
            kernel_stats = truth.judge(cp, got, k, dt, out, unwritten, ratio=ratio)
            if not any(f.kind == "input modified" for f in faults):  # the same inputs again
                start = out.poison_bits if c0 is None else upload_bits(cp, c0)
                fault = determinism_fault(self, case, gc, start, lambda: self.launch(case, ga, gb, gc))
                faults += [fault] if fault else []
            sources, error_map = (), None
            if not kernel_stats.passed or faults:
                sources, error_map = trace(self, case, data, ratio, unwritten)
                if strays is not None:
                    outside = outside_cells(gc.outside(strays, c_transposed), error_map.cell)
                    error_map = replace(error_map, outside=outside)
            del ratio, unwritten
            misread = which_misreading(self, case, data, got, kernel_stats, (a_bits, b_bits, c0_bits), truth)
            del got  # M x N arrays, not needed while cuBLAS runs (specs.footprint counts on it)
            peer = self.peer(case, data, truth, (a_bits, b_bits, c0_bits))
            self.stream.synchronize()
        return Verification(
            case_id=case.name,
            seed=seed,
            shape=case.shape,
            alpha=case.ab.alpha,
            beta=case.ab.beta,
            kernel=kernel_stats,
            peer=peer,
            faults=tuple(faults),
            error_map=error_map,
            sources=sources,
            misread=misread,
            other_streams=streams if isinstance(streams, tuple) else (),
            unchecked_streams=streams if isinstance(streams, str) else "",
        )

    def truth(self, case: Case, a_bits: Any, b_bits: Any, c0_bits: Any) -> Truth:
        """The fp64 result and the scales of its bounds (:class:`~pytest_gemm.judge.accuracy.Truth`), from the
        inputs' bits."""
        cp = self.cp
        dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        a64, b64 = bits_to_float64(cp, a_bits, dt), bits_to_float64(cp, b_bits, dt)
        if case.spec.scales is not None:  # FP8: the product of exactly the dequantised operands
            assert self.scaled is not None and self.scaled.case is case
            a64, b64 = self.scaled.dequantised(cp, "A", a64), self.scaled.dequantised(cp, "B", b64)
        c064 = None if c0_bits is None else bits_to_float64(cp, c0_bits, out)
        truth = Truth.of(cp, a64, b64, c064, case.ab.alpha, case.ab.beta, out, case.shape.batch)
        truth.figures = dt.exact or case.spec.scales is not None  # the peers' calc_diff and cosine too
        return truth

    def output(self, case: Case, gc: GuardedMatrix, data: CaseInputs, c0_bits: Any) -> tuple[Any, Any]:
        """C (logical order, float64), and where it still holds, bit for bit, what it started as."""
        cp = self.cp
        out = get_dtype(case.spec.output_dtype(case.dtype))
        got = data.logical(gc.as_float64(cp, out), "C")
        c_bits = data.logical(gc.matrix(uint_type(cp, out.itemsize)), "C")
        unchanged = c_bits == out.poison_bits if c0_bits is None else c_bits == c0_bits
        return got, unchanged

    def judge_output(self, case: Case, gc: GuardedMatrix, data: CaseInputs, c0_bits: Any, truth: Truth) -> ErrorStats:
        """Error statistics of the C held in ``gc`` (unwritten = still bitwise equal to what it started as)."""
        dt, out = precision(case)
        got, unchanged = self.output(case, gc, data, c0_bits)
        return truth.judge(self.cp, got, case.shape.K, dt, out, unchanged)

    def launch(
        self, case: Case, ga: GuardedMatrix, gb: GuardedMatrix, gc: GuardedMatrix, watch: bool = False
    ) -> tuple[int, ...] | str:
        """Run the kernel once and wait for it (CUDA errors propagate to the worker, which classifies them): for a
        Python kernel, for the whole device, so that what it queued on a stream of its own is finished before its
        output is read. With ``watch``, a Python kernel's launch is watched (:attr:`stream_check`): the other streams
        it put work on (a fault), or why that cannot be told (none where nothing is watched)."""
        call = self.launcher(case, ga, gb, gc, get_dtype(case.dtype))
        python = case.spec.kind == "py"
        streams: tuple[int, ...] | str
        if watch and python and self.stream_check is not None:
            streams = self.stream_check(call)
        else:
            call()
            streams = "this worker has no stream check" if watch and python else ()
        self.stream.synchronize()
        if python:
            self.cp.cuda.runtime.deviceSynchronize()
        return streams

    def launcher(
        self, case: Case, ga: GuardedMatrix, gb: GuardedMatrix, gc: GuardedMatrix, dt: DType
    ) -> Callable[[], None]:
        """A function that launches the kernel on these operands on the current stream, without waiting: its
        function, geometry and arguments (tensor maps included) are worked out once, here, not per launch.
        The function's dynamic shared memory limit is set here too: use the launcher before another case's."""
        cp, spec = self.cp, case.spec
        out = get_dtype(spec.output_dtype(case.dtype))
        alpha, beta = case.ab.alpha, case.ab.beta
        if spec.kind == "py":
            fn, path = self.python_function(case)
            return python_launcher(cp, case, (ga, gb, gc), dt, fn, path, self)
        fn = self._function(case)
        geom = launch_geometry(spec, case.variant, case.shape, sm_count=self.sm_count)
        if geom.shared_mem > 48 * 1024:
            cp.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SMEM_ATTR, geom.shared_mem)
        scalar = np.dtype(dt.scalar).type
        size = np.dtype(SIZE_TYPES[spec.size_type].numpy).type  # a shape past it is skipped at collection
        stride = np.dtype(SIZE_TYPES[spec.stride_type or spec.size_type].numpy).type
        values = {
            "batch": size(case.shape.batch),
            "stride_a": stride(ga.batch_stride),
            "stride_b": stride(gb.batch_stride),
            "stride_c": stride(gc.batch_stride),
            "M": size(case.shape.M),
            "N": size(case.shape.N),
            "K": size(case.shape.K),
            "alpha": scalar(alpha),
            "beta": scalar(beta),
            "A": ga.pointer(),
            "B": gb.pointer(),
            "C": gc.pointer(),
            "lda": size(ga.ld),
            "ldb": size(gb.ld),
            "ldc": size(gc.ld),
        }
        if self.scaled is not None and self.scaled.case is case:  # an FP8 kernel's scales
            grids = self.scaled.grids
            values.update(scale_a=grids["A"].pointer(), scale_b=grids["B"].pointer())
            values.update(ld_scale_a=size(grids["A"].ld), ld_scale_b=size(grids["B"].ld))
        for arg, (operand, g, gdt) in zip(MAP_ARGS, (("A", ga, dt), ("B", gb, dt), ("C", gc, out))):
            if arg in spec.args:
                values[arg] = self._tensor_map(case, operand, g, gdt)
        args = tuple(values[a] for a in spec.args)
        grid, block, shared_mem = geom.grid, geom.block, geom.shared_mem
        return lambda: fn(grid, block, args, shared_mem=shared_mem)

    def _tensor_map(self, case: Case, operand: str, g: GuardedMatrix, dt: DType) -> np.ndarray:
        """The 128-byte CUtensorMap of one operand as stored (:func:`.tma.operand_map`), kept per address."""
        if len(self._tensor_maps) > 256:
            self._tensor_maps.clear()
        return operand_map(self._tensor_maps, case, operand, g, dt)

    def peer(self, case: Case, data: CaseInputs, truth: Truth, bits: tuple[Any, Any, Any]) -> ErrorStats | None:
        """cuBLAS on the kernel's work (:func:`.cublas.peer_output`), judged by the same bound."""
        dt, out = precision(case)
        if no_peer(case, self.capability):  # no GEMM of cuBLAS's to compare with
            return None
        result = peer_output(self.cp, self.cublas_gemm(case, dt, out), data, bits, case.shape, out)
        return truth.judge(self.cp, result, case.shape.K, dt, out)

    def cublas_gemm(self, case: Case, dt: DType, out: DType) -> Callable[[dict[str, tuple[int, int, int]]], Callable]:
        """cuBLAS's GEMM of this case (:func:`.cublas.gemm_runner`), on this runner's stream."""
        from cupy_backends.cuda.libs import cublas

        if case.spec.scales is not None:  # FP8: cuBLASLt's, through torch, on this runner's stream
            assert self.scaled is not None and self.scaled.case is case
            return fp8_runner(self.cp, case, self.scaled, out, self.index, self.stream.ptr)
        if self._cublas is None:
            self._cublas = cublas.create()
        cublas.setStream(self._cublas, self.stream.ptr)
        ab = case.ab
        return gemm_runner(
            cublas, self._cublas, case.storage, case.shape, dt, out, case.spec.accumulate, ab.alpha, ab.beta
        )
