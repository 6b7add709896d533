"""Hooks that pytest-gemm adds to pytest."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_gemm_worker_backend(config: pytest.Config) -> str | None:
    """The backend GPU workers run, as ``module:attribute`` (default: the CUDA backend).

    The attribute is called with ``cubin_cache=`` in the worker process and must give an object with
    ``facts() -> dict`` and ``run(request, notify) -> Outcome``; raising an exception named
    ``DeviceUnavailable`` means there is no device. The plugin's own tests use this to serve outcomes
    recorded on a GPU, through the real worker processes, on machines without one.
    """
