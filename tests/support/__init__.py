"""Shared helpers for the plugin's own tests: paths, device checks, small projects and the H100 recording.

Imported as ``support`` from any folder of tests/ (pyproject.toml puts tests/ on ``sys.path``); the fixtures are
in tests/conftest.py."""

from __future__ import annotations

import copy
import functools
import os
import sys
from pathlib import Path

import pytest

#: tests/, where the test kernels, the recorded data and the replay and synthetic backends lie
TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
KERNELS = ROOT / "kernels"
BROKEN = TESTS / "kernels_broken"
FAULTS = TESTS / "kernels_faults"


def _device_reason() -> str | None:
    """Ask a GPU worker, as the plugin does (this process never opens the device itself)."""
    from pytest_gemm.isolation.workers import WorkerPool
    from pytest_gemm.worker.serve import DEFAULT_BACKEND

    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=60.0)
    try:
        reason = pool.probe()
    finally:
        pool.close()
    return None if reason is None else f"no CUDA device: {reason}"


def _nvrtc_reason() -> str | None:
    from pytest_gemm.compiler.nvrtc import NvrtcUnavailable, nvrtc_version

    try:
        nvrtc_version()
    except NvrtcUnavailable as exc:
        return str(exc)
    return None


def sweep_seeds(name: str, default: str) -> range:
    """The seeds environment variable ``name`` gives a false-alarm sweep: "20" (seeds 0 to 19), or "4-19" (seeds 4
    to 19, to spread a sweep's seeds over device calls)."""
    text = os.environ.get(name, default)
    first, _, last = text.partition("-")
    return range(int(first), int(last) + 1) if last else range(int(first))


def release_pools(cp, large: bool) -> None:
    """A false-alarm sweep's large case frees its blocks in CuPy's and torch's pools: sweeps that run side by side on
    one GPU then need a case's memory each, not what their pools keep."""
    if large:
        cp.get_default_memory_pool().free_all_blocks()
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.cuda.empty_cache()


def seeds_said(seeds: range) -> str:
    """How a sweep's log says its seeds."""
    return f"seeds {seeds.start}-{seeds.stop - 1}" if seeds.start else f"{len(seeds)} seeds"


def failure_reports(result: pytest.RunResult) -> str:
    """The output before pytest's short summary, which repeats whole messages when on CI (or wide)."""
    return result.stdout.str().split("short test summary info")[0]


def small_project(pytester: pytest.Pytester, naive: str, tiled: str) -> Path:
    """A project whose kernels/ holds a naive and a tiled kernel, run on two small shapes; its kernels folder."""
    pytester.makeini("[pytest]\ngemm_shapes = 64,128x96x32\n")
    kernels = pytester.mkdir("kernels")
    (kernels / "naive.cu").write_text(naive)
    (kernels / "tiled.cu").write_text(tiled)
    return kernels


NO_DEVICE = _device_reason()
NO_NVRTC = _nvrtc_reason()

#: GPU tests run only where a CUDA device is present; elsewhere they skip with the reason.
requires_gpu = pytest.mark.skipif(NO_DEVICE is not None, reason=NO_DEVICE or "")
requires_nvrtc = pytest.mark.skipif(NO_NVRTC is not None, reason=NO_NVRTC or "")

NAIVE_HEADER = """/* pytest-gemm
entry = "sgemm_naive"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/
"""

#: the naive kernel's statements: one thread an element of C, alpha A B + beta C (C read only when beta is not 0)
NAIVE_LOOP = """    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
"""
NAIVE_BODY = (
    """
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B,
                                       float beta, float* C) {
"""
    + NAIVE_LOOP
    + "}\n"
)


#: the header of an FP8 or INT8 kernel (no body), its args, dtypes and extra lines to be filled in
SCALED_HEADER = """/* pytest-gemm
entry = "k"
args = {args}
dtypes = {dtypes}
block = 1
grid = 1
{extra}
*/
"""
#: an FP8 kernel's arguments: the operands, their scales and the sizes
FP8_ARGS = '["A", "B", "C", "scale_a", "scale_b", "M", "N", "K"]'


def naive_project(pytester: pytest.Pytester, naive_source: str) -> pytest.Pytester:
    """A project whose ini sets 64³ shapes, with the naive kernel in kernels/naive.cu."""
    pytester.makeini("[pytest]\ngemm_shapes = 64\n")
    (pytester.mkdir("kernels") / "naive.cu").write_text(naive_source)
    return pytester


def run_pytest_in(work: Path, *args: str, timeout: float = 600) -> str:
    """What ``python -m pytest -p no:cacheprovider ARGS`` prints, run in ``work`` in a process of its own (for a
    module's one GPU run: pytester's in-process runs are per test), on a terminal wide enough that no table shortens
    a kernel's name, as a serial run of the suite would start it (no xdist worker's variables: a module's fixture
    runs before tests/conftest.py's clears them)."""
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST") and k != "PYTEST_ADDOPTS"}
    env["COLUMNS"] = "200"
    return subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=timeout, env=env).stdout


def run_kernel_files(work: Path, folder: Path, names: tuple[str, ...], *args: str, timeout: float = 580) -> str:
    """:func:`run_pytest_in` a copy of the kernel files ``names`` of ``folder`` in ``work``, their GPU cases only,
    every outcome listed (-rA): a GPU test module's one run of its kernels."""
    import shutil

    for name in names:
        shutil.copy(folder / name, work / name)
    return run_pytest_in(work, "--gemm-kernels", *names, "-m", "gpu", "-rA", "-q", *args, timeout=timeout)


def outcomes_in(output: str) -> dict[str, str]:
    """Each test's outcome in a run's output, from -rA's lines (PASSED, FAILED, ERROR; skips are counted by reason
    there), by test name."""
    import re

    found = {}
    for line in output.splitlines():
        match = re.match(r"(PASSED|FAILED|ERROR) \S*::(\S+)", line)
        if match:
            found[match.group(2)] = match.group(1)
    return found


def failure_section(output: str, test: str) -> str:
    """The failure section of ``test`` in a run's output: from its ``___ test ___`` line to the next section or the
    summary."""
    import re

    start = output.index(f"_ {test} _")
    after = re.search(r"\n_{3,} \S+ _{3,}\n|\n=+ short test summary", output[start + 1 :])
    return output[start : start + 1 + after.start()] if after else output[start:]


RECORDED = TESTS / "data" / "h100_outcomes.json"
#: the timed cases of the recording, as ``file::case`` keys
TIMED = (
    "01_naive.cu::sgemm_naive[fp32-512x512x512]",
    "01_naive.cu::sgemm_naive[fp32-4096x4096x4096]",
    "02_smem_tiling.cu::sgemm_smem[TILE32-fp32-1024x1024x1024-a0.7b1.3]",
)


def recording() -> dict:
    """Worker outcomes recorded on an H100 by scripts/record_outcomes.py: the device facts and each outcome (a new
    copy at each call: the caller may change it)."""
    import json

    return json.loads(RECORDED.read_text())


@functools.cache
def _recorded() -> dict:
    """:func:`recording`, read once a process, for the readers here that never change it."""
    return recording()


def recorded_outcome(key: str):
    from pytest_gemm.records.outcome import Outcome
    from pytest_gemm.records.plain import from_plain

    return from_plain(Outcome, copy.deepcopy(_recorded()["outcomes"][key]))  # its dicts its own, not the cache's


@functools.cache
def recorded_record(key: str):
    """The record the plugin makes of a recorded timed outcome (through the real verdict code); made once a process
    (a frozen record, whose dicts, the NVML readings, no test may change in place: a test that needs another makes it
    with ``dataclasses.replace``)."""
    from pytest_gemm.judge.case import judge_outcome
    from pytest_gemm.records.shapes import parse_shapes
    from pytest_gemm.specs.cases import expand
    from pytest_gemm.specs.files import load_specs

    file, name = key.split("::")
    shape = next(p for p in name[:-1].split("[")[1].split("-") if p.count("x") == 2)
    shown = f"kernels/{file}"
    cases = [c for spec in load_specs(KERNELS / file, shown) for c in expand(spec, parse_shapes(shape))]
    case = next(c for c in cases if c.name == name)
    result = judge_outcome(
        case, f"{shown}::{name}", recorded_outcome(key), _recorded()["facts"], source_sha256="0" * 64, save_raw=True
    )
    assert result.timing is not None and result.outcome == "passed"
    return result.timing


def recorded_records() -> list:
    return [recorded_record(key) for key in TIMED]


REPLAY_CONFTEST = """
import sys
sys.path.insert(0, {tests!r})


def pytest_gemm_worker_backend(config):
    return "replay_backend:ReplayBackend"
"""


def with_keys(source: str, **keys: str) -> str:
    """``source`` with some header lines replaced (``key = value``), or added right after ``/* pytest-gemm``."""
    lines = source.splitlines()
    for key, value in keys.items():
        found = [i for i, line in enumerate(lines) if line.startswith(f"{key} =")]
        if found:
            lines[found[0]] = f"{key} = {value}"
        else:
            lines.insert(lines.index("/* pytest-gemm") + 1, f"{key} = {value}")
    return "\n".join(lines) + "\n"
