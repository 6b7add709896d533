"""Running one GPU case inside pytest: its request to the GPU workers, its judged and gated result made once
(:func:`pytest_gemm.judge.verdict.final`), and what pytest and the reporting process get of it: the test passes,
fails with the result's text or skips with its reason, its device times go to pytest-benchmark, and the result
crosses to the reporting process as one record (:class:`~pytest_gemm.records.result.ItemResult`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ..isolation.dispatch import Done, GpuWorkers
from ..judge.case import judge_outcome
from ..judge.verdict import Judged, claims_speed, confirmed, final, needs_confirming
from ..records.request import Request
from ..records.result import CaseResult, ItemResult, WorkerNote
from ..report.failure import failure_text
from ..report.regression import replay_command
from ..runs.data import stored
from ..settings import Settings
from ..worker.serve import DEFAULT_BACKEND
from .ahead import Lookahead
from .benchmark import record_device_times
from .facts import RunFacts
from .gating import Gate
from .items import GemmCaseItem, GemmFailure
from .pictures import Pictures
from .properties import add_result

__all__ = ["CaseRunner"]


class CaseRunner:
    """The GPU workers of this pytest process, the cases sent ahead to them, and how a case's result is made."""

    def __init__(
        self, config: pytest.Config, settings: Settings, facts: RunFacts, cache: str | None, pictures: Pictures
    ) -> None:
        self.config, self.settings, self.facts, self.cache, self.pictures = config, settings, facts, cache, pictures
        self.gate = Gate(settings.gate, config.rootpath)
        self._workers: GpuWorkers | None = None
        self.ahead = Lookahead(settings, facts.timed, lambda: self.workers, self.gate.recorded_on)

    @property
    def workers(self) -> GpuWorkers:
        """The GPU workers, started on first use."""
        if self._workers is None:
            backend = self.config.hook.pytest_gemm_worker_backend(config=self.config) or DEFAULT_BACKEND
            self._workers = GpuWorkers(
                backend,
                self.cache,
                self.settings.timeout,
                wanted=self.settings.gpus,
                worker_id=self.facts.worker_id,
                costly=backend == DEFAULT_BACKEND and not self.facts.xdist,  # xdist: a worker may take another GPU
            )
        return self._workers

    @property
    def started(self) -> GpuWorkers | None:
        """The GPU workers, if the run started them (the end of the run says what became of them)."""
        return self._workers

    def forget_workers(self) -> None:
        """Close the workers started to probe the device (xdist's workers start their own)."""
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def run(self, item: GemmCaseItem, benchmark: Any) -> None:
        """Run one case in a GPU worker; then it passes, fails or skips as its final result says."""
        request = self.ahead.request(item, benchmark is not None and self.facts.timed)
        done = self.ahead.take(item, request).result()
        outcome = done.outcome
        if outcome.output.strip():
            item.add_report_section("call", "GPU worker output", outcome.output)
        gpu = done.facts or self.workers.facts or {}
        judged = judge_outcome(
            item.case, item.nodeid, outcome, gpu, source_sha256=item.source_sha256, save_raw=self.facts.save_raw
        )
        result = final(judged, None if self.settings.gate.update else self.gate.judge)
        if needs_confirming(result):  # timed again in a fresh worker on the same GPU before it fails
            result = confirmed(result, self._again(item, request, done))
        heatmap = ""
        if result.failed and result.diagnosis is not None:
            heatmap = self.pictures.heatmap(item.nodeid, result.diagnosis, str(gpu.get("name", ""))) or ""
        no_device = (done.unavailable or "") if outcome.skip is not None else ""
        travels = self._travels(result)
        add_result(item, ItemResult(travels, _note(done), gpu if travels.timing else None, heatmap, no_device))
        if result.timing is not None and outcome.timing is not None and judged.outcome == "passed":
            record_device_times(benchmark, item.gemm_clock, list(outcome.timing.kernel_s), result.timing.to_dict())
        self._end(item, result)

    def _again(self, item: GemmCaseItem, request: Request, done: Done) -> Judged | None:
        """The gate's judgement of a flagged case timed again in a fresh worker (docs/baselines.md#the-runs-false-
        alarms), on the GPU that timed it first; None where the re-timing gave no times to judge."""
        workers = self.workers
        allowed = None if done.gpu is None else [i for i, gpu in enumerate(workers.gpus) if gpu == done.gpu]
        future = workers.submit(dataclasses.replace(request, fresh_worker=True), allowed)
        workers.hurry(future)  # ahead of the cases sent ahead
        again = future.result()
        gpu = again.facts or done.facts or {}
        judged = judge_outcome(item.case, item.nodeid, again.outcome, gpu, source_sha256=item.source_sha256)
        if not claims_speed(judged) or judged.timing is None:
            return None
        return self.gate.judge(judged.timing)

    def _travels(self, result: CaseResult) -> CaseResult:
        """The result as it crosses to the reporting process: its error map pooled, or left out where nothing will
        draw it (no report folder, no saved run). A skipped case's timing and margin stay behind: a skip is not
        timed, so no table, saved run or GPU fact counts it."""
        if result.outcome == "skipped":
            result = dataclasses.replace(result, timing=None, margin=None)
        if result.diagnosis is not None and self.pictures.folder is None and not self.facts.saves_run:
            return dataclasses.replace(result, diagnosis=dataclasses.replace(result.diagnosis, error_map=None))
        return stored(result)

    @staticmethod
    def _end(item: GemmCaseItem, result: CaseResult) -> None:
        """Pass, skip or fail the test as the result says: with the text of its diagnosis or gate verdict (a skip with
        a diagnosis, a calibration error's, says why on one line), else with its message (a failure: why no gate
        verdict could be reached)."""
        replay = replay_command(item.nodeid, item.case.shape, item.base_seed)
        gated = result.timing is not None and result.timing.gate is not None
        said = failure_text(item.name, result, replay) if result.diagnosis is not None or gated else result.message
        if result.outcome == "skipped":
            pytest.skip(said)
        if result.failed:
            raise GemmFailure(said)


def _note(done: Done) -> WorkerNote | None:
    """Where the case ran, and what became of its worker (None: no worker ran it)."""
    outcome, failure = done.outcome, done.outcome.failure
    replaced = str(failure.kind) if failure is not None and failure.replace_worker else ""
    if not outcome.worker and not replaced:
        return None
    return WorkerNote(
        pid=outcome.worker,
        replaced=replaced,
        compiled=outcome.compiled,
        cached=outcome.cached,
        autotuned=outcome.autotuned,
        phase_s=dict(outcome.phase_s),
        wall_s=done.wall_s,
        gpu=done.gpu.label if done.gpu is not None else "",
    )
