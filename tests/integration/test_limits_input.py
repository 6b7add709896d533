"""Bounds on what a user can ask for, through pytester (docs/bad-input.md): a shape past the harness's int
arguments is skipped at collection, a kernel of more GPU cases than --gemm-max-cases is refused before they are built,
and a compile that takes minutes fails its variant at the compile limit, once."""

from __future__ import annotations

import time

import pytest

from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape

from support import ROOT, requires_nvrtc

# -- past the kernels' int arguments -----------------------------------------------------------------------------


def test_a_shape_past_the_kernels_int_arguments_is_skipped_at_collection_with_the_reason(pytester, naive_source):
    """`--gemm-shapes 3000000000x1x1` is skipped at collection (never sent to a worker, whose int32 packing
    it would overflow), saying which argument and the bound; the other shape's cases are untouched."""
    (pytester.path / "naive.cu").write_text(naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "3000000000x1x1,64", "-rs", "--benchmark-skip"
    )
    result.stdout.fnmatch_lines(
        ["SKIPPED ?3? naive.cu*: M = 3000000000 is past the kernel's int arguments (at most 2147483647)"]
    )
    assert result.stdout.str().count("past the kernel's int arguments") == 1  # the 64 cases are not among them


# -- kernels of too many cases --------------------------------------------------------------------------------------


def test_a_kernel_of_more_cases_than_the_limit_is_refused_before_they_are_built(pytester, naive_source):
    """20,000 shapes gave one kernel 60,000 cases (83 s) with no word; past --gemm-max-cases (ini gemm_max_cases) the
    kernel file is a collection error with the product and the options, said at once, and the others still run."""
    (pytester.path / "naive.cu").write_text(naive_source)
    (pytester.path / "wide.cu").write_text(
        naive_source.replace(
            'entry = "sgemm_naive"', 'entry = "sgemm_naive"\nname = "wide"\nparams = { T = [1, 2, 3, 4, 5, 6, 7, 8] }'
        )
    )
    pytester.makeini(
        "[pytest]\ngemm_shapes = " + ",".join(f"{i}x{i}x8" for i in range(1, 1001)) + "\ngemm_max_cases = 5000\n"
    )
    began = time.monotonic()
    result = pytester.runpytest("--gemm-kernels", "naive.cu", "wide.cu", "--co", "-q", "-m", "gpu")
    assert time.monotonic() - began < 30
    result.stdout.fnmatch_lines(
        [
            "wide.cu:2: wide would have 24,000 GPU cases (8 variant(s) x 1 dtype(s) x 1,000 shapes x 3 alpha/beta "
            "pair(s)), each a test; a kernel may have at most 5,000 (--gemm-max-cases / gemm_max_cases raises the "
            "limit; --gemm-shapes / gemm_shapes and --gemm-dtypes / gemm_dtypes choose fewer)",
            "3000/3002 tests collected (2 deselected), 1 error in *",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    shapes = ("--gemm-shapes", "64,96")  # 8 x 2 x 3 = 48 cases
    allowed = pytester.runpytest(
        "--gemm-kernels", "wide.cu", "--co", "-q", "-m", "gpu", *shapes, "--gemm-max-cases", "48"
    )
    assert allowed.ret == pytest.ExitCode.OK
    allowed.stdout.fnmatch_lines(["48/64 tests collected (16 deselected) in *"])


# -- compiles that take minutes -----------------------------------------------------------------------------------

SLOW = (ROOT / "tests" / "kernels_slow" / "slow_compile.cu").read_text()  # UNROLL=4096: 40 s or more in NVRTC


@requires_nvrtc
@pytest.mark.parametrize("ahead", [False, True], ids=["one by one", "compiled ahead"])
def test_a_compile_past_the_limit_fails_that_variant_saying_so_and_the_run_goes_on(pytester, monkeypatch, ahead):
    """With a 2 s limit (ini or option), the variant that would compile for 40 s fails after 2 s with the
    limit and the option that sets it, terminal lines said how long it had run, and the other variant passes;
    the same when the compile items are compiled ahead in threads."""
    from pytest_gemm.compiler import limited
    from pytest_gemm.plugin import compile_ahead

    monkeypatch.setattr(limited, "PROGRESS_EVERY", 0.5)
    if ahead:
        start = compile_ahead.CompileAhead.start
        monkeypatch.setattr(compile_ahead.CompileAhead, "start", lambda self, jobs, cores=None: start(self, jobs, 8))
        pytester.makeini("[pytest]\ngemm_compile_timeout = 2\n")
        limit: tuple[str, ...] = ()
    else:
        limit = ("--gemm-compile-timeout", "2")
    (pytester.path / "slow.cu").write_text(SLOW)
    began = time.monotonic()
    result = pytester.runpytest(
        "--gemm-kernels", "slow.cu", "-m", "gemm_compile", "--gemm-archs", "sm_90", "-p", "no:cacheprovider", *limit
    )
    assert time.monotonic() - began < 20
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: compiling slow.cu::slow?UNROLL4096? for sm_90: * s so far (limit 2 s, "
            "--gemm-compile-timeout / gemm_compile_timeout)",
            "*slow.cu: slow?UNROLL4096? did not compile for sm_90 within 2 s, so the compiler was stopped "
            "(--gemm-compile-timeout / gemm_compile_timeout sets the limit)",
        ]
    )


def _endless_compile_project(pytester, naive_source: str) -> None:
    """A project of the naive kernel whose GPU worker's backend compiles for ever (standing for a slow NVRTC)."""
    (pytester.path / "naive.cu").write_text(naive_source)
    (pytester.path / "endless_compile.py").write_text(ENDLESS_COMPILE)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(pytester.path)!r})\n\n\ndef pytest_gemm_worker_backend(config):\n"
        '    return "endless_compile:EndlessCompile"\n'
    )


def test_the_worker_compile_phase_has_the_compile_limit(pytester, naive_source):
    """In the GPU worker the compile phase is limited by --gemm-compile-timeout, not --gemm-timeout; a
    compile past it fails the case naming that option (a backend whose compile never ends stands for NVRTC)."""
    _endless_compile_project(pytester, naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "64", "--benchmark-skip", "-x",
        "--gemm-compile-timeout", "1", "--gemm-timeout", "60",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sgemm_naive?fp32-64x64x64? (M=64, N=64, K=64, alpha=1, beta=0) timed out after 1 s while compiling",
            "*the worker was killed and replaced; --gemm-compile-timeout (ini gemm_compile_timeout) sets the limit",
        ]
    )
    assert Request("p", "s", "k", (), "fp32", Shape(1, 1, 1), 1.0, 0.0, 0).compile_timeout == 300.0  # the default


def test_a_variant_whose_compile_timed_out_is_not_compiled_again(pytester, naive_source):
    """A compile past the limit costs the limit once a variant, not once a case: the variant's later cases
    fail at once, saying an earlier case did not compile, and no other worker is killed for them."""
    _endless_compile_project(pytester, naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "64", "--benchmark-skip",
        "--gemm-compile-timeout", "1", "--gemm-timeout", "60",
    )  # fmt: skip
    result.assert_outcomes(failed=3)
    # the failure sections only: under CI=... pytest repeats each whole message in its short summary
    text = result.stdout.str().split("short test summary info")[0]
    assert text.count("the worker was killed and replaced; --gemm-compile-timeout") == 1, text
    assert text.count("an earlier case of this variant did not compile within the limit either") == 2, text
    result.stdout.fnmatch_lines(
        ["*sgemm_naive?fp32-64x64x64-a0.7b1.3? (M=64, N=64, K=64, alpha=0.7, beta=1.3) timed out after 1 s while *"]
    )


ENDLESS_COMPILE = """
import time


class EndlessCompile:
    def __init__(self, cubin_cache=None):
        pass

    def facts(self):
        device = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}
        return {
            "name": device["name"],
            "compute_capability": "9.0",
            "sm_count": 132,
            "max_sm_clock_mhz": 1980,
            "uuid": "GPU-00000000-endless",
            "visible_devices": [device],
        }

    def run(self, request, notify):
        notify("load")
        notify("compile")
        time.sleep(120)
"""
