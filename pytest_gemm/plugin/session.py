"""The plugin's one session object (in ``config.stash``): settings, the GPU worker, the gate, and what
the run gathered for its reports. Registered as a plugin, it holds every hook that needs state.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from typing import Any

import pytest

from ..compiler.cache import CubinCache
from ..isolation.dispatch import Done, GpuWorkers
from ..judge.case import CaseFacts, case_facts, judge_outcome
from ..options import Settings, label
from ..records.case_record import CaseRecord, CompileRecord
from ..report.failure import declarations
from ..report.markdown import SummaryLine, markdown
from ..report.regression import replay_command
from ..report.run_data import FailedCase, section
from ..report.tables import compile_table, timer_names, timing_tables
from ..worker.serve import DEFAULT_BACKEND
from .ahead import Lookahead
from .benchmark import record_device_times
from .compile_ahead import CompileAhead, jobs_of
from .gating import Gatekeeper
from .items import GemmCaseItem, GemmCompileItem, GemmFailure, GemmSanitizeItem
from .pictures import failed_case, html_extras, report_folder, run_data, write
from .properties import CASE, COMPILE, DECLARED, ERROR_MAP, GPU, MARGIN, NO_DEVICE, RECORD, WHOLE_FILE, WORKER
from .terminal import LONG_RUN, gpus_line, header_line, no_device_line, progress_note, summary_file_text, workers_line

__all__ = ["GemmSession"]


def _props(report: pytest.TestReport, key: str) -> list[Any]:
    return [value for name, value in report.user_properties if name == key]


class GemmSession:
    """One pytest-gemm run."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config, self.settings = config, settings
        self.gatekeeper = Gatekeeper(settings.gate, config.rootpath)
        self.gatekeeper.check_files()
        cache = getattr(config, "cache", None)
        self.cubins = CubinCache(cache.mkdir("gemm-cubins")) if cache is not None else None
        self.compile_ahead = CompileAhead(self.cubins)
        self._workers: GpuWorkers | None = None
        self.ahead = Lookahead(config, settings, lambda: self.workers)
        # what the controlling process gathers from reports
        self.records: list[CaseRecord] = []
        self.compiled: list[CompileRecord] = []
        self.summary: dict[str, SummaryLine] = {}
        self.gpus: dict[str, dict[str, Any]] = {}  # GPU model -> its facts, for each model that timed a case
        self.per_gpu: Counter[str] = Counter()  # cases run on each GPU (a run on several)
        self.worker_pids: set[int] = set()
        self.replaced: Counter[str] = Counter()
        self.worker_compiles: Counter[str] = Counter()  # kernels compiled by workers, and found in the cache
        self.summary_error: str | None = None
        self.failures: list[FailedCase] = []  # failed verifications with an error map, for the pictures
        self.report_folder = report_folder(config, settings.report)  # --gemm-report, or beside pytest-html's
        self.report_line: tuple[str, bool] | None = None
        self.no_device: Counter[str] = Counter()  # GPU cases skipped for want of a device, by reason
        self.declared: dict[str, list[str]] = {}  # kernel -> header declarations that change its checks
        self.device_note: str | None = None  # said after collection: no device, and how many cases will skip

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
            worker_id = getattr(self.config, "workerinput", {}).get("workerid")
            self._workers = GpuWorkers(
                backend, cache, self.settings.timeout, wanted=self.settings.gpus, worker_id=worker_id
            )
        return self._workers

    def run_case(self, item: GemmCaseItem, benchmark: Any) -> None:
        """Run one case in a GPU worker, then skip, fail or record it as its verdict says."""
        request = self.ahead.request(item, benchmark is not None and not benchmark.disabled)
        done = self.ahead.take(item, request).result()
        outcome = done.outcome
        self._note_worker(item, done)
        if outcome.skip is not None and done.unavailable is not None:
            item.user_properties.append((NO_DEVICE, done.unavailable))
        if outcome.output.strip():
            item.add_report_section("call", "GPU worker output", outcome.output)
        gpu = done.facts or self.workers.facts or {}
        verdict = judge_outcome(self._facts(item), outcome, gpu, save_raw=self._save_raw())
        if verdict.skip is not None:
            pytest.skip(verdict.skip)
        if verdict.margin is not None:
            item.user_properties.append((MARGIN, verdict.margin))
        if verdict.record is not None:
            item.user_properties.append((GPU, gpu))
            item.user_properties.append((RECORD, verdict.record.to_dict()))
        if verdict.failure is not None:
            if outcome.verification is not None and self._keep_error_maps():
                failed = failed_case(item.nodeid, item.case.dtype, outcome.verification, verdict.diagnosis)
                if failed is not None:
                    item.user_properties.append((ERROR_MAP, failed.to_dict()))
            raise GemmFailure(verdict.failure)
        if verdict.record is not None and outcome.timing is not None:
            record_device_times(benchmark, item.gemm_clock, list(outcome.timing.kernel_s), verdict.record.to_dict())

    def _note_worker(self, item: GemmCaseItem, done: Done) -> None:
        outcome = done.outcome
        failure = outcome.failure
        replaced = str(failure.kind) if failure is not None and failure.replace_worker else None
        if outcome.worker or replaced:
            note = {"pid": outcome.worker, "replaced": replaced, "compiled": outcome.compiled, "cached": outcome.cached}
            gpu = done.gpu.label if done.gpu is not None else None
            item.user_properties.append(
                (WORKER, {**note, "phase_s": outcome.phase_s, "wall_s": done.wall_s, "gpu": gpu})
            )

    def _keep_error_maps(self) -> bool:
        """Whether a report or a saved run will show failed cases' error maps."""
        saved = any(self.config.getoption(o, None) for o in ("benchmark_json", "benchmark_save", "benchmark_autosave"))
        return self.report_folder is not None or saved

    def _save_raw(self) -> bool:
        return bool(self.config.getoption("benchmark_save_data", False))

    def _facts(self, item: GemmCaseItem) -> CaseFacts:
        replay = replay_command(item.nodeid, item.case.shape.id, item.base_seed)
        return case_facts(item.case, item.nodeid, replay, item.source_sha256)

    def _controls_the_run(self) -> bool:
        """Not an xdist worker (those only run cases; the controlling process talks to the user)."""
        return not hasattr(self.config, "workerinput") and os.name == "posix"

    # -- hooks -----------------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [header_line(config, self.settings, self.cubins)]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """With --gemm-require-gpu, no usable device is a usage error, before anything runs."""
        if not self.settings.require_gpu or not self._controls_the_run():
            return
        self.workers.probe()  # the worker it starts runs the cases (without xdist)
        reason = self.workers.unavailable
        if self.config.getoption("dist", "no") != "no":
            self.workers.close()  # the xdist workers start their own
            self._workers = None
        if reason is not None:
            raise pytest.UsageError(f"{label('require-gpu')}: no CUDA device ({reason})")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Start compiling the compile items ahead; when GPU cases are to run, ask for the device now, so that a
        missing one is said before they skip."""
        if self.config.getoption("collectonly") or not self._controls_the_run():
            return
        get = self.config.getoption
        skipped = get("benchmark_only", False) or get("setupplan", False) or get("setuponly", False)
        if get("dist", "no") == "no" and not skipped:
            self.compile_ahead.start(jobs_of(session.items, GemmCompileItem))
        runnable = [i for i in session.items if isinstance(i, GemmCaseItem) and i.case.skip_reason is None]
        if not runnable:
            return
        if self.config.getoption("dist", "no") == "no":
            self.ahead.order(session.items)
        self._show_progress(len(session.items))
        if self.workers.probe() is not None and self.workers.unavailable is not None:
            self.device_note = no_device_line(self.workers.unavailable, len(runnable), ahead=True)
        elif self.config.getoption("dist", "no") == "no":
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
        return [self.device_note] if self.device_note else []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if os.name == "posix":
            self.ahead.run_ahead(item, nextitem)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Tell each case whether its whole kernel file is selected (after -k, -m, ids and --lf have chosen),
        and which header declarations of its kernel are in force (user properties: they cross from xdist workers,
        where this hook runs, to the controlling process)."""
        selected: Counter[Any] = Counter(item.parent for item in items if isinstance(item, GemmCaseItem))
        for item in items:
            if isinstance(item, GemmCaseItem):
                spec = item.case.spec
                lines = declarations(always_reads_c=spec.always_reads_c, nondeterministic=spec.nondeterministic)
                if lines:
                    item.user_properties.append((DECLARED, {"kernel": f"{spec.path}::{spec.name}", "lines": lines}))
                whole = selected[item.parent] == getattr(item.parent, "n_cases", -1)
                item.user_properties.append((WHOLE_FILE, {"file": item.case.spec.path, "whole": whole}))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report: pytest.TestReport = yield
        if report.when == "setup" and not report.passed:
            self.ahead.drop(item.nodeid)  # its case was sent ahead, and will not be used
        if report.skipped and isinstance(item, (GemmCaseItem, GemmSanitizeItem)) and isinstance(report.longrepr, tuple):
            # a skip from the worker ("no CUDA device", another arch) points at the kernel, not at this module
            spec = item.case.spec if isinstance(item, GemmCaseItem) else item.spec
            report.longrepr = (item.nodeid.split("::")[0], spec.line, report.longrepr[2])
        if report.when == "call" and report.passed and not self.settings.gate.update:
            props = report.user_properties
            for i, (name, value) in enumerate(props):
                if name == RECORD:
                    gated = self.gatekeeper.gate(report, CaseRecord.from_dict(value)).to_dict()
                    props[i] = (RECORD, gated)
                    benchmark = getattr(item, "funcargs", {}).get("benchmark")
                    if benchmark is not None and "gemm" in benchmark.extra_info:
                        benchmark.extra_info["gemm"] = gated  # saved runs carry the gate's verdict too
        if report.when == "call" and isinstance(item, GemmCaseItem) and self.report_folder is not None:
            failed = next((FailedCase.from_dict(v) for v in _props(report, ERROR_MAP)), None)
            record = next((CaseRecord.from_dict(v) for v in _props(report, RECORD)), None)
            facts = self.gpu or (self._workers.facts if self._workers else None) or {}
            gpu = record.gpu if record is not None else str(facts.get("name", ""))
            extras = html_extras(self.config, self.report_folder, gpu, failed, record)  # pytest-html's row
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for whole in _props(report, WHOLE_FILE):
            # a shard is a partial selection: its update adds and changes entries, never removes
            self.gatekeeper.whole_files[whole["file"]] = whole["whole"] and self.settings.shard is None
        for declared in _props(report, DECLARED):
            self.declared[declared["kernel"]] = list(declared["lines"])
        if report.skipped:
            self.no_device.update(_props(report, NO_DEVICE))
        if report.when == "call":
            for worker in _props(report, WORKER):
                if worker["pid"]:
                    self.worker_pids.add(worker["pid"])
                if worker.get("gpu"):
                    self.per_gpu[worker["gpu"]] += 1
                if worker["replaced"]:
                    self.replaced[worker["replaced"]] += 1
                self.worker_compiles.update(compiled=worker.get("compiled", 0), cached=worker.get("cached", 0))
            self.compiled += [CompileRecord.from_dict(value) for value in _props(report, COMPILE)]
            self.failures += [FailedCase.from_dict(value) for value in _props(report, ERROR_MAP)]
            for facts in _props(report, GPU):
                self.gpus.setdefault(str(facts.get("name", "")), facts)
            for value in _props(report, RECORD):
                rec = CaseRecord.from_dict(value)
                self.records.append(rec)
                self.gatekeeper.collect(report, rec)
        self._summarise(report)

    def _summarise(self, report: pytest.TestReport) -> None:
        if self.settings.gate.summary is None or not _props(report, CASE):
            return
        line = self.summary.setdefault(report.nodeid, SummaryLine(report.nodeid))
        if report.when == "call":  # later reports carry the record as the item had it, before the gate
            for value in _props(report, RECORD):
                line.record = CaseRecord.from_dict(value)
        if report.failed or (report.skipped and line.outcome == "passed"):
            line.outcome = "failed" if report.failed else "skipped"
            if not line.message:
                if report.skipped and isinstance(report.longrepr, tuple):
                    line.message = str(report.longrepr[2]).removeprefix("Skipped: ")
                else:
                    text = report.longreprtext.strip()
                    line.message = text.splitlines()[0] if text else ""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.compile_ahead.close()
        if self._workers is not None:
            self._workers.close()
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: the controlling process writes
        if self.settings.gate.update:
            self.gatekeeper.write(self.gpus)
            if self.gatekeeper.update_errors and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = self.settings.gate.summary
        if path is not None:
            self.summary_error = summary_file_text(path, "## pytest-gemm\n\n" + markdown(list(self.summary.values())))
            if self.summary_error:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        if self.report_folder is not None:
            data = run_data(self.config, self.gpu or {}, self.records, self.failures)
            self.report_line = write(self.config, self.report_folder, data)
            if self.report_line[1] and self.settings.report is not None:
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        if self.compiled:
            tr.section("pytest-gemm compile report (ptxas)")
            for line in compile_table(self.compiled):
                tr.write_line(line)
        if self.records:
            tr.section(f"pytest-gemm timing (device time, {timer_names(self.records)})")
            width = shutil.get_terminal_size((120, 24)).columns
            models = sorted({r.gpu for r in self.records})
            for model in models:  # a table per GPU model (a host of mixed models times each case on one)
                records = [r for r in self.records if r.gpu == model]
                facts = self.gpus.get(model, {})
                for line in timing_tables(records, facts, width=width):
                    tr.write_line(line)
        gate = self.gatekeeper.summary_lines()
        if gate is not None:
            tr.section(gate[0])
            for line in gate[1]:
                tr.write_line(line, red=line.startswith("error:"))
        workers = workers_line(self.worker_pids, self.replaced, self.worker_compiles, self.per_gpu)
        if workers:
            tr.write_line(workers)
        workers_now = self._workers
        for index, why in sorted((workers_now.retired if workers_now else {}).items()):
            gpu = workers_now.gpus[index].label if workers_now.gpus else f"GPU {index}"
            tr.write_line(
                f"pytest-gemm: {gpu} was taken out of service ({why}); the other GPUs ran its cases", red=True
            )
        for index, pool in enumerate(workers_now.pools if workers_now else []):
            if pool.lost and index not in workers_now.retired:  # the last GPU serving: its later cases failed
                gpu = workers_now.gpus[index].label if index < len(workers_now.gpus) else "the GPU"
                tr.write_line(
                    f"pytest-gemm: {gpu} was lost during the run ({pool.lost}); the GPU cases after that failed",
                    red=True,
                )
        for reason, count in self.no_device.items():
            tr.write_line(no_device_line(reason, count, ahead=False), yellow=True)
        for kernel, lines in sorted(self.declared.items()):
            tr.write_line(f"pytest-gemm: {kernel} declares {'; '.join(lines)}")
        path = self.settings.gate.summary
        if path is not None:
            tr.write_line(self.summary_error or f"pytest-gemm summary: {path}", red=bool(self.summary_error))
        if self.report_line is not None:
            tr.write_line(self.report_line[0], red=self.report_line[1])

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
        """Saved runs carry the failed cases' error maps and the command line (docs/reports.md)."""
        data = run_data(config, self.gpu or {}, [], self.failures)
        data.date = str(output_json.get("datetime") or data.date)
        output_json["gemm"] = section(data)
