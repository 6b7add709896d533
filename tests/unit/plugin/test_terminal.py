"""The progress column's notes (plugin/terminal.py): what each GPU did, and how long is left."""

from __future__ import annotations

from collections import Counter

from pytest_gemm.plugin.terminal import progress_note


def test_progress_notes():
    per_gpu = Counter({"GPU 0 (CUDA_VISIBLE_DEVICES=0)": 70, "GPU 1 (CUDA_VISIBLE_DEVICES=1)": 68})
    assert progress_note(138, 400, 69.0, per_gpu) == "GPU 0: 70, GPU 1: 68, ~2m11s left"
    assert progress_note(10, 400, 5.0, Counter()) == ""  # under 5% done: no estimate yet
    assert progress_note(50, 90, 5.0, Counter()) == ""  # a short run
    assert progress_note(300, 400, 30.0, Counter()) == "~10s left"
    state = {"GPU 0 (CUDA_VISIBLE_DEVICES=0)": "busy", "GPU 1 (CUDA_VISIBLE_DEVICES=1)": ""}
    assert progress_note(138, 400, 69.0, per_gpu, 3, state) == "GPU 0: 70 busy, GPU 1: 68, 3 waiting, ~2m11s left"
    fresh = {"GPU 0 (CUDA_VISIBLE_DEVICES=0)": "busy", "GPU 1 (CUDA_VISIBLE_DEVICES=1)": "out"}
    assert progress_note(2, 400, 1.0, Counter(), 4, fresh) == "GPU 0: 0 busy, GPU 1: 0 out, 4 waiting"
    many = {f"GPU {i} (CUDA_VISIBLE_DEVICES={i})": "busy" if i % 3 else "" for i in range(12)}
    assert progress_note(2, 400, 1.0, Counter(), 0, many) == "8/12 GPUs busy"  # in short, past 4 GPUs
    order = {f"GPU {i} (CUDA_VISIBLE_DEVICES={i})": "" for i in (0, 1, 2)}
    assert progress_note(2, 400, 1.0, Counter({"GPU 2 (CUDA_VISIBLE_DEVICES=2)": 5}), 0, order).startswith(
        "GPU 0: 0, GPU 1: 0, GPU 2: 5"
    )
