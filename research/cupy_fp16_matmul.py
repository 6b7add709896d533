"""How far CuPy's own fp16 matmul is from the exact product, against an fp32 product rounded once to fp16, in units of
u16 times S (the norm a zero-mean sum has): the probe behind the accuracy rule's R term (docs/verification.md; data:
docs/data/h100-2026-11-26-reach-sweep.txt). Needs a GPU: python research/cupy_fp16_matmul.py"""

import cupy as cp

for m, n, k in [(1, 1, 1000), (64, 64, 1000), (1, 1, 65536), (16, 8192, 8192)]:
    rs = cp.random.RandomState(2)
    a = rs.uniform(-1, 1, (m, k), dtype=cp.float32).astype(cp.float16)
    b = rs.uniform(-1, 1, (k, n), dtype=cp.float32).astype(cp.float16)
    exact = a.astype(cp.float64) @ b.astype(cp.float64)
    S = float(cp.sqrt(((a.astype(cp.float64) ** 2).sum(0) * (b.astype(cp.float64) ** 2).sum(1)).sum()))
    got = (a @ b).astype(cp.float64)
    f32 = (a.astype(cp.float32) @ b.astype(cp.float32)).astype(cp.float16).astype(cp.float64)
    e = float(cp.linalg.norm(got - exact))
    e32 = float(cp.linalg.norm(f32 - exact))
    norm = float(cp.linalg.norm(exact))
    print(
        f"{m}x{n}x{k}: |C*|={norm:.3g} S={S:.3g} cupy fp16 err={e:.3g} ({e / S / 2**-11:.3g} u16 of S)"
        f" fp32-then-round err={e32:.3g} ({e32 / S / 2**-11:.3g} u16 of S)"
    )
