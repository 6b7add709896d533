"""Compile kernel sources with NVRTC into cubins. Needs no GPU and no CUDA driver.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel through ``cuda-bindings``
(``pip install 'pytest-gemm[nvrtc]'``), or from a CUDA toolkit. Results are kept in memory for
the process and, given a folder, on disk (:mod:`.cache`), so a new worker or a second run
compiles nothing.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..specs.spec import KernelSpec, Variant
from .cache import CubinCache, cache_key

__all__ = [
    "CompileError",
    "CompileResult",
    "Compiler",
    "NvrtcUnavailable",
    "Resources",
    "compile_kernel",
    "load_nvrtc",
    "nvrtc_version",
]


class NvrtcUnavailable(RuntimeError):
    """NVRTC (cuda-bindings and the NVRTC library) cannot be loaded."""


class CompileError(Exception):
    """The compiler rejected the source; ``log`` holds its messages with file and line."""

    def __init__(self, path: str, arch: str, log: str) -> None:
        self.path, self.arch, self.log = path, arch, log
        super().__init__(f"{path}: compilation for {arch} failed:\n{log}")


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for the entry function."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    static_smem: int


@dataclass(frozen=True)
class CompileResult:
    arch: str
    lowered_name: str
    resources: Resources | None
    log: str
    cubin: bytes = field(repr=False)
    from_cache: bool = False  # found on disk: NVRTC did not run


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NvrtcUnavailable(
            f"NVRTC is not available ({exc}); install it with: pip install 'pytest-gemm[nvrtc]'"
        ) from None
    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    try:
        _err, major, minor = nvrtc.nvrtcVersion()
    except RuntimeError as exc:
        raise NvrtcUnavailable(f"the NVRTC library cannot be loaded: {exc}") from None
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def _include_dirs() -> tuple[str, ...]:
    """CUDA headers (cuda_fp16.h, mma.h, cuda/barrier, ...) from the nvidia-cuda-* wheels or a toolkit."""
    dirs = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            dirs.append(found)
    except Exception:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda_fp16.h").exists():
            dirs.append(str(Path(root) / "include"))
    # CUDA 13 keeps CCCL (cuda/barrier, cuda/std, the parts cooperative_groups.h needs) in include/cccl,
    # in the toolkit and in the nvidia-cuda-cccl wheel alike; each CCCL follows its own CUDA headers.
    with_cccl = []
    for d in dirs:
        with_cccl.append(d)
        if (Path(d) / "cccl" / "cuda" / "std").is_dir():
            with_cccl.append(str(Path(d) / "cccl"))
    return tuple(dict.fromkeys(with_cccl))


def load_nvrtc() -> bool:
    """Load NVRTC and run its one-time probes (version, headers, ``--no-cache``) now, in this thread, so that
    threads compiling at once do not each run them; False when NVRTC cannot be loaded."""
    try:
        nvrtc_version()
    except NvrtcUnavailable:
        return False
    _include_dirs()
    _accepts_no_cache()
    return True


def compile_options(spec: KernelSpec, arch: str, *, no_cache: bool = False) -> list[str]:
    """NVRTC's options for ``spec`` on ``arch``; ``no_cache`` adds ``--no-cache`` (see :func:`_accepts_no_cache`)."""
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "--ptxas-options=-v", "-lineinfo"]
    if no_cache:
        # With a driver present, NVRTC 12.9+ serves repeat compiles from the driver's compute cache,
        # and a cached result comes without ptxas's report (registers, spills). This process caches.
        opts.append("--no-cache")
    opts += [f"-I{d}" for d in _include_dirs()]
    return opts + list(spec.options)


@functools.lru_cache(maxsize=1)
def _accepts_no_cache() -> bool:
    """Whether this NVRTC knows ``--no-cache`` (older ones reject unknown options)."""
    try:
        nvrtc = _nvrtc()
        err, prog = nvrtc.nvrtcCreateProgram(b"__global__ void k() {}", b"probe.cu", 0, [], [])
    except (NvrtcUnavailable, RuntimeError):
        return False
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return False
    try:
        (result,) = nvrtc.nvrtcCompileProgram(prog, 1, [b"--no-cache"])
        return result == nvrtc.nvrtcResult.NVRTC_SUCCESS
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def source_with_params(spec: KernelSpec, variant: Variant) -> str:
    """The source with each param defined as a macro on top.

    Defined in the text rather than with -D so that NVRTC's built-in headers, which are
    read first, never see them (a param named T would otherwise rewrite their templates).
    """
    fixed = [(flag, 1) for flag, value in spec.storage.flags().items() if value and flag not in variant.as_dict()]
    if not variant.params and not fixed:
        return spec.source
    defines = "".join(f"#define {name} {value}\n" for name, value in (*variant.params, *fixed))
    return f'{defines}#line 1 "{spec.path}"\n{spec.source}'


#: what compiles a program: (source, path, name expression, options, architecture) -> its result
Compiler = Callable[[str, str, str, tuple[str, ...], str], CompileResult]


def compile_kernel(
    spec: KernelSpec, variant: Variant, arch: str, cache: CubinCache | None = None, compiler: Compiler | None = None
) -> CompileResult:
    """Compile one variant of a ``.cu`` kernel for one architecture, or find it in ``cache`` or this process.

    NVRTC runs in this process, or in ``compiler`` when given (:class:`.limited.LimitedCompiler`: in a child process,
    with a time limit). The cache key leaves ``--no-cache`` out: whether NVRTC takes it follows from its version,
    which is in the key, so a worker that finds every kernel in the cache never pays :func:`_accepts_no_cache`'s
    probe.
    """
    source, name_expr = source_with_params(spec, variant), spec.entry_for(variant)
    key = ""
    if cache is not None:
        keyed = tuple(compile_options(spec, arch))
        key = cache_key(source, spec.path, name_expr, keyed, arch, nvrtc_version())
        found = cache.get(key)
        if found is not None:
            lowered, log, cubin = found
            return CompileResult(arch, lowered, parse_ptxas_resources(log, lowered), log, cubin, from_cache=True)
    options = tuple(compile_options(spec, arch, no_cache=_accepts_no_cache()))
    result = (compiler or _compile)(source, spec.path, name_expr, options, arch)
    if cache is not None:
        cache.put(key, result.lowered_name, result.log, result.cubin)
    return result


@functools.lru_cache(maxsize=256)
def _compile(source: str, path: str, name_expr: str, options: tuple[str, ...], arch: str) -> CompileResult:
    nvrtc = _nvrtc()
    try:
        err, prog = nvrtc.nvrtcCreateProgram(source.encode(), path.encode(), 0, [], [])
    except RuntimeError as exc:
        raise NvrtcUnavailable(f"the NVRTC library cannot be loaded: {exc}") from None
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, name_expr.encode())[0], "nvrtcAddNameExpression")
        opts = [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _log(nvrtc, prog)
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(path, arch, log or str(result))
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, name_expr.encode())
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or not lowered:
            raise CompileError(path, arch, f"entry {name_expr!r} is not a __global__ function in this file\n{log}")
        lowered = lowered.decode()
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
        return CompileResult(arch, lowered, parse_ptxas_resources(log, lowered), log, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc, prog) -> str:
    _err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\x00 \n").decode(errors="replace")


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise RuntimeError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")


_NUM = r"(\d+)"


def parse_ptxas_resources(log: str, function: str) -> Resources | None:
    """Registers, spills, stack and static shared memory of ``function`` from ``ptxas -v`` output."""
    marker = f"Function properties for {function}"
    start = log.find(marker)
    if start < 0:
        return None
    block = log[start : start + 600]
    end = block.find("Compiling entry function", len(marker))
    block = block[:end] if end > 0 else block

    def grab(pattern: str) -> int:
        match = re.search(pattern, block)
        return int(match.group(1)) if match else 0

    return Resources(
        registers=grab(rf"Used {_NUM} registers"),
        spill_stores=grab(rf"{_NUM} bytes spill stores"),
        spill_loads=grab(rf"{_NUM} bytes spill loads"),
        stack_bytes=grab(rf"{_NUM} bytes stack frame"),
        static_smem=grab(rf"{_NUM} bytes smem"),
    )
