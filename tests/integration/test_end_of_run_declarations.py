"""The end of a run names what a kernel's header declares, its storage orders included, with -v (on the H100
recording, no GPU needed). The failure text, tables, report and summary say it too:
tests/unit/report/test_declarations_report.py.
"""

from __future__ import annotations

from support import with_keys


def test_the_end_of_the_run_names_a_kernels_declared_orders(replay):
    """The plugin's end-of-run lines (plugin/summary.py) say what the header declares, the orders included, with -v
    (at default verbosity a passing run fits a screen)."""
    kernel = replay.path / "kernels" / "01_naive.cu"
    kernel.write_text(with_keys(kernel.read_text(), storage='{ B = "NxK" }'))
    test = "kernels/01_naive.cu::sgemm_naive[fp32-512x512x512]"
    said = (
        "pytest-gemm: kernels/01_naive.cu::sgemm_naive declares storage A MxK, B NxK, C MxN (each matrix as it "
        "lies in memory: rows of contiguous elements)"
    )
    result = replay.runpytest("--gemm-kernels", test, "--benchmark-skip", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([said])
    quiet = replay.runpytest("--gemm-kernels", test, "--benchmark-skip")  # a passing run fits a screen: -v says it
    quiet.assert_outcomes(passed=1)
    assert said not in quiet.stdout.str()
