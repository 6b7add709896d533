"""Test items: a kernel file is collected into compile items (``.cu``, no GPU) and case items (a GPU worker)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..compiler.limited import CompileTimeout
from ..compiler.nvrtc import CompileError, NvrtcUnavailable
from ..isolation.sanitizer import find_sanitizer, run_tool
from ..options import label
from ..records.case_record import CompileRecord
from ..records.result import CaseResult, ItemResult
from ..report.regression import case_command
from ..specs.archs import parse_arch
from ..specs.bounds import check_counts
from ..specs.cases import (
    Case,
    case_seed,
    check_launch,
    expand,
    to_request,
    variant_shared_mem,
    variant_threads,
)
from ..specs.files import case_path, read_specs
from ..specs.limits import KernelResources, launch_problems, limits_for_arch, near_limits, occupancy
from ..specs.sanitizing import sanitize_case
from ..specs.spec import KernelFileError, KernelSpec, Variant
from .benchmark import DeviceClock
from .compile_ahead import timeout_text
from .properties import add_result
from .stash import SESSION, Host

__all__ = [
    "GemmCaseItem",
    "GemmCompileItem",
    "GemmFailure",
    "GemmSanitizeItem",
    "KernelFile",
    "UnimportedKernelFile",
]


class GemmFailure(Exception):
    """A case failed; its message is the whole report (no Python traceback is useful here)."""


#: Errors whose message says everything: shown without a traceback of the plugin's internals.
_REPORTED_AS_TEXT = (GemmFailure, KernelFileError, CompileError)


class _TextFailure:
    """Mixin for items: failures with a complete message are shown as that message alone."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, _REPORTED_AS_TEXT):
            return str(excinfo.value)
        return super().repr_failure(excinfo)  # type: ignore[misc]


def _session(config: pytest.Config) -> Host:
    """The run's session (plugin/session.py)."""
    return config.stash[SESSION]


class KernelFile(pytest.File):
    """A kernel file (.cu or .py): its specs become compile items (for .cu) and case items."""

    n_cases = -1

    def collect(self) -> Iterator[pytest.Item]:
        settings = _session(self.config).settings
        try:
            shown = case_path(self.path, self.config.rootpath)  # a file outside the rootdir is refused here
            # the hash is of the bytes the specs were read from: a baseline notes it to tell a changed kernel
            specs, source = read_specs(self.path, shown)
            for spec in specs:  # before any case is built: a kernel of millions is refused at once
                limits = {"max_variants": settings.max_variants, "max_cases": settings.max_cases}
                check_counts(spec, settings.shapes, settings.dtypes, **limits, label=label)
                check_launch(spec)  # a launch CUDA refuses whatever the shape: one error, not a failure per case
            expanded = [(spec, expand(spec, settings.shapes, settings.dtypes)) for spec in specs]
        except KernelFileError as exc:
            raise self.CollectError(str(exc)) from None
        _session(self.config).selection.add(expanded)  # what --gemm-dtypes and --gemm-shapes left is said
        for spec, cases in expanded:
            if spec.kind.compiled:
                for variant in spec.variants():
                    for arch in (spec.arch,) if spec.arch else settings.archs:
                        parts = [spec.name] if len(specs) > 1 else []
                        parts += [variant.id, arch]
                        params = "-".join(p for p in parts if p)
                        item = GemmCompileItem.from_parent(
                            self, name=f"compile[{params}]", spec=spec, variant=variant, arch=arch
                        )
                        yield _with_params_id(item, "compile", params)
            for case in cases:
                yield GemmCaseItem.from_case(self, case, settings.seed, source)
        yield from sanitize_items(self, specs, settings.sanitize)
        self.n_cases = sum(len(cases) for _, cases in expanded)


class UnimportedKernelFile(pytest.File):
    """A kernel file named like a test module, in a run without --gemm-kernels: never imported, so its top level
    never runs in the pytest process (the end of the run says to collect it with --gemm-kernels)."""

    def collect(self) -> Iterator[pytest.Item]:
        return iter(())


def _with_params_id(item: pytest.Item, base: str, params: str) -> pytest.Item:
    """Give ``name[params]`` items the structured id that pytest >= 9.2 reads back from its cache.

    pytest 9.2 keeps node ids as (path, names, params) and parses ``--lf`` entries that way;
    an item whose name merely contains brackets would otherwise never match its own cache entry.
    The string node id is unchanged, and older pytest versions have no structured id to fix.
    """
    parent_id = getattr(item.parent, "id", None)
    if parent_id is not None and hasattr(parent_id, "with_params") and hasattr(item, "_id"):
        item._id = parent_id.child(base).with_params(params)
    return item


class GemmCompileItem(_TextFailure, pytest.Item):
    """Compile one variant of a .cu kernel for one architecture with NVRTC (no GPU), and check it can launch."""

    def __init__(self, *, spec: KernelSpec, variant: Variant, arch: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.variant, self.arch = spec, variant, arch
        self.add_marker("gemm")
        self.add_marker("gemm_compile")

    def runtest(self) -> None:
        spec, variant = self.spec, self.variant
        try:
            result = _session(self.config).compile_ahead.result(self.nodeid, spec, variant, self.arch)
        except NvrtcUnavailable as exc:
            pytest.skip(str(exc))
        except CompileError as exc:
            raise GemmFailure(f"{spec.path}: {spec.name} does not compile for {self.arch}:\n{exc.log}") from None
        except CompileTimeout as exc:
            raise GemmFailure(timeout_text(spec, variant, exc)) from None
        r = result.resources
        dynamic = variant_shared_mem(spec, variant)
        major, minor, _ = parse_arch(self.arch)
        limits, threads = limits_for_arch(self.arch, (major, minor)), variant_threads(spec, variant)
        occ, problems, near = None, [], []
        if r is not None and threads is not None and isinstance(dynamic, int):
            occ = occupancy(threads, r.registers, r.static_smem + dynamic, (major, minor))
        if r is not None and limits is not None and threads is not None:
            resources, smem = KernelResources(r.registers, r.static_smem), dynamic if isinstance(dynamic, int) else 0
            problems = launch_problems(threads, smem, resources, limits)
            near = near_limits(threads, smem, resources, limits)
        record = CompileRecord(
            file=spec.path,
            kernel=spec.label(variant),
            arch=self.arch,
            registers=r.registers if r else None,
            spill_stores=r.spill_stores if r else None,
            spill_loads=r.spill_loads if r else None,
            stack_bytes=r.stack_bytes if r else None,
            static_smem=r.static_smem if r else None,
            dynamic_smem=dynamic,
            from_cache=result.from_cache,
            threads=threads,
            blocks_per_sm=occ.blocks if occ else None,
            occupancy_percent=round(occ.warps_percent, 1) if occ else None,
            occupancy_limit=occ.limit if occ else None,
            cannot_launch=bool(problems),
            near_limits=tuple(near),
        )
        add_result(self, ItemResult(CaseResult("failed" if problems else "passed", kind="compile"), compiled=record))
        if problems:
            raise GemmFailure(
                f"{spec.path}: {record.kernel} compiles for {self.arch} but can never launch there:\n"
                + "\n".join(f"  - {p}" for p in problems)
            )

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.spec.line - 1, f"{self.spec.name} {self.name}"


class GemmCaseItem(_TextFailure, pytest.Function):
    """One GPU case: verify the kernel on one variant, dtype, shape and alpha/beta (in a GPU worker)."""

    case: Case
    base_seed: int
    gemm_seed: int
    gemm_clock: DeviceClock
    source_sha256: str  # of the kernel file, as collected

    @classmethod
    def from_case(cls, parent: KernelFile, case: Case, base_seed: int, source_sha256: str) -> GemmCaseItem:
        def gemm_case(request: pytest.FixtureRequest) -> None:
            _session(request.config).runner.run(request.node, None)

        def gemm_timed_case(request: pytest.FixtureRequest, benchmark: Any) -> None:
            _session(request.config).runner.run(request.node, benchmark)

        # Every case is also timed unless --benchmark-skip; only timed cases ask for pytest-benchmark's
        # fixture, so that --benchmark-only keeps them (and skips the compile items).
        timed = _session(parent.config).facts.uses_benchmark
        callobj = gemm_timed_case if timed else gemm_case
        item = cls.from_parent(parent, name=case.name, callobj=callobj)
        _with_params_id(item, case.spec.name, case.id)
        item.gemm_clock = DeviceClock()
        if timed:
            item.add_marker(pytest.mark.benchmark(timer=item.gemm_clock, group=f"{case.dtype} {case.shape.id}"))
            # A case that fails verification is never timed, by design: not a forgotten fixture.
            item.add_marker(pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"))
        item.case = case
        item.base_seed = base_seed
        item.source_sha256 = source_sha256
        item.gemm_seed = case_seed(base_seed, item.nodeid)
        item.add_marker("gemm")
        item.add_marker("gpu")
        if case.skip_reason:
            item.add_marker(pytest.mark.skip(reason=case.skip_reason))
        return item

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.case.spec.line - 1, self.name


#: how much longer than --gemm-timeout one tool may take (the tools slow launches down many times)
SLOWER = 10


def sanitize_items(parent: pytest.File, specs: list[KernelSpec], tools: tuple[str, ...]) -> Iterator[pytest.Item]:
    """The sanitize items of a kernel file's .cu kernels."""
    settings = _session(parent.config).settings
    for spec in specs:
        if not spec.kind.compiled:
            continue
        case = sanitize_case(spec, settings.dtypes)
        for tool in tools:
            params = "-".join(p for p in ([spec.name] if len(specs) > 1 else []) + [tool] if p)
            item = GemmSanitizeItem.from_parent(parent, name=f"sanitize[{params}]", spec=spec, case=case, tool=tool)
            yield _with_params_id(item, "sanitize", params)


class GemmSanitizeItem(_TextFailure, pytest.Item):
    """Run one kernel once, on a small edge shape, under one compute-sanitizer tool (needs a GPU)."""

    def __init__(self, *, spec: KernelSpec, case: Case | None, tool: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.case, self.tool = spec, case, tool
        self.add_marker("gemm")
        self.add_marker("gpu")
        self.add_marker("gemm_sanitize")

    def runtest(self) -> None:
        session = _session(self.config)
        if self.case is None:
            dtypes = session.settings.dtypes
            if dtypes and not set(dtypes) & set(self.spec.dtypes):
                pytest.skip(f"{self.spec.name}: {label('dtypes')} selects none of its dtypes ({', '.join(dtypes)})")
            pytest.skip(f"{self.spec.name}: its rules allow none of the shapes compute-sanitizer runs on")
        sanitizer = find_sanitizer()
        if sanitizer is None:
            pytest.skip("compute-sanitizer not found (it comes with the CUDA toolkit: put its bin/ on PATH)")
        workers = session.runner.workers
        reason = workers.probe()
        if reason is not None:
            pytest.skip(f"no CUDA device: {reason}")
        workers.drain()  # nothing else runs on the GPU beside the tool
        pin = workers.gpus[0].entry if workers.gpus else None
        case, timeout = self.case, SLOWER * session.settings.timeout
        request = to_request(case, str(self.path), session.settings.seed, None)
        kernel = self.spec.function_name  # a substring of its mangled and demangled names alike
        shape = case.shape.id
        what = f"{case.name} (M={case.shape.M}, N={case.shape.N}, K={case.shape.K})"
        try:
            run = run_tool(sanitizer, self.tool, request, kernel, timeout, pin)
        except subprocess.TimeoutExpired:
            raise GemmFailure(f"compute-sanitizer {self.tool} on {what} timed out after {timeout:g} s") from None
        replay = case_command(self.nodeid, shape, f"--gemm-sanitize {self.tool}")
        if run.errors is None or (not run.launched and not run.errors):
            shown = "\n".join(f"    {line}" for line in run.output.splitlines()[-20:])
            raise GemmFailure(
                f"compute-sanitizer {self.tool} did not check {what}: it reported no summary"
                + ("" if run.launched else ", and the kernel was not launched")
                + f"\n  what it printed:\n{shown}\n  replay: {replay}"
            )
        if run.errors:
            lines = "\n".join(f"    {line}" for line in run.first)
            raise GemmFailure(
                f"compute-sanitizer {self.tool} found {run.errors} error(s) in {what}; the first:\n{lines}\n"
                f"  replay: {replay}"
            )

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.spec.line - 1, f"{self.spec.name} {self.name}"
