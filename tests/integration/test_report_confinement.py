"""A report never writes outside its folder, whatever a run's dtypes, kernel names, files, test ids and GPU name
hold: a hostile run built in memory (past the saved-run reader's own checks, so that the writer's defence is what
is tested) is drawn by ``write_report``, by ``pytest-gemm plot`` and by the plugin's pictures, and every file of the
folders around the report is compared before and after."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install matplotlib)")

from pytest_gemm.records.case_record import GateResult
from pytest_gemm.records.diagnosis import Diagnosis
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import GateVerdict, Verdict
from pytest_gemm.report.names import OutsideFolderError
from pytest_gemm.runs.data import RunData
from pytest_gemm.runs.saved import read_run, run_json

from support.reports import RUN, error_map

pytestmark = pytest.mark.filterwarnings("ignore:constrained_layout not applied", "ignore:Glyph")

MINE = b"MY OWN PICTURE"
LONG = "a" * 3000


def _snapshot(root: Path) -> dict[Path, Any]:
    """Every entry under ``root``: a file's bytes, a link's target, or that it is a folder."""
    seen: dict[Path, Any] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                seen[path] = ("link", os.readlink(path))
            else:
                seen[path] = path.read_bytes() if stat.S_ISREG(mode) else "folder"
    return seen


def _changed(before: dict[Path, Any], after: dict[Path, Any]) -> set[Path]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


@pytest.fixture
def home(tmp_path) -> Path:
    """A user's project with pictures of their own beside the report folder it is about to write."""
    project = tmp_path / "project"
    (project / "docs" / "images").mkdir(parents=True)
    (project / "docs" / "images" / "mine.png").write_bytes(MINE)
    (project / "docs" / "images" / "merged.png").write_bytes(MINE)
    (project / "notes.txt").write_text("mine\n")
    return tmp_path


def _hostile(home: Path, escape: str) -> RunData:
    """A run whose every name is an attempt to write elsewhere: ``..``, absolute paths, odd and long text."""
    data = read_run(RUN)
    base = [r for r in data.records if r.kernel == "sgemm_naive"]
    climb = "x/" + "../" * 40
    dtypes = [
        "x/../../docs/images/mine",
        f"{climb}{home}/ESCAPED",
        f"{climb}{escape}",
        str(home / "abs-dtype"),
        "..",
        "",
        LONG,
        "sp ace\nnl\t$\\nope$",
        "FP32",
        "fp32",
        "x\ud800",
    ]
    kernels = ["../../docs/images/kernel", f"{home}/abs-kernel", "k\ud800", LONG]
    files = ["../../../../outside.cu", f"{home}/abs.cu", "kernels/01_naive.cu"]
    records = []
    for i, dtype in enumerate(dtypes):
        kernel, file = kernels[i % len(kernels)], files[i % len(files)]
        for r in base:
            test = f"{file}::{kernel}[{dtype}-{r.shape}]"
            records.append(dataclasses.replace(r, test=test, file=file, kernel=kernel, dtype=dtype, gpu=escape))
    gate = GateResult(GateVerdict.REGRESSED, "ratio", 0.05, 0.2, fails=True)
    records[0] = records[0].with_gate(gate)
    data.tests = {}
    data.with_timing(records)
    data.gpu = {**data.gpu, "name": "../../docs/images/gpu"}
    shape = Shape(256, 256, 512)
    for test in ["../../docs/images/mine::../../../x", f"{home}/abs::k[{escape}]", f"{LONG}::{LONG}", "x\ud800::y"]:
        emap = error_map(256, 256, marks={(3, 3): (0.0, "unwritten")})
        diagnosis = Diagnosis(Verdict.WRONG_OUTPUT, "fp32", shape, 1.0, 0.0, error_map=emap)
        data.tests[test] = CaseResult("failed", "verification failed", kind="case", diagnosis=diagnosis)
    return data


def _plugin(data: RunData, out: Path, home: Path) -> None:
    """The plugin's pictures: each failed case's heatmap as it ends, then the report."""
    from pytest_gemm.plugin.pictures import Pictures

    config = SimpleNamespace(getoption=lambda name, default=None: default, invocation_params=SimpleNamespace(dir=home))
    pictures = Pictures(config, out)  # type: ignore[arg-type]
    assert pictures.claim(overwrite=False, switch="--gemm-overwrite-report", shown=str) is None
    names = [pictures.heatmap(test, result.diagnosis, data.gpu_name) for test, result in data.failures.items()]
    assert all(name is not None and pictures.drawn(name) for name in names)
    lines = pictures.write(data, list(data.failures))
    assert lines == [(f"pytest-gemm report: {out / 'index.html'} (17 picture(s))", False)]


def _plot(data: RunData, out: Path, monkeypatch, capsys) -> None:
    """``pytest-gemm plot``, its reader handing over the hostile run."""
    from pytest_gemm import cli

    monkeypatch.setattr(cli, "read_saved", lambda path: data)
    assert cli.main(["plot", "evil.json", "--out", str(out), "--baselines", str(out.parent / "none")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{out / 'index.html'}: 13 chart(s), 4 error map(s)")
    assert all(Path(line.strip()).resolve().parent in (out.resolve(), out.resolve() / "errors") for line in printed[1:])


@pytest.mark.parametrize("how", ["write_report", "plot", "plugin"])
def test_a_hostile_run_writes_only_inside_its_report_folder(home, how, monkeypatch, capsys):
    escape = f"/tmp/pytest-gemm-escape-{uuid.uuid4().hex}"
    data = _hostile(home, escape)
    out = home / "project" / "repd4"
    before = _snapshot(home)
    monkeypatch.chdir(home / "project")
    if how == "write_report":
        from pytest_gemm.report.folder import write_report

        report = write_report(data, out)
        assert len(report.charts) == 13 and len(report.heatmaps) == 4
    elif how == "plot":
        _plot(data, out, monkeypatch, capsys)
    else:
        _plugin(data, out, home)
    changed = _changed(before, _snapshot(home))
    assert changed and all(path == out or path.is_relative_to(out) for path in changed), sorted(changed)
    assert (home / "project" / "docs" / "images" / "mine.png").read_bytes() == MINE
    assert not list(Path("/tmp").glob(Path(escape).name + "*"))
    pictures = sorted(p.name for p in out.rglob("*.png"))
    assert len(pictures) == 13 + 4 and all(len(name) < 120 for name in pictures)
    assert (out / "tflops-fp32.png").is_file() and (out / "index.html").is_file()


def test_a_link_in_the_report_folder_that_points_away_is_refused_before_anything_is_drawn(home, capsys):
    from pytest_gemm.cli import main
    from pytest_gemm.report.folder import write_report

    data = read_run(RUN)
    data.tests = {k: v for k, v in list(data.tests.items())[:3]}
    out = home / "project" / "report"
    out.mkdir()
    os.symlink(home / "project" / "docs" / "images", out / "tflops-fp32.png")
    before = _snapshot(home)
    with pytest.raises(OutsideFolderError, match="outside"):
        write_report(data, out)
    assert _changed(before, _snapshot(home)) == set()  # refused before the folder was even marked
    run = home / "run.json"
    run.write_text(json.dumps(run_json(data)))
    before = _snapshot(home / "project")
    assert main(["plot", str(run), "--out", str(out), "--overwrite-report"]) == 2
    assert "outside" in capsys.readouterr().err
    assert {p.name for p in _changed(before, _snapshot(home / "project"))} <= {".pytest-gemm-report"}
