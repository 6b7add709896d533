"""Which layouts of the scales torch's FP8 GEMMs (cuBLASLt) take on an H100 for DeepSeek-V3's scaling, A in 1 x 128
blocks and B in 128 x 128 blocks, at shapes where K / 128 is and is not a multiple of 4 and M is 1 to 4: the layouts
``worker/fp8_peer.py`` gives the peer, and the shapes where it has none.

Usage: python research/fp8_peer_layouts.py   (a GPU, torch 2.9 or later)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DEV = "cuda"


def attempt(call, *args, **kwargs) -> str:
    try:
        call(*args, **kwargs)
    except Exception as exc:  # what torch or cuBLASLt said, first line
        return "ERR " + " ".join(str(exc).split())[:100]
    return "OK"


def main() -> None:
    kinds = F.ScalingType
    for m, n, k in [(256, 256, 256), (384, 256, 640), (256, 256, 512), (256, 256, 1024), (8192, 8192, 16),
                    (1, 512, 256), (2, 512, 256), (4, 512, 256), (1, 512, 512)]:  # fmt: skip
        a = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn).t()  # K x N, column-major: B stored N x K
        kb, nb = -(-k // 128), -(-n // 128)
        l4 = -(-kb // 4) * 4
        sa = torch.ones(kb, m, device=DEV).t()  # (M, K/128), M-major
        padded = torch.ones(nb, l4, device=DEV)
        layouts = {
            "B (K/128, N/128) strides (1, L4)": padded[:, :kb].t(),
            "B (L4, N/128) strides (1, L4)": padded.t(),
            "B (K/128, N/128) contiguous": torch.ones(kb, nb, device=DEV),
        }
        for name, sb in layouts.items():
            v1 = attempt(torch._scaled_mm, a, b, sa, sb, out_dtype=torch.bfloat16)
            recipes = kinds.BlockWise1x128, kinds.BlockWise128x128
            v2 = attempt(F.scaled_mm, a, b, sa, recipes[0], sb, recipes[1], output_dtype=torch.bfloat16)
            print(f"{m}x{n}x{k} {name}: _scaled_mm {v1}; scaled_mm {v2}")


if __name__ == "__main__":
    main()
