"""Compile items through pytester (NVRTC, no GPU): their outcomes and report, the compile cache, architectures,
xdist, --last-failed, launch limits, CUDA's headers, and compiling ahead in threads."""

from __future__ import annotations

import shutil
import threading

import pytest

from support import FAULTS, requires_nvrtc

pytestmark = requires_nvrtc


def test_compile_items_pass_fail_and_report(pytester, naive_source):
    kernels = pytester.mkdir("kernels")
    (kernels / "good.cu").write_text(naive_source)
    (kernels / "typo.cu").write_text(naive_source.replace("acc += A", "acc += Q"))
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*kernels/typo.cu: sgemm_naive does not compile for sm_80:",
            '*kernels/typo.cu(14): error: identifier "Q" is undefined*',
            "*pytest-gemm compile report (ptxas)*",
            "*kernels/good.cu::sgemm_naive*sm_80*0/0*",
            "*kernels/good.cu::sgemm_naive*sm_90*0/0*",
        ]
    )


def test_compiled_kernels_are_cached_on_disk_and_cache_clear_empties_the_cache(pytester, naive_source):
    """A second run, or another process, compiles nothing; a changed source or option compiles again."""
    kernels = pytester.mkdir("kernels")
    (kernels / "naive.cu").write_text(naive_source)
    first = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile")
    first.stdout.fnmatch_lines(["2 variant(s) compiled by NVRTC, 0 found in the compile cache*"])
    cache = pytester.path / ".pytest_cache" / "d" / "gemm-cubins"
    assert len(list(cache.glob("*.cubin"))) == len(list(cache.glob("*.json"))) == 2
    again = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-v")
    again.stdout.fnmatch_lines(["0 variant(s) compiled by NVRTC, 2 found in the compile cache*"])
    again.stdout.fnmatch_lines(["*kernels/naive.cu::sgemm_naive*sm_90*0/0*"])  # ptxas's report comes from the cache
    (kernels / "naive.cu").write_text(naive_source + "\n// edited\n")
    edited = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile")
    edited.stdout.fnmatch_lines(["2 variant(s) compiled by NVRTC, 0 found in the compile cache*"])
    cleared = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--cache-clear")
    cleared.stdout.fnmatch_lines(["2 variant(s) compiled by NVRTC, 0 found in the compile cache*"])
    off = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-p", "no:cacheprovider")
    off.stdout.fnmatch_lines(["pytest-gemm: *; no compile cache (-p no:cacheprovider);*", "2 variant(s) compiled*"])


def test_compile_report_shows_dynamic_shared_memory_and_occupancy_per_variant(pytester, naive_source):
    header = 'params = { S = [2, 4, 150] }\nshared_mem = "S * 1024"\n*/'
    by_shape = 'shared_mem = "N * 4"\n*/'
    kernels = pytester.mkdir("kernels")
    (kernels / "smem.cu").write_text(naive_source.replace("*/", header, 1))
    (kernels / "shape.cu").write_text(naive_source.replace("*/", by_shape, 1))
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_90", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*kernel*static smem B  dynamic smem B  threads  occupancy (blocks/SM, warps, bound by)",
            "*kernels/shape.cu::sgemm_naive *sm_90*0/0*0*by shape*1024  -",
            "*kernels/smem.cu::sgemm_naive[[]S150[]]*sm_90*0/0*0*153600*1024  1, 50%, shared memory",
            "*kernels/smem.cu::sgemm_naive[[]S2[]]*sm_90*0/0*0*2048*1024  *, *%, *",
            "*kernels/smem.cu::sgemm_naive[[]S4[]]*sm_90*0/0*0*4096*1024  *, *%, *",
        ]
    )


def test_without_v_the_compile_report_is_a_line_and_the_variants_worth_a_look(pytester, naive_source):
    """A variant near a launch limit (here 94% of an sm_90 block's shared memory) is listed; the others are not."""
    header = 'params = { S = [2, 213] }\nshared_mem = "S * 1024"\n*/'
    (pytester.mkdir("kernels") / "smem.cu").write_text(naive_source.replace("*/", header, 1))
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_90")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "2 variant(s) compiled by NVRTC, 0 found in the compile cache *; 0 cannot launch, 0 spill, 1 sit near a "
            "launch limit (-v: every variant)",
            "*kernels/smem.cu::sgemm_naive[[]S213[]]*sm_90*218112*near the shared memory per block limit",
        ]
    )
    assert "S2]" not in result.stdout.str()


def test_a_kernel_pinned_to_an_arch_is_built_only_for_it(pytester, naive_source):
    kernels = pytester.mkdir("kernels")
    (kernels / "pinned.cu").write_text(naive_source.replace("*/", 'arch = "sm_90a"\n*/', 1))
    (kernels / "free.cu").write_text(naive_source)
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_80,sm_86", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*kernels/free.cu::sgemm_naive *sm_80*",
            "*kernels/free.cu::sgemm_naive *sm_86*",
            "*kernels/pinned.cu::sgemm_naive *sm_90a*",
        ]
    )
    assert "pinned.cu::sgemm_naive  sm_80" not in result.stdout.str()


def test_compile_report_survives_xdist(pytester, naive_source):
    pytest.importorskip("xdist")
    (pytester.mkdir("kernels") / "good.cu").write_text(naive_source)
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-n", "2", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*kernels/good.cu::sgemm_naive*sm_80*", "*kernels/good.cu::sgemm_naive*sm_90*"])


def test_last_failed_reruns_only_the_failures(pytester, naive_source):
    kernels = pytester.mkdir("kernels")
    (kernels / "good.cu").write_text(naive_source)
    (kernels / "typo.cu").write_text(naive_source.replace("acc += A", "acc += Q"))
    pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile").assert_outcomes(passed=2, failed=2)
    again = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--lf", "-p", "cacheprovider")
    again.assert_outcomes(failed=2)


def test_a_kernel_that_can_never_launch_fails_its_compile_item_with_the_numbers(pytester):
    """Caught on the CPU, from the header and ptxas's report: 1024 threads of about 220 registers each."""
    shutil.copy(FAULTS / "registers.cu", pytester.path / "registers.cu")
    result = pytester.runpytest("--gemm-kernels", "registers.cu", "-m", "gemm_compile", "--gemm-archs", "sm_90")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "registers.cu: register_hog compiles for sm_90 but can never launch there:",
            "  - * registers per thread x 1024 threads per block = * registers*, but a block on sm_90 has 65536: "
            "at * registers, at most * threads per block fit",
        ]
    )


HEADERS = ("cooperative_groups.h", "cuda/barrier", "cuda/pipeline", "mma.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h")


def test_the_headers_users_include_compile_without_extra_options(pytester, naive_source):
    """CUDA 13 keeps CCCL (cuda/barrier, and what cooperative_groups.h needs) in include/cccl."""
    kernels = pytester.mkdir("kernels")
    includes = "".join(f"#include <{h}>\n" for h in HEADERS)
    (kernels / "headers.cu").write_text(includes + "namespace cg = cooperative_groups;\n" + naive_source)
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile")
    result.assert_outcomes(passed=2)


def test_compile_items_compiled_ahead_in_threads_fail_and_pass_as_one_by_one(pytester, naive_source, monkeypatch):
    """On a host with cores to spare the compile items are compiled ahead in threads: the same outcomes, the same
    messages and the same cache as one by one (CI's two cores compile them one by one)."""
    from pytest_gemm.plugin import compile_ahead

    kernels = pytester.mkdir("kernels")
    (kernels / "good.cu").write_text(naive_source)
    (kernels / "typo.cu").write_text(naive_source.replace("acc += A", "acc += Q"))
    (kernels / "other.cu").write_text(naive_source.replace("sgemm_naive", "sgemm_other"))
    started: list[int] = []
    start = compile_ahead.CompileAhead.start

    def spy(self, jobs, cores=None):
        started.append(start(self, jobs, cores=8))
        return started[-1]

    threads: list[str] = []
    compile_kernel = compile_ahead.compile_kernel

    def compiled(*args):
        threads.append(threading.current_thread().name)
        return compile_kernel(*args)

    monkeypatch.setattr(compile_ahead.CompileAhead, "start", spy)
    monkeypatch.setattr(compile_ahead, "compile_kernel", compiled)
    result = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-p", "no:randomly", "-v")
    assert started == [6]  # six compile items, six threads of the eight cores' six
    assert len(threads) == 6 and all(name.startswith("gemm-compile") for name in threads)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*kernels/typo.cu: sgemm_naive does not compile for sm_80:",
            '*kernels/typo.cu(14): error: identifier "Q" is undefined*',
            "*pytest-gemm compile report (ptxas)*",
            "4 variant(s) compiled by NVRTC, 0 found in the compile cache*",
            "*kernels/good.cu::sgemm_naive*sm_90*0/0*",
            "*kernels/other.cu::sgemm_other*sm_90*0/0*",
        ]
    )
    again = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "-p", "no:randomly")
    again.assert_outcomes(passed=4, failed=2)
    again.stdout.fnmatch_lines(["0 variant(s) compiled by NVRTC, 4 found in the compile cache*"])
    # --benchmark-only runs only the timed cases: the compile items are skipped, and nothing compiles ahead
    started.clear()
    only = pytester.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--benchmark-only")
    only.assert_outcomes(skipped=6)
    assert started == []
