"""research/ncu_compare.py: Nsight Compute's side of the accuracy comparison sums each cuBLAS call's kernels."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from support import ROOT

_spec = importlib.util.spec_from_file_location("ncu_compare", ROOT / "research" / "ncu_compare.py")
ncu_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_compare)

GEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"
REDUCE = "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<T6>)"


def _csv(path: Path, launches: list[tuple[str, float, str]]) -> Path:
    """A file laid out as `ncu --csv --metrics gpu__time_duration.sum` writes it (its log lines first)."""
    rows = ["==PROF== Connected to process 4242", '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    for i, (name, value, unit) in enumerate(launches):
        quoted = name.replace('"', '""')
        rows.append(f'"{i}","{quoted}","gpu__time_duration.sum","{unit}","{value:,}"')
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_cublas_call_of_two_kernels_is_summed_and_the_kernel_under_test_is_not_counted(tmp_path):
    pair = [("cupy_fill", 30.0, "usecond"), ("sgemm_naive", 46.8, "usecond"), ("cupy_fill", 30.0, "usecond")]
    call = [(GEMM, 11.9, "usecond"), (REDUCE, 6.0, "usecond")]
    truth = [("void dgemm_kernel<double>(...)", 1.2, "msecond")]
    warm_up = [(GEMM, 6.0, "usecond"), ("cupy_copy", 2.0, "usecond")]  # the worker's warm-up: no kernel before it
    launches = ncu_compare.ncu_launches(_csv(tmp_path / "ncu.csv", warm_up + truth + (pair + call) * 3))
    calls = ncu_compare.timed_cublas_calls(launches, ("sgemm_naive",))
    assert [names for names, _ in calls] == [(GEMM, REDUCE)] * 3
    assert [round(seconds * 1e6, 3) for _, seconds in calls] == [17.9] * 3
    assert [round(s * 1e6, 3) for s in ncu_compare.ncu_durations(launches)["sgemm_naive"]] == [46.8] * 3


def test_only_the_timed_launches_of_the_kernel_are_compared(tmp_path):
    """A Triton kernel's autotuner launches it in other configs first; only the launches the harness timed
    (right after its prepare kernel) are Nsight Compute's side of the comparison."""
    trials = [("_matmul", 400.0, "usecond"), ("_matmul", 250.0, "usecond")] * 3  # two configs tried
    verify = [("cupy_copy", 2.0, "usecond"), ("_matmul", 251.0, "usecond")]
    timed = [("pytest_gemm_prepare", 60.0, "usecond"), ("_matmul", 246.0, "usecond"),
             ("pytest_gemm_prepare", 60.0, "usecond"), (GEMM, 180.0, "usecond")] * 4  # fmt: skip
    launches = ncu_compare.ncu_launches(_csv(tmp_path / "ncu.csv", trials + verify + timed))
    assert [round(s * 1e6) for s in ncu_compare.timed_launches(launches, "_matmul")] == [246] * 4
    untimed = ncu_compare.ncu_launches(_csv(tmp_path / "ncu2.csv", verify))
    assert [round(s * 1e6) for s in ncu_compare.timed_launches(untimed, "_matmul")] == [251]


def test_the_timed_cublas_calls_are_those_after_a_prepare_kernel_not_an_autotuners_cache_fills(tmp_path):
    """Triton's autotuner fills its L2 buffer (a torch kernel) before each trial of the kernel; those fills
    follow the kernel's launches, and outnumber the timed cuBLAS calls: only the work after a prepare kernel that is
    not the kernel under test (nor a helper of its own launched before it) is a timed cuBLAS call."""
    fill = "void at::vectorized_elementwise_kernel<4, at::FillFunctor<int>, std::array<char *, 1>>(int, T2, T3)"
    trials = [("_matmul", 250.0, "usecond"), (fill, 82.0, "usecond")] * 12
    helper = "void at::vectorized_elementwise_kernel<4, at::MulScalarFunctor<float>>"  # the kernel's own, before it
    timed = [
        ("pytest_gemm_prepare", 60.0, "usecond"),
        (helper, 3.0, "usecond"),
        ("_matmul", 246.0, "usecond"),
        ("pytest_gemm_prepare", 60.0, "usecond"),
        (GEMM, 180.0, "usecond"),
        (REDUCE, 2.0, "usecond"),
    ] * 3
    launches = ncu_compare.ncu_launches(_csv(tmp_path / "ncu.csv", trials + timed + [("pytest_gemm_mark", 1.0, "us")]))
    calls = ncu_compare.timed_cublas_calls(launches, ("_matmul",))
    assert [(names, round(seconds * 1e6)) for names, seconds in calls] == [((GEMM, REDUCE), 182)] * 3
