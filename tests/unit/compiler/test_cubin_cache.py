"""The compile cache on disk (compiler/cache.py): a half-written entry is compiled again, and a kernel found in the
cache costs no NVRTC probe."""

from __future__ import annotations

from pytest_gemm.compiler.nvrtc import compile_kernel
from pytest_gemm.specs.cufile import parse_cu_source

from support import requires_nvrtc

pytestmark = requires_nvrtc


def test_a_half_written_cache_entry_is_compiled_again(tmp_path, naive_source):
    from pytest_gemm.compiler.cache import CubinCache

    (spec,) = parse_cu_source("k.cu", naive_source)
    cache = CubinCache(tmp_path)
    first = compile_kernel(spec, spec.variants()[0], "sm_90", cache)
    assert not first.from_cache
    assert compile_kernel(spec, spec.variants()[0], "sm_90", cache).from_cache
    for cubin in tmp_path.glob("*.cubin"):
        cubin.write_bytes(cubin.read_bytes()[:100])  # a crash mid-write of another process
    again = compile_kernel(spec, spec.variants()[0], "sm_90", cache)
    assert not again.from_cache and again.cubin == first.cubin


def test_a_kernel_found_in_the_cache_costs_no_nvrtc_probe(tmp_path, naive_source, monkeypatch):
    """A new worker whose kernels are all cached compiles nothing, not even the --no-cache probe."""
    from pytest_gemm.compiler import nvrtc
    from pytest_gemm.compiler.cache import CubinCache

    (spec,) = parse_cu_source("k.cu", naive_source)
    cache = CubinCache(tmp_path)
    first = compile_kernel(spec, spec.variants()[0], "sm_90", cache)

    def probe() -> bool:
        raise AssertionError("NVRTC was probed for a kernel in the cache")

    monkeypatch.setattr(nvrtc, "_accepts_no_cache", probe)
    again = compile_kernel(spec, spec.variants()[0], "sm_90", cache)
    assert again.from_cache and again.cubin == first.cubin
