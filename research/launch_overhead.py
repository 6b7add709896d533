"""How much of a torch kernel's host time (the timing table's ``host`` column, #35) is the harness's own: the host's
time to make one call of tests/kernels_torch/triton_matmul.py's autotuned Triton matmul at 1024^3 fp16, called as a
user calls it, inside a device and stream context on the harness's stream (an ExternalStream: how the harness called
it first), and after setting torch's current stream to it (how it calls it now). Prints the medians of N calls each,
interleaved. Needs a GPU, torch and Triton.

Usage: python research/launch_overhead.py [N]
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def main(n: int = 400) -> None:
    path = ROOT / "tests" / "kernels_torch" / "triton_matmul.py"
    spec = importlib.util.spec_from_file_location("triton_matmul", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a, b, c = (torch.randn(1024, 1024, device="cuda", dtype=torch.float16) for _ in range(3))
    fn = module.triton_matmul
    own = torch.cuda.Stream()
    external = torch.cuda.ExternalStream(own.cuda_stream, device=torch.device("cuda", 0))

    def plain() -> None:
        fn(a, b, c, 1.0, 0.0, B_NxK=0)

    def context() -> None:  # how the harness called it before: a device and a stream context each call
        with torch.cuda.device(0), torch.cuda.stream(external):
            fn(a, b, c, 1.0, 0.0, B_NxK=0)

    def harness() -> None:  # how worker/python_calls.py's torch_launcher calls it
        torch.cuda.set_stream(external)
        fn(a, b, c, 1.0, 0.0, B_NxK=0)

    calls = {"plain": plain, "context": context, "harness": harness}
    for call in calls.values():
        call()  # the first compiles and autotunes
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
        if i % 50 == 49:
            torch.cuda.synchronize()  # keep the launch queue short
    torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {n} calls each, interleaved")
    for name, values in times.items():
        print(f"  {name:8s} median {statistics.median(values) * 1e6:7.2f} us per call")
    for name in ("context", "harness"):
        extra = statistics.median(times[name]) - statistics.median(times["plain"])
        print(f"  {name} adds {extra * 1e6:.2f} us per call")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
