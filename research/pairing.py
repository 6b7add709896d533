"""Does cuBLAS's time depend on the kernel it is paired with? (issues 13, 16, 17: ratios within 1%)

    python research/pairing.py OUT.jsonl [--groups bf16-1024,fp32-256] [--modes base,again,solo,...]
    python research/pairing.py OUT.jsonl --report

In one H100 main job, cuBLAS's median for the same problem (bf16, 1024^3, alpha 1, beta 0) spread 7.9% over the
16 cases that time it, each case's own 95% interval being about +-0.4%; the same pattern came back in a second
run (the wmma WN64 variants' cuBLAS about 6.95 us, the WN32 ones about 6.55 us). A case's ratio then carries
a term that depends on which kernel ran before cuBLAS, and a 2% move of that term between runs breaks "ratios
within 1%". This script times every case of a group through the worker's own backend, in one process, in
these modes:

- ``base``, ``again``: the group's cases in order, twice (does a case's cuBLAS time come back?);
- ``reverse``: in reverse order (is it the partner, or the time since the process started?);
- ``gap``: with a 200 us spin kernel (one thread) ahead of every prepare kernel, so that the GPU idles between
  the kernel and cuBLAS's flush (a power or clock effect fades in an idle gap; a cache or TLB state does not);
- ``read``: L2 flushed by reading instead of writing;
- ``solo``: cuBLAS timed with cuBLAS as its partner (the kernel's launches replaced by cuBLAS's own call), the
  reference without a partner effect;
- ``reused``, ``reused2``: the operand sets kept from one case to the next (the n-th set of a case is the same
  memory in every case of a shape), twice;
- ``carve0``, ``carve100``: the prepare kernel launched with a preferred shared memory carveout of 0% (all L1)
  or 100% (all shared memory) instead of none;
- ``flushB``, ``flushC``, ``flushB2``: the L2 flush writes another buffer of the same size, allocated anew
  (after a spacer of random size, so that it lands elsewhere in memory) for ``flushB`` and ``flushC``, and
  ``flushB``'s again for ``flushB2`` (does a case's level follow where the flush buffer lies?);
- ``l2only``, ``l2only2``: the prepare kernel's sweep of the SMs' instruction caches turned off (L2 flushed
  only, as before the sweep), twice. Without it, what a kernel left in the SMs' instruction caches, which the
  L2 flush does not reach, carries over to the next launch.

Groups: ``bf16-1024`` and ``bf16-256`` (steps 9 to 11), ``fp32-256`` (steps 2, 4, 6, 7 and 8). Every 33rd prepare
kernel follows a probe kernel (one thread, 20 us) that reads the SM clock (clock64 cycles over globaltimer ns);
each record keeps the probe's readings, the case's samples and its operand sets' addresses.

Each record names the kernels CUPTI saw (the kernel under test's and cuBLAS's). ``--report`` prints, per group
and mode, cuBLAS's median per case and its spread across cases, and how each mode's per-case medians correlate
with ``base``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from pytest_gemm.records.request import TimingSettings
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import case_seed, expand, to_request
from pytest_gemm.specs.files import load_specs
from pytest_gemm.worker import cupti_clock, timer
from pytest_gemm.worker.backend import GpuBackend

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {
    "bf16-1024": (["09_wmma.cu", "10_mma_sync.cu", "11_wgmma_tma.cu"], "bf16", 1024),
    "bf16-256": (["09_wmma.cu", "10_mma_sync.cu", "11_wgmma_tma.cu"], "bf16", 256),
    "fp32-256": (
        [f"{name}.cu" for name in ("02_smem_tiling", "04_2d_thread_tile", "06_conflict_free", "07_double_buffer")]
        + ["08_warp_tiling.cu"],
        "fp32",
        256,
    ),
}
MODES = [
    "base",
    "again",
    "reverse",
    "gap",
    "read",
    "solo",
    "reused",
    "reused2",
    "carve0",
    "carve100",
    "l2only",
    "l2only2",
    "flushB",
    "flushC",
    "flushB2",
]
FLUSHES: dict[str, Any] = {}  # flush buffers by mode (``base``: the timer's own), and spacers held
HELD: list[Any] = []
# Every 33rd prepare kernel (the kernel's and cuBLAS's in turn) follows a probe (one thread, 20 us) that measures
# the SM clock: clock64 cycles over globaltimer ns. It bears the spin kernel's name so that CUPTI's spans treat it
# as the harness's own.
PROBE_SOURCE = r"""
extern "C" __global__ void pytest_gemm_spin(unsigned long long* out, int index) {
    unsigned long long t0, t1;
    long long c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < 20000);
    long long c1 = clock64();
    out[2 * index] = (unsigned long long)(c1 - c0);
    out[2 * index + 1] = t1 - t0;
}
"""
PROBES = 4096
SEEN: collections.Counter[str] = collections.Counter()
GAP_NS = 200_000


class NamingClock(cupti_clock.CuptiClock):
    """The worker's CUPTI clock, also counting the names of the kernels it records."""

    def _completed(self, rows: list[tuple[int, int, int, int, str]]) -> None:
        for row in rows:  # (kind, stream, start, end, kernel name or "")
            if row[4]:
                SEEN[row[4]] += 1
        super()._completed(rows)


def cases_of(group: str) -> list[Any]:
    files, dtype, size = GROUPS[group]
    out = []
    for name in files:
        path = ROOT / "kernels" / name
        for spec in load_specs(path, f"kernels/{name}"):
            for case in expand(spec, [Shape(size, size, size)], [dtype]):
                if case.ab.id == "" and case.skip_reason is None:
                    out.append((str(path), case))
    return out


_OPERANDS = timer._Operands  # the worker's own class, before run() puts ReusedOperands in its place


class ReusedOperands(_OPERANDS):
    """Operand sets kept from one case to the next (``reused`` modes): the n-th set a case makes is always the
    same memory for one shape and dtype, its content replaced by this case's inputs."""

    on = False
    made: ClassVar[dict[tuple, _OPERANDS]] = {}
    index = 0
    pointers: ClassVar[list[tuple[int, int, int]]] = []  # A, B and C of each set, in the order the case made them

    def __new__(cls, cp: Any, uploaded: list[Any], c_shape: tuple[int, int], dt: Any, out: Any) -> Any:
        key = (tuple(x.shape for x in uploaded), c_shape, dt.name, out.name, cls.index)
        cls.index += 1
        ops = cls.made.get(key) if cls.on else None
        if ops is None:
            ops = object.__new__(cls)
            _OPERANDS.__init__(ops, cp, uploaded, c_shape, dt, out)
            if cls.on:
                cls.made[key] = ops
        else:
            ops.a.flat[...] = uploaded[0].reshape(-1)
            ops.b.flat[...] = uploaded[1].reshape(-1)
            ops.launch = ops.cublas_args = None  # this case's: its scalars live in its own closures
        cls.pointers.append((ops.a.flat.data.ptr, ops.b.flat.data.ptr, ops.c.flat.data.ptr))
        return ops

    def __init__(self, *args: Any) -> None:
        pass


def patch(backend: GpuBackend, mode: str) -> None:
    """Set the timer up for ``mode`` (every mode starts from the worker's defaults)."""
    t = backend.timer
    t.flush_mode = "read" if mode == "read" else "write"
    t.gap_ns = GAP_NS if mode == "gap" else 0
    t.solo = mode == "solo"
    carve = {"carve0": 0, "carve100": 100}.get(mode, -1)
    if carve != getattr(t, "carve", -1):
        t._prepare.preferred_shared_memory_carveout = carve
        t.carve = carve
    ReusedOperands.on = mode.startswith("reused")
    t.sweep_code = not mode.startswith("l2only")
    if t._flush is not None:
        FLUSHES.setdefault("base", t._flush)
        key = mode.rstrip("2") if mode.startswith("flush") else "base"
        if key not in FLUSHES:
            HELD.append(backend.cp.empty(random.randrange(1, 64) << 20, dtype=np.uint8))
            FLUSHES[key] = backend.cp.zeros(t.flush_bytes, dtype=np.uint8)
        t._flush = FLUSHES[key]


def install(backend: GpuBackend) -> None:
    """Hooks for the ``gap`` and ``solo`` modes on the backend's timer and runner."""
    t, runner = backend.timer, backend.runner
    t.gap_ns, t.solo, t.last_gemm = 0, False, None
    t.probe = backend.cp.RawKernel(PROBE_SOURCE, "pytest_gemm_spin")
    t.probe_out = backend.cp.zeros(2 * PROBES, dtype=backend.cp.uint64)
    t.prepares, t.probes = 0, 0
    prepare, cublas_gemm, launcher = t.prepare, t._cublas_gemm, runner.launcher

    def gapped_prepare(c_init: Any, c: Any, flush: bool) -> None:
        t.prepares += 1
        if t.prepares % 33 == 0 and t.probes < PROBES:
            t.probe((1,), (1,), (t.probe_out, np.int32(t.probes)))
            t.probes += 1
        if t.gap_ns:
            t._spin((1,), (1,), (np.uint64(t.gap_ns),))
        prepare(c_init, c, flush)

    def remembering_gemm(case: Any, dt: Any, out: Any) -> Any:
        t.last_gemm = cublas_gemm(case, dt, out)
        return t.last_gemm

    def solo_launcher(case: Any, a: Any, b: Any, c: Any, dt: Any) -> Any:
        if not t.solo or t.last_gemm is None:  # verification runs the kernel itself
            return launcher(case, a, b, c, dt)
        ops = SimpleNamespace(a=a, b=b, c=c, cublas_args=None)
        gemm = t.last_gemm
        return lambda: gemm(ops)

    t.prepare, t._cublas_gemm, runner.launcher = gapped_prepare, remembering_gemm, solo_launcher


def measure(backend: GpuBackend, path: str, case: Any) -> dict[str, Any]:
    SEEN.clear()
    backend.timer.last_gemm = None
    backend.timer.probes = 0
    ReusedOperands.index, ReusedOperands.pointers = 0, []
    request = to_request(case, path, case_seed(0, case.name), TimingSettings(timer="cupti"))
    outcome = backend.run(request, lambda phase: None)
    if outcome.timing is None:
        return {"error": str(outcome.failure), "verification": str(outcome.verification)[:300]}
    t = outcome.timing
    probes = backend.timer.probe_out[: 2 * backend.timer.probes].get().reshape(-1, 2)
    mhz = probes[:, 0] / np.maximum(probes[:, 1], 1) * 1e3
    k, r = np.array(t.kernel_s), np.array(t.reference_s)
    return {
        "kernel_s": float(np.median(k)),
        "cublas_s": float(np.median(r)),
        "cublas_iqr_s": float(np.subtract(*np.percentile(r, [75, 25]))),
        "n": len(k),
        "timer": t.timer,
        "note": t.timer_note,
        "cublas_kernels": sorted(n for n in SEEN if not n.startswith("pytest_gemm")),
        "copies": t.input_copies,
        "sm_mhz": [round(float(x), 1) for x in mhz],
        "pointers": ReusedOperands.pointers,
        "kernel_us": [round(x * 1e6, 3) for x in t.kernel_s],
        "cublas_us": [round(x * 1e6, 3) for x in t.reference_s],
    }


def run(out: str, groups: list[str], modes: list[str]) -> None:
    timer.CuptiClock = NamingClock
    timer._Operands = ReusedOperands
    backend = GpuBackend()
    install(backend)
    proc = f"{os.getpid()}-{time.time():.0f}"
    with open(out, "a", encoding="utf-8") as f:
        for group in groups:
            cases = cases_of(group)
            for mode in modes:
                patch(backend, mode)
                order = list(reversed(cases)) if mode == "reverse" else cases
                for path, case in order:
                    rec = {"run": proc, "group": group, "mode": mode, "case": case.name, **measure(backend, path, case)}
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    print(json.dumps(rec), flush=True)
        patch(backend, "base")


def report(out: str) -> None:
    recs = [json.loads(line) for line in Path(out).read_text().splitlines() if line.strip()]
    for run_id in sorted({r["run"] for r in recs}):
        print(f"\n# process {run_id}")
        for group in GROUPS:
            at = [r for r in recs if r["run"] == run_id and r["group"] == group and "cublas_s" in r]
            if not at:
                continue
            names = [r["case"] for r in at if r["mode"] == "base"]
            table = {m: {r["case"]: r for r in at if r["mode"] == m} for m in MODES}
            print(f"\n## {group}: cuBLAS median (us) per case and mode; k = the kernel's median (us)")
            print(f"{'case':58s} " + " ".join(f"{m:>8s}" for m in MODES) + "   k(base)")
            for name in names:
                cells = [table[m].get(name, {}).get("cublas_s") for m in MODES]
                k = table["base"][name]["kernel_s"] * 1e6
                shown = " ".join(f"{c * 1e6:8.3f}" if c else f"{'-':>8s}" for c in cells)
                print(f"{name[:58]:58s} {shown} {k:8.2f}")
            for m in MODES:
                vals = [table[m][n]["cublas_s"] for n in names if n in table[m]]
                if len(vals) < 2:
                    continue
                base = [table["base"][n]["cublas_s"] for n in names if n in table[m]]
                flat = np.std(base) == 0 or np.std(vals) == 0
                corr = 1.0 if m == "base" else float("nan") if flat else float(np.corrcoef(base, vals)[0, 1])
                print(
                    f"  {m:8s} spread {100 * (max(vals) / min(vals) - 1):5.2f}%"
                    f"  median {statistics.median(vals) * 1e6:.3f} us"
                    f"  corr with base {corr:+.2f}"
                )
            kernels = collections.Counter(" + ".join(r.get("cublas_kernels", [])) for r in at)
            for names_, count in kernels.most_common():
                print(f"  {count:3d}x CUPTI saw the kernels (the kernel under test's and cuBLAS's): {names_}")
    summary(recs)


def summary(recs: list[dict[str, Any]]) -> None:
    """Per group and mode: how a case's cuBLAS median moves from one process to the next (correlation of the
    per-case medians of the first two processes, by id, that ran the mode), and within a process from ``base`` to
    each other mode (median and largest change)."""
    runs = sorted({r["run"] for r in recs})
    med = {(r["run"], r["group"], r["mode"], r["case"]): r["cublas_s"] for r in recs if "cublas_s" in r}
    print("\n# Summary: cuBLAS's per-case median")
    for group in GROUPS:
        for mode in MODES:
            keys = [k for k in med if k[1] == group and k[2] == mode]
            if not keys:
                continue
            line = f"{group:10s} {mode:8s}"
            both = [r for r in runs if any(k[0] == r for k in keys)]
            if len(both) >= 2:
                cases = sorted({k[3] for k in keys if k[0] == both[0]} & {k[3] for k in keys if k[0] == both[1]})
                a = [med[(both[0], group, mode, c)] for c in cases]
                b = [med[(both[1], group, mode, c)] for c in cases]
                if len(cases) > 2 and np.std(a) > 0 and np.std(b) > 0:
                    line += f"  across 2 processes: corr {np.corrcoef(a, b)[0, 1]:+.2f}"
            if mode != "base":
                moves = [
                    abs(v / med[(run, g, "base", c)] - 1) * 100
                    for (run, g, _m, c), v in med.items()
                    if g == group and _m == mode and (run, g, "base", c) in med
                ]
                if moves:
                    line += f"  against base in one process: median {np.median(moves):.2f}%, max {max(moves):.2f}%"
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--groups", default="bf16-1024,fp32-256")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report(args.out)
    else:
        run(args.out, args.groups.split(","), args.modes.split(","))


if __name__ == "__main__":
    main()
