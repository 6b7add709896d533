"""Collection, ids, selection, options and header errors, through pytester (no GPU needed)."""

from __future__ import annotations

import pytest

from support import NO_DEVICE, small_project

TILED = """/* pytest-gemm
name = "tiled"
entry = "tiled<T>"
args = ["M", "N", "K", "A", "B", "C"]
dtypes = ["fp32", "fp64"]
block = ["T", "T"]
grid = ["cdiv(N, T)", "cdiv(M, T)"]
params = { T = [16, 32] }
requires = ["K % T == 0"]
*/
template <int TT> __global__ void tiled(int M, int N, int K, const float* A, const float* B, float* C) {}
"""


@pytest.fixture
def project(pytester, naive_source):
    kernels = small_project(pytester, naive_source, TILED)
    (kernels / "helper.cu").write_text("__device__ float helper(float x) { return x; }\n")
    (kernels / "README.txt").write_text("not a kernel")
    return pytester


def _ids(result):
    return [line for line in result.outlines if "::" in line]


def test_ids_are_deterministic_and_readable(project):
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "--gemm-archs", "sm_90")
    ids = _ids(result)
    assert ids[:7] == [
        "kernels/naive.cu::compile[sm_90]",
        "kernels/naive.cu::sgemm_naive[fp32-64x64x64]",
        "kernels/naive.cu::sgemm_naive[fp32-64x64x64-a0.7b1.3]",
        "kernels/naive.cu::sgemm_naive[fp32-64x64x64-a-1.5b0]",
        "kernels/naive.cu::sgemm_naive[fp32-128x96x32]",
        "kernels/naive.cu::sgemm_naive[fp32-128x96x32-a0.7b1.3]",
        "kernels/naive.cu::sgemm_naive[fp32-128x96x32-a-1.5b0]",
    ]
    # Kernels without alpha/beta: only alpha = 1, beta = 0. Variants come first in the id.
    assert "kernels/tiled.cu::tiled[T16-fp64-128x96x32]" in ids
    assert "kernels/tiled.cu::compile[T32-sm_90]" in ids
    assert not any("a0.7" in i for i in ids if "tiled.cu" in i)
    assert not any("helper.cu" in i for i in ids)  # a .cu without a header is not a kernel file
    again = project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "--gemm-archs", "sm_90")
    assert _ids(again) == ids


def test_without_paths_the_ini_paths_are_used(project):
    project.makeini("[pytest]\ngemm_shapes = 64\ngemm_kernel_paths = kernels\ntestpaths = tests\n")
    result = project.runpytest("--gemm-kernels", "--collect-only", "-q")
    assert "kernels/naive.cu::sgemm_naive[fp32-64x64x64]" in _ids(result)


def test_without_the_flag_kernel_files_are_not_collected(project):
    result = project.runpytest("kernels", "--collect-only", "-q")
    assert _ids(result) == []


def test_options_override_ini_settings(project):
    result = project.runpytest(
        "--gemm-kernels", "kernels", "--collect-only", "-q", "--gemm-shapes", "8x8x16", "--gemm-dtypes", "fp64"
    )
    ids = [i for i in _ids(result) if "compile" not in i]
    assert ids == ["kernels/tiled.cu::tiled[T16-fp64-8x8x16]", "kernels/tiled.cu::tiled[T32-fp64-8x8x16]"]


def test_named_shape_sets(project):
    result = project.runpytest("--gemm-kernels", "kernels/naive.cu", "--collect-only", "-q", "--gemm-shapes", "edge")
    ids = _ids(result)
    assert "kernels/naive.cu::sgemm_naive[fp32-64x64x65536]" in ids
    assert "kernels/naive.cu::sgemm_naive[fp32-255x256x257]" in ids


def test_selection_by_k_and_m_and_id(project):
    by_k = _ids(project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "-k", "T32 and fp64"))
    assert by_k and all("T32" in i and "fp64" in i for i in by_k)
    by_m = _ids(project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "-m", "gemm_compile"))
    assert by_m and all("::compile[" in i for i in by_m)
    not_gpu = _ids(project.runpytest("--gemm-kernels", "kernels", "--collect-only", "-q", "-m", "not gpu"))
    assert not_gpu == by_m
    one = "kernels/naive.cu::sgemm_naive[fp32-128x96x32-a0.7b1.3]"
    assert _ids(project.runpytest("--gemm-kernels", one, "--collect-only", "-q")) == [one]


def test_requires_rules_skip_with_the_rule_as_reason(project):
    result = project.runpytest("--gemm-kernels", "kernels/tiled.cu", "-rs", "-m", "gpu", "--gemm-shapes", "64x64x24")
    result.stdout.fnmatch_lines(["*requires K % T == 0 (M=64, N=64, K=24, T=16)*"])
    result.assert_outcomes(skipped=4)


@pytest.mark.skipif(NO_DEVICE is None, reason="a CUDA device is present; the GPU cases run instead")
def test_gpu_cases_skip_with_one_reason_without_a_device(project):
    result = project.runpytest("--gemm-kernels", "kernels/naive.cu", "-m", "gpu", "-rs")
    result.assert_outcomes(skipped=6)
    skip_lines = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len(skip_lines) == 1 and "no CUDA device" in skip_lines[0]


@pytest.mark.parametrize(
    ("options", "ini", "line"),
    [
        ([], "", "timing: CUPTI kernel records, cold L2, noise target 0.5%, >= 10 samples, <= 1 s per case"),
        (
            ["--gemm-hot-cache", "--gemm-noise", "0.01", "--gemm-min-samples", "20", "--gemm-max-time", "2.5"],
            "",
            "timing: CUPTI kernel records, hot L2, noise target 1%, >= 20 samples, <= 2.5 s per case",
        ),
        (
            [],
            "gemm_hot_cache = true\ngemm_max_time = 0.5\ngemm_timer = events\n",
            "timing: CUDA events, hot L2, noise target 0.5%, >= 10 samples, <= 0.5 s",
        ),
        (["--gemm-timer", "events"], "", "timing: CUDA events, cold L2"),
        (["--benchmark-skip"], "", "timing off"),
        (["-n", "2", "--benchmark-enable"], "", "timing off under xdist (pytest-benchmark disables benchmarks there)"),
    ],
)
def test_timing_settings_from_options_and_ini(project, options, ini, line):
    project.makeini("[pytest]\ngemm_shapes = 64\n" + ini)
    result = project.runpytest("--gemm-kernels", "kernels", "--collect-only", *options)
    result.stdout.fnmatch_lines([f"pytest-gemm: *; {line}*; gate: ratio, threshold 3%, baselines in baselines/"])


def test_malformed_header_is_a_collection_error_and_other_files_still_run(project):
    (project.path / "kernels" / "broken.cu").write_text(
        '/* pytest-gemm\nentry = "k"\nargs = ["M", "A", "B", "C"]\ndtypes = ["fp32"]\nblock = [32]\n'
        'grid = ["cdiv(N, 32)", "__import__(1)"]\n*/\n'
    )
    result = project.runpytest("--gemm-kernels", "kernels", "-m", "gemm_compile", "--gemm-archs", "sm_90")
    result.stdout.fnmatch_lines(["*kernels/broken.cu:2: key 'grid': call to '__import__' is not allowed*"])
    outcomes = result.parseoutcomes()
    assert outcomes["errors"] == 1
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 3  # the other files' compile tests


def test_bad_toml_reports_the_file_line(project):
    (project.path / "kernels" / "bad.cu").write_text("// x\n/* pytest-gemm\nentry = \n*/\n")
    result = project.runpytest("--gemm-kernels", "kernels/bad.cu")
    result.stdout.fnmatch_lines(["*kernels/bad.cu:3: the pytest-gemm header is not valid TOML*"])
    assert result.ret != 0


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--gemm-shapes", "big"], "--gemm-shapes / gemm_shapes: cannot read shape 'big'"),
        (["--gemm-dtypes", "fp8"], "--gemm-dtypes / gemm_dtypes: unknown dtype 'fp8'"),
        (["--gemm-archs", "90"], "--gemm-archs / gemm_archs: '90' is not an architecture"),
        (["--gemm-seed", "x"], "--gemm-seed / gemm_seed: expected an integer"),
        (["--gemm-noise", "0"], "--gemm-noise / gemm_noise: expected a number from 0.0001 to 0.5, got '0'"),
        (["--gemm-min-samples", "2"], "--gemm-min-samples / gemm_min_samples: expected an integer from 3 to"),
        (["--gemm-max-time", "soon"], "--gemm-max-time / gemm_max_time: expected a number from 0 to 3600"),
        (["--gemm-timer", "nsys"], "--gemm-timer / gemm_timer: expected one of cupti, events, graph, got 'nsys'"),
    ],
)
def test_bad_options_are_usage_errors(project, option, message):
    result = project.runpytest("--gemm-kernels", "kernels", *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


PY_KERNEL = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32", "fp64"], requires="K % 2 == 0")
def cupy_matmul(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)

def helper():
    pass
"""


def test_python_kernel_files(project):
    (project.path / "kernels" / "lib_kernels.py").write_text(PY_KERNEL)
    result = project.runpytest("--gemm-kernels", "kernels/lib_kernels.py", "--collect-only", "-q", "--gemm-shapes", "8")
    assert _ids(result) == [
        "kernels/lib_kernels.py::cupy_matmul[fp32-8x8x8]",
        "kernels/lib_kernels.py::cupy_matmul[fp32-8x8x8-a0.7b1.3]",
        "kernels/lib_kernels.py::cupy_matmul[fp32-8x8x8-a-1.5b0]",
        "kernels/lib_kernels.py::cupy_matmul[fp64-8x8x8]",
        "kernels/lib_kernels.py::cupy_matmul[fp64-8x8x8-a0.7b1.3]",
        "kernels/lib_kernels.py::cupy_matmul[fp64-8x8x8-a-1.5b0]",
    ]


def test_python_kernel_file_errors_name_the_file(project):
    (project.path / "kernels" / "bad_kernels.py").write_text(
        PY_KERNEL.replace('dtypes=["fp32", "fp64"]', 'dtypes=["fp32"], layout="sideways"') + "\nraise_here = 1\n"
    )
    (project.path / "kernels" / "computed.py").write_text(
        "from pytest_gemm import gemm_kernel\nTYPES = ['fp32']\n\n"
        "@gemm_kernel(dtypes=TYPES)\ndef k(A, B, C, a, b):\n    pass\n"
    )
    (project.path / "kernels" / "broken_syntax.py").write_text("from pytest_gemm import gemm_kernel\ndef (:\n")
    files = ["kernels/bad_kernels.py", "kernels/computed.py", "kernels/broken_syntax.py"]
    result = project.runpytest("--gemm-kernels", *files)
    result.stdout.fnmatch_lines_random(
        [
            "*kernels/bad_kernels.py:4: key 'layout': expected one of 'row', 'col', got 'sideways'*",
            "*kernels/computed.py:4: key 'dtypes': gemm_kernel(...): dtypes must be a literal (the file is read "
            "without running it)*",
            "*kernels/broken_syntax.py:2: not valid Python: invalid syntax*",
        ]
    )


def test_python_kernel_files_are_read_without_running_them(project):
    """The pytest process never imports a kernel file: its imports (CuPy, a missing module) and side effects
    happen only in a GPU worker."""
    marker = project.path / "imported.txt"
    (project.path / "kernels" / "side_effects.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\nimport gemm_kernel_missing_module\n"
        + PY_KERNEL
    )
    result = project.runpytest("--gemm-kernels", "kernels/side_effects.py", "--collect-only", "-q")
    assert "kernels/side_effects.py::cupy_matmul[fp32-64x64x64]" in _ids(result)
    assert not marker.exists()
