"""On the GPU: CUDA graphs (docs/verification.md#cuda-graphs). A kernel whose launch captures and replays right
passes; one whose call waits for its stream cannot be captured and passes with that answer, flagged; one that copies
its last result when captured fails when its graph is replayed on new values, named. The bundled kernels all capture
and replay right. Needs a CUDA device."""

from __future__ import annotations

import json
import shutil

import pytest

from support import ROOT, TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files, run_pytest_in

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = "256x256x256,384x640x512"


@pytest.fixture(scope="module")
def graphs_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("graphs")
    # -vv after run_kernel_files' -q: the full timing table, a row per timed case
    return run_kernel_files(work, TESTS / "kernels_graphs", ("graphs.py",), "--gemm-shapes", SHAPES, "-vv")


def _names(kernel: str) -> set[str]:
    return {f"{kernel}[fp32-{shape}]" for shape in SHAPES.split(",")}


def test_a_launch_that_captures_passes_and_one_that_waits_passes_flagged(graphs_run):
    outcomes = outcomes_in(graphs_run)
    names = _names("plain") | _names("synced")
    assert {n: outcomes.get(n) for n in names} == dict.fromkeys(names, "PASSED"), graphs_run[-4000:]
    rows = [line for line in graphs_run.splitlines() if line.startswith(("plain ", "synced "))]
    flagged = [line.split()[0] for line in rows if "no CUDA graph" in line]
    assert flagged == ["synced", "synced"], rows  # its timed cases at alpha = 1, beta = 0, one a shape
    assert "CUDA graphs: 2 case(s) captured into one and replayed right; 2 could not be captured (no CUDA graph" in (
        graphs_run
    )


def test_a_launch_that_copies_when_captured_fails_when_its_graph_is_replayed_on_new_values(graphs_run):
    outcomes = outcomes_in(graphs_run)
    names = _names("shortcut_when_captured")
    assert {n: outcomes.get(n) for n in names} == dict.fromkeys(names, "FAILED"), graphs_run[-4000:]
    for name in names:
        text = failure_section(graphs_run, name)
        assert "wrong when replayed from a CUDA graph: " in text, text
        assert "in C after replay 2 of a CUDA graph of one launch, A's rows negated" in text, text
        assert "(its own launches are right)" in text, text


def test_the_bundled_kernels_capture_and_replay_right(tmp_path):
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    out = run_pytest_in(tmp_path, "--gemm-kernels", "kernels/", "--gemm-shapes", "256x256x256", "-q")
    line = next((x for x in out.splitlines() if x.startswith("CUDA graphs: ")), "")
    assert line.endswith("0 could not be captured (no CUDA graph)"), out[-4000:]
    assert " passed" in out.splitlines()[-1] and "failed" not in out.splitlines()[-1], out[-4000:]


def test_the_graph_timer_times_replays_and_says_where_capture_is_refused(tmp_path):
    """docs/timing.md (--gemm-timer graph): a .cu kernel's and a Python kernel's launches are timed as graph replays;
    one whose call waits for its stream is timed by the events, and the run says why."""
    shutil.copy(ROOT / "kernels" / "01_naive.cu", tmp_path / "naive.cu")
    shutil.copy(TESTS / "kernels_graphs" / "graphs.py", tmp_path / "graphs.py")
    one = ["-k", "not a0.7 and not a-1.5 and not shortcut", "--gemm-max-time", "0.3"]
    args = ["--gemm-shapes", "256x256x256", "--gemm-timer", "graph", *one, "--benchmark-json", "run.json", "-q"]
    out = run_pytest_in(tmp_path, "--gemm-kernels", "naive.cu", "graphs.py", *args)
    saved = json.loads((tmp_path / "run.json").read_text())["benchmarks"]
    timers = {b["name"]: (b["extra_info"]["gemm"]["timer"], b["extra_info"]["gemm"]["timer_note"]) for b in saved}
    assert {"sgemm_naive[fp32-256x256x256]", "plain[fp32-256x256x256]", "synced[fp32-256x256x256]"} <= set(timers), (
        sorted(timers),
        out[-4000:],
    )
    assert timers["sgemm_naive[fp32-256x256x256]"] == ("graph", ""), out[-4000:]
    assert timers["plain[fp32-256x256x256]"] == ("graph", ""), out[-4000:]
    timer, note = timers["synced[fp32-256x256x256]"]
    assert timer == "events" and note.startswith("its launch could not be captured: "), note
    assert "1 case(s) timed with CUDA events, not CUDA graph replays: its launch could not be captured" in out
