"""How much one run may ask for, checked before any case is built: the shapes it runs (``--gemm-max-shapes``), the
variants of a kernel (``--gemm-max-variants``) and the GPU cases they make (``--gemm-max-cases``), each a clear
refusal with the count and the option that raises the limit, where expanding them would take minutes and gigabytes.
"""

from __future__ import annotations

from collections.abc import Callable

from ..records.shapes import Shape
from .cases import scalar_pairs
from .spec import KernelFileError, KernelSpec

__all__ = ["DEFAULT_MAX_CASES", "DEFAULT_MAX_SHAPES", "DEFAULT_MAX_VARIANTS", "check_counts"]

#: variants one kernel may have by default (--gemm-max-variants): 128 times the bundled kernels' most (8, in
#: kernels/09_wmma.cu), a sweep of 4 values of 5 params. Its 2,048 compile items for two architectures take about
#: 15 minutes on one core at NVRTC's 0.44 s a variant (docs/architecture.md); 10,000 variants give 20,000.
DEFAULT_MAX_VARIANTS = 1024
#: shapes one run may have by default (--gemm-max-shapes): about 20 times every shape set together (53 shapes), each
#: a GPU case of every variant, dtype and alpha/beta pair of every kernel
DEFAULT_MAX_SHAPES = 1024
#: GPU cases one kernel may have by default (--gemm-max-cases): its most variants (1,024) at the quick set's 3 shapes,
#: in all five float dtypes, with 3 alpha/beta pairs (46,080), fit. Collecting a case took 0.16 ms and 6 KB (100,000
#: shapes of one kernel: 300,002 tests in 47 s, 1.87 GB), so the limit costs about 10 s and 400 MB
DEFAULT_MAX_CASES = 65536


def check_counts(
    spec: KernelSpec,
    shapes: list[Shape],
    dtypes: list[str] | None,
    *,
    max_variants: int,
    max_cases: int,
    label: Callable[[str], str],
) -> None:
    """Refuse, before expanding any case, a kernel whose params give more than ``max_variants`` variants, or whose
    variants, selected dtypes, ``shapes`` and alpha/beta pairs give more than ``max_cases`` cases; each error says how
    many and which option raises the limit (``label``: how messages name an option)."""
    count = spec.variant_count
    if count > max_variants:
        product = " x ".join(f"{len(values)} {name}" for name, values in spec.params)
        raise KernelFileError(
            spec.path,
            f"{spec.name}'s params give {count:,} variants ({product}), each compiled and run at every shape; "
            f"a kernel may have at most {max_variants:,} ({label('max-variants')} raises the limit)",
            line=spec.line,
            key="params",
        )
    selected = sum(1 for d in spec.dtypes if dtypes is None or d in dtypes)
    pairs = len(scalar_pairs(spec))
    cases = count * selected * len(shapes) * pairs
    if cases > max_cases:
        raise KernelFileError(
            spec.path,
            f"{spec.name} would have {cases:,} GPU cases ({count:,} variant(s) x {selected} dtype(s) x "
            f"{len(shapes):,} shapes x {pairs} alpha/beta pair(s)), each a test; a kernel may have at most "
            f"{max_cases:,} ({label('max-cases')} raises the limit; {label('shapes')} and {label('dtypes')} choose "
            "fewer)",
            line=spec.line,
        )
