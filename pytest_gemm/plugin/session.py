"""The plugin's one session object (in ``config.stash``), registered as a plugin: every hook that needs state.

It holds the run's settings and facts (:class:`~.facts.RunFacts`, derived once), the GPU workers, the gate,
the shard, and the ledger of every test's judged result, from which the saved run, the summary, the report
and the terminal's tables are made (``summary.py`` prints them).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

from ..isolation.dispatch import Done, GpuWorkers
from ..judge.case import judge_outcome
from ..options import label
from ..records.case_record import CaseRecord, CompileRecord
from ..records.plain import to_plain
from ..records.result import CaseResult
from ..report.failure import failure_text, kernel_declarations
from ..report.markdown import markdown, summary_cases
from ..report.regression import replay_command
from ..runs.data import stored
from ..runs.saved import section
from ..settings import Settings
from ..specs.sharding import in_shard
from ..worker.serve import DEFAULT_BACKEND
from . import summary
from .ahead import Lookahead
from .benchmark import record_device_times
from .compile_ahead import CompileAhead, jobs_of, terminal_line
from .configure import cubin_cache
from .facts import RunFacts
from .gating import Gatekeeper
from .items import GemmCaseItem, GemmCompileItem, GemmFailure, GemmSanitizeItem, skip_case
from .ledger import Ledger
from .outputs import check_outputs, claim_report
from .pictures import Pictures
from .properties import (
    COMPILE,
    DECLARED,
    DIAGNOSIS,
    GPU,
    HEATMAP,
    MARGIN,
    NO_DEVICE,
    RECORD,
    SOURCE,
    TRANSIENT,
    UNTIMED,
    WHOLE_FILE,
    WORKER,
    props,
)
from .selection import Selection
from .terminal import LONG_RUN, gpus_line, header_line, no_device_line, progress_note, summary_file_text
from .walk import heard_notes

__all__ = ["GemmSession"]


class GemmSession:
    """One pytest-gemm run."""

    def __init__(self, config: pytest.Config, settings: Settings, facts: RunFacts) -> None:
        self.config, self.settings, self.facts = config, settings, facts
        self.gatekeeper = Gatekeeper(settings.gate, config.rootpath)
        self.gatekeeper.check_files()
        self.cubins = cubin_cache(config)  # None, with a warning, where the project cannot hold it
        self.compile_ahead = CompileAhead(self.cubins, settings.compile_timeout, terminal_line(config))
        self._workers: GpuWorkers | None = None
        self.ahead = Lookahead(config, settings, facts.timed, lambda: self.workers)
        self.ledger = Ledger(config, settings, facts)
        self.pictures = Pictures(config, settings.report)
        if facts.controller:  # where the run writes, checked before any work (xdist workers write none of it)
            check_outputs(config, settings, self.pictures)
        # what the controlling process gathers from reports
        self.compiled: list[CompileRecord] = []
        self.gpus: dict[str, dict[str, Any]] = {}  # GPU model -> its facts, for each model that timed a case
        self.per_gpu: Counter[str] = Counter()  # cases run on each GPU (a run on several)
        self.worker_pids: set[int] = set()
        self.replaced: Counter[str] = Counter()
        self.worker_compiles: Counter[str] = Counter()  # kernels compiled by workers, and found in the cache
        self.drawn: set[str] = set()  # failed cases whose heatmaps were drawn as they ended
        self.no_device: Counter[str] = Counter()  # GPU cases skipped for want of a device, by reason
        self.declared: dict[str, list[str]] = {}  # kernel -> header declarations that change its checks
        self.device_note: str | None = None  # said after collection: no device, and how many cases will skip
        self.left_out = 0  # tests this shard left to the other shards
        self.selection = Selection(settings)  # what --gemm-dtypes and --gemm-shapes left of each kernel
        self.lines: list[tuple[str, bool]] = []  # what the end of the run says beside the tables (text, red)

    @property
    def started_workers(self) -> GpuWorkers | None:
        """The GPU workers, if the run started them (the end of the run says what became of them)."""
        return self._workers

    @property
    def gpu(self) -> dict[str, Any] | None:
        """The facts of the first GPU model that timed a case (the run's GPU on a host of one model)."""
        return next(iter(self.gpus.values()), None)

    # -- running a case --------------------------------------------------------------------------
    @property
    def workers(self) -> GpuWorkers:
        if self._workers is None:
            backend = self.config.hook.pytest_gemm_worker_backend(config=self.config) or DEFAULT_BACKEND
            cache = str(self.cubins.folder) if self.cubins else None
            self._workers = GpuWorkers(
                backend, cache, self.settings.timeout, wanted=self.settings.gpus, worker_id=self.facts.worker_id
            )
        return self._workers

    def run_case(self, item: GemmCaseItem, benchmark: Any) -> None:
        """Run one case in a GPU worker, then skip, fail or record it as its judgement says."""
        request = self.ahead.request(item, benchmark is not None and self.facts.timed)
        done = self.ahead.take(item, request).result()
        outcome = done.outcome
        self._note_worker(item, done)
        if outcome.skip is not None and done.unavailable is not None:
            item.user_properties.append((NO_DEVICE, done.unavailable))
        if outcome.output.strip():
            item.add_report_section("call", "GPU worker output", outcome.output)
        gpu = done.facts or self.workers.facts or {}
        sha, save_raw = item.source_sha256, self.facts.save_raw
        result = judge_outcome(item.case, item.nodeid, outcome, gpu, source_sha256=sha, save_raw=save_raw)
        if result.outcome == "skipped":
            skip_case(item, result)
        if result.margin is not None:
            item.user_properties.append((MARGIN, result.margin))
        if result.outcome == "passed" and result.message:  # verified, not timed: why
            item.user_properties.append((UNTIMED, result.message))
        if result.timing is not None:
            item.user_properties.append((GPU, gpu))
            item.user_properties.append((RECORD, result.timing.to_dict()))
        if result.failed:
            self._failed(item, result, str(gpu.get("name", "")))
        if result.timing is not None and outcome.timing is not None:
            record_device_times(benchmark, item.gemm_clock, list(outcome.timing.kernel_s), result.timing.to_dict())

    def _failed(self, item: GemmCaseItem, result: CaseResult, gpu: str) -> None:
        assert result.diagnosis is not None
        drawn = self.pictures.heatmap(item.nodeid, result.diagnosis, gpu)
        if drawn is not None:
            item.user_properties.append((HEATMAP, drawn))
        if self.pictures.folder is None and not self.facts.saves_run:  # nothing will draw it: the words travel
            result = dataclasses.replace(result, diagnosis=dataclasses.replace(result.diagnosis, error_map=None))
        item.user_properties.append((DIAGNOSIS, to_plain(stored(result).diagnosis)))
        replay = replay_command(item.nodeid, item.case.shape, item.base_seed)
        raise GemmFailure(failure_text(item.name, result, replay))

    def _note_worker(self, item: GemmCaseItem, done: Done) -> None:
        outcome = done.outcome
        failure = outcome.failure
        replaced = str(failure.kind) if failure is not None and failure.replace_worker else None
        if outcome.worker or replaced:
            note = {"pid": outcome.worker, "replaced": replaced, "compiled": outcome.compiled, "cached": outcome.cached}
            note |= {"autotuned": list(outcome.autotuned)} if outcome.autotuned else {}
            gpu = done.gpu.label if done.gpu is not None else None
            item.user_properties.append(
                (WORKER, {**note, "phase_s": outcome.phase_s, "wall_s": done.wall_s, "gpu": gpu})
            )

    # -- hooks -----------------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [header_line(config, self.settings, self.facts, self.cubins)]
        if self.settings.shard is not None:
            index, count = self.settings.shard
            said = f"pytest-gemm: shard {index} of {count} of the selected tests"
            lines.append(f"{said} (by the SHA-256 of each test id)")
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """With --gemm-require-gpu, no usable device is a usage error, before anything runs."""
        self.ledger.session = session
        if not self.settings.require_gpu or not (self.facts.controller and self.facts.posix):
            return
        self.workers.probe()  # the worker it starts runs the cases (without xdist)
        reason = self.workers.unavailable
        if self.facts.xdist:
            self.workers.close()  # the xdist workers start their own
            self._workers = None
        if reason is not None:
            raise pytest.UsageError(f"{label('require-gpu')}: no CUDA device ({reason})")

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None]:
        """After every other selection: tell each case whether its whole kernel file is selected and which header
        declarations of its kernel are in force (user properties: they cross from xdist workers, where this hook
        runs, to the controlling process); then keep this shard's tests (a shard is not a narrower selection)."""
        collected = len(items)
        result = yield
        selected: Counter[Any] = Counter(item.parent for item in items if isinstance(item, GemmCaseItem))
        for item in items:
            if isinstance(item, GemmCaseItem):
                spec = item.case.spec
                lines = kernel_declarations(spec)
                if lines:
                    item.user_properties.append((DECLARED, {"kernel": f"{spec.path}::{spec.name}", "lines": lines}))
                whole = selected[item.parent] == getattr(item.parent, "n_cases", -1)
                item.user_properties.append((WHOLE_FILE, {"file": spec.path, "whole": whole}))
        if self.settings.shard is not None:
            kept = [item for item in items if in_shard(item.nodeid, self.settings.shard)]
            if len(kept) < len(items):
                chosen = {id(item) for item in kept}
                config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
                self.left_out = len(items) - len(kept)
                items[:] = kept
            if hasattr(config, "workeroutput"):  # an xdist worker: its controller learns it (pytest_testnodedown)
                config.workeroutput["gemm_shard_left_out"] = self.left_out
        for item in items:
            if isinstance(item, GemmCaseItem):
                item.user_properties.append((SOURCE, {"file": item.case.spec.path, "sha256": item.source_sha256}))
        if self.facts.controller:  # an xdist worker's counts are its own
            self.ledger.collected = collected
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Start compiling the compile items ahead; when GPU cases are to run, ask for the device now, so that a
        missing one is said before they skip."""
        if self.facts.controller:
            self.ledger.selected = len(session.items)  # after every selection (--lf's comes after the shard's)
        self.lines += [(line, False) for line in self.selection.finish(self.config, session.items)]  # a usage error?
        if self.config.getoption("collectonly") or not (self.facts.controller and self.facts.posix):
            return
        get = self.config.getoption
        skipped = get("benchmark_only", False) or get("setupplan", False) or get("setuponly", False)
        if not self.facts.xdist and not skipped:
            self.compile_ahead.start(jobs_of(session.items, GemmCompileItem))
        runnable = [i for i in session.items if isinstance(i, GemmCaseItem) and i.case.skip_reason is None]
        if not runnable:
            return
        if not self.facts.xdist:
            self.ahead.order(session.items)
        self._show_progress(len(session.items))
        if self.workers.probe() is not None and self.workers.unavailable is not None:
            self.device_note = no_device_line(self.workers.unavailable, len(runnable), ahead=True)
        elif not self.facts.xdist:
            self.device_note = gpus_line(self.workers.gpus, self.workers.note)

    def _show_progress(self, total: int) -> None:
        """In a long run, pytest's progress column also says how long is left, and what each GPU has done (it
        wraps the terminal reporter's progress text, a private method: without it, pytest's column stays)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        original = getattr(reporter, "_get_progress_information_message", None)
        if original is None or getattr(reporter, "_show_progress_info", None) != "progress" or total <= LONG_RUN:
            return
        start = time.monotonic()

        def message() -> str:
            text = original()
            done = int(getattr(reporter, "reported_progress", 0))
            queued, state = self._workers.queue_state() if self._workers is not None else (0, {})
            note = progress_note(done, total, time.monotonic() - start, self.per_gpu, queued, state)
            return f"{text[:-1]}, {note}]" if note and text.endswith("]") else text

        reporter._get_progress_information_message = message

    def pytest_report_collectionfinish(self) -> list[str]:
        """Said before anything runs, and again after a run's output at its end; under --co, where the listing is
        the output, at the end only."""
        ahead = [] if self.config.getoption("collectonly") else self.selection.lines
        return [*ahead, *([self.device_note] if self.device_note else [])]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Tests are about to run (not so under --collect-only, --help, --fixtures): the report folder is claimed."""
        if self.facts.controller and not self.config.getoption("collectonly"):
            claim_report(self.config, self.settings, self.pictures)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if self.facts.posix:
            self.ahead.run_ahead(item, nextitem)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report: pytest.TestReport = yield
        if report.when == "setup" and not report.passed:
            self.ahead.drop(item.nodeid)  # its case was sent ahead, and will not be used
        if report.skipped and isinstance(item, (GemmCaseItem, GemmSanitizeItem)) and isinstance(report.longrepr, tuple):
            # a skip from the worker ("no CUDA device", another arch) points at the kernel, not at this module
            spec = item.case.spec if isinstance(item, GemmCaseItem) else item.spec
            report.longrepr = (item.nodeid.split("::")[0], spec.line, report.longrepr[2])
        if report.when != "call":
            return report
        if report.passed and not self.settings.gate.update:
            for i, (name, value) in enumerate(report.user_properties):
                if name == RECORD:
                    gated = self.gatekeeper.gate(report, CaseRecord.from_dict(value)).to_dict()
                    report.user_properties[i] = (RECORD, gated)
                    benchmark = getattr(item, "funcargs", {}).get("benchmark")
                    if benchmark is not None and "gemm" in benchmark.extra_info:
                        benchmark.extra_info["gemm"] = gated  # saved runs carry the gate's verdict too
        # what only crossed to the controlling process leaves the item: the teardown report (JUnit XML's) is slim;
        # the timing record there is the gated one
        gated = dict(report.user_properties).get(RECORD)
        kept = [(k, v) for k, v in item.user_properties if k not in TRANSIENT]
        item.user_properties[:] = [(k, gated if k == RECORD and gated is not None else v) for k, v in kept]
        if isinstance(item, GemmCaseItem):
            heatmap = next(iter(props(report, HEATMAP)), None)
            record = next(iter(props(report, RECORD)), None)
            extras = self.pictures.html_extras(item.nodeid, heatmap, record["dtype"] if record else None)
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.ledger.collection_error(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for whole in props(report, WHOLE_FILE):
            # a shard is a partial selection: its update adds and changes entries, never removes
            self.gatekeeper.whole_files[whole["file"]] = whole["whole"] and self.settings.shard is None
        for declared in props(report, DECLARED):
            self.declared[declared["kernel"]] = list(declared["lines"])
        if report.skipped:
            self.no_device.update(props(report, NO_DEVICE))
        self.ledger.add(report)
        if report.when != "call":
            return
        for worker in props(report, WORKER):
            if worker["pid"]:
                self.worker_pids.add(worker["pid"])
            if worker.get("gpu"):
                self.per_gpu[worker["gpu"]] += 1
            if worker["replaced"]:
                self.replaced[worker["replaced"]] += 1
            self.worker_compiles.update(compiled=worker.get("compiled", 0), cached=worker.get("cached", 0))
        self.compiled += [CompileRecord.from_dict(value) for value in props(report, COMPILE)]
        if props(report, HEATMAP):
            self.drawn.add(report.nodeid)
        for facts in props(report, GPU):
            self.gpus.setdefault(str(facts.get("name", "")), facts)
        timing = self.ledger.tests[report.nodeid].timing  # the ledger has read it from this report
        if timing is not None and props(report, RECORD):
            self.gatekeeper.collect(report, timing)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Under pytest-xdist the workers collect and select: what the shard left out comes from theirs, and the lines
        they would have said after collection are said at the end."""
        said = getattr(node, "workeroutput", None) or {}
        self.left_out = max(self.left_out, int(said.get("gemm_shard_left_out", 0)))
        self.lines += [(line, False) for line in heard_notes(self.config, said)]
        self.lines += self.selection.heard(said)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        shard = self.settings.shard
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and shard is not None and self.left_out:
            session.exitstatus = pytest.ExitCode.OK  # a shard that holds none of the selected tests did its part
            self.lines.append((summary.empty_shard_line(shard, self.left_out), False))
        if self.selection.error is not None:  # from the xdist workers, which ran nothing
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        self.compile_ahead.close()
        if self._workers is not None:
            self._workers.close()
        if not self.facts.controller:
            self.pictures.close()  # the heatmaps it drew as its cases ended are in the folder before it ends
            return  # an xdist worker: the controlling process writes
        if self.settings.gate.update:
            self.gatekeeper.write(self.gpus)
            if self.gatekeeper.update_errors and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = self.settings.gate.summary
        if path is not None:
            text = "## pytest-gemm\n\n" + markdown(summary_cases(self.ledger.tests))
            error = summary_file_text(path, text)
            self.lines.append((error or f"pytest-gemm summary: {path}", bool(error)))
            if error and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        said = self.pictures.write(self.ledger.run(self.gpu or {}, self.gpus), self.drawn)
        self.lines += said
        if said and said[-1][1] and self.pictures.asked and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the report itself could not be written

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        summary.write(self, terminalreporter)

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        """Add the GPU's facts to pytest-benchmark's machine info (and so to its saved JSON)."""
        workers = self._workers
        gpu = (workers.facts if workers else None) or self.gpu  # the first GPU's, whichever timed first
        if gpu is None and workers is not None and workers.unavailable:
            gpu = {"available": False, "reason": f"no CUDA device: {workers.unavailable}"}
        machine_info["gpu"] = gpu or {"available": False, "reason": "no GPU case was timed in this run"}
        if len(self.gpus) > 1:  # a host of mixed models: each timed case names its own
            machine_info["gpus"] = list(self.gpus.values())

    def pytest_benchmark_update_json(self, config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
        """Saved runs carry every test's judged result, failed cases' diagnoses included (docs/reports.md)."""
        data = self.ledger.run(self.gpu or {}, self.gpus)
        data.date = str(output_json.get("datetime") or data.date)
        output_json["gemm"] = section(data)
