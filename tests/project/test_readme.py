"""The README's figures and words that can go stale are checked against the code: the variant count, the sample run's
totals, the extras, .ci/run's Chromium and whether --gemm-kernels takes a value."""

from __future__ import annotations

import re
import subprocess
import sys

from support import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _collected(*args: str) -> int:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    match = re.search(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", result.stdout)
    assert match, result.stdout[-2000:]
    return int(match[1])


def test_the_readmes_variant_count_is_the_bundled_kernels_compile_items():
    said = re.search(r"the (\d+) bundled variants", README)
    assert said, "the README no longer says how many variants the compile cache figure is for"
    assert int(said[1]) == _collected("--gemm-kernels", "kernels/", "-m", "gemm_compile")


def test_the_readmes_sample_run_counts_every_test_its_command_collects():
    command = re.search(r"`pytest (--gemm-kernels tests/kernels_faults[^`]*)`", README)
    totals = re.search(r"\n(\d+) failed, (\d+) passed, (\d+) skipped in ", README)
    assert command and totals
    args = command[1].split()
    assert sum(map(int, totals.groups())) == _collected(*args)


def test_the_readme_says_what_ci_installs_and_which_extras_bring_xdist():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("cu13", "cu12"):
        assert any(dep.startswith("pytest-xdist") for dep in extras[extra]), extra
    assert "the `cu13` and `cu12` extras install it" in README
    if "chromium" in (ROOT / ".ci" / "run").read_text():
        assert "Chromium" in README


def test_the_readme_says_gemm_kernels_takes_no_value():
    row = next(line for line in README.splitlines() if line.startswith("| `--gemm-kernels` |"))
    assert "taking no value" in row and "pytest's arguments" in row
