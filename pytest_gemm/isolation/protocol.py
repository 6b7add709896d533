"""The messages between the pytest process and a GPU worker: JSON objects, one per framed message.

Each message is ``{"kind": ..., "body": ...}``; bodies are plain records (:mod:`..records.plain`).
From the worker: ``hello`` (its device facts, its process id and whether the pool should keep a
standby worker; once), ``unavailable`` (why there is no device), ``broken`` (it could not start),
``phase`` (it began a phase of the current case), ``outcome`` and ``imported`` (the libraries of
``records.request.IMPORTS`` it has imported: once it imported those it was started to import ahead,
``--import``, and before an outcome whose case imported one). To the worker: ``run`` (a request), ``next``
(before a ``run``: the request likely to come next, whose inputs the worker may draw meanwhile), ``go`` and ``stop``.

A worker that enters :data:`TIME_PHASE` sends its ``phase`` message and waits for ``go`` before it
times anything: the pool answers once nothing else of its own uses the GPU (a standby worker that is
starting, a killed worker still going).
"""

from __future__ import annotations

import json
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["TIME_PHASE", "receive", "send"]

TIME_PHASE = "time"  # the phase in which a case is timed: the pool says when it may start


def send(conn: Connection, kind: str, body: Any = None) -> None:
    conn.send_bytes(json.dumps({"kind": kind, "body": body}).encode())


def receive(conn: Connection) -> tuple[str, Any]:
    """The next message; EOFError when the other side has gone."""
    data = json.loads(conn.recv_bytes().decode())
    return str(data["kind"]), data.get("body")
