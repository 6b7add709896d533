"""Compare the failure texts of two runs of the same tests, case by case (JUnit XML, as pytest writes it).

    python research/compare_failures.py OLD.xml NEW.xml

Every test that failed (or was skipped) in either run is listed when its text differs, with a diff; texts that differ
only in what a run measures (times, rates, ratios, process ids, seconds waited) are counted apart. The last line
sums it up. Used for research/refactor-acceptance.sh: a change of the code's shape must leave every failure reading
as it did.
"""

from __future__ import annotations

import difflib
import re
import sys
import xml.etree.ElementTree as ET

#: what a run measures, which two runs of the same case need not share: each replaced by a mark
_MEASURED = (
    (re.compile(r"\d+(\.\d+)?(e[-+]?\d+)? ?(us|ms|s|TFLOP/s)\b"), "<measured>"),
    (re.compile(r"\d+\.\d+x faster"), "<n>x faster"),
    (re.compile(r"\bpid \d+|\bprocess \d+"), "<pid>"),
    (re.compile(r"/tmp/\S+"), "<tmp>"),
)


def texts(path: str) -> dict[str, tuple[str, str]]:
    """Each test's (outcome, text) where it did not pass, keyed by JUnit's classname::name."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                text = (child.text or child.get("message") or "").strip()
                found[f"{case.get('classname')}::{case.get('name')}"] = (child.tag, text)
                break
    return found


def _unmeasured(text: str) -> str:
    for pattern, mark in _MEASURED:
        text = pattern.sub(mark, text)
    return text


def main(argv: list[str]) -> int:
    old, new = texts(argv[0]), texts(argv[1])
    same = measured = 0
    differ = []
    for test in sorted(set(old) | set(new)):
        a, b = old.get(test, ("passed", "")), new.get(test, ("passed", ""))
        if a == b:
            same += 1
        elif a[0] == b[0] and _unmeasured(a[1]) == _unmeasured(b[1]):
            measured += 1
        else:
            differ.append(test)
            print(f"--- {test}: {a[0]} -> {b[0]}")
            print("\n".join(difflib.unified_diff(a[1].splitlines(), b[1].splitlines(), "old", "new", lineterm="")))
    total = same + measured + len(differ)
    print(f"{total} cases that did not pass: {same} read alike, {measured} differ only in measured figures, "
          f"{len(differ)} differ")  # fmt: skip
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
