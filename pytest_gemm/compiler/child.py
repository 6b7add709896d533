"""A compile process: ``python -m pytest_gemm.compiler.child REQUESTS REPLIES PARENT`` compiles the programs it is
sent on the pipe REQUESTS, one at a time, with NVRTC, and sends each result back on REPLIES.

:mod:`.limited` starts it and kills it when a compile runs past its time limit. Each request is a JSON object
(source, path, name, options, arch); each reply a JSON object (the lowered name and ptxas's log, or the error),
followed on success by the cubin's bytes. It ends when its pipe closes, or once process PARENT is gone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from multiprocessing.connection import Connection

from .nvrtc import CompileError, NvrtcUnavailable, _compile

__all__ = ["main"]


def _end_when_orphaned(parent: int) -> None:
    """End this process once ``parent`` is gone, even in the middle of a compile (NVRTC may run for minutes)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    requests_fd, replies_fd, parent = (int(arg) for arg in (sys.argv[1:] if argv is None else argv))
    requests, replies = Connection(requests_fd, writable=False), Connection(replies_fd, readable=False)
    threading.Thread(target=_end_when_orphaned, args=(parent,), daemon=True).start()
    while True:
        try:
            job = json.loads(requests.recv_bytes())
        except (EOFError, OSError):
            return 0
        cubin = b""
        try:
            result = _compile(job["source"], job["path"], job["name"], tuple(job["options"]), job["arch"])
        except CompileError as exc:
            reply = {"error": "compile", "text": exc.log}
        except NvrtcUnavailable as exc:
            reply = {"error": "unavailable", "text": str(exc)}
        except Exception as exc:
            reply = {"error": "internal", "text": f"{type(exc).__name__}: {exc}"}
        else:
            reply, cubin = {"lowered": result.lowered_name, "log": result.log}, result.cubin
        try:
            replies.send_bytes(json.dumps(reply).encode())
            if "lowered" in reply:
                replies.send_bytes(cubin)
        except OSError:
            return 0


if __name__ == "__main__":
    sys.exit(main())
