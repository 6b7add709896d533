"""Which GPUs of a host a timed case is left to (docs/baselines.md#gpus-of-one-model): those that recorded its
baseline when some did and others did not; when recording, those that did not; otherwise any."""

from __future__ import annotations

from pytest_gemm.plugin.ahead import left_to

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
CASE = "kernels/01_naive.cu::sgemm_naive[fp32-512x512x512]"


def _recorded(**by_model: set[str]):
    def recorded_on(test: str, model: str) -> frozenset[str]:
        assert test == CASE
        return frozenset(by_model.get(model.split()[1], set()))

    return recorded_on


def test_a_case_is_left_to_the_gpus_that_recorded_it_and_when_recording_to_those_that_did_not():
    ids = ["aaa", "bbb", "ccc"]
    on_a = _recorded(H200={"aaa"})
    assert left_to(CASE, [H200] * 3, ids, [0, 1, 2], on_a, recording=False) == [0]
    assert left_to(CASE, [H200] * 3, ids, [0, 1, 2], on_a, recording=True) == [1, 2]
    on_ab = _recorded(H200={"aaa", "bbb", "zzz"})  # zzz: a GPU of another host
    assert left_to(CASE, [H200] * 3, ids, [0, 1, 2], on_ab, recording=False) == [0, 1]


def test_any_gpu_takes_a_case_all_or_none_of_them_recorded_or_one_nvml_does_not_name():
    ids = ["aaa", "bbb"]
    assert left_to(CASE, [H200] * 2, ids, [0, 1], _recorded(H200={"aaa", "bbb"}), recording=False) is None
    assert left_to(CASE, [H200] * 2, ids, [0, 1], _recorded(H200={"zzz"}), recording=False) is None
    assert left_to(CASE, [H200] * 2, ["aaa", ""], [0, 1], _recorded(H200={"aaa"}), recording=False) is None
    assert left_to(CASE, [H200], ["aaa"], [0], _recorded(H200={"aaa"}), recording=False) is None


def test_only_the_gpus_that_may_time_a_case_count_on_a_host_of_mixed_models():
    """A case timed on the H200s is never left to the H100 that recorded it in the H100's file."""
    models, ids = [H100, H200, H200], ["aaa", "bbb", "ccc"]
    recorded = _recorded(H100={"aaa"}, H200={"bbb"})
    assert left_to(CASE, models, ids, [1, 2], recorded, recording=False) == [1]
    assert left_to(CASE, models, ids, [1, 2], _recorded(H100={"aaa"}), recording=False) is None
