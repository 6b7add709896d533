"""docs/results-h100-*.md are scripts/results_doc.py's output from the committed saved runs: no drift."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.runs.data import RunData
from pytest_gemm.runs.saved import read_run

from support import ROOT

RUN = "docs/data/h100-2026-11-22-main-job.json"
PAGE = ROOT / "docs" / "results-h100-main-job.md"

_spec = importlib.util.spec_from_file_location("results_doc", ROOT / "scripts" / "results_doc.py")
results_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_doc)


@pytest.mark.parametrize(
    ("run", "page"),
    [
        (RUN, "docs/results-h100-main-job.md"),
        ("docs/data/h100-2026-11-23-quick-standard.json", "docs/results-h100-quick-standard.md"),
    ],
)
def test_the_committed_results_page_is_the_scripts_output_from_the_committed_run(run, page):
    assert (ROOT / page).read_text(encoding="utf-8") == results_doc.render(read_run(ROOT / run), run), (
        f"regenerate it: python scripts/results_doc.py {run} {page}"
    )


def test_the_page_names_the_clock_the_run_was_timed_with():
    assert "device time (CUDA events, cold L2)" in PAGE.read_text(encoding="utf-8")  # saved before CUPTI
    cupti = (ROOT / "docs/results-h100-quick-standard.md").read_text(encoding="utf-8")
    assert "device time (CUPTI kernel records, cold L2)" in cupti
    assert "| `sgemm_warp_tile[BN256-BK16]` |" in cupti and "% cuBLAS at 4096³" in cupti


def test_the_script_writes_the_page_from_any_folder_and_refuses_a_run_of_several_gpu_models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert results_doc.main([str(ROOT / RUN), "page.md"]) == 0
    assert (tmp_path / "page.md").read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    data = read_run(ROOT / RUN)
    data.with_timing([dataclasses.replace(data.records[0], gpu="NVIDIA H200")])
    with pytest.raises(ValueError, match="several GPU models"):
        results_doc.render(data, RUN)


def test_a_run_without_alpha_1_beta_0_cases_still_gets_its_tables_and_ties_keep_one_order():
    data = read_run(ROOT / RUN)
    fp32 = [dataclasses.replace(r, ab="a0.7b1.3") for r in data.records if r.dtype == "fp32"]
    page = results_doc.render(RunData.of_timed(data.gpu, fp32, date=data.date), RUN)
    assert "each case of a shape (no alpha = 1, beta = 0 case)" in page and "| `sgemm_naive` | " in page
    shapes = ("512x256x128", "128x256x512", "256x128x512")
    twins = [dataclasses.replace(fp32[0], test=f"t{s}", shape=Shape.of(s)) for s in shapes]
    page = results_doc.render(RunData.of_timed(data.gpu, twins), RUN)
    assert "| kernel | 128x256x512 | 256x128x512 | 512x256x128 |" in page
