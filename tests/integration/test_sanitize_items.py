"""compute-sanitizer items through pytester, on the CPU: one test per tool, skipped without compute-sanitizer, and
an unknown tool is a usage error. Running the tools needs a GPU: tests/gpu/test_gpu.py runs them on real kernels."""

from __future__ import annotations

import shutil

import pytest

from support import KERNELS, ROOT


def test_each_tool_is_a_test_of_its_own_and_skips_without_compute_sanitizer(pytester, monkeypatch):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "01_naive.cu")
    shutil.copy(ROOT / "tests" / "kernels_sanitize" / "sanitize.cu", pytester.path / "sanitize.cu")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(pytester.path / "no-cuda"))
    monkeypatch.setattr("pytest_gemm.isolation.sanitizer.Path", _no_toolkit(pytester.path))
    args = [
        "--gemm-kernels",
        "01_naive.cu",
        "sanitize.cu",
        "--gemm-sanitize",
        "memcheck, racecheck",
        "-m",
        "gemm_sanitize",
    ]
    collected = pytester.runpytest(*args, "--collect-only", "-q")
    collected.stdout.fnmatch_lines(
        [
            "01_naive.cu::sanitize[[]memcheck[]]",
            "01_naive.cu::sanitize[[]racecheck[]]",
            "sanitize.cu::sanitize[[]missing_barrier-memcheck[]]",
            "sanitize.cu::sanitize[[]missing_barrier-racecheck[]]",
            "8/* tests collected*",
        ]
    )
    result = pytester.runpytest(*args, "-rs")
    result.assert_outcomes(skipped=8)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]2[]] 01_naive.cu:16: compute-sanitizer not found (it comes with the CUDA toolkit*"]
    )


def _no_toolkit(root):
    """pathlib.Path, with /usr/local/cuda moved to a folder that does not exist (this machine may have a toolkit)."""
    from pathlib import Path

    def fake(path, *rest):
        path = str(root / "no-cuda") if str(path) == "/usr/local/cuda" else path
        return Path(path, *rest)

    return fake


@pytest.mark.parametrize("value", ["memchek", "memcheck,asan"])
def test_an_unknown_tool_is_a_usage_error(pytester, value):
    shutil.copy(KERNELS / "01_naive.cu", pytester.path / "01_naive.cu")
    result = pytester.runpytest("--gemm-kernels", "01_naive.cu", "--gemm-sanitize", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gemm-sanitize / gemm_sanitize: unknown compute-sanitizer tool*expected memcheck*"])
