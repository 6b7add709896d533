"""The plugin's one session object (in ``config.stash``), registered as a plugin: every hook that needs state, each
handing its work to the part that lives as long as it does.

* the run's settings and facts (:class:`~.facts.RunFacts`, derived once);
* the case runner (``runner.py``): the GPU workers, the cases sent ahead, each case's final result;
* the ledger (``ledger.py``): every report, ending in the run's summary, frozen once the tests ran;
* the end of the run (``finish.py``): what is written, and the exit status, set once; ``summary.py`` prints it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

from ..options import label
from ..records.result import ItemResult
from ..runs.saved import section
from ..settings import Settings
from ..specs.sharding import in_shard
from .compile_ahead import CompileAhead, jobs_of, terminal_line
from .configure import cubin_cache
from .facts import RunFacts
from .finish import Ending, finish
from .items import GemmCaseItem, GemmCompileItem, GemmSanitizeItem
from .ledger import RunLedger, RunSummary
from .outputs import check_outputs, claim_report
from .pictures import Pictures
from .progress import show_progress
from .properties import FACTS, RESULT, taken
from .runner import CaseRunner
from .selection import Selection, case_facts
from .summary import EndOfRun, write
from .terminal import gpus_line, header_line, no_device_line
from .walk import heard_notes

__all__ = ["GemmSession"]


class GemmSession:
    """One pytest-gemm run."""

    def __init__(self, config: pytest.Config, settings: Settings, facts: RunFacts) -> None:
        self.config, self.settings, self.facts = config, settings, facts
        self.cubins = cubin_cache(config)  # None, with a warning, where the project cannot hold it
        self.compile_ahead = CompileAhead(self.cubins, settings.compile_timeout, terminal_line(config))
        self.pictures = Pictures(config, settings.report)
        cache = str(self.cubins.folder) if self.cubins else None
        self.runner = CaseRunner(config, settings, facts, cache, self.pictures)
        self.runner.gate.check_files()
        self.ledger = RunLedger(config, settings, facts)
        self.summary: RunSummary | None = None  # the ledger's, frozen once the tests ran (:meth:`_ended`)
        self._made: dict[str, ItemResult] = {}  # results made in this process, until their reports are logged
        if facts.controller:  # where the run writes, checked before any work (xdist workers write none of it)
            check_outputs(config, settings, self.pictures)
        self.selection = Selection(settings)  # what --gemm-dtypes and --gemm-shapes left of each kernel
        self.device_note: str | None = None  # said after collection: no device, and how many cases will skip
        self.left_out = 0  # tests this shard left to the other shards
        self.lines: list[tuple[str, bool]] = []  # what the end of the run says beside the tables (text, red)
        self.ending: Ending | None = None

    # -- collection ------------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = [header_line(config, self.settings, self.facts, self.cubins)]
        if self.settings.shard is not None:
            index, count = self.settings.shard
            lines.append(
                f"pytest-gemm: shard {index} of {count} of the selected tests (by the SHA-256 of each test id)"
            )
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """With --gemm-require-gpu, no usable device is a usage error, before anything runs."""
        self.ledger.session = session
        if not self.settings.require_gpu or not (self.facts.controller and self.facts.posix):
            return
        workers = self.runner.workers
        workers.probe()  # the worker it starts runs the cases (without xdist)
        reason = workers.unavailable
        if self.facts.xdist:
            self.runner.forget_workers()  # the xdist workers start their own
        if reason is not None:
            raise pytest.UsageError(f"{label('require-gpu')}: no CUDA device ({reason})")

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None]:
        """After every other selection: keep this shard's tests (a shard is not a narrower selection), and give each
        case its facts as the run selected it (a user property: it crosses from xdist workers, where this hook
        runs, to the reporting process)."""
        collected = len(items)
        result = yield
        whole = case_facts([item for item in items if isinstance(item, GemmCaseItem)])
        if self.settings.shard is not None:
            kept = [item for item in items if in_shard(item.nodeid, self.settings.shard)]
            if len(kept) < len(items):
                chosen = {id(item) for item in kept}
                config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
                self.left_out = len(items) - len(kept)
                items[:] = kept
            if hasattr(config, "workeroutput"):  # an xdist worker: its controller learns it (pytest_testnodedown)
                config.workeroutput["gemm_shard_left_out"] = self.left_out
        cases = [item for item in items if isinstance(item, GemmCaseItem)]
        for item in cases:
            item.user_properties.append((FACTS, whole(item).to_dict()))
        self.runner.gate.cases = max(1, len(cases))  # the chance of a false regression is split among them
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
            self.runner.ahead.order(session.items)
        show_progress(self.config, len(session.items), self._progress)
        workers = self.runner.workers
        if workers.probe() is not None and workers.unavailable is not None:
            self.device_note = no_device_line(workers.unavailable, len(runnable), ahead=True)
        elif not self.facts.xdist:
            self.device_note = gpus_line(workers.gpus, workers.note)

    def _progress(self) -> tuple[int, dict[str, str], Counter[str]]:
        started = self.runner.started
        queued, state = started.queue_state() if started is not None else (0, {})
        return queued, state, Counter(self.ledger.per_gpu)

    def pytest_report_collectionfinish(self) -> list[str]:
        """Said before anything runs, and again after a run's output at its end; under --co, where the listing is
        the output, at the end only."""
        ahead = [] if self.config.getoption("collectonly") else self.selection.lines
        return [*ahead, *([self.device_note] if self.device_note else [])]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.ledger.collection_error(report)

    # -- running ---------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Tests are about to run (not so under --collect-only, --help, --fixtures): the report folder is claimed.
        Once they ran, every report is in: the run's summary is frozen."""
        if self.facts.controller and not self.config.getoption("collectonly"):
            claim_report(self.config, self.settings, self.pictures)
        try:
            return (yield)
        finally:
            if self.facts.controller:
                self._ended()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if self.facts.posix:
            self.runner.ahead.run_ahead(item, nextitem)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        """Where the report points, and what stays on the item once the report is made; the report's outcome is
        the final result's, never changed here."""
        report: pytest.TestReport = yield
        if report.when == "setup" and not report.passed:
            self.runner.ahead.drop(item.nodeid)  # its case was sent ahead, and will not be used
        if report.skipped and isinstance(item, (GemmCaseItem, GemmSanitizeItem)) and isinstance(report.longrepr, tuple):
            # a skip from the worker ("no CUDA device", another arch) points at the kernel, not at this module
            spec = item.case.spec if isinstance(item, GemmCaseItem) else item.spec
            report.longrepr = (item.nodeid.split("::")[0], spec.line, report.longrepr[2])
        ran = taken(item) if report.when == "call" else None
        if ran is not None:  # the teardown report (JUnit XML's) carries its slim form
            self._made[report.nodeid] = ran
            slim = ran.slim().to_dict()
            item.user_properties[:] = [(k, slim if k == RESULT else v) for k, v in item.user_properties]
            timing = ran.result.timing
            extras = self.pictures.html_extras(item.nodeid, ran.heatmap or None, timing.dtype if timing else None)
            if extras:
                report.extras = [*getattr(report, "extras", []), *extras]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The ledger takes each report; a result made in this process as it is, not decoded again."""
        self.ledger.add(report, self._made.pop(report.nodeid, None) if report.when == "call" else None)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Under pytest-xdist the workers collect and select: what the shard left out comes from theirs, and the lines
        they would have said after collection are said at the end."""
        said = getattr(node, "workeroutput", None) or {}
        self.left_out = max(self.left_out, int(said.get("gemm_shard_left_out", 0)))
        self.lines += [(line, False) for line in heard_notes(self.config, said)]
        self.lines += self.selection.heard(said)

    # -- the end ---------------------------------------------------------------------------------
    def _ended(self) -> RunSummary:
        """The run's summary, frozen once: as the tests end, or as the session ends where none ran."""
        if self.summary is None:
            self.summary = self.ledger.summary()
        return self.summary

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The one step that ends the run: workers closed, then (in the reporting process) what is written, and the
        exit status that follows."""
        self.compile_ahead.close()
        workers = self.runner.started
        if workers is not None:  # in the reporting process their exits go on while it writes; the cleanup waits
            workers.close(wait=not self.facts.controller)  # an xdist worker writes nothing, and is soon shut down
            self.config.add_cleanup(workers.close)  # run even where another plugin's unconfigure raises
        if not self.facts.controller:
            self.pictures.close()  # the heatmaps it drew as its cases ended are in the folder before it ends
            return  # an xdist worker: the reporting process writes
        summary = self._ended()
        self.ending = finish(
            session.exitstatus,
            summary,
            lambda status: self.ledger.run(summary, status),
            self.settings,
            self.pictures,
            left_out=self.left_out,
            selection_error=self.selection.error is not None,
            rootpath=self.config.rootpath,
        )
        session.exitstatus = self.ending.exit_status

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.ending is None:
            return
        end = EndOfRun(
            self._ended(),
            self.ending,
            self.settings,
            self.facts,
            self.runner.started,
            self.pictures.folder,
            self.lines,
            self.config.rootpath,
        )
        write(end, terminalreporter)

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        """Add the GPU's facts to pytest-benchmark's machine info (and so to its saved JSON)."""
        workers = self.runner.started
        summary = self.summary or self.ledger.summary()  # asked before the run too (--benchmark-compare)
        gpu = (workers.facts if workers else None) or summary.gpu  # the first GPU's, whichever timed first
        if not gpu and workers is not None and workers.unavailable:
            gpu = {"available": False, "reason": f"no CUDA device: {workers.unavailable}"}
        machine_info["gpu"] = gpu or {"available": False, "reason": "no GPU case was timed in this run"}
        if len(summary.gpus) > 1:  # a host of mixed models: each timed case names its own
            machine_info["gpus"] = list(summary.gpus.values())

    def pytest_benchmark_update_json(self, config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
        """Saved runs carry every test's judged result, failed cases' diagnoses included (docs/reports.md)."""
        data = self.ledger.run(self._ended())
        data.date = str(output_json.get("datetime") or data.date)
        output_json["gemm"] = section(data)
