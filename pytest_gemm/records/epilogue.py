"""A fused epilogue, as a record: what a kernel declares with the header's ``epilogue`` key, and the activations it may
apply (docs/kernel-files.md#fused-epilogues).

A kernel with an epilogue computes ``D = act(alpha A B + beta C + bias) + residual``: ``bias`` a vector broadcast
over D's rows or columns, ``act`` one of :data:`ACTIVATIONS`, ``residual`` a matrix of D's shape added after the
activation, and, with ``aux``, a second output holding the pre-activation value ``alpha A B + beta C + bias``. D is
C itself unless the kernel takes ``D``: then C is an input only. The bias, the residual, aux and D are of C's dtype and
laid out as C (with ``ldc``).

Pure: no arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ACTIVATIONS", "BIAS_AXES", "EPILOGUE_ARGS", "Activation", "Epilogue"]


@dataclass(frozen=True)
class Activation:
    """An activation's facts that the bound needs (docs/verification.md#fused-epilogues): ``slope``, its largest
    |derivative| anywhere (how far an error in its argument may grow), and ``error``, how far evaluating it in fp32
    arithmetic may err, as a fraction of |x|."""

    name: str
    formula: str
    slope: float
    error: float


#: fp32's unit roundoff
_U32 = 2.0**-24
#: each activation. Slopes: relu's is 1; GELU's largest is Phi(x) + x phi(x) at x = sqrt(2), 1.1290 (its tanh form's
#: differs by under 1e-3); SiLU's is 1.0998 at x = 2.40. Evaluation: relu is exact; erff and expf are within 2 ulps
#: each (CUDA's math library's documented maximum errors), and the few roundings around each (the argument's scaling,
#: 1 +, the products by x / 2) add up to under 5 units of x: 8 leave room. GELU's tanh form may take the hardware's
#: tanh, tanh.approx.f32 (PTX ISA: an absolute error of at most 2^-10.987), as cuBLASLt's GELU epilogue does (measured
#: on an H200: its fp32 GELU errs by up to 3e-5 in the tanh, 4x the bound of fp32 arithmetic): x / 2 times that
ACTIVATIONS = {
    "relu": Activation("relu", "max(x, 0)", 1.0, 0.0),
    "gelu": Activation("gelu", "x (1 + erf(x / sqrt(2))) / 2", 1.13, 8 * _U32),
    "gelu_tanh": Activation(
        "gelu_tanh", "x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2", 1.13, 0.5 * 2.0**-10.987 + 8 * _U32
    ),
    "silu": Activation("silu", "x / (1 + exp(-x))", 1.10, 8 * _U32),
}
#: the axis a bias vector runs along, and what it is
BIAS_AXES = {
    "N": "N values, one a column of D (torch's nn.Linear bias)",
    "M": "M values, one a row of D (cuBLASLt's bias in its column-major view)",
}
#: the arguments an epilogue adds, and what each is
EPILOGUE_ARGS = {
    "D": "the output, when C is an input only (separate C and D)",
    "bias": "the bias vector",
    "residual": "the matrix added after the activation",
    "aux": "the second output: the pre-activation value",
}


@dataclass(frozen=True)
class Epilogue:
    """What a kernel's epilogue declares: the bias's axis (None: no bias), the activation (None: none), whether it adds
    a residual and writes ``aux``, whether it writes D apart from C (``d``), and the epilogue operands a Python kernel
    is given after C, alpha and beta (and any group arrays), in order."""

    bias: str | None = None
    activation: str | None = None
    residual: bool = False
    aux: bool = False
    d: bool = False
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """The one rule of a valid ``epilogue`` table: each refusal a ValueError naming the entry at fault."""
        if self.bias is not None and (not isinstance(self.bias, str) or self.bias not in BIAS_AXES):
            raise ValueError(f"bias: expected one of {', '.join(map(repr, BIAS_AXES))}, got {self.bias!r}")
        if self.activation is not None and (not isinstance(self.activation, str) or self.activation not in ACTIVATIONS):
            raise ValueError(
                f"activation: expected one of {', '.join(map(repr, ACTIVATIONS))}, got {self.activation!r}"
            )
        for name in ("residual", "aux"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        if self.aux and self.activation is None:
            raise ValueError("aux: the second output holds the pre-activation value; declare an activation")
        for arg in self.args:
            if not isinstance(arg, str) or arg not in EPILOGUE_ARGS:
                raise ValueError(f"args: expected names from {', '.join(EPILOGUE_ARGS)}, got {arg!r}")
        if len(set(self.args)) != len(self.args):
            raise ValueError(f"args: an operand named twice in {list(self.args)}")
        if not (self.bias or self.activation or self.residual or self.d):
            raise ValueError("declares nothing: give a bias, an activation, a residual, or D apart from C")

    @property
    def imports(self) -> tuple[str, ...]:
        """The libraries its peer is reached through (worker/epilogue_peer.py)."""
        return ("torch",)

    @property
    def operands(self) -> tuple[str, ...]:
        """The epilogue's operands besides D, as the kernel takes them: the bias, the residual, aux."""
        return tuple(name for name, on in (("bias", self.bias), ("residual", self.residual), ("aux", self.aux)) if on)

    @property
    def fused(self) -> bool:
        """Whether it changes the result (a bias, an activation or a residual), not only where it lands."""
        return bool(self.bias or self.activation or self.residual)

    @property
    def slope(self) -> float:
        """The activation's largest slope (1 without one)."""
        return 1.0 if self.activation is None else ACTIVATIONS[self.activation].slope

    def describe(self) -> str:
        """``D = gelu(alpha A B + beta C + bias[N]) + residual``, as the report and the docs write it."""
        inner = "alpha A B + beta C" + (f" + bias[{self.bias}]" if self.bias else "")
        outer = f"{self.activation}({inner})" if self.activation else inner
        return f"{'D' if self.d else 'C'} = {outer}" + (" + residual" if self.residual else "")
