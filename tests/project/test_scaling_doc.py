"""docs/scaling.md names only real options, and its GitHub Actions workflow is valid YAML."""

from __future__ import annotations

import argparse
import re

import pytest

from pytest_gemm.cli import _parser
from pytest_gemm.options import OPTIONS

from support import ROOT


# -- the guide -------------------------------------------------------------------------------------
def test_the_scaling_guide_names_only_real_options_and_its_workflow_is_valid_yaml():
    text = (ROOT / "docs" / "scaling.md").read_text()
    plugin = {f"--gemm-{option.name}" for option in OPTIONS} | {"--gemm-kernels"}
    named = set(re.findall(r"--gemm-[a-z][a-z-]*[a-z]", text))
    assert "--gemm-report" in named and named <= plugin, named - plugin
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    merge_options = {o for action in sub.choices["merge"]._actions for o in action.option_strings}
    commands = re.findall(r"pytest-gemm merge [^`\"\n]*(?:\n +[\[-][^\n]*)*", text)
    used = {o for command in commands for o in re.findall(r"(?<![\w-])--[a-z][a-z-]*", command)}
    assert {"--out", "--allow-partial", "--root"} <= used <= merge_options, used - merge_options
    assert all("report-" in c or "run.json" in c or "RUN.json" in c for c in commands)  # never --benchmark-json's
    assert "mkdir -p logs runs" in text  # Slurm writes --output=logs/... only into a folder that exists
    block = re.search(r"```yaml\n(.*?)```", text, re.S)[1]
    assert "{" not in block.replace("${{", "").replace("}}", "")  # block mappings: ${{ }} in a flow mapping breaks
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load(block)["jobs"]
    upload = jobs["gemm"]["steps"][-1]["with"]
    assert upload == {"name": "gemm-shard-${{ matrix.shard }}", "path": "report-${{ matrix.shard }}/"}
    download = next(step for step in jobs["merge"]["steps"] if "download-artifact" in step.get("uses", ""))
    assert "merge-multiple" not in download["with"]  # each shard's run.json in a folder of its own
