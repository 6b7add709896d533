"""#35: Python kernels that take torch tensors, on the CPU: the decorator read without torch, the stream check on
recorded CUPTI work and on a recorded timed outcome. tests/test_gpu_torch.py runs Triton and torch kernels on the
GPU."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import TimingProblem, Verdict
from pytest_gemm.report.failure import failure_text
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.specs.spec import KernelFileError, spec_from_mapping
from pytest_gemm.worker.cupti_clock import build_spans, other_streams

from conftest import recorded_outcome, recording

TRITON_FILE = """
import torch
import triton
import triton.language as tl

from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp16", "bf16"], arrays="torch", storage={"B": "NxK"})
def triton_matmul(A, B, C, alpha, beta):
    C.copy_(alpha * (A @ B) + beta * C)
"""


def test_a_kernel_asks_for_torch_tensors_and_is_read_without_torch(tmp_path):
    """The decorator is read from the syntax tree: collection needs neither torch nor Triton (a fresh interpreter
    in which importing either fails)."""
    (spec,) = parse_py_source("k.py", TRITON_FILE)
    assert spec.arrays == "torch" and spec.dtypes == ("fp16", "bf16")
    (tmp_path / "k.py").write_text(TRITON_FILE)
    code = textwrap.dedent(
        f"""
        import sys
        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "triton"):
                    raise ImportError("no " + name)
        sys.meta_path.insert(0, Refuse())
        from pathlib import Path
        from pytest_gemm.specs.files import load_specs
        (spec,) = load_specs(Path({str(tmp_path / "k.py")!r}), "k.py")
        print(spec.name, spec.arrays, "torch" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["triton_matmul", "torch", "False"]


def test_arrays_is_checked():
    with pytest.raises(KernelFileError, match="arrays': expected one of 'cupy', 'torch', got 'jax'"):
        spec_from_mapping({"dtypes": ["fp16"], "arrays": "jax"}, path="k.py", kind="py", default_name="k")
    header = {"entry": "k", "args": ["M", "N", "K", "A", "B", "C"], "dtypes": ["fp32"], "block": [1], "grid": [1]}
    with pytest.raises(KernelFileError, match=r"a \.cu kernel takes pointers; arrays is for Python kernels"):
        spec_from_mapping({**header, "arrays": "torch"}, path="k.cu")


# (stream id, start ns, end ns, role): role 1 the prepare kernel, 2 another harness kernel, 0 the launch's work
HARNESS, OTHER = 7, 13


def test_work_on_a_stream_of_its_own_is_found_in_cuptis_records():
    """Triton's launch on a stream of its own: the harness's stream shows the prepare kernels and no launch work, and
    the other stream's records say which stream it was (cuBLAS's launches, on the harness's stream, are spans)."""
    work = [
        (HARNESS, 0, 10, 1),  # prepare, the kernel's turn
        (OTHER, 12, 40, 0),  # the kernel, on its own stream
        (HARNESS, 50, 60, 1),  # prepare, cuBLAS's turn
        (HARNESS, 61, 90, 0),  # cuBLAS
        (HARNESS, 95, 96, 2),  # the closing mark
    ]
    assert other_streams(work) == (OTHER,)
    spans = build_spans(work)
    assert spans[0] is None and spans[1] is not None and spans[1].seconds == pytest.approx(29e-9)
    assert other_streams([w for w in work if w[0] == HARNESS]) == ()
    several = [(HARNESS, 0, 10, 1), (HARNESS, 11, 20, 0), (HARNESS, 21, 30, 0), (HARNESS, 40, 41, 2)]
    assert build_spans(several)[0].seconds == pytest.approx(18e-9)  # every kernel of the call, summed


def test_a_kernel_timed_on_another_stream_fails_naming_it_and_claims_no_speed():
    key = "01_naive.cu::sgemm_naive[fp32-512x512x512]"
    outcome = recorded_outcome(key)
    run = dataclasses.replace(outcome.timing, other_streams=(OTHER,))
    spec = spec_from_mapping({"dtypes": ["fp32"], "arrays": "torch"}, path="k.py", kind="py", default_name="k")
    case = Case(spec, spec.variants()[0], "fp32", Shape(512, 512, 512), AlphaBeta(1.0, 0.0))
    result = judge_outcome(case, "k.py::k[fp32-512x512x512]", dataclasses.replace(outcome, timing=run),
                           recording()["facts"])  # fmt: skip
    assert result.failed and result.diagnosis.kind == Verdict.TIMING
    assert result.diagnosis.problems == (TimingProblem.OTHER_STREAM,) and result.diagnosis.streams == (OTHER,)
    assert result.timing is None  # no speed claimed, nothing gated or saved as a timing
    text = failure_text("k[fp32-512x512x512]", result, "REPLAY")
    assert f"launched GPU work on CUDA stream(s) {OTHER} (CUPTI's ids), not on the harness's stream" in text
    assert "it is not timed, and not gated" in text and "suspicious" not in text and "last timed launch" not in text


def test_a_kernel_file_that_cannot_import_torch_or_triton_says_what_to_install(tmp_path):
    """#35 item 6: the worker's import of the file fails on a missing torch (or Triton): the case's error names
    what to install (as it names any other import error)."""
    from pytest_gemm.worker.kernels import _import

    for package in ("torch", "triton"):
        path = tmp_path / f"k_{package}.py"
        path.write_text(f"raise ModuleNotFoundError(\"No module named '{package}'\", name={package!r})\n")
        with pytest.raises(KernelFileError) as info:
            _import(path, path.name)
        assert str(info.value).startswith(
            f"{path.name}: this kernel file needs {package} (pip install {package}); importing the kernel file failed"
        )
