"""Baseline entries that hold records of several GPUs of one model, and the gate's choice among them.

GPUs of one model differ: on H100s with the same code, cuBLAS at half precision and 1024^3 ran 4%
faster on some than on others, and a cluster kernel 8% slower, which failed the main job with
false regressions on a GPU other than the one that recorded the baselines.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_gemm.baselines.gpus import MAX_GPUS
from pytest_gemm.baselines.store import BaselineError, BaselineFile, entry_from_record, load, merge, save
from pytest_gemm.judge.gate import compared_record, judge
from pytest_gemm.records.case_record import CaseRecord, gpu_identity
from pytest_gemm.report.regression import regression_text
from pytest_gemm.runs.saved import read_run

from support import TESTS, recorded_record

H100 = "NVIDIA H100 80GB HBM3"
RECORDED = {"pytest_gemm": "0.2.0", "cupy": "14.2.0", "cublas": "13.1.0", "driver": "580.159.04", "date": "2026-11-22"}
DATA = TESTS / "data"
A, B, C = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"


def _on(gpu: str, scale: float = 1.0, **extra):
    """The recorded naive 4096^3 case, timed on GPU ``gpu`` (an identity), its kernel times scaled."""
    row = recorded_record("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]")
    scaled = {k: tuple(v * scale for v in getattr(row, k)) for k in ("ratio_ci", "ci_s")}
    return dataclasses.replace(
        row, ratio=row.ratio * scale, median_s=row.median_s * scale, source_sha256="abc", gpu_id=gpu, **scaled, **extra
    )


def _entry_of(*recordings: tuple[str, float], recorded=RECORDED) -> dict:
    """One entry recorded on each (GPU, scale) in turn, as successive --gemm-update-baselines runs make it."""
    baseline = BaselineFile(None, H100)
    for i, (gpu, scale) in enumerate(recordings):
        merge(baseline, {"k": entry_from_record(_on(gpu, scale), {**recorded, "date": f"2026-11-{10 + i}"})})
    return baseline.entries["k"]


def test_gpu_identity_is_a_short_hash_of_the_uuid():
    one = gpu_identity({"uuid": "GPU-7e3ccd97-f329-36bb-3523-676041316be9"})
    assert len(one) == 12 and one == gpu_identity({"uuid": "GPU-7e3ccd97-f329-36bb-3523-676041316be9"})
    assert "7e3ccd97" not in one and one != gpu_identity({"uuid": "GPU-74e22483-08b4-20c5-da56-47653a7d24db"})
    assert gpu_identity({}) == gpu_identity({"uuid": None}) == ""


def test_an_entry_keeps_each_gpus_record_when_recorded_alike():
    entry = _entry_of((A, 1.0), (B, 1.08))
    assert sorted(entry["gpus"]) == [A, B]
    assert entry["ratio"] == entry["gpus"][B]["ratio"]  # the top level is the latest recording
    assert entry["gpus"][A]["ratio"] == pytest.approx(entry["ratio"] / 1.08)
    assert entry["gpus"][A]["date"] == "2026-11-10" and entry["gpus"][B]["date"] == "2026-11-11"
    again = _entry_of((A, 1.0), (B, 1.08), (A, 1.02))  # a GPU recording again replaces its own record only
    assert sorted(again["gpus"]) == [A, B]
    assert again["gpus"][A]["ratio"] == pytest.approx(again["gpus"][B]["ratio"] * 1.02 / 1.08)


@pytest.mark.parametrize(
    "change",
    [
        {"source_sha256": "def"},
        {"recorded": {**RECORDED, "cublas": "13.2.0"}},
        {"recorded": {**RECORDED, "pytest_gemm": "0.3.0"}},
        {"recorded": {**RECORDED, "timer": "the other"}},
    ],
    ids=["source", "cublas", "pytest-gemm", "timer"],
)
def test_records_made_differently_are_dropped_not_mixed(change):
    baseline = BaselineFile(None, H100, {"k": _entry_of((A, 1.0), (B, 1.05))})
    fresh = entry_from_record(_on(C, 1.2), {**RECORDED, "date": "2026-11-20"})
    if "source_sha256" in change:
        fresh["source_sha256"] = change["source_sha256"]
    else:
        timer = fresh["recorded"]["timer"]
        other = {"the other": "events" if timer == "cupti" else "cupti"}
        fresh["recorded"] = {**fresh["recorded"], **{k: other.get(v, v) for k, v in change["recorded"].items()}}
        fresh["recorded"]["date"] = "2026-11-20"
    changes = merge(baseline, {"k": fresh})
    assert changes.changed == ["k"] and sorted(baseline.entries["k"]["gpus"]) == [C]


def test_an_entry_keeps_the_newest_records():
    gpus = [f"{i:012d}" for i in range(MAX_GPUS + 3)]
    entry = _entry_of(*((g, 1.0 + i / 100) for i, g in enumerate(gpus)))
    assert sorted(entry["gpus"]) == sorted(gpus[-MAX_GPUS:])


def test_a_run_without_a_gpu_identity_replaces_the_entry():
    baseline = BaselineFile(None, H100, {"k": _entry_of((A, 1.0), (B, 1.05))})
    merge(baseline, {"k": entry_from_record(_on(""), RECORDED)})
    assert "gpus" not in baseline.entries["k"]


def test_a_gpu_is_compared_with_its_own_record():
    entry = _entry_of((A, 1.0), (B, 1.10))
    own = judge(_on(A, 1.07), entry)  # 7% slower than its own record, though faster than B's
    assert (own.verdict, own.compared_with) == ("regressed", "own") and own.change == pytest.approx(0.07)
    assert judge(_on(B, 1.12), entry).verdict == "same"
    assert judge(_on(B, 0.99), entry).verdict == "improved"


def test_another_gpu_is_compared_with_the_range_of_the_recorded_ones():
    entry = _entry_of((A, 1.0), (B, 1.08))
    inside = judge(_on(C, 1.05), entry)
    assert (inside.verdict, inside.compared_with, inside.change) == ("same", "others", 0.0)
    assert inside.notes == ()
    near = judge(_on(C, 1.10), entry)  # 1.9% above the slowest record (within the threshold), 10% above the fastest
    assert near.verdict == "same" and near.change == pytest.approx(1.10 / 1.08 - 1)
    # 3.7% above the slowest: past the threshold, but within the spread between GPUs for a run of 573 cases
    assert judge(_on(C, 1.12), entry, cases=573).verdict == "same"
    slower = judge(_on(C, 1.20), entry)
    assert slower.verdict == "regressed" and slower.change == pytest.approx(1.20 / 1.08 - 1)
    lo, hi = entry["gpus"][A]["ratio"], entry["gpus"][B]["ratio"]
    assert slower.notes == (
        f"other GPUs: this GPU has no record of its own; the 2 GPU(s) recorded span {lo:.4g} to {hi:.4g}, "
        "and it was compared with the slowest",
    )
    faster = judge(_on(C, 0.93), entry)
    assert faster.verdict == "improved" and faster.change == pytest.approx(-0.07)
    assert faster.notes[-1].endswith("compared with the fastest")
    assert judge(_on("", 1.12), entry).compared_with == "others"  # no identity (no NVML): the range too


def test_the_regression_text_shows_the_record_compared():
    entry = _entry_of((A, 1.08), (B, 1.0))  # the slowest record is the older one
    row = _on(C, 1.20)
    result = judge(row, entry)
    text = regression_text(row, compared_record(entry, row, result), result, "pytest 'x' ...")
    slowest = entry["gpus"][A]
    assert f"{slowest['ratio']:.4g} [{slowest['ratio_ci'][0]:.4g}, {slowest['ratio_ci'][1]:.4g}]" in text
    assert "+11.1% against its baseline" in text and "baseline recorded 2026-11-10" in text
    assert "note: other GPUs: this GPU has no record of its own" in text


def test_the_record_shown_is_the_side_of_the_range_the_change_is_from():
    entry = _entry_of((A, 1.0), (B, 1.08))
    below = _on(C, 0.97)  # 3% under the fastest: the same, measured from the fastest
    result = judge(below, entry)
    assert result.verdict == "same" and result.change == pytest.approx(-0.03)
    assert compared_record(entry, below, result)["ratio"] == entry["gpus"][A]["ratio"]
    above = _on(C, 1.10)
    assert compared_record(entry, above, judge(above, entry))["ratio"] == entry["gpus"][B]["ratio"]


def test_the_kernel_time_confirms_against_the_range_of_the_recorded_times():
    """GPU A: ratio 1.00 with kernel time 1.10; GPU B: ratio 1.08, time 1.00 (its cuBLAS slower). A third GPU at
    ratio 1.20 whose kernel time (1.05) is inside the recorded times has a faster cuBLAS, not a slower kernel."""
    entry = _entry_of((A, 1.0), (B, 1.08))
    a, b = entry["gpus"][A], entry["gpus"][B]
    a["median_s"], a["ci_s"] = a["median_s"] * 1.10, [v * 1.10 for v in a["ci_s"]]
    b["median_s"], b["ci_s"] = b["median_s"] / 1.08, [v / 1.08 for v in b["ci_s"]]
    fast_cublas = _on(C, 1.20)
    fast_cublas = dataclasses.replace(fast_cublas, median_s=fast_cublas.median_s / 1.20 * 1.05)
    result = judge(fast_cublas, entry)
    assert result.verdict == "same" and result.notes[0].startswith("reference moved")
    slower = dataclasses.replace(fast_cublas, median_s=fast_cublas.median_s / 1.05 * 1.20)
    assert judge(slower, entry).verdict == "regressed"


def test_an_old_entry_without_gpu_records_is_compared_as_before():
    entry = entry_from_record(_on(""), RECORDED)
    assert "gpus" not in entry
    result = judge(_on(A, 1.10), entry)
    assert (result.verdict, result.compared_with) == ("regressed", "single")


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ([1, 2], "'gpus' must be an object of per-GPU objects"),
        ({"aa": {"ratio": -1}}, "gpus['aa']: ratio must be a positive number"),
        ({"aa": {"ratio": 2.0, "median_s": 1e-3, "ratio_ci": [1.9], "ci_s": [1, 2]}}, "ratio_ci must be a list"),
    ],
)
def test_a_malformed_gpu_record_names_the_entry(tmp_path, gpus, message):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    save(BaselineFile(path, H100, {"k": entry_from_record(_on(A), RECORDED)}))
    data = json.loads(path.read_text())
    data["entries"]["k"]["gpus"] = gpus
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=f"entry 'k': .*{message.replace('[', '.').replace(']', '.')}"):
        load(path, gpu=H100)


def test_a_record_round_trips_through_the_file(tmp_path):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    entry = _entry_of((A, 1.0), (B, 1.08))
    save(BaselineFile(path, H100, {"k": entry}))
    assert load(path, gpu=H100).entries["k"] == entry


def test_a_saved_record_keeps_its_gpu_and_how_it_was_compared():
    row = _on(C, 1.20)
    judged = row.with_gate(judge(row, _entry_of((A, 1.0), (B, 1.08))))
    back = CaseRecord.from_dict(json.loads(json.dumps(judged.to_dict())))
    assert (back.gpu_id, back.gate.compared_with) == (C, "others")
    old = judged.to_dict()
    del old["gpu_id"], old["gate"]["compared_with"]  # saved before they existed
    back = CaseRecord.from_dict(old)
    assert (back.gpu_id, back.gate.compared_with) == ("", "")


def test_a_saved_run_of_one_gpu_gives_its_records_that_gpus_identity(tmp_path):
    run = json.loads((DATA / "h100_run.json").read_text())
    facts = run["machine_info"]["gpu"]
    for bench in run["benchmarks"]:
        bench["extra_info"]["gemm"].pop("gpu_id", None)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    records = read_run(path).records
    assert records and {r.gpu_id for r in records} == {gpu_identity(facts)}
    facts["visible_devices"] = [{"name": facts["name"]}] * 2  # two GPUs could have run them: not said
    path.write_text(json.dumps(run))
    assert {r.gpu_id for r in read_run(path).records} == {""}
