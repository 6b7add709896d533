"""On the GPU: the prepare kernel ahead of every timed launch sweeps every SM's instruction caches, once per
launch, and not without a flush. Needs a device."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from support import ROOT, requires_gpu


@requires_gpu
@pytest.mark.gpu
def test_every_sm_is_swept_once_per_launch_and_not_without_a_flush():
    # In a child process: the test process itself never imports CuPy.
    script = textwrap.dedent(
        """
        import json
        import cupy as cp
        from pytest_gemm.worker.backend import GpuBackend
        timer = GpuBackend().timer
        sms = timer.runner.sm_count
        c = cp.zeros(4096, dtype=cp.uint8)
        seen, first = [], timer._epoch
        for flush in (True, True, False):
            swept = int(timer._sink[1].get())
            timer.prepare(c, c, flush)
            cp.cuda.runtime.deviceSynchronize()
            slots = timer._sm_epochs.get()
            epochs = [int(e) - first for e in slots[slots != 0]]
            seen.append([len(epochs), sorted(set(epochs)), int(timer._sink[1].get()) - swept])
        print(json.dumps({"sms": sms, "seen": seen, "epoch": timer._epoch - first}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["sms"] > 0
    sms = facts["sms"]
    # each flushing launch reached every SM and swept it once (one block per SM); without the flush, none did
    assert facts["seen"] == [[sms, [1], sms], [sms, [2], sms], [sms, [2], 0]] and facts["epoch"] == 2
