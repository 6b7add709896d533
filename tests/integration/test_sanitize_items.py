"""compute-sanitizer items through pytester, on the CPU: one test per tool, skipped without compute-sanitizer, and
an unknown tool is a usage error. Running the tools needs a GPU: tests/gpu/test_gpu.py runs them on real kernels."""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_gemm.runs.saved import read_run

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


def test_sanitize_items_are_not_cases_of_their_kernel_file(replay, monkeypatch):
    """A kernel file's sanitize items are tests of their own, not its cases: a run that selects every case of the file
    selects it whole with --gemm-sanitize too, so its saved run says so and an update removes the entries of its gone
    cases."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(replay.path / "no-cuda"))
    monkeypatch.setattr("pytest_gemm.isolation.sanitizer.Path", _no_toolkit(replay.path))
    args = ["--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-sanitize", "memcheck"]
    replay.runpytest(*args, "--gemm-update-baselines").assert_outcomes(passed=6, skipped=1)
    path = replay.path / "baselines" / "nvidia-h100-80gb-hbm3.json"
    data = json.loads(path.read_text())
    gone = "kernels/01_naive.cu::sgemm_gone[fp32-512x512x512]"
    data["entries"][gone] = dict(next(iter(data["entries"].values())), kernel="sgemm_gone")
    path.write_text(json.dumps(data))
    update = replay.runpytest(*args, "--gemm-update-baselines", "--benchmark-json", "run.json")
    update.assert_outcomes(passed=6, skipped=1)
    update.stdout.fnmatch_lines(["baselines/nvidia-h100-80gb-hbm3.json: 0 added, 0 changed, 1 removed"])
    assert gone not in json.loads(path.read_text())["entries"]
    assert read_run(replay.path / "run.json").files["kernels/01_naive.cu"].whole
