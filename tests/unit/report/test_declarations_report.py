"""A kernel's declared storage orders and accumulation show in what a user reads: the failure text, the timing
tables, the HTML report and the markdown summary; saved runs keep them."""

from __future__ import annotations

import dataclasses
import json

from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.case_record import CaseRecord
from pytest_gemm.records.outcome import Outcome
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.storage import Storage
from pytest_gemm.records.verdicts import Verdict
from pytest_gemm.report.failure import diagnosis_lines, failure_text, kernel_declarations
from pytest_gemm.report.html import page
from pytest_gemm.report.markdown import markdown, summary_cases
from pytest_gemm.report.tables import dtype_label, timing_tables
from pytest_gemm.runs.data import RunData
from pytest_gemm.runs.saved import read_run, run_json
from pytest_gemm.specs.cases import AlphaBeta, Case
from pytest_gemm.specs.header import spec_from_mapping

from support import ROOT, recorded_outcome, recorded_record, recording

GPU = recording()["facts"]
TIMED = "01_naive.cu::sgemm_naive[fp32-512x512x512]"
HEADER = {
    "entry": "k",
    "args": ["M", "N", "K", "A", "B", "C"],
    "block": [16, 16],
    "grid": ["cdiv(N, 16)", "cdiv(M, 16)"],
}
DECLARED = {"dtypes": ["fp16"], "storage": {"B": "NxK", "C": "NxM"}, "accumulate": "fp16"}


def _cases(**header) -> list[Case]:
    spec = spec_from_mapping({**HEADER, "dtypes": ["fp32"], **header}, path="k.cu")
    return [Case(spec, v, spec.dtypes[0], Shape(512, 512, 512), AlphaBeta(1.0, 0.0)) for v in spec.variants()]


def _failed(case: Case) -> CaseResult:
    """The case judged from a recorded outcome whose output was wrong."""
    outcome = recorded_outcome(TIMED)
    verification = outcome.verification
    wrong = dataclasses.replace(verification.kernel, bad=7, max_ratio=3.0)
    return judge_outcome(case, f"k.cu::{case.name}", Outcome(dataclasses.replace(verification, kernel=wrong)), GPU)


def _timed(case: Case) -> CaseRecord:
    result = judge_outcome(case, f"k.cu::{case.name}", recorded_outcome(TIMED), GPU)
    assert result.timing is not None
    return result.timing


def test_the_failure_text_names_the_declared_orders_and_accumulation():
    (case,) = _cases(**DECLARED)
    result = _failed(case)
    d = result.diagnosis
    assert d.kind == Verdict.WRONG_OUTPUT and d.declared.storage == Storage(B="NxK", C="NxM")
    assert d.declared.accumulate == "fp16"
    text = failure_text(case.name, result, "pytest k.cu")
    assert "  declared in the header: storage A MxK, B NxK, C NxM (each matrix as it lies in memory" in text
    assert '  declared in the header: accumulate = "fp16": judged by fp16 accumulation\'s error bound' in text
    # the default says nothing
    (plain,) = _cases()
    result = _failed(plain)
    assert result.diagnosis.declared.default
    assert "declared in the header" not in failure_text(plain.name, result, "pytest k.cu")


def test_a_swept_order_is_each_cases_own_and_the_run_says_the_kernel_declares_both():
    cases = _cases(params={"B_NxK": [0, 1]}, layout="col")
    assert [_failed(c).diagnosis.declared.storage.text for c in cases] == ["A KxM, B KxN, C NxM", "A KxM, B NxK, C NxM"]
    assert kernel_declarations(cases[0].spec) == [
        "storage A KxM, B KxN or NxK, C NxM (each matrix as it lies in memory: rows of contiguous elements)"
    ]
    assert kernel_declarations(_cases(params={"B_NxK": [0]})[0].spec) == []  # swept over row-major only
    (fp16,) = _cases(**{**DECLARED, "storage": {}})
    assert [line.split(":")[0] for line in kernel_declarations(fp16.spec)] == ['accumulate = "fp16"']


def test_storage_text_reads_back_and_anything_else_is_refused():
    for storage in (Storage(), Storage(B="NxK"), Storage.of_layout("col")):
        assert Storage.of_text("" if storage.is_default else storage.text) == storage
    for text in ("A MxN", "B NxK, D MxN", "nonsense"):
        try:
            Storage.of_text(text)
        except ValueError as exc:
            assert "expected storage orders such as" in str(exc)
        else:
            raise AssertionError(text)


def test_tables_the_report_and_the_summary_show_a_declared_fp16_accumulation():
    """One rule (report.tables.dtype_label) says it wherever the dtype is shown."""
    (case,) = _cases(**DECLARED)
    record = _timed(case)
    assert record.accumulate == "fp16" and dtype_label(record.dtype, record.accumulate) == "fp16 (fp16 acc)"
    fp32 = recorded_record(TIMED)
    assert fp32.accumulate == ""
    lines = timing_tables([record, fp32], GPU)
    assert "fp16 (fp16 acc):" in lines and "fp32:" in lines
    assert lines[lines.index("fp16 (fp16 acc):") + 2].split()[:2] == ["k", "512x512x512"]  # its own table
    assert lines[lines.index("fp32:") + 2].split()[0] == "sgemm_naive"
    condensed = timing_tables([record, fp32], GPU, full=False)
    assert "fp16 (fp16 acc):" in condensed
    data = RunData.of_timed(GPU, [record, fp32])
    html = page(data, [], {})
    assert "<h3>fp16 (fp16 acc): 1 case(s)</h3>" in html and "<h3>fp32: 1 case(s)</h3>" in html
    summary = markdown(summary_cases(data.tests))
    (row,) = [line for line in summary.splitlines() if record.test in line]
    assert row.endswith("| fp16 (fp16 acc) |")
    (other,) = [line for line in summary.splitlines() if fp32.test in line]
    assert "acc" not in other


def test_a_failed_case_shows_its_declarations_in_the_report_and_summary():
    (case,) = _cases(**DECLARED)
    result = _failed(case)
    test = f"k.cu::{case.name}"
    data = RunData(GPU, tests={test: result})
    html = page(data, [], {})
    assert "<li>declared in the header: storage A MxK, B NxK, C NxM" in html
    assert "<li>declared in the header: accumulate = &quot;fp16&quot;" in html
    assert "fp16 (fp16 acc)" in markdown(summary_cases(data.tests))
    assert diagnosis_lines(result.diagnosis)[0].startswith("wrong values")


def test_saved_runs_keep_the_declarations_and_older_runs_still_load(tmp_path):
    (case,) = _cases(**DECLARED)
    record, failed = _timed(case), _failed(case)
    data = RunData.of_timed(GPU, [record])
    data.tests["k.cu::k[failed]"] = failed
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_json(data)))
    back = read_run(path)
    assert back.records == [record] and back.records[0].accumulate == "fp16"
    assert back.failures["k.cu::k[failed]"].diagnosis == failed.diagnosis
    # a record and a diagnosis saved before the fields existed read with the defaults
    saved = record.to_dict()
    del saved["accumulate"]
    assert CaseRecord.from_dict(saved).accumulate == ""
    older = failed.to_dict()
    del older["diagnosis"]["declared"]
    assert CaseResult.from_dict(older).diagnosis.declared.default
    # a format-2 run kept the declarations flat, the orders in words: read into the typed record
    flat = {**older["diagnosis"], "storage": "A MxK, B NxK, C NxM", "accumulate": "fp16"}
    path.write_text(json.dumps({**run_json(data), "gemm": {**run_json(data)["gemm"], "format": 2,
                                "tests": {"k.cu::k[failed]": {**older, "diagnosis": flat}}}}))  # fmt: skip
    assert read_run(path).failures["k.cu::k[failed]"].diagnosis.declared == failed.diagnosis.declared
    old = read_run(ROOT / "docs/data/h100-2026-11-22-main-job.json")
    assert old.records and all(r.accumulate == "" for r in old.records)
    assert "acc)" not in "\n".join(timing_tables(old.records, old.gpu))
