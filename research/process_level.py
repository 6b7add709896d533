"""What moves a case's kernel/cuBLAS ratio from one worker process to the next? (issues 13, 16, 17: ratios within 1%)

    python research/process_level.py OUT.jsonl [--configs base,again,tight] [--cases fp32-256-naive,...]
    python research/process_level.py OUT.jsonl --report

A case timed twice in one process moves less than the same case in two processes (the runs behind this:
docs/timing.md, "How far a case's ratio moves from one run to the next"). Run this script in several processes, one
after the other; each times the same cases through the worker's own backend (``GpuBackend.run``, docs/lab.md), every
config in turn for one case before the next case:

- ``base``, ``again``: the worker as it is, twice (the spread within one process);
- ``tight``: the stopping rule at a 0.25% half-width (is it the sampling noise of each run?).

Each record keeps every pair's times. ``--report`` prints, per case and config, each process's median ratio and
the spread across processes (max/min - 1), and the same for other estimators of the per-pair ratios (the mean of
their middle half, and the ratio of the two interquartile means).

The configs that changed the worker's own state (an L2 flush of 4x or 8x its size, the kernel and cuBLAS on the
same operand sets, the kernel's module loaded again, a new cuBLAS handle) needed its private hooks and were
retired; what they found is in docs/timing.md ("A level per process, measured directly") and
docs/data/h100-2026-11-25-process-level.txt.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gemm.records.request import TimingSettings
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import case_seed, expand, to_request
from pytest_gemm.specs.files import load_specs
from pytest_gemm.worker.backend import GpuBackend

ROOT = Path(__file__).resolve().parent.parent
# name: (file, case-name prefix, dtype, size)
CASES = {
    "fp32-256-naive": ("01_naive.cu", "sgemm_naive", "fp32", 256),
    "fp32-256-step8": ("08_warp_tiling.cu", "sgemm_warp_tile[BN256-BK16", "fp32", 256),
    "fp32-1024-step8": ("08_warp_tiling.cu", "sgemm_warp_tile[BN256-BK16", "fp32", 1024),
    "bf16-256-step10": ("10_mma_sync.cu", "hgemm_mma_tma_bf16[TILE_N128", "bf16", 256),
    "bf16-256-step11": ("11_wgmma_tma.cu", "hgemm_wgmma_bf16[STAGES4", "bf16", 256),
    "bf16-1024-wmma": ("09_wmma.cu", "hgemm_wmma_bf16[WN64-PAD16-STAGES4", "bf16", 1024),
    "bf16-1024-step11": ("11_wgmma_tma.cu", "hgemm_wgmma_bf16[STAGES4", "bf16", 1024),
    "fp16-1024-step10ws": ("10_mma_sync_ws.cu", "hgemm_mma_ws_fp16", "fp16", 1024),
    "fp16-1024-step12": ("12_wgmma_ws.cu", "hgemm_wgmma_ws_fp16", "fp16", 1024),
}
CONFIGS = ["base", "again", "tight"]


def case_of(name: str) -> tuple[str, Any]:
    file, prefix, dtype, size = CASES[name]
    path = ROOT / "kernels" / file
    for spec in load_specs(path, f"kernels/{file}"):
        for case in expand(spec, [Shape(size, size, size)], [dtype]):
            if case.name.startswith(prefix) and case.ab.id == "" and case.skip_reason is None:
                return str(path), case
    raise SystemExit(f"no case {prefix} at {dtype} {size}^3 in {file}")


def settings_for(config: str) -> TimingSettings:
    settings = TimingSettings(timer="cupti")
    return replace(settings, noise=0.0025, max_time=3.0) if config == "tight" else settings


def measure(backend: GpuBackend, path: str, case: Any, settings: TimingSettings) -> dict[str, Any]:
    request = to_request(case, path, case_seed(0, case.name), settings)
    outcome = backend.run(request, lambda phase: None)
    if outcome.timing is None:
        return {"error": str(outcome.failure)[:300], "verification": str(outcome.verification)[:300]}
    t = outcome.timing
    return {
        "timer": t.timer,
        "note": t.timer_note,
        "stop": t.stop_reason,
        "copies": t.input_copies,
        "kernel_us": [round(x * 1e6, 4) for x in t.kernel_s],
        "cublas_us": [round(x * 1e6, 4) for x in t.reference_s],
    }


def run(out: str, names: list[str], configs: list[str]) -> None:
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise SystemExit(f"unknown configs {unknown}: {', '.join(CONFIGS)} (others were retired: see the docstring)")
    backend = GpuBackend(os.environ.get("GEMM_CUBINS"))
    proc = f"{os.getpid()}-{time.time():.0f}"
    with open(out, "a", encoding="utf-8") as f:
        for name in names:
            path, case = case_of(name)
            for config in configs:
                settings = settings_for(config)
                t0 = time.perf_counter()
                rec = {"run": proc, "case": name, "config": config, **measure(backend, path, case, settings)}
                rec["wall_s"] = round(time.perf_counter() - t0, 3)
                f.write(json.dumps(rec) + "\n")
                f.flush()
                short = {k: v for k, v in rec.items() if not k.endswith("_us")}
                print(json.dumps({**short, "n": len(rec.get("kernel_us", []))}), flush=True)


def iqm(x: np.ndarray) -> float:
    lo, hi = np.percentile(x, [25, 75])
    return float(np.mean(x[(x >= lo) & (x <= hi)]))


ESTIMATORS = {
    "median": lambda k, r: float(np.median(k / r)),
    "iqm": lambda k, r: iqm(k / r),
    "iqm/iqm": lambda k, r: iqm(k) / iqm(r),
}


def report(out: str) -> None:
    recs = [json.loads(line) for line in Path(out).read_text().splitlines() if line.strip()]
    recs = [r for r in recs if "kernel_us" in r]
    configs = list(dict.fromkeys(r["config"] for r in recs))  # an older file may hold retired configs too
    runs = sorted({r["run"] for r in recs}, key=lambda s: s.split("-")[1])
    print(f"{len(runs)} processes; per case and config: each process's median ratio (kernel/cuBLAS), then the spread")
    print("across processes (max/min - 1, %) by each estimator, and cuBLAS's and the kernel's own median spreads\n")
    at = collections.defaultdict(dict)
    for r in recs:
        at[(r["case"], r["config"])][r["run"]] = r
    spreads: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for name in CASES:
        for config in configs:
            got = at.get((name, config))
            if not got:
                continue
            k = {p: np.array(got[p]["kernel_us"]) for p in runs if p in got}
            r = {p: np.array(got[p]["cublas_us"]) for p in runs if p in got}
            ratios = " ".join(f"{ESTIMATORS['median'](k[p], r[p]):.4f}" for p in k)
            cells = []
            for est, fn in ESTIMATORS.items():
                vals = [fn(k[p], r[p]) for p in k]
                s = 100 * (max(vals) / min(vals) - 1)
                spreads[(est, config)].append(s)
                cells.append(f"{est} {s:5.2f}")
            ks = [float(np.median(x)) for x in k.values()]
            rs = [float(np.median(x)) for x in r.values()]
            n = int(np.median([len(x) for x in k.values()]))
            print(
                f"{name:20s} {config:7s} {ratios}  | {'  '.join(cells)} | cuBLAS {100 * (max(rs) / min(rs) - 1):5.2f}"
                f" ({np.median(rs):.3f} us) kernel {100 * (max(ks) / min(ks) - 1):5.2f} ({np.median(ks):.3f} us) n~{n}"
            )
        print()
    print("Spread across processes (%), per config and estimator: median and largest over the cases")
    for (est, config), vals in sorted(spreads.items(), key=lambda kv: (configs.index(kv[0][1]), kv[0][0])):
        print(f"  {config:7s} {est:8s} median {np.median(vals):5.2f}  max {max(vals):5.2f}")
    within = []
    for name in CASES:
        a, b = at.get((name, "base"), {}), at.get((name, "again"), {})
        for p in set(a) & set(b):
            fa = ESTIMATORS["median"](np.array(a[p]["kernel_us"]), np.array(a[p]["cublas_us"]))
            fb = ESTIMATORS["median"](np.array(b[p]["kernel_us"]), np.array(b[p]["cublas_us"]))
            within.append(abs(fa / fb - 1) * 100)
    if within:
        print(
            f"base against again in one process (median ratio): median {np.median(within):.2f}%, max {max(within):.2f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report(args.out)
    else:
        run(args.out, args.cases.split(","), args.configs.split(","))


if __name__ == "__main__":
    main()
