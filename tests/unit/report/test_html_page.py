"""The report page (report/folder.py): index.html's pictures, facts and tables, heatmaps drawn once, the same report
from a saved run, and how it renders in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (pip install matplotlib)")

from pytest_gemm.records.result import CaseResult
from pytest_gemm.report.folder import heatmap_name, write_report
from pytest_gemm.report.tables import COLUMNS, NUMERIC, cells
from pytest_gemm.runs.saved import read_run

from support.reports import RUN, assert_self_contained, assert_sensible_png, error_map, failed, pixels_near
from support.shared import made_once

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _fail(data, emap, name: str) -> str:
    """Add a failed case with this error map to a run; its test id."""
    test, diagnosis = failed(emap, name)
    data.tests[test] = CaseResult("failed", "verification failed", kind="case", diagnosis=diagnosis)
    return test


#: one xdist worker where xdist can group them (the report is made once for the run anyway: tests/support/shared.py)
pytestmark = pytest.mark.xdist_group("html_page")


def _report(out: Path) -> None:
    data = read_run(RUN)
    data.command = "pytest --gemm-kernels kernels/ --benchmark-json run.json"
    marks = {(10, 10): (0.0, "unwritten"), (50, 60): (300.0, "over the bound")}
    _fail(data, error_map(512, 512, marks=marks), "sgemm_bad[fp32-512x512x512]")
    _fail(data, error_map(300, 700, tile=(32, 128)), "<script>alert(1)</script>[fp32-300x700x512]")
    write_report(data, out)


@pytest.fixture(scope="session")
def folder(pytestconfig, tmp_path_factory) -> Path:
    """A report of the recorded H100 run with two failed cases added; written once for the run, whichever xdist
    workers run this module's tests (none writes into it)."""
    return made_once(pytestconfig, tmp_path_factory, "html-page-report", _report)


def test_the_page_shows_every_picture_the_facts_and_the_tables(folder):
    assert_self_contained(folder)
    page = (folder / "index.html").read_text()
    assert "<title>pytest-gemm report: NVIDIA H100 80GB HBM3, 2026-11-22</title>" in page
    assert "<code>pytest --gemm-kernels kernels/ --benchmark-json run.json</code>" in page
    assert "135 timed case(s), 2 failed case(s) with a diagnosis" in page
    assert '<a href="run.json">run.json</a>' in page  # the run itself, beside the page
    assert "<h3>fp32: 45 case(s)</h3>" in page and "<td>sgemm_warp_tile[BN256-BK16]</td>" in page
    assert "<td>driver_version</td><td>580.159.04</td>" in page
    record = read_run(RUN).records[0]  # its row: the terminal table's cells, the gate's before the flags
    row = [*list(cells(record).values())[:-1], "", cells(record)["flags"]]
    assert "<th>" + "</th><th>".join(row_head()) + "</th>" in page
    assert (
        "".join(f'<td class="num">{c}</td>' if h in NUMERIC else f"<td>{c}</td>" for h, c in zip(row_head(), row))
        in page
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    for png in folder.rglob("*.png"):
        assert_sensible_png(png)


def row_head() -> list[str]:
    return [*COLUMNS[:-1], "gate", COLUMNS[-1]]


def test_a_heatmap_drawn_already_this_run_is_not_drawn_again(tmp_path):
    data = read_run(RUN)
    data.tests = {}
    tests = [_fail(data, error_map(256, 256), f"k{i}[fp32-256x256x512]") for i in range(2)]
    (tmp_path / "errors").mkdir()
    kept = tmp_path / heatmap_name(tests[0])
    kept.write_bytes(b"drawn as the case ended")
    report = write_report(data, tmp_path, drawn=tests)  # the second is missing
    assert kept.read_bytes() == b"drawn as the case ended"
    assert_sensible_png(tmp_path / heatmap_name(tests[1]))
    assert sorted(report.heatmaps.values()) == sorted(heatmap_name(test) for test in tests)


def test_run_json_beside_the_page_draws_the_same_report(folder, tmp_path):
    again = read_run(folder / "run.json")
    assert len(again.records) == 135 and len(again.failures) == 2
    write_report(again, tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(p.name for p in folder.rglob("*"))
    report = write_report(again, tmp_path / "plot", source=folder / "run.json")  # drawn from a saved run: not copied
    assert report.run_file is None and not (tmp_path / "plot" / "run.json").exists()
    assert (
        f"<strong>Drawn from:</strong> <code>{folder / 'run.json'}</code>" in (tmp_path / "plot/index.html").read_text()
    )


@pytest.mark.skipif(CHROMIUM is None, reason="no headless browser: apt-get install chromium")
def test_the_page_renders_in_headless_chromium(folder, tmp_path):
    shot = tmp_path / "shot.png"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,9000",
        (folder / "index.html").as_uri(),
    ]
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    import numpy as np
    from matplotlib.image import imread

    grey = imread(shot)[..., :3].mean(axis=-1)
    assert grey.std() > 0.15  # not a blank page
    assert pixels_near(shot, "#0072B2", 6) > 20_000  # the pictures: fp32 lines and bars, Okabe-Ito blue
    assert pixels_near(shot, "#E69F00", 6) > 20_000  # bf16's bars and the mma kernels' lines
    assert pixels_near(shot, "#e8eef4", 2) > 5_000  # the tables' header rows
    assert pixels_near(shot, "#D55E00", 6) > 500  # the unwritten cells of a heatmap
    rows_with_ink = (grey < 0.9).any(axis=1)
    assert np.count_nonzero(rows_with_ink) > 0.5 * len(rows_with_ink)  # content all the way down
