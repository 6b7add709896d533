"""Lines the plugin prints: the report header, the workers' line, and the summary file."""

from __future__ import annotations

import fnmatch
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from ..compiler.cache import CubinCache
from ..isolation.devices import Gpu
from ..options import label
from ..records.request import TIMERS
from ..report.outputs import write_summary
from ..settings import Settings
from ..specs.files import declares_kernels, mentions_without_declaring, message_path
from ..specs.source import file_problem
from .facts import RunFacts
from .walk import imported_by_pytest

__all__ = ["header_line", "kernel_file_hints", "no_device_line", "summary_file_text", "workers_line"]


def header_line(config: pytest.Config, s: Settings, facts: RunFacts, cubins: CubinCache | None) -> str:
    t = s.timing
    if not facts.timed and not facts.xdist:
        timing = "timing off"
    elif not facts.timed:
        timing = "timing off under xdist (pytest-benchmark disables benchmarks there)"
    else:
        timing = (
            f"timing: {TIMERS[t.timer]}, {'cold' if t.cold_cache else 'hot'} L2, noise target {100 * t.noise:g}%, "
            f">= {t.min_samples} samples, <= {t.max_time:g} s per case"
        )
    g = s.gate
    folder = message_path(g.folder, config.rootpath)
    gate = (
        f"recording baselines in {folder}/"
        if g.update
        else f"gate: {g.metric}, threshold {100 * g.threshold:g}%, baselines in {folder}/"
    )
    why = "-p no:cacheprovider" if getattr(config, "cache", None) is None else "it could not be created"
    cache = "compiled kernels cached" if cubins else f"no compile cache ({why})"
    return (
        f"pytest-gemm: {len(s.shapes)} shapes, dtypes {','.join(s.dtypes) if s.dtypes else 'as declared'}, "
        f"compile for {','.join(s.archs)}, seed {s.seed}; GPU work in a worker process, {s.timeout:g} s per phase; "
        f"{cache}; {timing}; {gate}"
    )


def no_device_line(reason: str, cases: int, *, ahead: bool) -> str:
    """No CUDA device: why, and how many GPU cases skip for it (``ahead``: said before they run)."""
    noun = "GPU case" if cases == 1 else "GPU cases"
    if ahead:
        return (
            f"pytest-gemm: no CUDA device ({reason}): {cases} {noun} will be skipped "
            "(--gemm-require-gpu makes this an error)"
        )
    return f"pytest-gemm: no CUDA device ({reason}): {cases} {noun} skipped"


def gpus_line(gpus: Sequence[Gpu], note: str | None) -> str | None:
    """The GPUs a run on several uses, one worker pinned to each (None for one GPU and nothing to say)."""
    if len(gpus) < 2 and note is None:
        return None
    shown = "; ".join(f"{gpu.label} {gpu.model}" for gpu in gpus)
    return f"pytest-gemm: {len(gpus)} GPUs, one worker each: {shown}" + (f" ({note})" if note else "")


LONG_RUN = 100  # items in a run from which the progress column says how long is left


def progress_note(
    done: int,
    total: int,
    elapsed_s: float,
    per_gpu: Counter[str],
    queued: int = 0,
    state: dict[str, str] | None = None,
) -> str:
    """What pytest's progress column adds for a long run: on several GPUs, the cases each has done and its
    state ("busy", "out" of service), and the cases sent ahead that wait for a GPU; then the time left,
    estimated from the pace so far ('' until 5% is done, or for a short run). Over 4 GPUs, in short."""
    state = state or {}
    gpus = [*state, *sorted(set(per_gpu) - set(state))]  # GPU order, as the dispatcher numbers them
    parts = []
    if len(gpus) > 4:
        busy = sum(1 for gpu in gpus if state.get(gpu) == "busy")
        parts.append(f"{busy}/{len(gpus)} GPUs busy")
    elif len(gpus) > 1:
        parts += [
            f"{gpu.split(' (')[0]}: {per_gpu[gpu]}" + (f" {state[gpu]}" if state.get(gpu) else "") for gpu in gpus
        ]
    if len(gpus) > 1 and queued:
        parts.append(f"{queued} waiting")
    if total > LONG_RUN and done >= max(1, total // 20) and done < total:
        left = round(elapsed_s / done * (total - done))
        parts.append(f"~{left // 60}m{left % 60:02d}s left" if left >= 60 else f"~{left}s left")
    return ", ".join(parts)


def workers_line(pids: set[int], replaced: Counter[str], compiles: Counter[str], per_gpu: Counter[str]) -> str:
    """How many GPU worker processes ran, what they compiled, and why any were replaced ('' when none ran)."""
    if not pids and not replaced:
        return ""
    text = f"pytest-gemm: {len(pids)} GPU worker process(es)"
    if len(per_gpu) > 1:
        text += " (cases run: " + ", ".join(f"{gpu}: {n}" for gpu, n in sorted(per_gpu.items())) + ")"
    if compiles["compiled"] or compiles["cached"]:
        text += f", {compiles['compiled']} kernel(s) compiled in them, {compiles['cached']} found in the compile cache"
    if replaced:
        reasons = ", ".join(f"{why}: {n}" for why, n in sorted(replaced.items()))
        text += f"; {sum(replaced.values())} replaced after a case left them unusable ({reasons})"
    return text


def summary_file_text(path: Path, text: str) -> str | None:
    """Write the markdown summary (and append it to $GITHUB_STEP_SUMMARY); an error message naming the path and
    whose it is, or None."""
    error = write_summary(path, text, label("summary"))
    return f"pytest-gemm: {error}" if error else None


_KERNEL_FILES = ".cu files with a /* pytest-gemm header, .py files that use @gemm_kernel; see docs/kernel-files.md"


_NOT_DECLARED = (
    "names gemm_kernel but declares no kernel (a kernel is a top-level def under @gemm_kernel(...), or under an alias "
    "the file imports, such as `from pytest_gemm import gemm_kernel as gk`: the file is read without running it)"
)
#: files named in the hints about one folder; more are counted
_NAMED = 5


def _kernel_files_under(folder: Path, config: pytest.Config, *, count: bool) -> tuple[int, list[Path]]:
    """How many kernel files a folder holds (``count``: else 0, and no ``.cu`` file is read), and its .py files that
    name gemm_kernel without declaring a kernel, not looking into the folders pytest does not recurse into. Files that
    are not regular are never read."""
    found, mentions = 0, []
    skip = config.getini("norecursedirs")
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, pattern) for pattern in skip))
        for name in sorted(files):
            path = Path(root, name)
            if count and name.endswith((".cu", ".py")):
                found += declares_kernels(path, test_module=imported_by_pytest(path, config))
            if name.endswith(".py") and mentions_without_declaring(path):
                mentions.append(path)
    return found, mentions


def _not_declared(config: pytest.Config, mentions: list[Path]) -> list[str]:
    """The hint for each file that names gemm_kernel without declaring a kernel (at most :data:`_NAMED`)."""
    hints = [f"pytest-gemm: {message_path(m, config.rootpath)} {_NOT_DECLARED}" for m in mentions[:_NAMED]]
    if len(mentions) > _NAMED:
        hints.append(f"pytest-gemm: and {len(mentions) - _NAMED} more such files")
    return hints


def kernel_file_hints(config: pytest.Config, *, gemm: bool, nothing_ran: bool) -> list[str]:
    """Hints for a run that missed kernels: the paths it was given hold kernel files but --gemm-kernels is off, or
    a named ``.cu`` file has no header, or a folder holds no kernel file (with --gemm-kernels); and, in any
    --gemm-kernels run, each file of its paths that names gemm_kernel without declaring a kernel. A file that is not
    regular is passed over unread."""
    hints = []
    for arg in config.args:
        path = config.invocation_params.dir / arg.split("::")[0]
        if not path.exists() or (not path.is_dir() and file_problem(path) is not None):
            continue
        shown = message_path(path, config.rootpath) + ("/" if path.is_dir() else "")
        if path.is_dir():
            if not nothing_ran and not gemm:
                continue
            count, mentions = _kernel_files_under(path, config, count=nothing_ran)
            if count and not gemm:
                noun = "kernel file" if count == 1 else "kernel files"
                them = "it" if count == 1 else "them"
                hints.append(f"pytest-gemm: {shown} holds {count} {noun}; run with --gemm-kernels to collect {them}")
            elif gemm:
                if nothing_ran and not count:
                    hints.append(f"pytest-gemm: {shown} holds no kernel file ({_KERNEL_FILES})")
                hints += _not_declared(config, mentions)  # whether or not the folder holds kernel files
        elif declares_kernels(path, test_module=imported_by_pytest(path, config, named=not gemm)):  # as collected
            if not gemm and nothing_ran:
                hints.append(f"pytest-gemm: {shown} is a kernel file; run with --gemm-kernels to collect it")
        elif gemm and path.suffix == ".cu":
            hints.append(f"pytest-gemm: {shown} has no pytest-gemm header, so it declares no tests ({_KERNEL_FILES})")
        elif gemm and mentions_without_declaring(path):
            hints.append(f"pytest-gemm: {shown} {_NOT_DECLARED}")
    return hints
