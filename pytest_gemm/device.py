"""Everything that touches the GPU: load compiled kernels, build guarded buffers, launch, and judge.

This is the one module that imports CuPy. Its entry point takes a :class:`~pytest_gemm.cases.Case`
and a seed and returns a :class:`~pytest_gemm.verify.VerificationResult`, both plain records, so
it can run unchanged in a worker process.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .archs import arch_runs_on
from .cases import Case, launch_geometry, tensor_map_box
from .compiler import compile_kernel
from .dtypes import DType, get_dtype
from .spec import KernelFileError, KernelSpec
from .tensor_maps import MAP_ARGS, TensorMapLayout, layout_problems
from .verify import ErrorStats, Fault, VerificationResult, count_changed, error_stats

__all__ = ["DeviceUnavailable", "GpuRunner", "KernelLaunchError", "open_device"]

_GUARD_BYTES = 64 * 1024  # guard before each buffer, and at least this much after it
_GUARD_ROWS = 256  # the guard after a buffer also covers this many extra rows (tiles up to 256)
_LD_PAD = 16  # extra elements per row when the kernel takes lda/ldb/ldc; the padding is guarded too
_MAX_DYNAMIC_SMEM_ATTR = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
# CUtensorMapDataType by storage type, and the other cuTensorMapEncodeTiled choices the harness makes
_TMA_DATA_TYPES = {"float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
_TMA_SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
_TMA_L2_PROMOTION_128B = 2
_TMA_OOB_FILL_ZEROS = 0


class DeviceUnavailable(RuntimeError):
    """No usable CUDA device (no CuPy, no driver, or no GPU)."""


class KernelLaunchError(RuntimeError):
    """The kernel launch, or the work it did, raised a CUDA error."""


def open_device(index: int = 0) -> GpuRunner:
    """Open the GPU, or raise :class:`DeviceUnavailable` with the reason."""
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # cuBLAS fp32 must be real fp32
    os.environ["CUPY_TF32"] = "0"
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
    return GpuRunner(cupy, index)


@dataclass
class GuardedMatrix:
    """A matrix stored at the centre of a larger buffer whose rest holds a NaN bit pattern."""

    flat: Any  # unsigned-integer view of the whole buffer
    start: int
    rows: int
    cols: int
    ld: int
    guard_bits: int

    def matrix(self, storage: Any) -> Any:
        """The rows x cols matrix (a strided view when ld > cols), in its element type."""
        region = self.flat[self.start : self.start + self.rows * self.ld].view(storage)
        return region.reshape(self.rows, self.ld)[:, : self.cols]

    def pointer(self) -> Any:
        """The buffer from the matrix's first element on, to pass as a kernel argument."""
        return self.flat[self.start :]

    def as_float64(self, xp: Any, dt: DType) -> Any:
        return _bits_to_float64(xp, self.matrix(uint_type(xp, dt.itemsize)), dt)

    def guard_faults(self, xp: Any, name: str) -> list[Fault]:
        faults = []
        before = self.flat[: self.start]
        after = self.flat[self.start + self.rows * self.ld :]
        padding = self.flat[self.start : self.start + self.rows * self.ld].reshape(self.rows, self.ld)[:, self.cols :]
        for where, region in (
            (f"the guard before {name}", before),
            (f"the guard after {name}", after),
            (f"the row padding of {name} (between ld and the row's end)", padding),
        ):
            changed = int((region != self.guard_bits).sum()) if region.size else 0
            if changed:
                faults.append(Fault("out-of-bounds write", where, changed))
        return faults


class GpuRunner:
    """One CUDA device: verifies cases on it."""

    def __init__(self, cupy: Any, index: int) -> None:
        self.cp = cupy
        self.index = index
        cupy.cuda.Device(index).use()
        props = cupy.cuda.runtime.getDeviceProperties(index)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.capability = (int(props["major"]), int(props["minor"]))
        self.arch = f"sm_{props['major']}{props['minor']}"
        self.sm_count = int(props["multiProcessorCount"])
        self.l2_bytes = int(props["l2CacheSize"])
        self.max_clock_mhz = int(props["clockRate"]) / 1000  # CUDA reports kHz
        self.pci_bus_id = cupy.cuda.runtime.deviceGetPCIBusId(index)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._functions: dict[tuple, Any] = {}
        self._tensor_maps: dict[tuple, np.ndarray] = {}
        self._timer: Any = None

    def cannot_run(self, spec: KernelSpec) -> str | None:
        """Why this device cannot run a kernel pinned to another architecture (None when it can)."""
        if spec.arch and not arch_runs_on(spec.arch, self.capability):
            return (
                f"{spec.name} is built for {spec.arch} (its header's arch), "
                f"which this {self.name} ({self.arch}) cannot run"
            )
        return None

    def facts(self) -> dict[str, Any]:
        """What CUDA and CuPy say about this device and its software (NVML adds the rest)."""
        cp = self.cp
        from cupy_backends.cuda.libs import cublas

        handle = cublas.create()
        try:
            cublas_version = cublas.getVersion(handle)
        finally:
            cublas.destroy(handle)
        runtime = cp.cuda.runtime.runtimeGetVersion()
        driver = cp.cuda.runtime.driverGetVersion()
        return {
            "name": self.name,
            "compute_capability": f"{self.capability[0]}.{self.capability[1]}",
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "cuda_max_sm_clock_mhz": self.max_clock_mhz,
            "pci_bus_id": self.pci_bus_id,
            "cuda_driver_api_version": _cuda_version(driver),
            "cuda_runtime_version": _cuda_version(runtime),
            "cupy_version": cp.__version__,
            "cublas_version": f"{cublas_version // 10000}.{cublas_version % 10000 // 100}.{cublas_version % 100}",
        }

    def benchmark(self, case: Case, seed: int, settings: Any) -> Any:
        """Time the kernel against cuBLAS on this case (see :mod:`.device_timing`)."""
        from .device_timing import Timer

        if self._timer is None:
            self._timer = Timer(self)
        return self._timer.time_case(case, seed, settings)

    # -- kernels ---------------------------------------------------------------------------------
    def _function(self, case: Case) -> Any:
        arch = case.spec.arch or self.arch
        key = (case.spec.path, case.spec.name, case.variant, arch)
        if key not in self._functions:
            compiled = compile_kernel(case.spec, case.variant, arch)
            module = self.cp.cuda.function.Module()
            module.load(compiled.cubin)
            self._functions[key] = (module, module.get_function(compiled.lowered_name))
        return self._functions[key][1]

    # -- buffers ---------------------------------------------------------------------------------
    def _guarded(self, dt: DType, padded: bool, shape: tuple[int, int], fill: np.ndarray | None) -> GuardedMatrix:
        """A guarded rows x cols buffer (storage order) holding ``fill``, or the NaN poison when it is None."""
        cp = self.cp
        rows, cols = shape
        ld = cols + (_LD_PAD if padded else 0)
        before = _GUARD_BYTES // dt.itemsize
        after = max(before, _GUARD_ROWS * ld)
        flat = cp.full(before + rows * ld + after, dt.guard_bits, dtype=uint_type(cp, dt.itemsize))
        g = GuardedMatrix(flat, before, rows, cols, ld, dt.guard_bits)
        g.matrix(flat.dtype)[...] = dt.poison_bits if fill is None else upload_bits(cp, fill)
        return g

    # -- one case --------------------------------------------------------------------------------
    def verify(self, case: Case, seed: int) -> VerificationResult:
        """Run the kernel once on fresh guarded buffers, then judge it against the fp64 truth."""
        cp = self.cp
        spec, (m, n, k) = case.spec, (case.shape.M, case.shape.N, case.shape.K)
        dt, out = get_dtype(case.dtype), get_dtype(spec.output_dtype(case.dtype))
        data = case_inputs(case, seed)

        with self.stream:
            ga = self._guarded(dt, "lda" in spec.args, data.stored(data.a).shape, data.stored(data.a))
            gb = self._guarded(dt, "ldb" in spec.args, data.stored(data.b).shape, data.stored(data.b))
            c_shape = (n, m) if data.col else (m, n)
            c0 = None if data.c0 is None else data.stored(data.c0)
            gc = self._guarded(out, "ldc" in spec.args, c_shape, c0)
            self._launch(case, ga, gb, gc, dt)

            # The reference starts only now, on buffers of its own.
            a_bits, b_bits = upload_bits(cp, data.a), upload_bits(cp, data.b)
            c0_bits = None if data.c0 is None else upload_bits(cp, data.c0)
            faults = ga.guard_faults(cp, "A") + gb.guard_faults(cp, "B") + gc.guard_faults(cp, "C")
            for name, g, bits in (("A", ga, a_bits), ("B", gb, b_bits)):
                changed = count_changed(cp, bits, data.logical(g.matrix(bits.dtype)))
                if changed:
                    faults.append(Fault("input modified", f"{name} (inputs must be read-only)", changed))

            truth, gscale = self.truth(case, a_bits, b_bits, c0_bits)
            kernel_stats = self.judge_output(case, gc, data, c0_bits, truth, gscale)
            operands = (data.a, a_bits), (data.b, b_bits)
            peer = self._peer(operands, c0_bits, case, dt, out, truth, gscale)
            self.stream.synchronize()
        return VerificationResult(
            case_id=case.spec.name + f"[{case.id}]",
            seed=seed,
            shape=(m, n, k),
            alpha=case.ab.alpha,
            beta=case.ab.beta,
            kernel=kernel_stats,
            peer=peer,
            faults=tuple(faults),
        )

    def truth(self, case: Case, a_bits: Any, b_bits: Any, c0_bits: Any) -> tuple[Any, Any]:
        """The fp64 result and the scale G of the per-element bound, from the inputs' bits."""
        cp = self.cp
        dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        alpha, beta = case.ab.alpha, case.ab.beta
        a64, b64 = _bits_to_float64(cp, a_bits, dt), _bits_to_float64(cp, b_bits, dt)
        truth = alpha * (a64 @ b64)
        gscale = abs(alpha) * (cp.abs(a64) @ cp.abs(b64))
        if c0_bits is not None:
            c064 = _bits_to_float64(cp, c0_bits, out)
            truth += beta * c064
            gscale += abs(beta) * cp.abs(c064)
        return truth, gscale

    def judge_output(self, case: Case, gc: GuardedMatrix, data: CaseInputs, c0_bits: Any, truth: Any, gscale: Any):
        """Error statistics of the C held in ``gc`` (unwritten = still bitwise equal to what it started as)."""
        cp = self.cp
        dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        got = data.logical(gc.as_float64(cp, out))
        c_bits = data.logical(gc.matrix(uint_type(cp, out.itemsize)))
        unchanged = c_bits == out.poison_bits if c0_bits is None else c_bits == c0_bits
        return error_stats(cp, got, truth, gscale, case.shape.K, dt, out, unchanged)

    def _launch(self, case: Case, ga: GuardedMatrix, gb: GuardedMatrix, gc: GuardedMatrix, dt: DType) -> None:
        """Run the kernel once and wait for it; CUDA errors become :class:`KernelLaunchError`."""
        cp = self.cp
        try:
            self.enqueue(case, ga, gb, gc, dt)
            self.stream.synchronize()
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise self.launch_error(case, exc) from None

    def launch_error(self, case: Case, exc: Exception) -> KernelLaunchError:
        return KernelLaunchError(
            f"CUDA error while running {case.spec.name}[{case.id}]: {exc}. Errors such as an illegal address "
            "leave this process's CUDA context unusable: later GPU cases in this run may fail too."
        )

    def enqueue(self, case: Case, ga: GuardedMatrix, gb: GuardedMatrix, gc: GuardedMatrix, dt: DType) -> None:
        """Launch the kernel on the current stream without waiting for it."""
        cp, spec = self.cp, case.spec
        out = get_dtype(spec.output_dtype(case.dtype))
        alpha, beta = case.ab.alpha, case.ab.beta
        if spec.kind == "py":
            storage, out_storage = np_dtype(dt), np_dtype(out)
            views = [g.matrix(s) for g, s in ((ga, storage), (gb, storage), (gc, out_storage))]
            if spec.layout == "col":
                views = [v.T for v in views]
            spec.function(*views, alpha, beta, **case.variant.as_dict())
            return
        fn = self._function(case)
        geom = launch_geometry(spec, case.variant, case.shape)
        if geom.shared_mem > 48 * 1024:
            cp.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SMEM_ATTR, geom.shared_mem)
        scalar = np.dtype(dt.scalar).type
        values = {
            "M": np.int32(case.shape.M),
            "N": np.int32(case.shape.N),
            "K": np.int32(case.shape.K),
            "alpha": scalar(alpha),
            "beta": scalar(beta),
            "A": ga.pointer(),
            "B": gb.pointer(),
            "C": gc.pointer(),
            "lda": np.int32(ga.ld),
            "ldb": np.int32(gb.ld),
            "ldc": np.int32(gc.ld),
        }
        for arg, (operand, g, gdt) in zip(MAP_ARGS, (("A", ga, dt), ("B", gb, dt), ("C", gc, out))):
            if arg in spec.args:
                values[arg] = self._tensor_map(case, operand, g, gdt)
        fn(geom.grid, geom.block, tuple(values[a] for a in spec.args), shared_mem=geom.shared_mem)

    def _tensor_map(self, case: Case, operand: str, g: GuardedMatrix, dt: DType) -> np.ndarray:
        """The 128-byte CUtensorMap of one operand's storage, as a one-element array CuPy passes by value."""
        spec, wanted = case.spec, case.spec.tensor_map(operand)
        inner, outer = tensor_map_box(spec, wanted, case.variant)
        layout = TensorMapLayout(operand, g.rows, g.cols, g.ld, dt.itemsize, inner, outer, wanted.swizzle)
        problems = layout_problems(layout)
        if problems:
            raise KernelFileError(
                spec.path,
                f"{spec.name}[{case.id}]: cannot build {operand}_map: " + "; ".join(problems),
                line=spec.line,
                key="tensor_maps",
            )
        address = g.pointer().data.ptr
        key = (address, layout, dt.storage)
        if key not in self._tensor_maps:
            if len(self._tensor_maps) > 256:
                self._tensor_maps.clear()
            self._tensor_maps[key] = _encode_tensor_map(address, layout, dt)
        return self._tensor_maps[key]

    def _peer(self, operands, c0_bits, case: Case, dt: DType, out: DType, truth, gscale) -> ErrorStats:
        """cuBLAS at the kernel's own dtype (fp32 without TF32; TF32 by rounding the operands).

        ``operands`` holds (host array, device bits) for A and B; the bits already on the device are
        reused, except for bf16, whose CuPy array type comes from ml_dtypes through the host array.
        """
        cp = self.cp
        a_s, b_s = (cp.asarray(host) if dt.name == "bf16" else bits.view(np_dtype(dt)) for host, bits in operands)
        if dt.name == "tf32":
            a_s, b_s = _round_tf32(cp, a_s), _round_tf32(cp, b_s)
        acc = cp.float64 if dt.name == "fp64" else cp.float32
        result = case.ab.alpha * _widen(cp, cp.matmul(a_s, b_s), acc)
        if c0_bits is not None:
            result = result + case.ab.beta * _bits_to_float64(cp, c0_bits, out).astype(acc)
        if out.name == "bf16":  # round to bf16 on the host (ml_dtypes), then widen exactly
            result = cp.asarray(result.get().astype(np_dtype(out)).astype(np.float64))
        else:
            result = result.astype(np_dtype(out)).astype(cp.float64)
        return error_stats(cp, result, truth, gscale, case.shape.K, dt, out)


@dataclass(frozen=True)
class CaseInputs:
    """A case's host data (logical row-major A, B and prior C) and its layout."""

    a: np.ndarray
    b: np.ndarray
    c0: np.ndarray | None
    col: bool

    def stored(self, x: np.ndarray) -> np.ndarray:
        """``x`` in the kernel's storage order (column-major layouts store the transpose)."""
        return np.ascontiguousarray(x.T) if self.col else x

    def logical(self, x: Any) -> Any:
        """A stored array seen in logical (row-major) order."""
        return x.T if self.col else x


def case_inputs(case: Case, seed: int) -> CaseInputs:
    """The seeded inputs of a case: the same seed always gives the same A, B and prior C."""
    dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
    m, n, k = case.shape.M, case.shape.N, case.shape.K
    rng = np.random.default_rng(seed)
    a = _random(rng, (m, k), np_dtype(dt))
    b = _random(rng, (k, n), np_dtype(dt))
    c0 = _random(rng, (m, n), np_dtype(out)) if case.ab.prior else None
    return CaseInputs(a, b, c0, case.spec.layout == "col")


def _encode_tensor_map(address: int, layout: TensorMapLayout, dt: DType) -> np.ndarray:
    """Ask the CUDA driver (cuTensorMapEncodeTiled) for a 2-D tiled tensor map of one operand."""
    try:
        encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError) as exc:
        raise KernelLaunchError(f"cannot load cuTensorMapEncodeTiled from the CUDA driver: {exc}") from None
    encode.restype = ctypes.c_int
    storage = ctypes.create_string_buffer(128 + 64)  # CUtensorMap is 128 bytes, 64-byte aligned
    aligned = (ctypes.addressof(storage) + 63) // 64 * 64
    rc = encode(
        ctypes.c_void_p(aligned),
        _TMA_DATA_TYPES[dt.storage],
        2,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * 2)(layout.cols, layout.rows),
        (ctypes.c_uint64 * 1)(layout.pitch_bytes),
        (ctypes.c_uint32 * 2)(layout.box_inner, layout.box_outer),
        (ctypes.c_uint32 * 2)(1, 1),
        0,  # no interleave
        _TMA_SWIZZLE_MODES[layout.swizzle],
        _TMA_L2_PROMOTION_128B,
        _TMA_OOB_FILL_ZEROS,
    )
    if rc != 0:
        raise KernelLaunchError(f"cuTensorMapEncodeTiled failed with CUDA error {rc} for {layout}")
    record = np.zeros(1, dtype=np.dtype([("bytes", np.uint8, 128)]))
    record.view(np.uint8)[:] = np.frombuffer(ctypes.string_at(aligned, 128), dtype=np.uint8)
    return record


def np_dtype(dt: DType) -> np.dtype:
    if dt.storage == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dt.storage)


def _cuda_version(value: int) -> str:
    return f"{value // 1000}.{value % 1000 // 10}"


def _widen(cp: Any, x: Any, dtype: Any) -> Any:
    """Convert to ``dtype``; bf16 (a 2-byte type that is not float16) through its bits."""
    if x.dtype.itemsize == 2 and x.dtype != cp.float16:
        return _bf16_bits_to(cp, x.view(cp.uint16), dtype)
    return x.astype(dtype)


def _bf16_bits_to(xp: Any, bits: Any, dtype: Any) -> Any:
    """bf16 bit patterns (uint16) to ``dtype``: a bf16 is the top half of an fp32."""
    return (bits.astype(xp.uint32) << 16).view(xp.float32).astype(dtype)


def upload_bits(cp: Any, host: np.ndarray) -> Any:
    """Copy a host array to the device as its raw bits (works for bf16, which CuPy may not know)."""
    return cp.asarray(np.ascontiguousarray(host).view(f"u{host.dtype.itemsize}"))


def _bits_to_float64(xp: Any, bits: Any, dt: DType) -> Any:
    if dt.name == "bf16":
        return _bf16_bits_to(xp, bits, xp.float64)
    contiguous = bits if bits.flags.c_contiguous else xp.ascontiguousarray(bits)
    return contiguous.view(np_dtype(dt)).astype(xp.float64)


def uint_type(xp: Any, itemsize: int) -> Any:
    return {2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[itemsize]


def _random(rng: np.random.Generator, shape: tuple[int, int], storage: np.dtype) -> np.ndarray:
    """Zero-mean data in (-1, 1), stored exactly in the kernel's element type."""
    work = np.float64 if storage == np.float64 else np.float32
    return rng.uniform(-1.0, 1.0, size=shape).astype(work).astype(storage)


def _round_tf32(cp: Any, x: Any) -> Any:
    bits = x.view(cp.uint32)
    return ((bits + cp.uint32(0x1000)) & cp.uint32(0xFFFFE000)).view(cp.float32)
