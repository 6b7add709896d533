"""The devices a worker lists in its hello, from CUDA's properties as CuPy gives them (a stand-in for CuPy here):
each one's UUID written as NVML writes it, so that the pytest process knows which GPU recorded a baseline before
that GPU's worker has started. tests/gpu checks on a GPU that the two agree."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_gemm.worker.runner import device_uuid, visible_devices

RAW = bytes.fromhex("3162f25e05acc984bcd4d9aa0cb33e5a")


def test_a_uuid_is_written_as_nvml_writes_it_and_is_empty_where_cuda_gives_none():
    assert device_uuid({"uuid": RAW}) == "GPU-3162f25e-05ac-c984-bcd4-d9aa0cb33e5a"
    assert device_uuid({}) == ""
    assert device_uuid({"uuid": b"\0" * 8}) == ""


def test_each_visible_device_has_its_name_capability_and_uuid():
    props = [
        {"name": b"NVIDIA H200", "major": 9, "minor": 0, "uuid": RAW},
        {"name": "NVIDIA H100 80GB HBM3", "major": 9, "minor": 0},
    ]
    runtime = SimpleNamespace(getDeviceCount=lambda: 2, getDeviceProperties=lambda i: props[i])
    cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime))
    assert visible_devices(cupy) == [
        {"name": "NVIDIA H200", "capability": "9.0", "uuid": "GPU-3162f25e-05ac-c984-bcd4-d9aa0cb33e5a"},
        {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "uuid": ""},
    ]
