"""The devices a worker lists in its hello, from CUDA's properties as CuPy gives them (a stand-in for CuPy here):
each one's UUID is NVML's, found by the device's PCI bus id as the GPU's own facts are, so that the pytest process
knows which GPU recorded a baseline before that GPU's worker has started. tests/gpu checks on a GPU that the two
agree."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_gemm.worker.nvml import open_monitor
from pytest_gemm.worker.runner import visible_devices


def test_each_visible_device_has_its_name_capability_and_nvmls_uuid_by_its_bus_id():
    props = [
        {"name": b"NVIDIA H200", "major": 9, "minor": 0},
        {"name": "NVIDIA H100 80GB HBM3", "major": 9, "minor": 0},
    ]
    buses = ["0000:18:00.0", "0000:2A:00.0"]
    runtime = SimpleNamespace(
        getDeviceCount=lambda: 2, getDeviceProperties=lambda i: props[i], deviceGetPCIBusId=lambda i: buses[i]
    )
    cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime))
    uuids = {"0000:18:00.0": "GPU-3162f25e-05ac-c984-bcd4-d9aa0cb33e5a"}
    assert visible_devices(cupy, lambda bus: uuids.get(bus, "")) == [
        {"name": "NVIDIA H200", "capability": "9.0", "uuid": "GPU-3162f25e-05ac-c984-bcd4-d9aa0cb33e5a"},
        {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "uuid": ""},
    ]


def test_a_gpu_nvml_cannot_see_has_no_uuid():
    assert open_monitor(None).uuid() == ""
