"""Saved runs written by older pytest-gemm versions, read into today's form before they are checked.

Format 1 kept failed verifications in a ``failures`` list beside ``tests`` (each with its diagnosis as
sentences and a full error map: maps are pooled to ``STORED_CELLS`` a side once read), and timing records
named their suspicions in sentences and their gate results without whether they fail the test. Formats 1 and 2 kept
a diagnosis's declarations as flat fields, the storage orders and the scales in words (``"A MxK, B NxK, C MxN"``,
``"A 1x128 (stored KxM), B 128x128, fp32"``), which are read into today's typed ``declared`` record.
"""

from __future__ import annotations

import re
from typing import Any

from ..judge.gate import GatePolicy
from ..records.plain import to_plain
from ..records.scales import Scales
from ..records.storage import Storage
from ..records.verdicts import GateVerdict, TimingProblem, Verdict
from .check import WrongValue, check, key

__all__ = ["legacy_declarations", "legacy_record", "legacy_tests"]

#: what a format-1 record's suspicion sentence says, and the word it is now
_SUSPICIONS = (("peak", TimingProblem.ABOVE_PEAK), ("faster than cuBLAS", TimingProblem.FASTER_THAN_CUBLAS))


def _suspicion(value: Any) -> Any:
    if not isinstance(value, str) or value in {p.value for p in TimingProblem}:
        return value
    return next((word.value for text, word in _SUSPICIONS if text in value), value)


def legacy_record(value: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """A timing record as saved (``extra_info["gemm"]``), with a format-1 record's sentences as words and its
    gate result saying whether it fails the test (by the settings the run saved)."""
    out = dict(value)
    for name in ("suspicious", "suspicious_expected"):
        if isinstance(out.get(name), list):
            out[name] = [_suspicion(v) for v in out[name]]
    gate = out.get("gate")
    if isinstance(gate, dict) and "fails" not in gate and gate.get("verdict") in {v.value for v in GateVerdict}:
        out["gate"] = {**gate, "fails": GatePolicy.of_saved(settings).fails(GateVerdict(gate["verdict"]))}
    return out


def legacy_tests(tests: dict[str, Any], failures: list[Any]) -> dict[str, Any]:
    """The ``tests`` section, with a format-1 run's ``failures`` folded into its tests as diagnoses."""
    if not failures:
        return tests
    tests = dict(tests)
    for i, failed in enumerate(failures):
        where = f"gemm.failures[{i}]"
        check(failed, dict, where)
        for name in ("test", "dtype", "shape"):
            check(failed.get(name), str, key(where, name))
        said = failed.get("diagnosis", [])
        check(said, list[str], key(where, "diagnosis"))
        diagnosis = {
            "kind": Verdict.WRONG_OUTPUT.value,
            **{name: failed.get(name) for name in ("dtype", "shape", "alpha", "beta")},
            "error_map": failed.get("error_map"),
            "said": said,
        }
        entry = tests.get(failed["test"])
        if entry is not None and not isinstance(entry, dict):
            raise WrongValue(f"{key('gemm.tests', failed['test'])}: expected an object")
        entry = dict(entry or {"outcome": "failed", "kind": "case", "message": said[0] if said else ""})
        tests[failed["test"]] = {**entry, "diagnosis": diagnosis}
    return tests


#: a format-2 diagnosis's declarations, flat
_FLAT = ("always_reads_c", "nondeterministic", "storage", "accumulate", "scaling")
#: how format 2 wrote an FP8 kernel's scales (``Scales.describe``)
_SCALES = re.compile(
    r"A (?P<A>[\w]+)(?: \(stored (?P<A_stored>\w+)\))?, B (?P<B>[\w]+)(?: \(stored (?P<B_stored>\w+)\))?, "
    r"(?P<type>\w+)(?:, rows padded to (?P<align>\d+) bytes)?"
)


def _scales(text: str, where: str) -> Scales:
    found = _SCALES.fullmatch(text)
    if found is None:
        raise WrongValue(f"{where}: expected scales such as 'A 1x128 (stored KxM), B 128x128, fp32', got {text!r}")
    words: dict[str, Any] = {name: value for name, value in found.groupdict().items() if value is not None}
    if "align" in words:
        words["align"] = int(words["align"])
    return Scales(**words)


def legacy_declarations(diagnosis: Any, where: str) -> Any:
    """A saved diagnosis with format 2's flat declarations (the storage orders and scales in words) as today's
    ``declared`` record; any other value as it is (the reader checks it)."""
    if not isinstance(diagnosis, dict) or not set(_FLAT) & set(diagnosis):
        return diagnosis
    flat = {name: diagnosis[name] for name in _FLAT if name in diagnosis}
    for name in ("nondeterministic", "storage", "accumulate", "scaling"):
        check(flat.get(name, ""), str, key(where, name))
    check(flat.get("always_reads_c", False), bool, key(where, "always_reads_c"))
    try:
        storage = Storage.of_text(flat.get("storage", ""))
    except ValueError as exc:
        raise WrongValue(f"{key(where, 'storage')}: {exc}") from None
    scaling = flat.get("scaling", "")
    declared = {
        "storage": to_plain(storage),
        "accumulate": flat.get("accumulate", ""),
        "always_reads_c": flat.get("always_reads_c", False),
        "nondeterministic": flat.get("nondeterministic", ""),
        "scales": to_plain(_scales(scaling, key(where, "scaling"))) if scaling else None,
    }
    return {**{k: v for k, v in diagnosis.items() if k not in _FLAT}, "declared": declared}
