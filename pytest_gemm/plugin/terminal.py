"""Lines the plugin prints: the report header, the workers' line, and the summary file."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ..compiler.cache import CubinCache
from ..options import Settings
from ..specs.files import shown_path

__all__ = ["header_line", "summary_file_text", "workers_line"]


def header_line(config: pytest.Config, s: Settings, cubins: CubinCache | None) -> str:
    t = s.timing
    xdist = config.getoption("dist", "no") != "no"
    if config.getoption("benchmark_skip", False) or config.getoption("benchmark_disable", False):
        timing = "timing off"
    elif xdist:
        timing = "timing off under xdist (pytest-benchmark disables benchmarks there)"
    else:
        timing = (
            f"timing: {'cold' if t.cold_cache else 'hot'} L2, noise target {100 * t.noise:g}%, "
            f">= {t.min_samples} samples, <= {t.max_time:g} s per case"
        )
    g = s.gate
    folder = shown_path(g.folder, config.rootpath)
    gate = (
        f"recording baselines in {folder}/"
        if g.update
        else f"gate: {g.metric}, threshold {100 * g.threshold:g}%, baselines in {folder}/"
    )
    cache = "compiled kernels cached" if cubins else "no compile cache (-p no:cacheprovider)"
    return (
        f"pytest-gemm: {len(s.shapes)} shapes, dtypes {','.join(s.dtypes) if s.dtypes else 'as declared'}, "
        f"compile for {','.join(s.archs)}, seed {s.seed}; GPU work in a worker process, {s.timeout:g} s per phase; "
        f"{cache}; {timing}; {gate}"
    )


def workers_line(pids: set[int], replaced: Counter[str], compiles: Counter[str]) -> str:
    """How many GPU worker processes ran, what they compiled, and why any were replaced ('' when none ran)."""
    if not pids and not replaced:
        return ""
    text = f"pytest-gemm: {len(pids)} GPU worker process(es)"
    if compiles["compiled"] or compiles["cached"]:
        text += f", {compiles['compiled']} kernel(s) compiled in them, {compiles['cached']} found in the compile cache"
    if replaced:
        reasons = ", ".join(f"{why}: {n}" for why, n in sorted(replaced.items()))
        text += f"; {sum(replaced.values())} replaced after a case left them unusable ({reasons})"
    return text


def summary_file_text(path: Path, text: str) -> str | None:
    """Write the markdown summary (and append it to $GITHUB_STEP_SUMMARY); an error message, or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if step_summary:
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(text)
    except OSError as exc:
        return f"cannot write the summary: {exc}"
    return None
