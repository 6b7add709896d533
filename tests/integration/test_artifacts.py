"""What a run leaves behind stays small whatever the matrices' size: the JUnit XML, the saved run, the report
folder and the terminal. Driven on the CPU by tests/synthetic_backend.py (broken kernels made up at any size,
their causes traced and their maps pooled by the worker's own rules) and by saved runs of the old format."""

from __future__ import annotations

import ast
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gemm.plugin.properties import RESULT
from pytest_gemm.records.verdicts import Verdict
from pytest_gemm.runs.data import STORED_CELLS
from pytest_gemm.runs.saved import read_run

from support import TESTS, run_pytest_in
from support.shared import made_once

pytestmark = pytest.mark.xdist_group("artifacts")  # one xdist worker where xdist can group (tests/support/shared.py)

SYNTHETIC = """/* pytest-gemm
entry = "synthetic<V>"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
params = { V = [0, 1, 2, 3, 4, 9] }
block = [16, 16]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
template <int V>
__global__ void synthetic(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {}
"""


CONFTEST = (
    f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n\n\ndef pytest_gemm_worker_backend(config):\n"
    '    return "synthetic_backend:SyntheticBackend"\n'
)
ARGS = ("--gemm-kernels", "kernels", "--gemm-shapes", "2048", "-m", "not gemm_compile", "-p", "no:randomly")


@pytest.fixture
def broken(pytester):
    """Five variants wrong in five ways at 2048 x 2048 (15 cases), one right and timed (3 cases)."""
    (pytester.mkdir("kernels") / "synthetic.cu").write_text(SYNTHETIC)
    pytester.makeconftest(CONFTEST)
    return pytester


def _run(project, *args):
    return project.runpytest(*ARGS, *args)


def _broken_run(folder: Path) -> None:
    (folder / "kernels").mkdir()
    (folder / "kernels" / "synthetic.cu").write_text(SYNTHETIC)
    (folder / "conftest.py").write_text(CONFTEST)
    outputs = ("--junitxml", "run.xml", "--benchmark-json", "run.json", "--gemm-report", "report")
    out = run_pytest_in(folder, *ARGS, *outputs)
    assert "15 failed, 3 passed" in out.splitlines()[-1], out[-4000:]


@pytest.fixture(scope="session")
def broken_run(pytestconfig, tmp_path_factory) -> Path:
    """The broken kernels' run at 2048, made once for the whole run (it takes most of the module's time), whichever
    xdist workers run this module's tests: its folder, with its JUnit XML, saved run and report."""
    return made_once(pytestconfig, tmp_path_factory, "broken-2048", _broken_run)


def test_a_run_of_broken_kernels_at_2048_leaves_small_artifacts(broken_run):
    broken = SimpleNamespace(path=broken_run)
    xml = (broken.path / "run.xml").read_text()
    results = [ast.literal_eval(p.get("value")) for p in ET.fromstring(xml).iter("property") if p.get("name") == RESULT]
    assert len(results) == 18 and all(r["result"]["diagnosis"] is None and r["gpu"] is None for r in results)
    assert sum(r["heatmap"].startswith("errors/") for r in results) == 15  # each failed case names its picture
    assert xml.count("'verdict': 'new'") == 3  # the timed cases' records, as the gate left them
    assert len(xml) < 18 * 6_000, len(xml)
    saved = json.loads((broken.path / "run.json").read_text())
    entries = saved["gemm"]["tests"]
    failed = [e for e in entries.values() if e["outcome"] == "failed"]
    assert len(failed) == 15 and all(len(json.dumps(e, indent=4)) < 32_000 for e in failed)
    data = read_run(broken.path / "run.json")
    kinds = {str(f.kind) for r in data.failures.values() for f in r.diagnosis.findings}
    assert {"unwritten", "C read although beta = 0", "read past A", "over the bound", "out-of-bounds write"} <= kinds
    for result_ in data.failures.values():
        emap = result_.diagnosis.error_map
        assert len(emap.ratio) == len(emap.ratio[0]) == STORED_CELLS and emap.cell == (32, 32)
    report = broken.path / "report"
    assert len(list((report / "errors").glob("*.png"))) == 15 and (report / "run.json").is_file()
    assert sum(p.stat().st_size for p in report.rglob("*")) < 15 * 200_000 + 2_000_000


def test_the_terminal_shows_pytest_benchmarks_tables_only_when_asked(broken):
    quiet = _run(broken, "-k", "V9")
    quiet.assert_outcomes(passed=3)
    text = quiet.stdout.str()
    assert "pytest-gemm timing" in text and "Name (time in" not in text
    assert "all 3 timed case(s): -v" in text
    loud = _run(broken, "-k", "V9", "-v")
    assert "Name (time in" in loud.stdout.str()  # -v: pytest-benchmark's own tables, and the whole of pytest-gemm's


def _format_one(path: Path) -> dict:
    """A saved run as pytest-gemm 0.2 wrote it: failed cases in a list beside the tests, maps as lists of numbers."""
    saved, run = json.loads(path.read_text()), read_run(path)
    failures = []
    for test, entry in saved["gemm"]["tests"].items():
        diagnosis = entry.pop("diagnosis", None)
        if diagnosis is None or diagnosis["kind"] != Verdict.WRONG_OUTPUT:
            continue
        emap = run.tests[test].diagnosis.error_map  # its 64 cells a side, each made four: 128 a side
        ratio = [[v for v in row for _ in (0, 1)] for row in emap.ratio for _ in (0, 1)]
        cause = [[w for w in row for _ in (0, 1)] for row in emap.cause for _ in (0, 1)]
        cell = [emap.cell[0] // 2, emap.cell[1] // 2]
        plain = {
            **emap.__dict__,
            "cell": cell,
            "ratio": ratio,
            "cause": cause,
            "outside": [list(r) for r in emap.outside],
        }
        said = ["unwritten output: some element(s) of C still hold the NaN poison"]
        keys = ("dtype", "shape", "alpha", "beta")
        failures.append({"test": test, **{k: diagnosis[k] for k in keys}, "diagnosis": said, "error_map": plain})
    saved["gemm"]["format"], saved["gemm"]["failures"] = 1, failures
    for bench in saved["benchmarks"]:
        record = bench["extra_info"]["gemm"]
        record.get("gate", {}).pop("fails", None)
    return saved


def test_a_run_saved_by_the_previous_format_still_loads_its_maps_pooled(broken_run, tmp_path):
    broken = SimpleNamespace(path=broken_run)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_format_one(broken.path / "run.json"), indent=4))
    data, new = read_run(old), read_run(broken.path / "run.json")
    assert len(data.failures) == 15 and len(data.records) == 3 and data.records == new.records
    for test, result in data.failures.items():
        assert result.diagnosis.said == ("unwritten output: some element(s) of C still hold the NaN poison",)
        emap, same = result.diagnosis.error_map, new.tests[test].diagnosis.error_map
        assert len(emap.ratio) == STORED_CELLS and emap.cell == same.cell and emap.cause == same.cause  # pooled back
