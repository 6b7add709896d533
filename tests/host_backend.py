"""A worker backend that runs Python kernels on the host: each case prepared, launched and verified by the GPU
worker's own code (its strategies, its layout, its truth, its diagnosis re-runs) on NumPy standing for CuPy, with
no peer and no timing. The CPU's way to take a kernel file through the whole plugin (collection, the worker's pipe,
judgement, the report) with real verdicts; used through the documented ``pytest_gemm_worker_backend`` hook by
tests/integration/test_grouped_cases.py. No device is opened or pretended: the facts it sends say "host"."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from pytest_gemm.records.outcome import Outcome
from pytest_gemm.specs.files import case_from_request, load_specs
from pytest_gemm.worker.verify import verify

from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case


class HostBackend:
    def __init__(self, cubin_cache: str | None = None) -> None:
        self._modules: dict[str, object] = {}

    def facts(self) -> dict:
        name = "host (NumPy, no GPU)"
        return {"name": name, "compute_capability": "0.0", "sm_count": 1, "visible_devices": [{"name": name}]}

    def _function(self, path: str, attr: str):
        if path not in self._modules:
            spec = importlib.util.spec_from_file_location(f"host_kernels_{len(self._modules)}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._modules[path] = module
        return getattr(self._modules[path], attr)

    def run(self, request, notify) -> Outcome:
        notify("load")
        case = case_from_request(request, load_specs(Path(request.path), request.shown))
        fn = self._function(request.path, case.spec.attr or case.spec.name)
        notify("verify")
        prepared = host_case(FunctionKernel(HostDevice(HostCupy()), case, fn), request.seed)
        return Outcome(verification=verify(prepared), worker=os.getpid(), untimed="run on the host, not timed")
