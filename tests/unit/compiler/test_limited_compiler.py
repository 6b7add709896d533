"""The compile processes (compiler/limited.py): one killed from outside fails its compile with the signal, and the next
compile starts a new process."""

from __future__ import annotations

import pytest

from pytest_gemm.specs.cufile import parse_cu_source

from support import ROOT, requires_nvrtc

# -- compiles that take minutes -----------------------------------------------------------------------------------

SLOW = (ROOT / "tests" / "kernels_slow" / "slow_compile.cu").read_text()  # UNROLL=4096: 40 s or more in NVRTC


@requires_nvrtc
def test_a_compile_process_that_dies_fails_its_variant_with_how_it_ended():
    """A compile process killed from outside (the OOM killer, say) fails that compile with the signal,
    and the next compile starts a new process, which is kept for the next one until trimmed."""
    import os
    import signal
    import threading

    from pytest_gemm.compiler.limited import LimitedCompiler
    from pytest_gemm.compiler.nvrtc import CompileError, compile_kernel

    spec = parse_cu_source("slow.cu", SLOW)[0]
    slow, fast = spec.variants()[1], spec.variants()[0]
    compiler = LimitedCompiler(60.0)
    try:
        threading.Timer(1.0, lambda: [os.kill(pid, signal.SIGKILL) for pid in _children(compiler)]).start()
        with pytest.raises(CompileError, match=r"the compile process died \(signal 9 \(SIGKILL\)\)"):
            compile_kernel(spec, slow, "sm_90", None, compiler)
        assert compile_kernel(spec, fast, "sm_90", None, compiler).cubin
        (idle,) = compiler._idle  # kept for the next compile, until trimmed
        compiler.trim(keep=0)
        assert not compiler._idle and idle.popen.returncode is not None
    finally:
        compiler.close()


def _children(compiler) -> list[int]:
    return [child.popen.pid for child in compiler._busy]
