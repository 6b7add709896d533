"""On the GPU: CuPy names the same misreadings as NumPy does, on the simulated kernels of
tests/unit/judge/test_misreadings.py. Needs a device."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from support import ROOT, requires_gpu

C_WRITE_ONLY = "C written transposed, C0 read where it lies"  # the other way to write C transposed


@requires_gpu
@pytest.mark.gpu
def test_cupy_names_the_same_misreadings_on_the_gpu():
    """The worker runs the same code with CuPy (in a child process: the test process never imports CuPy)."""
    script = textwrap.dedent(
        """
        import json, sys
        import cupy as cp
        sys.path.insert(0, "tests/unit/judge")
        from test_misreadings import C_WRITE_ONLY, Misreading, Shape, Simulated, Storage, misreading
        found = []
        for bug, storage, shape, ab in (
            (Misreading.B_ORDER, Storage(B="NxK"), Shape(300, 200, 100), (1.0, 0.0)),
            (Misreading.A_AS_B, Storage(), Shape(256, 256, 256), (-1.5, 0.0)),
            (C_WRITE_ONLY, Storage(C="NxM"), Shape(200, 300, 64), (0.7, 1.3)),
            (Misreading.BETA_AS_ONE, Storage.of_layout("col"), Shape(128, 96, 64), (0.7, 1.3)),
            (None, Storage(), Shape(128, 96, 64), (0.7, 1.3)),
        ):
            case = Simulated(shape, storage, "fp16", *ab)
            got = case.kernel(bug)
            on = [None if x is None else cp.asarray(x) for x in (got, case.a, case.b, case.c0)]
            read = misreading(cp, *on, case.alpha, case.beta, storage, case.dt, case.out)
            cpu = case.misreading(got)
            found.append([str(bug), str(read and read.kind), (read and read.kind) == (cpu and cpu.kind)])
        print(json.dumps(found))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == [
        ["B read in the other order", "B read in the other order", True],
        ["A read as B", "A read as B", True],
        [C_WRITE_ONLY, "C written transposed", True],
        ["beta taken as 1", "beta taken as 1", True],
        ["None", "None", True],
    ]
