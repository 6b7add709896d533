"""A broken kernel costs one case, not the run: every fault path through the real plugin and worker processes.

CUDA errors, refused launches and Python exceptions are outcomes recorded on an H100 (served by
tests/replay_backend.py); hangs and deaths are real: the replayed worker sleeps, exits or kills itself.
No GPU needed. The same fixtures run on the GPU in tests/gpu/test_gpu.py.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from support import FAULTS, failure_reports

NAIVE = "kernels/01_naive.cu::sgemm_naive"
GOOD = [f"{NAIVE}[fp32-512x512x512]", f"{NAIVE}[fp32-4096x4096x4096]", f"{NAIVE}[fp32-512x512x512-a0.7b1.3]"]
STICKY = [f"kernels/sticky.cu::{k}[fp32-256x256x256]" for k in ("wild_write", "misaligned_load", "trap")]
HOG = "kernels/registers.cu::register_hog[fp32-256x256x256]"
RAISES = "kernels/py_faults.py::raises[fp32-256x256x256]"


@pytest.fixture
def faults(replay):
    for name in ("sticky.cu", "registers.cu", "hang.cu", "py_faults.py"):
        shutil.copy(FAULTS / name, replay.path / "kernels" / name)
    replay.makeini("[pytest]\ngemm_shapes = 256,512,4096\n")
    return replay


def _section(output: str, test: str) -> str:
    name = test.split("::")[-1]
    match = re.search(r"_{3,} " + re.escape(name) + r" _{3,}\n(.*?)(?=\n_{3,} |\n=+ )", output, re.DOTALL)
    assert match, f"{name} did not fail:\n{output[-3000:]}"
    return match.group(1)


def _verdicts(result) -> dict[str, str]:
    """Each test's outcome, from the short summary (-rA)."""
    return {test: word for word, test in re.findall(r"^(PASSED|FAILED|SKIPPED) (\S+)", result.stdout.str(), re.M)}


def test_each_fault_fails_its_own_case_with_its_own_reason_and_the_rest_run(faults):
    """Faults interleaved with correct cases: the correct ones pass as they do alone."""
    order = [GOOD[0], STICKY[0], GOOD[1], HOG, STICKY[1], RAISES, STICKY[2], GOOD[2]]
    result = faults.runpytest("--gemm-kernels", *order, "-rA")
    result.assert_outcomes(passed=3, failed=5)
    out = result.stdout.str()
    alone = faults.runpytest("--gemm-kernels", *GOOD, "-rA")
    alone.assert_outcomes(passed=3)

    wild = _section(out, STICKY[0])
    assert wild.startswith(
        "CUDA error while verifying wild_write[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0): "
        "cudaErrorIllegalAddress: an illegal memory access was encountered"
    )
    assert "the CUDA context was lost: the worker that ran this case was replaced" in wild
    assert f"replay: pytest '{STICKY[0]}' --gemm-kernels --gemm-shapes 256x256x256 --gemm-seed 0" in wild
    assert "cudaErrorMisalignedAddress: misaligned address" in _section(out, STICKY[1])
    assert "cudaErrorLaunchFailure: unspecified launch failure" in _section(out, STICKY[2])

    hog = _section(out, HOG)
    assert hog.startswith("cannot launch register_hog[fp32-256x256x256] (M=256, N=256, K=256, alpha=1, beta=0): ")
    assert re.search(r"\b220 registers per thread x 1024 threads per block = 225280 registers\b.* has 65536", hog)
    raised = _section(out, RAISES)
    assert "the Python kernel raised ValueError: this kernel is not written yet" in raised
    assert "py_faults.py:14 in raises: raise ValueError(" in raised  # the kernel's own frame, no internals

    # Three sticky errors: three replacements; the refused launch and the exception keep their worker.
    assert "pytest-gemm: 4 GPU worker process(es); 3 replaced after a case left them unusable (CUDA error: 3)" in out
    assert "Traceback" not in out and "cupy" not in out.lower()
    for good in GOOD:
        assert _verdicts(result)[good] == _verdicts(alone)[good] == "PASSED"


def test_a_hang_times_out_the_worker_is_replaced_and_the_run_goes_on(faults, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512]=hang")
    result = faults.runpytest("--gemm-kernels", GOOD[0], GOOD[1], "--gemm-timeout", "1.5")
    result.assert_outcomes(passed=1, failed=1)
    text = _section(result.stdout.str(), GOOD[0])
    assert text.startswith(
        "sgemm_naive[fp32-512x512x512] (M=512, N=512, K=512, alpha=1, beta=0) timed out after 1.5 s while verifying"
    )
    assert "the worker was killed and replaced; --gemm-timeout (ini gemm_timeout) sets the limit" in text
    result.stdout.fnmatch_lines(["pytest-gemm: 2 GPU worker process(es); 1 replaced * (timed out: 1)"])


def test_the_timeout_has_an_ini_setting_and_is_checked(faults):
    faults.makeini("[pytest]\ngemm_shapes = 512\ngemm_timeout = 7.5\n")
    header = faults.runpytest("--gemm-kernels", "kernels/01_naive.cu", "--collect-only")
    header.stdout.fnmatch_lines(["pytest-gemm: *; GPU work in a worker process, 7.5 s per phase;*"])
    bad = faults.runpytest("--gemm-kernels", "kernels/01_naive.cu", "--gemm-timeout", "soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gemm-timeout / gemm_timeout: expected a number from 0.1 to 86400, got 'soon'*"])


@pytest.mark.parametrize(("act", "said"), [("exit:1", "exit code 1"), ("signal:11", "signal 11 (SIGSEGV)")])
def test_a_worker_that_dies_fails_its_case_and_a_new_one_takes_the_next(faults, monkeypatch, act, said):
    monkeypatch.setenv("REPLAY_ACT", f"01_naive.cu::sgemm_naive[fp32-4096x4096x4096]={act}")
    result = faults.runpytest("--gemm-kernels", *GOOD)
    result.assert_outcomes(passed=2, failed=1)
    text = _section(result.stdout.str(), GOOD[1])
    assert text.startswith("the GPU worker died while verifying sgemm_naive[fp32-4096x4096x4096] (M=4096, ")
    assert text.splitlines()[0].endswith(f"): {said}")
    result.stdout.fnmatch_lines(["pytest-gemm: 2 GPU worker process(es); 1 replaced * (worker died: 1)"])


def test_what_the_worker_prints_is_shown_with_its_case(faults, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512]=print:hello from the kernel")
    result = faults.runpytest("--gemm-kernels", GOOD[0], GOOD[1], "-rP")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*- Captured GPU worker output call -*", "hello from the kernel"])
    assert result.stdout.str().count("hello from the kernel") == 1


def test_exitfirst_and_last_failed_work_with_faults(faults):
    files = ["kernels/sticky.cu", "kernels/registers.cu", "kernels/01_naive.cu", "-m", "gpu", "-k", "not a0.7"]
    first = faults.runpytest("--gemm-kernels", *files, "-x", "--gemm-shapes", "256")
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    again = faults.runpytest("--gemm-kernels", *files, "--lf", "--gemm-shapes", "256")
    again.assert_outcomes(failed=1, passed=0)
    assert "FAILED kernels/sticky.cu::wild_write[fp32-256x256x256]" in again.stdout.str()
    whole = faults.runpytest("--gemm-kernels", *files, "--gemm-shapes", "256,512", "-rs")
    # the naive kernel at 256^3 (two cases) and the four faults at 512^3 are not in the recording: skipped
    whole.assert_outcomes(passed=2, failed=4, skipped=6)
    last = faults.runpytest("--gemm-kernels", *files, "--lf", "--gemm-shapes", "256,512")
    last.assert_outcomes(failed=4, passed=0)


def test_an_impossible_block_fails_before_any_worker_is_asked(faults):
    """A block that depends on the shape fails that case (a fixed one is a collection error)."""
    kernel = Path(faults.path / "kernels" / "01_naive.cu")
    kernel.write_text(kernel.read_text().replace("block = [32, 32]", 'block = ["M // 8", 32]'))
    result = faults.runpytest("--gemm-kernels", GOOD[0])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*01_naive.cu:*key 'block': 64 x 32 = 2048 threads per block for *; CUDA allows 1024"])
    assert "GPU worker process" not in result.stdout.str()


GUARD = """
import sys

TOUCHED = []


class _Guard:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("cupy", "cupy_backends", "pynvml", "cupti") or name.startswith("pytest_gemm.worker."):
            if name != "pytest_gemm.worker.serve":  # the backend's default name is read from here, not run
                TOUCHED.append(name)
        return None


sys.meta_path.insert(0, _Guard())


def pytest_sessionfinish(session):
    import pathlib
    pathlib.Path("imports.txt").write_text("\\n".join(TOUCHED))
"""


def test_the_pytest_process_never_imports_cupy_or_nvml(faults):
    """An import guard in the pytest process: CuPy, NVML and the GPU backend load only in worker processes,
    even for a Python kernel file that imports CuPy at its top."""
    (faults.path / "kernels" / "uses_cupy.py").write_text(
        "import cupy\nfrom pytest_gemm import gemm_kernel\n\n\n@gemm_kernel(dtypes=['fp32'])\n"
        "def k(A, B, C, alpha, beta):\n    C[...] = cupy.matmul(A, B)\n"
    )
    conftest = faults.path / "conftest.py"
    conftest.write_text(GUARD + conftest.read_text())
    result = faults.runpytest("--gemm-kernels", *GOOD, STICKY[0], "kernels/uses_cupy.py", "kernels/sticky.cu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (faults.path / "imports.txt").read_text() == ""


def test_a_worker_that_dies_between_cases_costs_no_case(faults, monkeypatch):
    """Killed from outside while idle (here: it exits 0.2 s after answering, while pytest runs a test of the
    project's own, before which no case is sent ahead, and sets the next case up)."""
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512]=die-later:9")
    conftest = faults.path / "conftest.py"
    conftest.write_text(
        conftest.read_text() + "\n\ndef pytest_runtest_setup(item):\n    import time\n    time.sleep(0.6)\n"
    )
    faults.makepyfile(test_own="def test_own():\n    pass\n")
    result = faults.runpytest("--gemm-kernels", GOOD[0], "test_own.py", *GOOD[1:])
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["pytest-gemm: 2 GPU worker process(es)*"])


def test_a_kernel_that_calls_sys_exit_fails_its_case_with_that(faults, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-4096x4096x4096]=sysexit:3")
    result = faults.runpytest("--gemm-kernels", *GOOD)
    result.assert_outcomes(passed=2, failed=1)
    text = _section(result.stdout.str(), GOOD[1])
    assert text.startswith("sgemm_naive[fp32-4096x4096x4096] (M=4096, N=4096, K=4096, alpha=1, beta=0): ")
    assert "the Python kernel raised SystemExit: 3" in text
    result.stdout.fnmatch_lines(["pytest-gemm: 2 GPU worker process(es)*(kernel raised: 1)"])


def test_timing_that_makes_progress_is_not_cut_off_by_the_time_limit(faults, monkeypatch):
    """The limit is on silence, not on length: the timing loop reports every batch."""
    monkeypatch.setenv("REPLAY_ACT", "01_naive.cu::sgemm_naive[fp32-512x512x512]=slow-timing:4")
    result = faults.runpytest("--gemm-kernels", GOOD[0], "--gemm-timeout", "1", "--gemm-max-time", "0.5")
    result.assert_outcomes(passed=1)


def test_cupy_compiling_its_own_kernels_does_not_run_out_the_cases_time_limit(faults, monkeypatch):
    """3 s inside CuPy's compiler at --gemm-timeout 1: the harness's cost, not the kernel's; a hang still times out."""
    monkeypatch.setenv(
        "REPLAY_ACT",
        f"01_naive.cu::{GOOD[0].split('::')[1]}=slow-cupy-compile:3,01_naive.cu::{GOOD[2].split('::')[1]}=hang",
    )
    result = faults.runpytest("--gemm-kernels", GOOD[0], GOOD[2], "--gemm-timeout", "1", "-rA")
    assert _verdicts(result) == {GOOD[0]: "PASSED", GOOD[2]: "FAILED"}
    assert "timed out after 1 s while verifying" in _section(result.stdout.str(), GOOD[2])


def test_a_worker_that_cannot_start_is_not_retried_for_every_case(faults, monkeypatch):
    monkeypatch.setenv("REPLAY_BROKEN", "the recording is missing")
    result = faults.runpytest("--gemm-kernels", *GOOD, "-m", "gpu")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert failure_reports(result).count("the GPU worker could not start: RuntimeError: the recording is missing") == 3
    assert "2 starts in a row failed; no more are tried in this run" in _section(out, GOOD[2])
    assert "Traceback" not in out


def test_a_gpu_that_fails_when_a_worker_starts_is_blamed_on_the_gpu_not_on_pytest_gemm(faults, monkeypatch):
    """Seen on an H100 that stopped working during a run: the worker's warm-up got cudaErrorUnknown."""
    monkeypatch.setenv("REPLAY_BROKEN", "the worker's warm-up failed: cudaErrorUnknown: unknown error")
    result = faults.runpytest("--gemm-kernels", *GOOD, "-m", "gpu")
    result.assert_outcomes(failed=3)
    reports = failure_reports(result)
    assert (
        reports.count(
            "CUDA error while starting the GPU worker for sgemm_naive[fp32-512x512x512] (M=512, N=512, K=512, alpha=1, "
            "beta=0): the GPU worker could not start: RuntimeError: the worker's warm-up failed: cudaErrorUnknown: "
            "unknown error (the GPU may have stopped working: nvidia-smi, and the Xid lines of the kernel log, "
            "say more)"
        )
        == 1
    )
    assert "internal error" not in reports and "please report" not in reports
    assert "the CUDA context was lost" not in reports and "context survived" not in reports


def test_a_gpu_lost_during_the_run_fails_the_cases_after_it_instead_of_skipping_them(faults, monkeypatch, tmp_path):
    """A GPU that worked and then vanished is a failure: a run that skipped the rest would pass."""
    monkeypatch.setenv("REPLAY_LOST_FILE", str(tmp_path / "lost"))
    monkeypatch.setenv("REPLAY_ACT", f"01_naive.cu::{GOOD[1].split('::')[1]}=lose-gpu")
    result = faults.runpytest("--gemm-kernels", *GOOD, "-m", "gpu", "-rA")
    assert _verdicts(result) == {GOOD[0]: "PASSED", GOOD[1]: "FAILED", GOOD[2]: "FAILED"}
    assert result.ret == 1
    assert _section(result.stdout.str(), GOOD[1]).startswith("the GPU worker died while verifying")
    assert _section(result.stdout.str(), GOOD[2]).startswith(
        "CUDA error while starting the GPU worker for sgemm_naive[fp32-512x512x512-a0.7b1.3] (M=512, N=512, K=512, "
        "alpha=0.7, beta=1.3): the GPU was lost during the run: the NVIDIA driver finds no GPU"
    )
    assert "no CUDA device" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["pytest-gemm: * was lost during the run (the NVIDIA driver finds no GPU); the GPU cases after that failed"]
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["alone", "xdist"])
def test_header_declarations_in_force_are_named_at_the_end(faults, xdist):
    kernel = Path(faults.path / "kernels" / "01_naive.cu")
    text = kernel.read_text().replace(
        'dtypes = ["fp32"]', 'dtypes = ["fp32"]\nalways_reads_c = true\nnondeterministic = "split-K with atomicAdd"', 1
    )
    assert "always_reads_c" in text
    kernel.write_text(text)
    run = faults.runpytest_subprocess if xdist else faults.runpytest
    result = run("--gemm-kernels", GOOD[0], GOOD[2], "--benchmark-skip", "-v", *xdist)  # said with -v
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: kernels/01_naive.cu::sgemm_naive declares always_reads_c = true: C holds finite prior data "
            "in its beta = 0 cases too; nondeterministic (split-K with atomicAdd): its launches are not compared bit "
            "for bit"
        ]
    )


def test_the_replay_command_runs_the_case_again_where_its_shape_is_not_in_the_shape_set(faults):
    first = faults.runpytest("--gemm-kernels", STICKY[0])
    first.assert_outcomes(failed=1)
    (command,) = re.findall(r"replay: (pytest .*)$", failure_reports(first), re.M)
    faults.makeini("[pytest]\ngemm_shapes = 4096\n")  # 256x256x256 is no longer among the shapes run
    again = faults.runpytest(*shlex.split(command)[1:])
    again.assert_outcomes(failed=1)
    assert "CUDA error while verifying wild_write[fp32-256x256x256]" in again.stdout.str()


def test_a_crash_costs_its_case_and_no_start_the_next_case_runs_on_a_standby_worker(faults, monkeypatch, tmp_path):
    """A backend whose start is costly (the GPU's; here one that takes 1 s) gets a standby worker started ahead:
    the case after a crash runs on a worker that had started before the crash, and no worker starts while a case
    is timed (architecture.md#the-boundary)."""
    runs, starts = tmp_path / "runs.jsonl", tmp_path / "starts.jsonl"
    monkeypatch.setenv("REPLAY_STANDBY", "1")
    monkeypatch.setenv("REPLAY_LOG", str(runs))
    monkeypatch.setenv("REPLAY_STARTS", str(starts))
    order = [GOOD[0], STICKY[0], GOOD[1], STICKY[1], GOOD[2]]
    result = faults.runpytest("--gemm-kernels", *order, "-rA")
    assert _verdicts(result) == dict.fromkeys(GOOD, "PASSED") | dict.fromkeys(STICKY[:2], "FAILED")
    result.stdout.fnmatch_lines(["pytest-gemm: 3 GPU worker process(es); 2 replaced * (CUDA error: 2)"])
    cases = [json.loads(line) for line in runs.read_text().splitlines()]
    started = {line["pid"]: line for line in map(json.loads, starts.read_text().splitlines())}
    assert [case["case"].split("/")[-1] for case in cases] == [test.split("/")[-1] for test in order]
    first = min(started.values(), key=lambda start: start["start"])
    assert [start["warmed"] for start in started.values()].count(False) == 1 and not first["warmed"]
    for crash, after in zip(cases[1::2], cases[2::2], strict=True):
        assert after["pid"] != crash["pid"]
        assert started[after["pid"]]["end"] <= crash["start"]  # ready before the crash
    timed = [case for case in cases if case["timing_from"] is not None]
    assert len(timed) == 3
    for case in timed:
        for start in started.values():
            assert start["end"] <= case["timing_from"] or start["start"] >= case["end"]


def test_crashes_that_come_faster_than_a_worker_starts_get_more_standby_workers(faults, monkeypatch, tmp_path):
    """A kernel that crashes at every shape: each crash takes a standby before the one behind it has started, so
    the pool starts more at once (up to three), and every case still gets its own verdict."""
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv("REPLAY_STANDBY", "1")
    monkeypatch.setenv("REPLAY_STARTS", str(starts))
    order = [GOOD[0], *STICKY, GOOD[1]]
    result = faults.runpytest("--gemm-kernels", *order, "-rA")
    assert _verdicts(result) == dict.fromkeys([GOOD[0], GOOD[1]], "PASSED") | dict.fromkeys(STICKY, "FAILED")
    result.stdout.fnmatch_lines(["pytest-gemm: 4 GPU worker process(es); 3 replaced * (CUDA error: 3)"])
    warmed = sorted((s["start"], s["end"]) for s in map(json.loads, starts.read_text().splitlines()) if s["warmed"])
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(warmed))  # two started side by side
    assert len(warmed) <= len(STICKY) + 3  # one for each crash, and at most three kept


def test_the_run_writes_its_end_while_its_worker_exits_and_waits_for_it_before_pytest_ends(faults, monkeypatch):
    """A worker's exit takes time (a CUDA context's teardown: about 1.3 s on an H200). The run asks its workers to end
    as the session ends and writes its end meanwhile (here the terminal summary), then waits for them: none is left
    when pytest ends."""
    exits, summary = faults.path / "exits.jsonl", faults.path / "summary.txt"
    monkeypatch.setenv("REPLAY_EXIT", f"2:{exits}")
    conftest = faults.path / "conftest.py"
    hook = (
        f"def pytest_terminal_summary():\n    import time\n    open({str(summary)!r}, 'w').write(repr(time.time()))\n"
    )
    conftest.write_text(conftest.read_text() + "\n\n" + hook)
    result = faults.runpytest("--gemm-kernels", GOOD[0])
    result.assert_outcomes(passed=1)
    ended = [json.loads(line)["ended"] for line in exits.read_text().splitlines()]  # written as each worker ended
    assert len(ended) == 1
    assert float(summary.read_text()) < ended[0]  # the summary did not wait for the worker's exit
