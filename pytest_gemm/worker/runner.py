"""One CUDA device, as a worker keeps it from case to case: its facts and limits, the harness's stream, and its caches
and handles (compiled kernels, tensor maps, the cuBLAS handle, the kernel files it imported). Nothing of one case is
kept here: a case's buffers and strategies are its :class:`~.prepared.PreparedCase`'s. Part of the worker package,
the only one that imports CuPy; it runs in worker processes only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..compiler.cache import CubinCache
from ..compiler.nvrtc import compile_kernel
from ..records.dtypes import DType
from ..records.outcome import cuda_version
from ..specs.archs import arch_runs_on
from ..specs.cases import Case
from ..specs.limits import DeviceLimits, KernelResources
from ..specs.spec import KernelSpec
from .buffers import GuardedMatrix
from .environment import cupy_environment
from .errors import DeviceUnavailable
from .kernels import KernelFiles
from .tma import operand_map

__all__ = ["GpuRunner", "device_name", "open_device", "visible_devices"]

_FUNC_MAX_THREADS, _FUNC_STATIC_SMEM, _FUNC_NUM_REGS = 0, 1, 4  # CU_FUNC_ATTRIBUTE_*
_DEV_REGS_PER_BLOCK, _DEV_SMEM_OPTIN = 12, 97  # cudaDevAttrMaxRegistersPerBlock, ...SharedMemoryPerBlockOptin
_TENSOR_MAPS_KEPT = 256


def device_name(props: dict[str, Any]) -> str:
    """A device's name from CUDA's properties (CuPy gives bytes or str, by version)."""
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def visible_devices(cupy: Any, uuid_of: Callable[[str], str]) -> list[dict[str, str]]:
    """The devices this process sees, in CUDA's order: each one's name, compute capability and UUID (``uuid_of`` its
    PCI bus id: NVML's, as the GPU's facts give it, so that the two name one GPU alike; '' where unknown)."""
    devices = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        props = cupy.cuda.runtime.getDeviceProperties(index)
        capability = f"{props['major']}.{props['minor']}"
        uuid = uuid_of(cupy.cuda.runtime.deviceGetPCIBusId(index))
        devices.append({"name": device_name(props), "capability": capability, "uuid": uuid})
    return devices


def open_device(index: int = 0, cubins: CubinCache | None = None) -> GpuRunner:
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
    return GpuRunner(cupy, index, cubins, KernelFiles())


class GpuRunner:
    """One CUDA device and what the worker keeps on it."""

    def __init__(self, cupy: Any, index: int, cubins: CubinCache | None, files: KernelFiles) -> None:
        self.cp = cupy
        self.index = index
        self.cubins = cubins
        self.files = files  # the kernel files this worker read and imported
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
        self.compiles = {"nvrtc": 0, "cache": 0}  # kernels this worker compiled, and found compiled
        self._functions: dict[tuple, Any] = {}
        self._tensor_maps: dict[tuple, np.ndarray] = {}
        self._cublas: int | None = None  # a cuBLAS handle for the peer and the timed reference, made on first use
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
        from cupy_backends.cuda.libs import cublas

        cp, version = self.cp, cublas.getVersion(self.cublas_handle())
        return {
            "name": self.name,
            "compute_capability": f"{self.capability[0]}.{self.capability[1]}",
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "cuda_max_sm_clock_mhz": self.max_clock_mhz,
            "pci_bus_id": self.pci_bus_id,
            "cuda_driver_api_version": cuda_version(cp.cuda.runtime.driverGetVersion()),
            "cuda_runtime_version": cuda_version(cp.cuda.runtime.runtimeGetVersion()),
            "cupy_version": cp.__version__,
            "cublas_version": f"{version // 10000}.{version % 10000 // 100}.{version % 100}",
        }

    def function(self, case: Case) -> Any:
        """The case's ``.cu`` kernel, compiled (or found in the compile cache) and loaded once per variant."""
        arch = case.spec.arch or self.arch
        key = (case.spec.path, case.spec.name, case.variant, arch, hash(case.spec.source))
        if key not in self._functions:
            compiled = compile_kernel(case.spec, case.variant, arch, self.cubins)
            self.compiles["cache" if compiled.from_cache else "nvrtc"] += 1
            module = self.cp.cuda.function.Module()
            module.load(compiled.cubin)
            self._functions[key] = (module, module.get_function(compiled.lowered_name))
        return self._functions[key][1]

    def resources(self, fn: Any) -> KernelResources:
        """What a loaded kernel needs, from its function attributes."""
        get = self.cp.cuda.driver.funcGetAttribute
        return KernelResources(
            registers=int(get(_FUNC_NUM_REGS, fn.ptr)),
            static_smem=int(get(_FUNC_STATIC_SMEM, fn.ptr)),
            max_threads=int(get(_FUNC_MAX_THREADS, fn.ptr)),
        )

    def tensor_map(self, case: Case, operand: str, g: GuardedMatrix, dt: DType) -> np.ndarray:
        """The 128-byte CUtensorMap of one operand as stored (:func:`.tma.operand_map`), kept per address."""
        if len(self._tensor_maps) > _TENSOR_MAPS_KEPT:
            self._tensor_maps.clear()
        return operand_map(self._tensor_maps, case, operand, g, dt)

    def cublas_handle(self) -> int:
        """The worker's cuBLAS handle (made on first use)."""
        if self._cublas is None:
            from cupy_backends.cuda.libs import cublas

            self._cublas = cublas.create()
        return self._cublas
