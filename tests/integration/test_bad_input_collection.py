"""Every bad input answered: a clear message naming the file and the problem, the run goes on,
and the exit code is right. Through pytester, on the CPU: the missing device is the replay backend with no
recording, or the real CUDA backend on a machine without a driver.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from support import NAIVE_HEADER, NO_DEVICE, naive_project, with_keys

NO_RECORDING = "no recording to replay (PYTEST_GEMM_REPLAY is not set)"


@pytest.fixture
def no_device(replay, monkeypatch):
    """The replay project, whose GPU workers find no device: every GPU case skips."""
    monkeypatch.delenv("PYTEST_GEMM_REPLAY")
    return replay


@pytest.fixture
def project(pytester, naive_source):
    return naive_project(pytester, naive_source)


# -- no GPU is never silent ---------------------------------------------------------------------


def test_no_device_is_said_after_collection_and_at_the_end_with_the_count(no_device):
    result = no_device.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=6)
    out = result.stdout.lines
    ahead = (
        f"pytest-gemm: no CUDA device ({NO_RECORDING}): 6 GPU cases will be skipped "
        "(--gemm-require-gpu makes this an error)"
    )
    after = f"pytest-gemm: no CUDA device ({NO_RECORDING}): 6 GPU cases skipped"
    # said before any case runs, right after "collected", and again after the run
    assert out.index(ahead) == next(i for i, line in enumerate(out) if line.startswith("collected")) + 1
    assert out.index(after) > out.index(ahead)


def test_cases_skipped_by_a_rule_are_not_counted_as_waiting_for_a_device(no_device):
    kernel = no_device.path / "kernels" / "01_naive.cu"
    kernel.write_text(with_keys(kernel.read_text(), requires='"K > 1000"'))
    result = no_device.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu")
    result.assert_outcomes(skipped=6)  # 3 at 512 (the rule), 3 at 4096 (no device)
    result.stdout.fnmatch_lines(["pytest-gemm: no CUDA device (*): 3 GPU cases skipped"])


def test_no_device_line_under_xdist(no_device):
    result = no_device.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "-n", "2")
    result.assert_outcomes(skipped=6)
    result.stdout.fnmatch_lines([f"pytest-gemm: no CUDA device ({NO_RECORDING}): 6 GPU cases skipped"])


def test_with_a_device_nothing_is_said_about_one(replay):
    result = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--benchmark-skip")
    result.assert_outcomes(passed=6)
    assert "no CUDA device" not in result.stdout.str()


@pytest.mark.parametrize("how", ["option", "ini"])
def test_require_gpu_turns_a_missing_device_into_a_usage_error(no_device, how):
    if how == "ini":
        no_device.makeini("[pytest]\ngemm_shapes = 512\ngemm_require_gpu = true\n")
    options = ["--gemm-require-gpu"] if how == "option" else []
    result = no_device.runpytest("--gemm-kernels", "kernels/01_naive.cu", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--gemm-require-gpu / gemm_require_gpu: no CUDA device ({NO_RECORDING})" in result.stderr.str()
    assert "passed" not in result.stdout.str()  # nothing ran, not even the compile items


def test_require_gpu_under_xdist_is_a_usage_error_too(no_device):
    result = no_device.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-n", "2", "--gemm-require-gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"no CUDA device ({NO_RECORDING})" in result.stderr.str()


def test_require_gpu_with_a_device_runs_as_usual(replay):
    result = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-m", "gpu", "--gemm-require-gpu")
    result.assert_outcomes(passed=6)


def _libcuda_loads() -> bool:
    """Whether a CUDA driver is installed (asked in a separate process: this one stays free of CUDA)."""
    probe = "import ctypes; ctypes.CDLL('libcuda.so.1')"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


@pytest.mark.skipif(NO_DEVICE is None or _libcuda_loads(), reason="this machine has a CUDA driver")
def test_without_a_driver_the_reason_says_so(project):
    """Not CUDA's "insufficient driver" (or a missing CuPy) when there is no libcuda at all."""
    result = project.runpytest("--gemm-kernels", "kernels/naive.cu", "-m", "gpu", "-rs")
    reason = "no NVIDIA driver: libcuda.so.1 cannot be loaded"
    result.stdout.fnmatch_lines(
        [
            f"pytest-gemm: no CUDA device ({reason}): 3 GPU cases will be skipped*",
            f"pytest-gemm: no CUDA device ({reason}): 3 GPU cases skipped",
            f"SKIPPED [[]3[]] kernels/naive.cu:2: no CUDA device: {reason}",
        ]
    )


# -- a helper file never breaks the run ----------------------------------------------------------


def test_a_helper_cu_file_that_is_not_utf8_is_ignored(project):
    (project.path / "kernels" / "helper.cu").write_bytes(b"// \xff helper\n__device__ float h(float x) { return x; }\n")
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert "helper.cu" not in result.stdout.str()
    assert "kernels/naive.cu::sgemm_naive[fp32-64x64x64]" in result.stdout.lines


def test_a_kernel_file_that_is_not_utf8_names_the_line(project):
    (project.path / "kernels" / "latin1.cu").write_bytes(NAIVE_HEADER.encode() + b"// caf\xe9\n")
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a collection error, as for any broken header
    result.stdout.fnmatch_lines(
        ["kernels/latin1.cu:8: byte 0xe9 at column 7 is not UTF-8; a kernel file must be UTF-8"]
    )


# -- mistakes surface at collection, once ------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"block": "[2048]"}, "key 'block': block dimension x is 2048; CUDA allows at most 1024"),
        ({"block": "[64, 32]"}, "key 'block': 64 x 32 = 2048 threads per block; CUDA allows 1024"),
        (
            {"block": '["T", "T"]', "params": "{ T = [16, 64] }"},
            "key 'block': 64 x 64 = 4096 threads per block for T=64; CUDA allows 1024",
        ),
        ({"grid": "[0, 1]"}, "key 'grid': grid dimension x is 0; it must be at least 1"),
        (
            {"shared_mem": "300000"},
            "key 'shared_mem': shared_mem is 300000; CUDA allows at most 232448 bytes per block",
        ),
    ],
)
def test_a_launch_cuda_refuses_whatever_the_shape_is_one_collection_error(project, naive_source, keys, message):
    (project.path / "kernels" / "big.cu").write_text(with_keys(naive_source, name='"big"', **keys))
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu", "--benchmark-skip", "-rA")
    result.stdout.fnmatch_lines([f"kernels/big.cu:2: {message}"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors") == 1 and not outcomes.get("failed")
    # naive.cu's cases still ran: they pass on a GPU, and skip without one
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 3
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # big.cu never reached a GPU worker: it has no case, and a worker (on a GPU) compiled naive.cu's kernel alone
    assert "kernels/big.cu::" not in result.stdout.str()
    workers = [line for line in result.outlines if "GPU worker process" in line]
    assert all("1 kernel(s) compiled" in line for line in workers)


def test_a_grid_that_is_zero_for_one_shape_fails_that_case_saying_at_least_1(project, naive_source):
    # 4 * (N // 100) blocks of 32 columns: none for N = 64, all 128 columns for N = 128
    grid = '["4 * (N // 100)", "cdiv(M, 32)"]'
    (project.path / "kernels" / "naive.cu").write_text(with_keys(naive_source, grid=grid))
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu", "--gemm-shapes", "64,128", "--benchmark-skip")
    result.stdout.fnmatch_lines(
        [
            "kernels/naive.cu:2: key 'grid': grid dimension x '4 * (N // 100)' is 0 for M=64, N=64, K=64;"
            " it must be at least 1"
        ]
    )
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 3  # the 64 cases
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 3  # the 128 ones: right on a GPU, skipped without
    assert "expected an int" not in result.stdout.str()


def test_an_unknown_architecture_is_one_usage_error(project):
    result = project.runpytest("--gemm-kernels", "kernels", "--gemm-archs", "sm_80,sm_999")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-archs / gemm_archs: 'sm_999' is not a known GPU architecture; known: sm_50," in result.stderr.str()
    assert "compile[" not in result.stdout.str()


# -- missing flags and empty files give a hint ---------------------------------------------------


def test_kernel_paths_without_the_flag_give_a_hint(project):
    (project.path / "kernels" / "helper.cu").write_text("__device__ float h(float x) { return x; }\n")
    result = project.runpytest("kernels")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["pytest-gemm: kernels/ holds 1 kernel file; run with --gemm-kernels to collect it"])
    named = project.runpytest("kernels/naive.cu")
    hint = "pytest-gemm: kernels/naive.cu is a kernel file; run with --gemm-kernels to collect it"
    named.stdout.fnmatch_lines([hint])


def test_a_named_cu_file_without_a_header_gives_a_hint(project):
    (project.path / "kernels" / "foo.cu").write_text("__device__ float h(float x) { return x; }\n")
    result = project.runpytest("--gemm-kernels", "kernels/foo.cu")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["pytest-gemm: kernels/foo.cu has no pytest-gemm header, so it declares no tests (*docs/kernel-files.md)"]
    )


def test_a_folder_without_kernel_files_gives_a_hint(project):
    project.mkdir("src")
    result = project.runpytest("--gemm-kernels", "src")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["pytest-gemm: src/ holds no kernel file (.cu files with a /* pytest-gemm header*"])


def test_no_hint_when_the_kernels_were_collected(project):
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gpu")
    out = result.stdout.str()
    assert "holds" not in out and "with --gemm-kernels" not in out and "no pytest-gemm header" not in out


# -- TOML errors give the file's line ------------------------------------------------------------


def test_a_toml_error_names_the_line_of_the_file(project):
    (project.path / "kernels" / "bad.cu").write_text(
        '// a kernel\n\n/* pytest-gemm\nentry = "k"\nargs = ["M", "N", "K", "A", "B", "C"]\ndtypes = "fp32"\n'
        "block = [32]\ngrid = [1,, 2]\n*/\n"
    )
    result = project.runpytest("--gemm-kernels", "kernels/bad.cu")
    result.stdout.fnmatch_lines(["kernels/bad.cu:8: the pytest-gemm header is not valid TOML: * (column *)"])
    assert "at line" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
