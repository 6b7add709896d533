"""The pytest layer: options, collection of kernel files into test items, and reports.

It stays thin: parsing lives in :mod:`.spec`, expansion in :mod:`.cases`, compiling in
:mod:`.compiler`, GPU work in :mod:`.device`, judging in :mod:`.verify` and the
failure text in :mod:`.report`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .benchmark_bridge import DeviceClock, record_device_times
from .cases import Case, case_seed, expand, variant_shared_mem
from .ci_summary import CASE, CaseSummary
from .compiler import CompileError, NvrtcUnavailable, compile_kernel
from .device import DeviceUnavailable, KernelLaunchError, open_device
from .gatekeeper import WHOLE_FILE, GateKeeper
from .kernel_files import load_specs, shown_path, source_hash
from .nvml import GpuMonitor, open_monitor, throttle_flags
from .options import Settings, add_options, read_settings
from .peaks import peak_flops
from .report import failure_message, stats_line
from .reports import CompileReport, TimingReport
from .spec import KernelFileError, KernelSpec
from .timing import summarize

SETTINGS = pytest.StashKey[Settings]()


class GemmFailure(Exception):
    """A case failed; its message is the whole report (no Python traceback is useful here)."""


#: Errors whose message says everything: shown without a traceback of the plugin's internals.
_REPORTED_AS_TEXT = (GemmFailure, KernelLaunchError, KernelFileError, CompileError)


class _TextFailure:
    """Mixin for items: failures with a complete message are shown as that message alone."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, _REPORTED_AS_TEXT):
            return str(excinfo.value)
        return super().repr_failure(excinfo)  # type: ignore[misc]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gemm: a pytest-gemm case (compile or GPU)")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with 'no CUDA device' without one")
    config.addinivalue_line("markers", "gemm_compile: compiles a kernel with NVRTC (no GPU needed)")
    if not config.getoption("gemm_kernels"):
        return
    config.stash[SETTINGS] = read_settings(config)
    # One malformed kernel file must not stop the others: its collection error is reported
    # (and the run fails), but the rest of the kernels still run.
    config.option.continue_on_collection_errors = True
    config.pluginmanager.register(CompileReport(), "gemm-compile-report")
    config.pluginmanager.register(TimingReport(), "gemm-timing-report")
    settings = config.stash[SETTINGS]
    keeper = GateKeeper(settings.gate, config.rootpath)
    keeper.check_files()
    config.pluginmanager.register(keeper, "gemm-gatekeeper")
    config.pluginmanager.register(CaseSummary(settings.gate.summary), "gemm-case-summary")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        paths = config.getini("gemm_kernel_paths")
        config.args = [str(config.rootpath / p) for p in paths]


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if SETTINGS not in config.stash:
        return None
    s = config.stash[SETTINGS]
    t = s.timing
    xdist = bool(getattr(config.option, "numprocesses", None)) and not config.getoption("benchmark_enable", False)
    if config.getoption("benchmark_skip", False) or config.getoption("benchmark_disable", False):
        timing = "timing off"
    elif xdist:
        timing = "timing off under xdist (pytest-benchmark's rule; --benchmark-enable times anyway)"
    else:
        timing = (
            f"timing: {'cold' if t.cold_cache else 'hot'} L2, noise target {100 * t.stop.target:g}%, "
            f">= {t.stop.min_samples} samples, <= {t.stop.max_time:g} s per case"
        )
    g = s.gate
    folder = shown_path(g.folder, config.rootpath)
    if g.update:
        gate = f"recording baselines in {folder}/"
    else:
        gate = f"gate: {g.metric}, threshold {100 * g.threshold:g}%, baselines in {folder}/"
    return [
        f"pytest-gemm: {len(s.shapes)} shapes, dtypes {','.join(s.dtypes) if s.dtypes else 'as declared'}, "
        f"compile for {','.join(s.archs)}, seed {s.seed}; {timing}; {gate}"
    ]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if SETTINGS not in parent.config.stash:
        return None
    if file_path.suffix == ".cu":
        return KernelFile.from_parent(parent, path=file_path)
    if file_path.suffix == ".py" and not file_path.name.startswith(("test_", "conftest")):
        try:
            text = file_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if "gemm_kernel" in text:
            return KernelFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tell each case whether its whole kernel file is selected (after -k, -m, ids and --lf have chosen)."""
    if SETTINGS not in config.stash:
        return
    selected: dict[Any, int] = {}
    for item in items:
        if isinstance(item, GemmCaseItem):
            selected[item.parent] = selected.get(item.parent, 0) + 1
    for item in items:
        if isinstance(item, GemmCaseItem):
            whole = selected[item.parent] == getattr(item.parent, "n_cases", -1)
            item.user_properties.append((WHOLE_FILE, {"file": item.case.spec.path, "whole": whole}))


class KernelFile(pytest.File):
    """A kernel file (.cu or .py): its specs become compile items (for .cu) and case items."""

    def _specs(self) -> list[KernelSpec]:
        return load_specs(self.path, shown_path(self.path, self.config.rootpath))

    def collect(self) -> Iterator[pytest.Item]:
        settings = self.config.stash[SETTINGS]
        try:
            specs = self._specs()
            expanded = [(spec, expand(spec, settings.shapes, settings.dtypes)) for spec in specs]
        except KernelFileError as exc:
            raise self.CollectError(str(exc)) from None
        for spec, cases in expanded:
            if spec.kind == "cu":
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
                yield GemmCaseItem.from_case(self, case, settings.seed)
        self.n_cases = sum(len(cases) for _, cases in expanded)


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
    """Compile one variant of a .cu kernel for one architecture with NVRTC (no GPU)."""

    def __init__(self, *, spec: KernelSpec, variant, arch: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.variant, self.arch = spec, variant, arch
        self.add_marker("gemm")
        self.add_marker("gemm_compile")

    def runtest(self) -> None:
        try:
            result = compile_kernel(self.spec, self.variant, self.arch)
        except NvrtcUnavailable as exc:
            pytest.skip(str(exc))
        except CompileError as exc:
            raise GemmFailure(
                f"{self.spec.path}: {self.spec.name} does not compile for {self.arch}:\n{exc.log}"
            ) from None
        r = result.resources
        row = {
            "file": self.spec.path,
            "kernel": self.spec.name + (f"[{self.variant.id}]" if self.variant.id else ""),
            "arch": self.arch,
            "registers": r.registers if r else None,
            "spill_stores": r.spill_stores if r else None,
            "spill_loads": r.spill_loads if r else None,
            "stack_bytes": r.stack_bytes if r else None,
            "static_smem": r.static_smem if r else None,
            "dynamic_smem": variant_shared_mem(self.spec, self.variant),
        }
        self.user_properties.append(("gemm_compile", row))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.spec.line - 1, f"{self.spec.name} {self.name}"


class GemmCaseItem(_TextFailure, pytest.Function):
    """One GPU case: verify the kernel on one variant, dtype, shape and alpha/beta."""

    case: Case
    base_seed: int
    gemm_seed: int
    gemm_clock: DeviceClock

    @classmethod
    def from_case(cls, parent: KernelFile, case: Case, base_seed: int) -> GemmCaseItem:
        def gemm_case(gemm_device: Any, request: pytest.FixtureRequest) -> None:
            _run_case(gemm_device, request, None)

        def gemm_timed_case(gemm_device: Any, request: pytest.FixtureRequest, benchmark: Any) -> None:
            _run_case(gemm_device, request, benchmark)

        # Every case is also timed unless --benchmark-skip; only timed cases ask for pytest-benchmark's
        # fixture, so that --benchmark-only keeps them (and skips the compile items).
        timed = not parent.config.getoption("benchmark_skip", False)
        callobj = gemm_timed_case if timed else gemm_case
        item = cls.from_parent(parent, name=f"{case.spec.name}[{case.id}]", callobj=callobj)
        _with_params_id(item, case.spec.name, case.id)
        item.gemm_clock = DeviceClock()
        if timed:
            item.add_marker(pytest.mark.benchmark(timer=item.gemm_clock, group=f"{case.dtype} {case.shape.id}"))
            # A case that fails verification is never timed, by design: not a forgotten fixture.
            item.add_marker(pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"))
        item.case = case
        item.base_seed = base_seed
        item.gemm_seed = case_seed(base_seed, item.nodeid)
        item.add_marker("gemm")
        item.add_marker("gpu")
        item.user_properties.append((CASE, {"file": case.spec.path, "kernel": case.spec.name, "case": case.id}))
        if case.skip_reason:
            item.add_marker(pytest.mark.skip(reason=case.skip_reason))
        return item

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.case.spec.line - 1, self.name


def _run_case(device: Any, request: pytest.FixtureRequest, benchmark: Any) -> None:
    item = request.node
    reason = device.cannot_run(item.case.spec)
    if reason:
        pytest.skip(reason)
    result = device.verify(item.case, item.gemm_seed)
    item.user_properties.append(("gemm_margin", result.kernel.margin))
    replay = f"pytest '{item.nodeid}' --gemm-kernels --gemm-seed {item.base_seed}"
    if not result.passed:
        raise GemmFailure(failure_message(result, dtype=item.case.dtype, replay=replay))
    if benchmark is not None and not benchmark.disabled:
        _time_case(device, request, benchmark, replay)


def _time_case(device: Any, request: pytest.FixtureRequest, benchmark: Any, replay: str) -> None:
    """Time a verified case against cuBLAS, check the numbers are believable, and record them."""
    item: GemmCaseItem = request.node
    case, config = item.case, item.config
    monitor: GpuMonitor = request.getfixturevalue("gemm_monitor")
    gpu = config.stash[GPU_FACTS]
    before = monitor.sample()
    run = device.benchmark(case, item.gemm_seed, config.stash[SETTINGS].timing)
    after = monitor.sample()
    clock = gpu.get("max_sm_clock_mhz") or gpu.get("cuda_max_sm_clock_mhz")
    peak = peak_flops(device.name, device.capability, device.sm_count, clock, case.dtype)
    metrics = summarize(
        run,
        flops=case.shape.flops,
        peak_flops=peak,
        throttle=throttle_flags(before, after),
        expect_fast=case.spec.expect_fast,
    )
    wrong = run.last_output is not None and not run.last_output.passed
    row = {
        "test": item.nodeid,
        "file": case.spec.path,
        "kernel": case.spec.name + (f"[{case.variant.id}]" if case.variant.id else ""),
        "variant": case.variant.id,
        "gpu": device.name,
        "source_sha256": source_hash(item.path),
        "regression_threshold": case.spec.regression_threshold,
        "dtype": case.dtype,
        "shape": case.shape.id,
        "ab": case.ab.id,
        "alpha": case.ab.alpha,
        "beta": case.ab.beta,
        **metrics,
        "verdict": "wrong" if wrong else ("suspicious" if metrics["suspicious"] else "ok"),
        "nvml_before": before,
        "nvml_after": after,
    }
    if config.getoption("benchmark_save_data", False):
        row["raw"] = {"kernel_s": list(run.kernel_s), "cublas_s": list(run.reference_s)}
    item.user_properties.append(("gemm_gpu", gpu))
    item.user_properties.append(("gemm_timing", row))
    if run.reference_output is not None and not run.reference_output.passed:
        raise GemmFailure(
            f"{case.spec.name}[{case.id}]: the cuBLAS launches timed alongside produced a wrong result "
            f"({stats_line(run.reference_output)}); this is a pytest-gemm bug, please report it with: {replay}"
        )
    problems = []
    if wrong:
        problems.append(
            "the output of the last timed launch is wrong (the first launch was right: does the kernel "
            f"keep state between launches?): {stats_line(run.last_output)}"
        )
    problems += [f"suspicious timing: {text}" for text in metrics["suspicious"]]
    if problems:
        hint = (
            'If this speed is real, say why in the kernel header: expect_fast = "...".' if metrics["suspicious"] else ""
        )
        raise GemmFailure("\n".join([f"{case.spec.name}[{case.id}]:", *problems, hint, f"replay: {replay}"]).strip())
    record_device_times(benchmark, item.gemm_clock, list(run.kernel_s), row)


GPU_FACTS = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def gemm_device(pytestconfig: pytest.Config) -> Any:
    """The GPU runner; skips every GPU case with one reason when there is no usable device."""
    try:
        return open_device()
    except DeviceUnavailable as exc:
        pytestconfig.stash[GPU_FACTS] = {"available": False, "reason": f"no CUDA device: {exc}"}
        pytest.skip(f"no CUDA device: {exc}")


@pytest.fixture(scope="session")
def gemm_monitor(gemm_device: Any, pytestconfig: pytest.Config) -> GpuMonitor:
    """NVML's view of the runner's GPU (found by PCI bus id); its facts go to the stash for reports."""
    monitor = open_monitor(gemm_device.pci_bus_id)
    pytestconfig.stash[GPU_FACTS] = {"available": True, **gemm_device.facts(), **monitor.facts()}
    return monitor


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add the GPU's facts to pytest-benchmark's machine info (and so to its saved JSON)."""
    if SETTINGS not in config.stash:
        return
    report = config.pluginmanager.get_plugin("gemm-timing-report")
    gpu = (report.gpu if report is not None else None) or config.stash.get(GPU_FACTS, None)
    machine_info["gpu"] = gpu or {"available": False, "reason": "no GPU case was timed in this run"}
