"""One launch of one case for compute-sanitizer: ``compute-sanitizer --tool T python -m pytest_gemm.worker.sanitize``.

The request arrives as JSON on standard input. The kernel is launched once, alone: CuPy's memory pool is
off and the matrices have no guard regions, so that an access past a matrix reaches memory that is not
allocated, where memcheck sees it. What the kernel computed is not judged here (the case items do that);
the tool's report, written to its log file, is the result. Part of the worker package; nothing else runs here.
"""

from __future__ import annotations

import json
import sys

from ..records.plain import from_plain
from ..records.request import Request
from ..records.verdicts import FailureKind
from ..specs.errors import KernelFileError

__all__ = ["main"]

#: exit statuses the pytest side reads: the launch ran; something kept it from running
LAUNCHED, NOT_LAUNCHED = 0, 3


def main() -> int:
    request = from_plain(Request, json.loads(sys.stdin.read()))
    try:
        from .environment import cupy_environment

        cupy_environment()
        import cupy

        cupy.cuda.set_allocator(None)  # every buffer its own cudaMalloc: nothing around it is allocated
        from .inputs import input_strategy
        from .kinds import kernel_strategy
        from .peers import launched_alone
        from .prepared import PreparedCase
        from .runner import open_device

        runner = open_device(0)
        case = runner.files.case(request)
        inputs = input_strategy(case)
        kernel = kernel_strategy(runner, case, inputs, request.path)
        # The arguments were checked against the kernel by its verification; asking the driver again would show
        # here: with a driver that does not count them, the probe past the last one is a failed call (CUDA 13.0)
        kernel.check(signature=False)
        prepared = PreparedCase(runner, case, request.seed, kernel, inputs, launched_alone(case), guards=False)
        with runner.stream:
            prepared.launch(prepared.operands())
    except KernelFileError as exc:
        print(f"{FailureKind.KERNEL_FILE}: {exc}", flush=True)
        return NOT_LAUNCHED
    except Exception as exc:  # a CUDA error, a compile error: the tool's log says the rest
        print(f"{type(exc).__name__}: {exc}", flush=True)
        return NOT_LAUNCHED
    print("launched", flush=True)
    return LAUNCHED


if __name__ == "__main__":
    sys.exit(main())
