"""Grouped kernels through the whole plugin on the CPU (tests/host_backend.py runs Python kernels on NumPy through
the worker's own verification): a right grouped kernel passes in each layout, a plain kernel skips grouped shapes
saying why, and each grouped fault reaches the test's failure text, named (docs/verification.md#grouped-gemm)."""

from __future__ import annotations

from support import TESTS
from support.cli import cli

KERNELS = """
import numpy as np
from pytest_gemm import gemm_kernel

@gemm_kernel(
    dtypes=["fp32"],
    alpha_beta=False,
    groups={"layout": "contiguous", "align": 8, "args": ["group_index", "group_offsets"]},
)
def right(A, B, C, index, offsets):
    for g in range(B.shape[0]):
        rows = np.nonzero(index == g)[0]
        C[rows] = A[rows] @ B[g]


@gemm_kernel(
    dtypes=["fp32"],
    alpha_beta=False,
    groups={"layout": "contiguous", "align": 8, "args": ["group_index", "group_offsets"]},
)
def pads(A, B, C, index, offsets):
    right(A, B, C, index, offsets)
    C[index < 0] = 0


@gemm_kernel(
    dtypes=["fp32"],
    alpha_beta=False,
    groups={"layout": "contiguous", "align": 8, "args": ["group_index", "group_offsets"]},
)
def off_by_one(A, B, C, index, offsets):
    for g in range(B.shape[0]):
        rows = np.nonzero(index == g)[0]
        C[rows] = A[rows] @ B[max(g - 1, 0)]


@gemm_kernel(dtypes=["fp32"], alpha_beta=False, groups={"layout": "masked", "align": 16, "args": ["group_rows"]})
def slots(A, B, C, rows):
    for g in range(B.shape[0]):
        C[g] = A[g] @ B[g]  # every row of the slot, past the group's count too


@gemm_kernel(dtypes=["fp32"], alpha_beta=False, groups={"layout": "k", "args": ["group_offsets"]})
def weight_gradient(A, B, C, offsets):
    for g in range(C.shape[0]):
        C[g] = A[:, offsets[g] : offsets[g + 1]] @ B[offsets[g] : offsets[g + 1]]


@gemm_kernel(dtypes=["fp32"])
def plain(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
"""


def _run(pytester, *args):
    """The kernels above run by the host backend."""
    pytester.makepyfile(grouped_kernels=KERNELS)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n\n\ndef pytest_gemm_worker_backend(config):\n"
        "    return 'host_backend:HostBackend'\n"
    )
    return pytester.runpytest("--gemm-kernels", "grouped_kernels.py", "-m", "gpu", "-rA", *args)


def test_grouped_kernels_are_judged_group_by_group_through_the_plugin(pytester):
    result = _run(pytester, "--gemm-shapes", "300x64x32g4,64x32x16")
    outcomes = {
        line.split("::")[1].split(" ")[0]: line.split(" ")[0]
        for line in result.stdout.lines
        if line.startswith(("PASSED", "FAILED"))
    }
    assert outcomes["right[fp32-300x64x32g4]"] == "PASSED"
    assert outcomes["weight_gradient[fp32-300x64x32g4]"] == "PASSED"
    assert outcomes["plain[fp32-64x32x16]"] == "PASSED"
    for wrong in ("pads", "off_by_one", "slots"):
        assert outcomes[f"{wrong}[fp32-300x64x32g4]"] == "FAILED", result.stdout.str()
    text = result.stdout.str()
    assert "padding rows written:" in text and "in the padding rows after groups" in text
    assert "matches another group's B read (group 1's rows computed with group 0's B" in text
    assert "rows past a group's end written" in text and "an empty group not skipped" in text
    result.stdout.fnmatch_lines(["*300x64x32g4 is a grouped GEMM of 4 groups; the kernel is not grouped*"])
    result.stdout.fnmatch_lines(["*64x32x16 is one GEMM; the kernel is grouped and runs grouped shapes*"])


def test_a_grouped_failure_reaches_the_report_and_reads_back(pytester):
    """The report folder of a run with grouped failures holds their findings, group by group, and its run data reads
    back through the saved-run checks (the command that plots a saved run takes it)."""
    import json

    args = ("--gemm-shapes", "300x64x32g4", "--gemm-report", "report", "-k", "off_by_one or slots")
    result = _run(pytester, *args)
    result.assert_outcomes(failed=2)
    folder = pytester.path / "report"
    page = (folder / "index.html").read_text()
    assert "another group&#x27;s B read" in page or "another group's B read" in page
    assert "rows past a group" in page
    data = json.loads((folder / "run.json").read_text())
    assert "300x64x32g4" in json.dumps(data)
    assert any(folder.glob("errors/*.png")), sorted(p.name for p in folder.rglob("*"))
    again = cli(pytester.path, "plot", str(folder / "run.json"), "--out", str(pytester.path / "again"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "rows past a group" in (pytester.path / "again" / "index.html").read_text()
