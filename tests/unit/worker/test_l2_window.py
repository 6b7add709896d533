"""The persisting-L2 check (docs/verification.md#persisting-l2) where it cannot read the device: it never fails a
case, finds nothing, and says why it did not run."""

from __future__ import annotations

import pytest

from pytest_gemm.worker.l2_window import PersistingL2

from support import NO_DEVICE


@pytest.mark.skipif(NO_DEVICE is None, reason="a CUDA device is here: the check reads it (tests/gpu)")
def test_without_a_device_the_check_says_why_it_did_not_run():
    check = PersistingL2(0)
    check.start()
    check.after_call()
    check.after_call()  # a second call is as quiet
    assert check.found == 0
    assert check.why_not.endswith("persisting L2 not checked")
