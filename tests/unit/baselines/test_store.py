"""Baseline files (baselines/store.py): names, saving and loading, failed writes, unreadable files, another GPU's file,
and merging entries."""

from __future__ import annotations

import json
import os

import pytest

from pytest_gemm.baselines.store import (
    BaselineError,
    BaselineFile,
    OtherGpuError,
    gpu_slug,
    load,
    merge,
    render,
    save,
)

from support.baselines import H100, baseline_entry


def test_gpu_slug():
    assert gpu_slug(H100) == "nvidia-h100-80gb-hbm3"
    assert gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
    with pytest.raises(BaselineError):
        gpu_slug("!!!")


def test_a_gpu_name_whose_file_name_would_be_too_long_names_no_file():
    """A name of 150 characters whose slug doubles ('İ' lowers to 'i' and a combining dot): over 200 characters,
    too long for the baseline file's lock file (``.<slug>.json.lock``) on a file system of 255-byte names."""
    assert len(gpu_slug("G" * 200)) == 200
    with pytest.raises(
        BaselineError, match=r"^cannot name a baseline file after the GPU 'İİİ.*\(over 200 characters\)$"
    ):
        gpu_slug("İ" * 150)


def test_save_and_load_round_trip_with_stable_sorted_text(tmp_path):
    path = tmp_path / "baselines" / "nvidia-h100-80gb-hbm3.json"
    baseline = BaselineFile(path, H100, {"b::k[x]": baseline_entry(), "a::k[y]": baseline_entry()})
    save(baseline)
    text = path.read_text()
    assert text == render(load(path, gpu=H100)) and text.endswith("}\n")
    assert text.index('"a::k[y]"') < text.index('"b::k[x]"')  # sorted keys: diffs review well
    assert json.loads(text)["schema"] == 1
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left behind


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    save(BaselineFile(path, H100, {"a::k[y]": baseline_entry()}))
    before = path.read_text()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save(BaselineFile(path, H100, {}))
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == [path.name]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 2, "gpu": "x", "entries": {}}', "schema version 2 is not one this pytest-gemm reads (1)"),
        ('{"schema": 1, "gpu": 3, "entries": {}}', "expected 'gpu' (a string) and 'entries' (an object)"),
        ('{"schema": 1, "gpu": "x", "entries": {"k": {"ratio": 1}}}', "entry 'k': missing ab, ci_s, dtype"),
        ("[]", "expected a JSON object"),
    ],
)
def test_unreadable_files_are_errors_that_name_the_file(tmp_path, text, message):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        load(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)
    assert path.read_text() == text  # never touched by reading


def test_a_baseline_from_another_gpu_model_is_never_used(tmp_path):
    path = tmp_path / "x.json"
    save(BaselineFile(path, "NVIDIA A100-SXM4-80GB", {}))
    with pytest.raises(OtherGpuError, match="recorded on 'NVIDIA A100-SXM4-80GB', not on this GPU"):
        load(path, gpu=H100)
    assert load(tmp_path / "missing.json") is None


def test_merge_reports_added_changed_and_removed():
    baseline = BaselineFile(None, H100, {"old": baseline_entry(), "same": baseline_entry(), "moved": baseline_entry()})
    changes = merge(
        baseline,
        {"same": baseline_entry(), "moved": baseline_entry(scale=1.1), "new": baseline_entry()},
        remove=["old", "same"],
    )
    assert (changes.added, changes.changed, changes.removed) == (["new"], ["moved"], ["old"])
    assert sorted(baseline.entries) == ["moved", "new", "same"]  # a key both new and stale is kept
    assert not merge(baseline, {"same": baseline_entry()})
