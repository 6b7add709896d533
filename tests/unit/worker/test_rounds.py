"""How a batch's CUPTI records become its times, on the CPU: each launch is the work between the prepare kernel
before it and the next harness kernel, timed by its records' own durations."""

from __future__ import annotations

import pytest

from pytest_gemm.worker.cupti_clock import MARK_KERNEL, PREPARE_KERNEL, SPIN_KERNEL, Span, build_spans, role_of
from pytest_gemm.worker.rounds import Batch, read_spans
from pytest_gemm.worker.timer import input_copies

WORK, PREPARE, MARK = 0, 1, 2
STREAM, OTHER = 7, 8


def test_a_launch_is_the_work_between_its_prepare_kernel_and_the_next_harness_kernel():
    work = [
        (STREAM, 0, 100, MARK),  # a spin ahead of the batch: no span
        (STREAM, 110, 150, PREPARE),
        (STREAM, 160, 400, WORK),  # the kernel under test
        (STREAM, 410, 450, PREPARE),
        (STREAM, 460, 500, WORK),  # cuBLAS's split-K GEMM ...
        (STREAM, 520, 530, WORK),  # ... and its reduction, 20 ns later
        (OTHER, 470, 480, WORK),  # another stream's work is not the launch's
        (STREAM, 540, 541, MARK),  # closes the last span
    ]
    spans = build_spans(sorted(work, key=lambda w: -w[1]))  # records may arrive in any order
    assert spans == [Span(240, 160, 400, 1), Span(50, 460, 530, 2)]
    # the gap between cuBLAS's two kernels is not its time
    assert spans[1].seconds == pytest.approx(50e-9)


def test_a_launch_without_gpu_work_is_a_missing_span():
    work = [(STREAM, 0, 10, PREPARE), (STREAM, 20, 30, PREPARE), (STREAM, 40, 50, WORK), (STREAM, 60, 61, MARK)]
    assert build_spans(work) == [None, Span(10, 40, 50, 1)]
    assert build_spans([(STREAM, 0, 10, WORK)]) == []


def test_overlapping_records_count_once_and_gaps_not_at_all():
    # a programmatic dependent launch may start before the kernel it follows has ended
    work = [(STREAM, 0, 10, PREPARE), (STREAM, 20, 60, WORK), (STREAM, 50, 70, WORK), (STREAM, 80, 90, WORK)]
    assert build_spans(work) == [Span(60, 20, 90, 3)]  # 20-70 and 80-90


def test_only_the_harness_kernels_own_names_are_marks():
    assert [role_of(name) for name in (PREPARE_KERNEL, MARK_KERNEL, SPIN_KERNEL)] == [PREPARE, MARK, MARK]
    # a user's kernel that happens to share the prefix is a launch's work, as any other
    assert role_of("pytest_gemm_prepare_tiles") == WORK
    assert role_of("sgemm_naive") == WORK


def _batch() -> Batch:
    return Batch(events_k=[1.0, 1.0], events_r=[1.0, 1.0], host_s=0.01)


def test_a_batch_pairs_kernel_and_cublas_launch_by_launch():
    done = _batch()
    read_spans(done, [Span(100, 0, 100, 1), Span(30, 200, 240, 2), Span(110, 300, 410, 1), Span(31, 500, 531, 1)], 2)
    assert done.problem == ""
    assert done.kernel_s == [pytest.approx(100e-9), pytest.approx(110e-9)]
    assert done.reference_s == [pytest.approx(30e-9), pytest.approx(31e-9)]


@pytest.mark.parametrize(
    ("spans", "problem"),
    [
        ([Span(1, 1, 2, 1)], "CUPTI recorded 1 of the 2 launches of a batch"),
        ([Span(1, 1, 2, 1), None], "CUPTI recorded no GPU work for 1 of 2 launches"),
    ],
)
def test_a_batch_cupti_did_not_see_whole_says_why(spans, problem):
    done = _batch()
    read_spans(done, spans, 1)
    assert done.problem == problem
    assert done.kernel_s == []


@pytest.mark.parametrize(
    ("set_bytes", "cold", "copies"),
    [
        (768 << 10, True, 32),  # fp32 256^3 on an H100 (50 MiB of L2): 134 sets would fill twice L2, capped
        (8 << 20, True, 13),  # a set of 8 MiB: ceil(100 / 8)
        (50 << 20, True, 1),  # a set as large as L2 flushes itself
        (768 << 10, False, 1),  # a hot cache reuses one set
    ],
)
def test_small_operand_sets_are_rotated_through_enough_copies_for_twice_l2(set_bytes, cold, copies):
    assert input_copies(set_bytes, 50 << 20, cold) == copies
