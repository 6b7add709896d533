"""Merged runs (runs/merge.py, runs/plan.py): a merged run keeps what each run said, the plan comes from the times the
runs measured, and runs saved before these keys existed still read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_gemm.judge.gate import GatePolicy, judge
from pytest_gemm.judge.verdict import confirmed, final, needs_confirming
from pytest_gemm.records.result import CaseResult
from pytest_gemm.runs.data import KernelFileRun, RunData, Shards
from pytest_gemm.runs.merge import merge_runs, prunable_files, regate
from pytest_gemm.runs.plan import plan_lines
from pytest_gemm.runs.saved import read_run, run_json

from support import recorded_records, recording

# -- the rules, on saved runs built from recorded records --------------------------------------------
SETTINGS = {"seed": 0, "threshold": 0.05, "gate-metric": "ratio", "hot-cache": False, "timed": True}


def test_the_merged_run_keeps_what_each_run_said():
    records = recorded_records()
    first, second = records[:1], records[1:]
    a = RunData.of_timed({}, first, version="1", settings=SETTINGS, shard=Shards((1,), 2), wall_s=10.0)
    a.files = {"kernels/01_naive.cu": KernelFileRun("0" * 64, True)}
    b = RunData.of_timed({}, second, version="1", settings=SETTINGS, shard=Shards((2,), 2), wall_s=12.0)
    b.files = {
        "kernels/01_naive.cu": KernelFileRun("0" * 64, True),
        "kernels/02_smem_tiling.cu": KernelFileRun("", False),
    }
    merged = merge_runs([("a.json", a), ("b.json", b)]).data
    assert merged.shard is None and [r.test for r in merged.records] == [r.test for r in first + second]
    assert prunable_files(merged.files, sharded=merged.shard is not None) == ["kernels/01_naive.cu"]  # step 2: part
    half = merge_runs([("a.json", a)], allow_partial=True).data
    assert prunable_files(half.files, sharded=half.shard is not None) == []  # half a suite prunes nothing
    assert any(n.startswith("merged from b.json (shard 2 of 2, 2 tests)") for n in merged.notes)


def test_the_plan_comes_from_the_times_the_runs_measured():
    def run(shard: int, seconds: list[float], wall: float) -> RunData:
        tests = {
            f"k.cu::k[{shard}-{i}]": CaseResult("passed", duration_s=s, kind="case") for i, s in enumerate(seconds)
        }
        return RunData({}, tests=tests, version="1", settings=SETTINGS, shard=Shards((shard,), 2), wall_s=wall)

    runs = [("a.json", run(1, [60.0] * 5, 330.0)), ("b.json", run(2, [60.0] * 5, 320.0))]
    lines = plan_lines(runs, merge_runs(runs).data, 600)
    assert lines[0] == (
        "plan: 10 tests took 600.0 s in tests (600.0 s in 10 GPU tests, 60.00 s each on average; "
        "the longest test 60.0 s)"
    )
    assert lines[1] == "  a.json (shard 1 of 2): 300.0 s in 5 tests, 330.0 s from start to saved"
    assert lines[3].startswith(
        "plan: for at most 600 s per shard: 2 shard(s) (600.0 s of tests spread over 570.0 s each"
    )
    assert plan_lines(runs, merge_runs(runs).data, 60)[-1].startswith("plan: no shard count keeps a shard under 60 s")
    assert plan_lines([("c.json", RunData({}))], RunData({}), 600) == []  # no times saved: no plan


def test_a_run_saved_before_these_keys_existed_is_still_read(tmp_path):
    old = json.loads(json.dumps(run_json(RunData.of_timed(dict(recording()["facts"]), recorded_records()))))
    for key in ("pytest_gemm", "settings", "shard", "files", "tests", "wall_s"):
        del old["gemm"][key]
    (tmp_path / "old.json").write_text(json.dumps(old))
    data = read_run(tmp_path / "old.json")
    assert len(data.records) == 3 and data.version == "" and data.shard is None
    assert [r.outcome for r in data.tests.values()] == ["passed"] * 3  # the timed cases are the tests it says


# -- gating a saved run again: the verdict pytest made, made the same way -----------------------------
def _said(record, gate) -> str:
    return f"merge gate: {record.name} {gate.verdict}"


@pytest.mark.parametrize("unchecked", ["", "cupti-python is not installed"])
def test_merge_gates_a_case_as_pytest_did(unchecked):
    """One verdict: a saved case gated again is made final as pytest made it (judge.verdict.final). Under
    --gemm-fail-new a case with no baseline entry fails, but one whose streams were not checked makes no speed claim:
    it is not gated, and stays passed, in merge as in pytest."""
    record = dataclasses.replace(recorded_records()[0], unchecked_streams=unchecked)
    policy = GatePolicy(fail_new=True)

    def gate(r):
        return judge(r, None, policy=policy, baseline_file="baselines/h100.json", file_missing=True)

    in_pytest = final(CaseResult("passed", kind="case", timing=record), gate)
    data = RunData.of_timed({}, [record], settings={"fail-new": True})
    regate(data, gate, _said)
    merged = data.tests[record.test]
    assert (merged.outcome, merged.timing) == (in_pytest.outcome, in_pytest.timing)
    assert merged.outcome == ("passed" if unchecked else "failed")
    assert merged.message == ("" if unchecked else f"merge gate: {record.name} new")
    assert (merged.timing.gate is None) == bool(unchecked)


def test_recording_sets_the_gate_aside_and_a_failure_of_its_own_stays():
    """Gated with no gate (as when recording baselines), a case the gate failed passes again, its verdict gone; a
    case that failed for another reason stays failed."""
    record, other = recorded_records()[:2]
    verdict = judge(record, None, policy=GatePolicy(fail_new=True))
    data = RunData.of_timed({}, [record.with_gate(verdict), other])
    data.tests[other.test] = dataclasses.replace(data.tests[other.test], outcome="failed", message="teardown")
    assert data.tests[record.test].failed
    regate(data, None, _said)
    assert data.tests[record.test] == CaseResult("passed", kind="case", timing=record)
    assert (data.tests[other.test].outcome, data.tests[other.test].message) == ("failed", "teardown")


@pytest.mark.parametrize(("again", "outcome"), [(1.004, "passed"), (1.07, "failed")])
def test_a_flagged_cases_re_timing_is_kept_when_a_run_is_gated_again(again, outcome):
    """docs/baselines.md#the-runs-false-alarms: a case pytest's gate flagged, then timed again in a fresh worker, is
    gated again by merge with that re-timing: not confirmed, it passes; confirmed, it fails, in merge as in pytest."""
    from support.baselines import baseline_entry, timed_record

    record = timed_record(1.06)

    def gate(r):
        return judge(r, baseline_entry())

    flagged = final(CaseResult("passed", kind="case", timing=record), gate)
    assert needs_confirming(flagged) and flagged.failed
    in_pytest = confirmed(flagged, gate(timed_record(again)))
    assert in_pytest.outcome == outcome and not needs_confirming(in_pytest)
    data = RunData.of_timed({}, [in_pytest.timing])
    data.tests[record.test] = in_pytest
    regate(data, gate, _said)
    merged = data.tests[record.test]
    assert (merged.outcome, merged.timing.gate.verdict) == (outcome, in_pytest.timing.gate.verdict)
    assert merged.timing.gate.confirmed_change == pytest.approx(again - 1)
