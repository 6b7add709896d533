"""Everything that touches the GPU: load compiled kernels, build guarded buffers, launch, and judge.

This is the one module that imports CuPy. Its entry point takes a :class:`~pytest_gemm.cases.Case`
and a seed and returns a :class:`~pytest_gemm.verify.VerificationResult`, both plain records, so
it can run unchanged in a worker process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cases import Case, launch_geometry
from .compiler import compile_kernel
from .dtypes import DType, get_dtype
from .verify import ErrorStats, Fault, VerificationResult, count_changed, error_stats

__all__ = ["DeviceUnavailable", "GpuRunner", "KernelLaunchError", "open_device"]

_GUARD_BYTES = 64 * 1024  # guard before each buffer, and at least this much after it
_GUARD_ROWS = 256  # the guard after a buffer also covers this many extra rows (tiles up to 256)
_LD_PAD = 16  # extra elements per row when the kernel takes lda/ldb/ldc; the padding is guarded too
_MAX_DYNAMIC_SMEM_ATTR = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


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
class _Guarded:
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
        return _bits_to_float64(xp, self.matrix(_uint(xp, dt.itemsize)), dt)

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
        self.arch = f"sm_{props['major']}{props['minor']}"
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._functions: dict[tuple, Any] = {}

    # -- kernels ---------------------------------------------------------------------------------
    def _function(self, case: Case) -> Any:
        key = (case.spec.path, case.spec.name, case.variant, self.arch)
        if key not in self._functions:
            compiled = compile_kernel(case.spec, case.variant, self.arch)
            module = self.cp.cuda.function.Module()
            module.load(compiled.cubin)
            self._functions[key] = (module, module.get_function(compiled.lowered_name))
        return self._functions[key][1]

    # -- buffers ---------------------------------------------------------------------------------
    def _guarded(self, dt: DType, padded: bool, shape: tuple[int, int], fill: np.ndarray | None) -> _Guarded:
        """A guarded rows x cols buffer (storage order) holding ``fill``, or the NaN poison when it is None."""
        cp = self.cp
        rows, cols = shape
        ld = cols + (_LD_PAD if padded else 0)
        before = _GUARD_BYTES // dt.itemsize
        after = max(before, _GUARD_ROWS * ld)
        flat = cp.full(before + rows * ld + after, dt.guard_bits, dtype=_uint(cp, dt.itemsize))
        g = _Guarded(flat, before, rows, cols, ld, dt.guard_bits)
        g.matrix(flat.dtype)[...] = dt.poison_bits if fill is None else _upload_bits(cp, fill)
        return g

    # -- one case --------------------------------------------------------------------------------
    def verify(self, case: Case, seed: int) -> VerificationResult:
        """Run the kernel once on fresh guarded buffers, then judge it against the fp64 truth."""
        cp = self.cp
        spec, (m, n, k) = case.spec, (case.shape.M, case.shape.N, case.shape.K)
        dt, out = get_dtype(case.dtype), get_dtype(spec.output_dtype(case.dtype))
        storage, out_storage = _np_dtype(dt), _np_dtype(out)
        alpha, beta = case.ab.alpha, case.ab.beta

        rng = np.random.default_rng(seed)
        a = _random(rng, (m, k), storage)
        b = _random(rng, (k, n), storage)
        c0 = _random(rng, (m, n), out_storage) if case.ab.prior else None
        col = spec.layout == "col"
        phys = (lambda x: np.ascontiguousarray(x.T)) if col else (lambda x: x)  # storage order
        logical = (lambda x: x.T) if col else (lambda x: x)

        with self.stream:
            a_phys, b_phys = phys(a), phys(b)
            ga = self._guarded(dt, "lda" in spec.args, a_phys.shape, a_phys)
            gb = self._guarded(dt, "ldb" in spec.args, b_phys.shape, b_phys)
            c_shape = (n, m) if col else (m, n)
            gc = self._guarded(out, "ldc" in spec.args, c_shape, None if c0 is None else phys(c0))
            self._launch(case, ga, gb, gc, storage, out_storage, alpha, beta, dt)

            # The reference starts only now, on buffers of its own.
            got = logical(gc.as_float64(cp, out))
            c_bits = logical(gc.matrix(_uint(cp, out.itemsize)))
            c0_bits = None if c0 is None else _upload_bits(cp, c0)
            unchanged = c_bits == out.poison_bits if c0_bits is None else c_bits == c0_bits

            faults = ga.guard_faults(cp, "A") + gb.guard_faults(cp, "B") + gc.guard_faults(cp, "C")
            inputs = {"A": (ga, _upload_bits(cp, a)), "B": (gb, _upload_bits(cp, b))}
            for name, (g, bits) in inputs.items():
                changed = count_changed(cp, bits, logical(g.matrix(bits.dtype)))
                if changed:
                    faults.append(Fault("input modified", f"{name} (inputs must be read-only)", changed))

            a64, b64 = (_bits_to_float64(cp, bits, dt) for _, bits in inputs.values())
            truth = alpha * (a64 @ b64)
            gscale = abs(alpha) * (cp.abs(a64) @ cp.abs(b64))
            if c0_bits is not None:
                c064 = _bits_to_float64(cp, c0_bits, out)
                truth += beta * c064
                gscale += abs(beta) * cp.abs(c064)
            kernel_stats = error_stats(cp, got, truth, gscale, k, dt, out, unchanged)
            operands = (a, inputs["A"][1]), (b, inputs["B"][1])
            peer = self._peer(operands, c0_bits, case, dt, out, truth, gscale)
            self.stream.synchronize()
        return VerificationResult(
            case_id=case.spec.name + f"[{case.id}]",
            seed=seed,
            shape=(m, n, k),
            alpha=alpha,
            beta=beta,
            kernel=kernel_stats,
            peer=peer,
            faults=tuple(faults),
        )

    def _launch(self, case, ga, gb, gc, storage, out_storage, alpha, beta, dt: DType) -> None:
        cp, spec = self.cp, case.spec
        try:
            if spec.kind == "py":
                views = [g.matrix(s) for g, s in ((ga, storage), (gb, storage), (gc, out_storage))]
                if spec.layout == "col":
                    views = [v.T for v in views]
                spec.function(*views, alpha, beta, **case.variant.as_dict())
            else:
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
                fn(geom.grid, geom.block, tuple(values[a] for a in spec.args), shared_mem=geom.shared_mem)
            self.stream.synchronize()
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise KernelLaunchError(
                f"CUDA error while running {spec.name}[{case.id}]: {exc}. Errors such as an illegal address "
                "leave this process's CUDA context unusable: later GPU cases in this run may fail too."
            ) from None

    def _peer(self, operands, c0_bits, case: Case, dt: DType, out: DType, truth, gscale) -> ErrorStats:
        """cuBLAS at the kernel's own dtype (fp32 without TF32; TF32 by rounding the operands).

        ``operands`` holds (host array, device bits) for A and B; the bits already on the device are
        reused, except for bf16, whose CuPy array type comes from ml_dtypes through the host array.
        """
        cp = self.cp
        a_s, b_s = (cp.asarray(host) if dt.name == "bf16" else bits.view(_np_dtype(dt)) for host, bits in operands)
        if dt.name == "tf32":
            a_s, b_s = _round_tf32(cp, a_s), _round_tf32(cp, b_s)
        acc = cp.float64 if dt.name == "fp64" else cp.float32
        result = case.ab.alpha * _widen(cp, cp.matmul(a_s, b_s), acc)
        if c0_bits is not None:
            result = result + case.ab.beta * _bits_to_float64(cp, c0_bits, out).astype(acc)
        if out.name == "bf16":  # round to bf16 on the host (ml_dtypes), then widen exactly
            result = cp.asarray(result.get().astype(_np_dtype(out)).astype(np.float64))
        else:
            result = result.astype(_np_dtype(out)).astype(cp.float64)
        return error_stats(cp, result, truth, gscale, case.shape.K, dt, out)


def _np_dtype(dt: DType) -> np.dtype:
    if dt.storage == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dt.storage)


def _widen(cp: Any, x: Any, dtype: Any) -> Any:
    """Convert to ``dtype``; bf16 (a 2-byte type that is not float16) through its bits."""
    if x.dtype.itemsize == 2 and x.dtype != cp.float16:
        return _bf16_bits_to(cp, x.view(cp.uint16), dtype)
    return x.astype(dtype)


def _bf16_bits_to(xp: Any, bits: Any, dtype: Any) -> Any:
    """bf16 bit patterns (uint16) to ``dtype``: a bf16 is the top half of an fp32."""
    return (bits.astype(xp.uint32) << 16).view(xp.float32).astype(dtype)


def _upload_bits(cp: Any, host: np.ndarray) -> Any:
    """Copy a host array to the device as its raw bits (works for bf16, which CuPy may not know)."""
    return cp.asarray(np.ascontiguousarray(host).view(f"u{host.dtype.itemsize}"))


def _bits_to_float64(xp: Any, bits: Any, dt: DType) -> Any:
    if dt.name == "bf16":
        return _bf16_bits_to(xp, bits, xp.float64)
    contiguous = bits if bits.flags.c_contiguous else xp.ascontiguousarray(bits)
    return contiguous.view(_np_dtype(dt)).astype(xp.float64)


def _uint(xp: Any, itemsize: int) -> Any:
    return {2: xp.uint16, 4: xp.uint32, 8: xp.uint64}[itemsize]


def _random(rng: np.random.Generator, shape: tuple[int, int], storage: np.dtype) -> np.ndarray:
    """Zero-mean data in (-1, 1), stored exactly in the kernel's element type."""
    work = np.float64 if storage == np.float64 else np.float32
    return rng.uniform(-1.0, 1.0, size=shape).astype(work).astype(storage)


def _round_tf32(cp: Any, x: Any) -> Any:
    bits = x.view(cp.uint32)
    return ((bits + cp.uint32(0x1000)) & cp.uint32(0xFFFFE000)).view(cp.float32)
