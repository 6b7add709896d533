"""A worker backend for the CPU tests: outcomes recorded on a GPU, served through real worker processes.

The plugin runs it in place of the CUDA backend (``pytest_gemm_worker_backend`` in a conftest), so a
test drives everything a GPU run does (requests, the worker process, its time limits and replacement,
the verdict, the record, the gate, pytest-benchmark) with no GPU. It never pretends to be a device
for a GPU test: GPU tests run the real backend and skip without a device.

Environment:
  PYTEST_GEMM_REPLAY   the recording (tests/data/h100_outcomes.json, written by scripts/record_outcomes.py)
  REPLAY_SCALE         multiply the kernel's device times by this (a slower or faster kernel)
  REPLAY_GPU           report this GPU name instead of the recorded one
  REPLAY_THROTTLE      set NVML's power-cap reason in the samples taken after timing
  REPLAY_ACT           file::case=act,... where act is slow-once:S (its first timing in the run S times slower),
                       hang, exit:N, signal:N, sysexit:N, print:TEXT (then the
                       outcome), die-later:N (exit N just after answering), slow-timing:S (S seconds of timing),
                       lose-gpu (the GPU stops working: the worker dies, and REPLAY_LOST_FILE is created),
                       slow-cupy-compile:S (S seconds inside a stand-in for CuPy's compiler, while verifying) or
                       rows-vary:N (N rows of C differed at M = 1, as the worker's batch invariance check says)
  REPLAY_LOST_FILE     while this file exists, a new worker finds no device (a GPU lost during the run)
  REPLAY_BROKEN        the backend fails to start with this message
  REPLAY_UUIDS         give each GPU of REPLAY_DEVICES a UUID of its own (GPU-replay-N, N its place in the list)
  REPLAY_DEVICES       the GPUs of a recorded host, by physical index: names separated by ';', each with
                       '@8.0' for a compute capability other than the recording's (default: the recorded GPU
                       alone); CUDA_VISIBLE_DEVICES selects among them as CUDA would
  REPLAY_BROKEN_PIN    a worker pinned to this CUDA_VISIBLE_DEVICES entry fails to start
  REPLAY_SLEEP         seconds each case takes (a GPU kept busy)
  REPLAY_LOG           append one JSON line per case run: the worker's pid, CUDA_VISIBLE_DEVICES, the case, and
                       when it started, began timing (after the pool's word; null when untimed) and ended (time.time())
  REPLAY_STANDBY       the backend's start takes this many seconds, and it asks the pool for a standby worker, as
                       the GPU backend does
  REPLAY_STARTS        append one JSON line per backend started: its pid, CUDA_VISIBLE_DEVICES, when its start
                       began and ended, and whether it was started warmed (a standby, or a worker started ahead)
  REPLAY_EXIT          "SECONDS:FILE": a worker's exit takes SECONDS (a CUDA context's teardown), and appends one
                       JSON line to FILE with its pid, when its exit began and when it ended
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from pytest_gemm.records.outcome import BatchRows, Outcome
from pytest_gemm.records.plain import from_plain
from pytest_gemm.specs.files import case_from_request, load_specs


def _fake_cupy_compiler():
    """tests/data/fake_cupy/cupy/cuda/compiler.py, loaded from its file (it shadows no real CuPy)."""
    import importlib.util

    path = Path(__file__).parent / "data" / "fake_cupy" / "cupy" / "cuda" / "compiler.py"
    spec = importlib.util.spec_from_file_location("fake_cupy_compiler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DeviceUnavailable(Exception):
    """No recording to replay (named like the CUDA backend's, so the worker reports 'no CUDA device')."""


def recording_key(shown: str, name: str) -> str:
    return f"{Path(shown).name}::{name}"


def _slow_exit(seconds: float, path: str) -> None:
    began = time.time()
    time.sleep(seconds)
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"pid": os.getpid(), "began": began, "ended": time.time()}) + "\n")


class ReplayBackend:
    def __init__(self, cubin_cache: str | None = None, warmed: bool = False) -> None:
        began = time.time()
        self.standby = bool(os.environ.get("REPLAY_STANDBY"))
        time.sleep(float(os.environ.get("REPLAY_STANDBY") or 0))
        self._open()
        if os.environ.get("REPLAY_STARTS"):
            with open(os.environ["REPLAY_STARTS"], "a", encoding="utf-8") as log:
                line = {"pid": os.getpid(), "start": began, "end": time.time(), "warmed": warmed}
                line["pin"] = os.environ.get("CUDA_VISIBLE_DEVICES")
                log.write(json.dumps(line) + "\n")
        if os.environ.get("REPLAY_EXIT"):
            seconds, _, path = os.environ["REPLAY_EXIT"].partition(":")
            atexit.register(_slow_exit, float(seconds), path)

    def _open(self) -> None:
        if os.environ.get("REPLAY_BROKEN"):
            raise RuntimeError(os.environ["REPLAY_BROKEN"])
        path = os.environ.get("PYTEST_GEMM_REPLAY")
        if not path:
            raise DeviceUnavailable("no recording to replay (PYTEST_GEMM_REPLAY is not set)")
        data = json.loads(Path(path).read_text())
        self._facts = dict(data["facts"])
        if os.environ.get("REPLAY_GPU"):
            self._facts["name"] = os.environ["REPLAY_GPU"]
        if os.environ.get("REPLAY_UUID"):  # another GPU of the same model
            self._facts["uuid"] = os.environ["REPLAY_UUID"]
        if os.environ.get("REPLAY_UUIDS"):  # each GPU of the host its own (its place in REPLAY_DEVICES)
            first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
            self._facts["uuid"] = f"GPU-replay-{first}"
        lost = os.environ.get("REPLAY_LOST_FILE")
        if lost and Path(lost).exists():
            raise DeviceUnavailable("the NVIDIA driver finds no GPU")
        visible = self.list_devices()
        if not visible:
            raise DeviceUnavailable(f"no device (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        broken = os.environ.get("REPLAY_BROKEN_PIN")
        if broken is not None and os.environ.get("CUDA_VISIBLE_DEVICES") == broken:
            raise RuntimeError(f"the GPU at CUDA_VISIBLE_DEVICES={broken} is broken")
        if os.environ.get("REPLAY_DEVICES"):
            self._facts["name"] = visible[0]["name"]
            self._facts["compute_capability"] = visible[0]["capability"]
        self._facts["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        self._facts["visible_devices"] = visible
        self.outcomes = data["outcomes"]
        self.scale = float(os.environ.get("REPLAY_SCALE", "1"))
        self.acts = dict(item.split("=", 1) for item in os.environ.get("REPLAY_ACT", "").split(",") if "=" in item)

    @staticmethod
    def list_devices() -> list[dict]:
        """The recorded host's GPUs that CUDA_VISIBLE_DEVICES leaves visible, in its order (up to a bad entry)."""
        recorded = json.loads(Path(os.environ["PYTEST_GEMM_REPLAY"]).read_text())["facts"]
        names = [n for n in os.environ.get("REPLAY_DEVICES", "").split(";") if n] or [recorded["name"]]
        capability = recorded.get("compute_capability", "9.0")
        devices = [{"name": n.split("@")[0], "capability": n.split("@")[1] if "@" in n else capability} for n in names]
        if os.environ.get("REPLAY_UUIDS"):
            for i, device in enumerate(devices):
                device["uuid"] = f"GPU-replay-{i}"
        outer = os.environ.get("CUDA_VISIBLE_DEVICES")
        if outer is None:
            return devices
        visible = []
        for entry in outer.split(","):
            if not entry.strip().isdigit() or int(entry) >= len(devices):
                break
            visible.append(devices[int(entry)])
        return visible

    def facts(self) -> dict:
        return self._facts

    def run(self, request, notify) -> Outcome:
        started = time.time()
        self._timing_from: float | None = None
        outcome = self._replay(request, notify)
        time.sleep(float(os.environ.get("REPLAY_SLEEP", "0")))
        if os.environ.get("REPLAY_LOG"):
            line = {
                "pid": os.getpid(),
                "pin": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "case": request.shown
                + "::"
                + case_from_request(request, load_specs(Path(request.path), request.shown)).name,
                "timed": request.timing is not None,
                "start": started,
                "timing_from": self._timing_from,
                "end": time.time(),
            }
            with open(os.environ["REPLAY_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps(line) + "\n")
        return outcome

    def _replay(self, request, notify) -> Outcome:
        notify("load")
        case = case_from_request(request, load_specs(Path(request.path), request.shown))
        key = recording_key(request.shown, case.name)
        notify("verify")
        act = self.acts.get(key, "")
        once_scale = 1.0
        if act == "hang":
            time.sleep(3600)
        elif act.startswith("exit:"):
            os._exit(int(act[5:]))
        elif act.startswith("signal:"):
            os.kill(os.getpid(), int(act[7:]))
            time.sleep(10)
        elif act.startswith("print:"):
            print(act[6:], flush=True)
        elif act.startswith("sysexit:"):
            sys.exit(int(act[8:]))
        elif act.startswith("die-later:"):
            threading.Timer(0.2, os._exit, (int(act[10:]),)).start()
        elif act == "lose-gpu":
            Path(os.environ["REPLAY_LOST_FILE"]).touch()
            os._exit(1)
        elif act.startswith("slow-cupy-compile:"):
            _fake_cupy_compiler().compile(float(act[len("slow-cupy-compile:") :]))
        elif act.startswith("slow-once:"):  # its first timing in the run slower; later ones (a re-timing) not
            once = Path(f".replay-once-{hashlib.sha256(key.encode()).hexdigest()[:12]}")
            scale = 1.0 if once.exists() else float(act[len("slow-once:") :])
            once.touch()
            once_scale = scale
        elif act.startswith("slow-timing:"):
            for _ in range(int(float(act[12:]) / 0.25)):
                notify("time")  # the timing loop reports progress after every batch
                self._timing_from = self._timing_from or time.time()
                time.sleep(0.25)
        if key not in self.outcomes:
            return Outcome(skip=f"not in the recording: {key}")
        outcome = from_plain(Outcome, self.outcomes[key])
        if act.startswith("rows-vary:") and outcome.verification is not None:
            rows = BatchRows(at=(1, case.shape.M // 2), differing=int(act[len("rows-vary:") :]), where=1)
            outcome = dataclasses.replace(
                outcome, verification=dataclasses.replace(outcome.verification, batch_rows=rows)
            )
        if outcome.timing is not None and request.timing is None:
            outcome = dataclasses.replace(outcome, timing=None, nvml_before=None, nvml_after=None)
        if outcome.timing is not None:
            notify("time")
            self._timing_from = self._timing_from or time.time()
            kernel_s = tuple(t * self.scale * once_scale for t in outcome.timing.kernel_s)
            outcome = dataclasses.replace(outcome, timing=dataclasses.replace(outcome.timing, kernel_s=kernel_s))
            if os.environ.get("REPLAY_THROTTLE"):
                after = dict(outcome.nvml_after or {}, clock_event_reasons=0x4)
                outcome = dataclasses.replace(outcome, nvml_after=after)
        return outcome
