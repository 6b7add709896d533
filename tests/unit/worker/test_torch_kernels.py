"""Python kernels that take torch tensors, on the CPU: the decorator read without torch, the stream check on
recorded CUPTI work and on a recorded timed outcome. tests/gpu/test_gpu_torch.py runs Triton and torch kernels on the
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
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.header import spec_from_mapping
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.worker.cupti_clock import build_spans, other_streams

from support import recorded_outcome, recording

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
    # where the harness sets which stream: CuPy's always, torch's only for arrays="torch"
    assert "CuPy's current stream, which the harness sets for every Python kernel" in text
    assert "arrays=\"torch\", on torch's (the harness sets torch's only then" in text


def test_a_kernel_file_that_cannot_import_torch_or_triton_says_what_to_install(tmp_path):
    """The worker's import of the file fails on a missing torch (or Triton): the case's error names
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


def _python_case(spec_data: dict | None = None) -> Case:
    data = {"dtypes": ["fp32"], "arrays": "torch", **(spec_data or {})}
    spec = spec_from_mapping(data, path="k.py", kind="py", default_name="k")
    return Case(spec, spec.variants()[0], "fp32", Shape(512, 512, 512), AlphaBeta(1.0, 0.0))


def test_a_first_launch_on_another_stream_fails_verification_naming_it():
    """CUPTI watches a Python kernel's first verification launch; work on another stream fails the case
    there (with --benchmark-skip too), and it is not timed."""
    outcome = recorded_outcome("01_naive.cu::sgemm_naive[fp32-512x512x512]")
    verification = dataclasses.replace(outcome.verification, other_streams=(OTHER, OTHER + 1))
    assert not verification.passed and verification.kernel.passed
    watched = dataclasses.replace(outcome, verification=verification, timing=None)
    result = judge_outcome(_python_case(), "k.py::k[fp32-512x512x512]", watched, recording()["facts"])
    assert result.failed and result.timing is None
    assert result.diagnosis.problems == (TimingProblem.OTHER_STREAM,) and result.diagnosis.streams == (OTHER, OTHER + 1)
    assert f"stream(s) {OTHER}, {OTHER + 1} (CUPTI's ids)" in failure_text("k[fp32-512x512x512]", result, "REPLAY")


def test_a_python_kernel_whose_streams_cupti_could_not_check_makes_no_speed_claim(tmp_path):
    """Without CUPTI, events cannot see a launch on another stream: the case is timed and shown, flagged
    and said why, but neither gated nor recorded as a baseline; the host's launch time is shown beside the device's."""
    from pytest_gemm.judge.verdict import final
    from pytest_gemm.plugin.finish import recordable
    from pytest_gemm.plugin.gating import Gate, gate_lines
    from pytest_gemm.plugin.ledger import RunSummary
    from pytest_gemm.report.tables import timing_tables
    from pytest_gemm.settings import GateSettings

    outcome = recorded_outcome("01_naive.cu::sgemm_naive[fp32-512x512x512]")
    why = "cupti-python is not installed"
    verification = dataclasses.replace(outcome.verification, unchecked_streams=why)
    run = dataclasses.replace(outcome.timing, host_median_s=(outcome.timing.kernel_s[0] * 2, 4e-6))
    unchecked = dataclasses.replace(outcome, verification=verification, timing=run)
    result = judge_outcome(_python_case(), "k.py::k[fp32-512x512x512]", unchecked, recording()["facts"])
    record = result.timing
    assert result.outcome == "passed" and record.unchecked_streams == why and record.host_s > record.median_s
    gate = Gate(GateSettings(tmp_path / "baselines"), tmp_path)
    assert final(result, gate.judge) == result and result.timing.gate is None  # no baseline read, no verdict
    summary = RunSummary(tests={record.test: result}, files={}, gpus={})
    assert recordable(summary) == [] and len(summary.unchecked) == 1
    updating = GateSettings(tmp_path / "baselines", update=True)
    _, lines = gate_lines(updating, summary.records, len(summary.unchecked), None, tmp_path)
    assert any(line.startswith("not recorded: 1 timed case(s) of Python kernels whose launches") for line in lines)
    lines = timing_tables([record], recording()["facts"])
    header = next(line for line in lines if line.startswith("kernel"))
    assert header.split()[:4] == ["kernel", "shape", "median", "host"]
    table = "\n".join(lines)
    assert "not gated" in table and "launch-bound" in table and f"not gated, no speed claim ({why})" in table


def test_the_autotuners_choice_is_reported_with_the_timing(tmp_path):
    """What each autotuned Triton kernel chose for a case is in its record and under the table."""
    from pytest_gemm.report.tables import timing_tables

    outcome = recorded_outcome("01_naive.cu::sgemm_naive[fp32-512x512x512]")
    choice = "_matmul: BM: 128, BN: 128, BK: 32, num_warps: 4, num_ctas: 1, num_stages: 4, maxnreg: None"
    tuned = dataclasses.replace(outcome, autotuned=(choice,))
    record = judge_outcome(_python_case(), "k.py::k[fp32-512x512x512]", tuned, recording()["facts"]).timing
    assert record.autotuned == (choice,) and dataclasses.replace(record).to_dict()["autotuned"] == [choice]
    assert f"autotuned: k chose {choice} at 512x512x512" in timing_tables([record], recording()["facts"])


def test_autotune_choices_reads_the_autotuners_the_first_call_ran():
    """Only the autotuners the call ran are reported, each once, by its function's name, one behind Triton's
    heuristics too (Triton's Autotuner faked: the check is by class, from the module Triton defines it in)."""
    import types

    module = types.ModuleType("triton.runtime.autotuner")

    class Autotuner:
        def __init__(self, name):
            self.base_fn, self.best_config = types.SimpleNamespace(__name__=name), "stale"

    class Heuristics:  # Triton's @triton.heuristics over @triton.autotune: it holds the autotuner as fn
        __module__ = "triton.runtime.autotuner"

        def __init__(self, fn):
            self.fn = fn

    module.Autotuner = Autotuner
    used, unused, wrapped = Autotuner("used"), Autotuner("unused"), Autotuner("wrapped")
    space = {"used": used, "unused": unused, "other": object(), "heuristic": Heuristics(wrapped)}
    fn = types.FunctionType(compile("def f(): pass", "k.py", "exec").co_consts[0], space)

    def call():
        used.best_config, wrapped.best_config = "BM: 64", "BM: 32"

    from pytest_gemm.worker.python_calls import autotune_choices

    saved = sys.modules.get("triton.runtime.autotuner")
    sys.modules["triton.runtime.autotuner"] = module
    try:
        assert autotune_choices(fn, call) == ("used: BM: 64", "wrapped: BM: 32")
    finally:
        if saved is None:
            del sys.modules["triton.runtime.autotuner"]
        else:
            sys.modules["triton.runtime.autotuner"] = saved


@pytest.mark.parametrize(
    ("raised", "shown", "oom"),
    [
        (
            ("AcceleratorError", "CUDA error: an illegal memory access was encountered\nSearch for "
             "`cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information."),
            "AcceleratorError: CUDA error: an illegal memory access was encountered (cudaErrorIllegalAddress)",
            False,
        ),
        (
            ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 9313.23 GiB."),
            "OutOfMemoryError: CUDA out of memory. Tried to allocate 9313.23 GiB.",
            True,
        ),
        (
            ("RuntimeError", "Triton Error [CUDA]: an illegal memory access was encountered"),
            "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
            False,
        ),
    ],
)  # fmt: skip
def test_torch_and_tritons_cuda_errors_are_cuda_errors_not_the_kernels_python(raised, shown, oom):
    """torch's and Triton's CUDA errors (the messages as torch 2.11 and Triton 3.6 word them) are CUDA
    errors of the case, a sticky one replacing the worker as for a .cu kernel; a ValueError stays the kernel's own."""
    from pytest_gemm.worker.errors import KernelCudaError, KernelRaised, cuda_error_name, guarded_call

    kind = type(raised[0], (RuntimeError,), {})
    with pytest.raises(KernelCudaError) as info:
        guarded_call(lambda: (_ for _ in ()).throw(kind(raised[1])), "k.py", "k.py", ())
    assert str(info.value) == shown and info.value.out_of_memory == oom
    assert cuda_error_name(str(info.value)) == ("" if oom or "Triton" in shown else "cudaErrorIllegalAddress")
    with pytest.raises(KernelRaised) as own:
        guarded_call(lambda: int("x"), "k.py", "k.py", ())
    assert not isinstance(own.value, KernelCudaError)


def test_a_python_kernel_may_compute_c_equals_a_b_without_alpha_and_beta():
    """Triton's TMA tutorial computes A @ B: alpha_beta=False declares it; its cases are alpha = 1, beta = 0 only."""
    from pytest_gemm.records.shapes import parse_shapes
    from pytest_gemm.specs.cases import expand

    source = TRITON_FILE.replace('storage={"B": "NxK"})', 'storage={"B": "NxK"}, alpha_beta=False)')
    (spec,) = parse_py_source("k.py", source)
    assert not spec.alpha_beta and {c.ab.id for c in expand(spec, parse_shapes("256"))} == {""}
    with pytest.raises(KernelFileError, match="alpha_beta': expected true or false, got 'no'"):
        spec_from_mapping({"dtypes": ["fp16"], "alpha_beta": "no"}, path="k.py", kind="py", default_name="k")


_SPAN = object()  # the one span of a watched launch (its contents are not read)


class _Clock:
    """CUPTI's clock as the timer uses it: what it recorded, or how it fails."""

    def __init__(self, spans=(_SPAN,), others=(), fails_at=""):
        self.spans_, self.others, self.fails_at, self.abandoned = list(spans), others, fails_at, False

    def start(self):
        if self.fails_at == "start":
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    def spans(self):
        if self.fails_at == "spans":
            raise RuntimeError("CUPTI_ERROR_UNKNOWN")
        return self.spans_

    def other_streams(self):
        return self.others

    def abandon(self):
        self.abandoned = True


def _timer(clock):
    """A Timer whose device parts are stand-ins: only streams_of's own logic runs."""
    import concurrent.futures
    import types

    from pytest_gemm.worker.timer import Timer

    timer = object.__new__(Timer)
    done = concurrent.futures.Future()
    done.set_result(None)
    timer._compiled, timer._cupti = done, clock
    timer.cp = types.SimpleNamespace(
        empty=lambda *a, **k: None, uint8=None, cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
            deviceSynchronize=lambda: None)))  # fmt: skip
    timer.prepare = lambda *a: None
    timer._mark = lambda *a: None
    return timer


def test_the_stream_check_says_why_where_cupti_cannot_tell_and_never_claims_a_clean_launch_it_did_not_see():
    """A stream check whose CUPTI fails to start, fails to flush, or saw no record of the harness's kernel around the
    call says why (the case is then unchecked: no speed claim), never "no other stream"; a launch that raises leaves
    CUPTI abandoned and its own error to report."""
    calls = []

    def launch():
        calls.append(1)

    assert _timer(_Clock(others=(OTHER,))).streams_of(launch) == (OTHER,)
    assert _timer(_Clock()).streams_of(launch) == ()
    assert _timer(_Clock(spans=())).streams_of(launch).startswith("CUPTI recorded 0 launch(es)")
    assert _timer(_Clock(fails_at="start")).streams_of(launch) == "CUPTI failed: RuntimeError: " + (
        "CUPTI_ERROR_NOT_INITIALIZED")  # fmt: skip
    assert _timer(_Clock(fails_at="spans")).streams_of(launch).startswith("CUPTI failed: RuntimeError")
    # under Nsight Compute, CUPTI is the profiler's: the launch still runs, unwatched (it once did not run at all)
    assert _timer("cupti-python is not installed").streams_of(launch) == "cupti-python is not installed"
    assert calls == [1] * 6  # the launch ran once each time, watched or not
    clock = _Clock()
    with pytest.raises(ZeroDivisionError):
        _timer(clock).streams_of(lambda: 1 / 0)
    assert clock.abandoned


def test_torchs_current_stream_goes_back_to_its_default_after_each_case(monkeypatch):
    """A torch kernel's case leaves the harness's stream as torch's current one; the backend sets torch's default back
    when the case ends, so that a later case never depends on whether a torch case ran before it (torch faked)."""
    import types

    from pytest_gemm.worker import python_calls

    set_to = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True, default_stream=lambda: "default", set_stream=set_to.append
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    python_calls.default_torch_stream()
    assert set_to == ["default"]
    monkeypatch.delitem(sys.modules, "torch")
    python_calls.default_torch_stream()  # no torch imported: nothing to do
    assert set_to == ["default"]
