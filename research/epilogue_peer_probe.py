"""Which way torch computes a fused epilogue fastest: cuBLASLt's own epilogue (``torch._addmm_activation``, one call:
the bias along N, then ReLU or GELU's tanh form) against ``addmm`` followed by torch's bias add and activation in
place, each a kernel of its own, at transformer-MLP shapes, in bf16, fp16 and fp32. The harness's epilogue peer
(pytest_gemm/worker/epilogue_peer.py) takes cuBLASLt's way where it has the epilogue; this says by how much that is the
faster peer. Device time by CUDA events, the median of 30 launches after 5 warm-up ones. Needs torch and a GPU.

    python research/epilogue_peer_probe.py
"""

from __future__ import annotations

import statistics

import torch

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 14336), (2048, 14336, 4096), (256, 7168, 2048))


def _time(call, repeats: int = 30) -> float:
    for _ in range(5):
        call()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _ways(a, b, bias, d, gelu: bool):
    """The two ways, as calls: cuBLASLt's epilogue, and addmm then the activation in place."""

    def lt() -> None:
        torch._addmm_activation(bias, a, b, use_gelu=gelu, out=d)

    def steps() -> None:
        torch.addmm(bias, a, b, out=d)
        if gelu:
            torch.ops.aten.gelu_(d, approximate="tanh")  # in place, as the peer does
        else:
            d.relu_()

    return lt, steps


def main() -> None:
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for m, n, k in SHAPES:
            a = torch.randn(m, k, dtype=dtype, device="cuda")
            b = torch.randn(k, n, dtype=dtype, device="cuda")
            bias = torch.randn(n, dtype=dtype, device="cuda")
            d = torch.empty(m, n, dtype=dtype, device="cuda")
            for act, gelu in (("relu", False), ("gelu_tanh", True)):
                lt, steps = _ways(a, b, bias, d, gelu)
                t_lt, t_steps = _time(lt), _time(steps)
                flops = 2 * m * n * k
                print(
                    f"{str(dtype).split('.')[-1]} {m}x{n}x{k} {act}: cuBLASLt epilogue {t_lt * 1e3:.1f} us "
                    f"({flops / t_lt / 1e9:.0f} TFLOP/s), addmm + {act} {t_steps * 1e3:.1f} us: "
                    f"the epilogue takes {t_lt / t_steps:.2f} of the steps' time"
                )


if __name__ == "__main__":
    main()
