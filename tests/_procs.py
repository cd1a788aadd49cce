"""Helpers for tests that need real processes: run a function in a forked child, get its JSON result."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any


def in_child(fn: Callable[[], Any], *, timeout_s: float = 60.0) -> Any:
    """Run ``fn`` in a forked child process; its JSON-able return value, or the child's error re-raised here."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        try:
            payload = {"ok": fn()}
        except BaseException:
            payload = {"error": traceback.format_exc()}
        with os.fdopen(write_end, "w") as out:
            json.dump(payload, out)
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"the child process did not finish within {timeout_s} s")
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    text = b"".join(chunks).decode()
    payload = json.loads(text)
    if "error" in payload:
        raise AssertionError(f"the child process failed:\n{payload['error']}")
    return payload["ok"]


def drop_root() -> None:
    """In a child: lose root's power to write anywhere, so file permissions mean what they say."""
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)


def tunekit_messages(level: int = logging.NOTSET) -> list[str]:
    """In a child: a list that collects every message tunekit logs from now on at ``level`` or above."""
    caught: list[str] = []
    handler = logging.Handler(level)
    handler.emit = lambda record: caught.append(record.getMessage())  # type: ignore[method-assign]
    # Not the busy-machine doubt: the tests' equal candidates are in doubt on a loaded machine by design,
    # and what these children count is what the cache, sinks and workers said.
    handler.addFilter(lambda record: record.name != "tunekit.doubt")
    # Nor the key-churn note: these children tune a new key at every call on purpose.
    handler.addFilter(lambda record: "took a new value at each" not in record.getMessage())
    logging.getLogger("tunekit").addHandler(handler)
    return caught
