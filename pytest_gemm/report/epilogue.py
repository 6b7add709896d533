"""A fused epilogue's findings in words: the misreadings of its bias, activation and residual (judge.epilogue), its
second output found wrong, and its declaration (records.epilogue)."""

from __future__ import annotations

from ..records.diagnosis import Diagnosis, Finding
from ..records.epilogue import BIAS_AXES, Epilogue
from ..records.verdicts import Check, Misreading

__all__ = ["EPILOGUE_CHECKS", "EPILOGUE_READINGS", "aux_text", "epilogue_lines", "epilogue_reading"]

#: how each of an epilogue's misreadings reads (``{act}``: the declared activation, ``{axis}``/``{other}``: the
#: bias's declared axis and the other one)
EPILOGUE_READINGS = {
    Misreading.BIAS_OTHER_AXIS: "the bias applied along {other} (bias[i] added to {other_line} i); the header says "
    "{axis}",
    Misreading.ACTIVATION_BEFORE_BIAS: "the activation applied before the bias ({act}(alpha A B + beta C) + bias)",
    Misreading.BIAS_IGNORED: "the bias ignored ({act}(alpha A B + beta C))",
    Misreading.ACTIVATION_IGNORED: "the activation not applied (alpha A B + beta C + bias, no {act})",
    Misreading.OTHER_GELU: "GELU's other form ({other_act} where the header says {act})",
    Misreading.RESIDUAL_IGNORED: "the residual ignored ({act}(alpha A B + beta C + bias) alone)",
}
_LINE = {"N": "column", "M": "row"}


def epilogue_reading(kind: Misreading, d: Diagnosis) -> str:
    """An epilogue's misreading in words, with what the header declares."""
    epi = d.declared.epilogue or Epilogue(d=True)
    axis = epi.bias or "N"
    other = "M" if axis == "N" else "N"
    act = epi.activation or "act"
    return EPILOGUE_READINGS[kind].format(
        act=act,
        axis=f"{axis} ({BIAS_AXES[axis]})",
        other=f"{other} (one value a {_LINE[other]})",
        other_line=_LINE[other],
        other_act="gelu_tanh" if act == "gelu" else "gelu",
    )


def aux_text(f: Finding, d: Diagnosis) -> str:
    """The second output found wrong: how many of its elements, and what they hold."""
    return (
        f"{f.kind}: {f.count} element(s) of aux are not the pre-activation value alpha A B + beta C + bias within its "
        f"bound ({f.region})"
    )


def epilogue_lines(epilogue: Epilogue | None) -> list[str]:
    """A kernel's epilogue in words: one line, none without one."""
    if epilogue is None:
        return []
    parts = [epilogue.describe()]
    if epilogue.aux:
        parts.append("aux holds alpha A B + beta C + bias")
    if epilogue.d:
        parts.append("C is an input only")
    return ["epilogue: " + "; ".join(parts)]


#: the checks of an epilogue, by kind
EPILOGUE_CHECKS = {Check.AUX_WRONG: aux_text}
