"""Every GPU of a host (isolation/devices.py): which GPU each worker gets, on recorded device lists. No GPU is
needed; the session runs are in tests/integration/test_multi_gpu.py."""

from __future__ import annotations

import pytest

from pytest_gemm.isolation.devices import plan_gpus, timing_model, visible_entries, xdist_index

H200_X2 = ["NVIDIA H200", "NVIDIA H200"]  # nvidia-smi -L of a two-H200 host, as CUDA names them
MIXED = ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]


@pytest.mark.parametrize(
    ("outer", "count", "entries"),
    [
        (None, 2, ["0", "1"]),
        ("2,3", 2, ["2", "3"]),
        ("3, 2", 2, ["3", "2"]),  # the outer order is CUDA's order
        ("GPU-8f2a,GPU-1c3d", 2, ["GPU-8f2a", "GPU-1c3d"]),
        ("1,7", 1, ["1"]),  # CUDA stops at an entry it cannot use
        ("", 0, []),
    ],
)
def test_workers_are_pinned_to_entries_of_the_outer_list_never_to_physical_indices(outer, count, entries):
    assert visible_entries(outer, count) == entries


def test_the_gpus_asked_for_are_the_first_visible_ones():
    gpus, note = plan_gpus("4,5,6", ["NVIDIA H200"] * 3, 2)
    assert [(g.index, g.entry) for g in gpus] == [(0, "4"), (1, "5")] and note is None
    gpus, note = plan_gpus(None, H200_X2, 4)
    assert len(gpus) == 2 and note == "4 GPUs asked for, 2 visible: using 2"
    assert gpus[1].label == "GPU 1 (CUDA_VISIBLE_DEVICES=1)"


def test_xdist_workers_take_the_gpus_round_robin():
    assert [xdist_index(w) for w in ("gw0", "gw13", None, "master")] == [0, 13, None, None]
    pins = [plan_gpus("2,3", H200_X2, None, worker)[0] for worker in ("gw0", "gw1", "gw2")]
    assert [[(g.index, g.entry) for g in gpus] for gpus in pins] == [[(0, "2")], [(1, "3")], [(0, "2")]]


def test_a_timed_case_has_one_gpu_model_on_a_host_of_mixed_models():
    tests = [f"kernels/k.cu::k[fp32-{n}x{n}x{n}]" for n in range(64, 64 * 40, 64)]
    chosen = [timing_model(t, MIXED) for t in tests]
    assert chosen == [timing_model(t, list(reversed(MIXED))) for t in tests]  # not the order CUDA lists them
    assert set(chosen) == set(MIXED)  # both models time cases
    assert all(timing_model(t, H200_X2) is None for t in tests)  # one model: any GPU may time it
