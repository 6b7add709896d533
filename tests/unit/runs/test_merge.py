"""Merged runs (runs/merge.py, runs/plan.py): a merged run keeps what each run said, the plan comes from the times the
runs measured, and runs saved before these keys existed still read."""

from __future__ import annotations

import json

from pytest_gemm.records.result import CaseResult
from pytest_gemm.runs.data import KernelFileRun, RunData, Shards
from pytest_gemm.runs.merge import merge_runs, prunable_files
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
    assert prunable_files(merged) == ["kernels/01_naive.cu"]  # step 2 was not selected whole
    assert prunable_files(merge_runs([("a.json", a)], allow_partial=True).data) == []  # half a suite prunes nothing
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
