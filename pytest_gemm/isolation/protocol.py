"""The messages between the pytest process and a GPU worker: JSON objects, one per framed message.

Each message is ``{"kind": ..., "body": ...}``; bodies are plain records (:mod:`..records.plain`).
From the worker: ``hello`` (its device facts and process id, once), ``unavailable`` (why there is
no device), ``broken`` (it could not start), ``phase`` (it began a phase of the current case) and
``outcome``. To the worker: ``run`` (a request) and ``stop``.
"""

from __future__ import annotations

import json
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["receive", "send"]


def send(conn: Connection, kind: str, body: Any = None) -> None:
    conn.send_bytes(json.dumps({"kind": kind, "body": body}).encode())


def receive(conn: Connection) -> tuple[str, Any]:
    """The next message; EOFError when the other side has gone."""
    data = json.loads(conn.recv_bytes().decode())
    return str(data["kind"]), data.get("body")
