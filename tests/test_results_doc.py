"""docs/results-h100-main-job.md is scripts/results_doc.py's output from the committed saved run: no drift."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pytest_gemm.report.run_data import read_run

ROOT = Path(__file__).resolve().parent.parent
RUN = "docs/data/h100-2026-11-22-main-job.json"
PAGE = ROOT / "docs" / "results-h100-main-job.md"

_spec = importlib.util.spec_from_file_location("results_doc", ROOT / "scripts" / "results_doc.py")
results_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_doc)


def test_the_committed_results_page_is_the_scripts_output_from_the_committed_run():
    assert PAGE.read_text(encoding="utf-8") == results_doc.render(read_run(ROOT / RUN), RUN), (
        f"regenerate it: python scripts/results_doc.py {RUN} {PAGE.relative_to(ROOT)}"
    )


def test_the_page_names_the_gpu_the_date_and_the_command_and_has_a_table_per_dtype():
    page = PAGE.read_text(encoding="utf-8")
    assert "# The main job on an NVIDIA H100 80GB HBM3, 2026-11-22" in page
    assert "Command: `pytest " in page and "--gemm-kernels kernels/" in page
    for dtype in ("bf16", "fp16", "fp32"):
        assert f"\n## {dtype}\n" in page
    assert "| `sgemm_naive` | " in page and "| cuBLAS | " in page
