"""A local Ray cluster for the campaign tests: started once per test process, stopped after the last test."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

KINDS = {"cpu-numpy": 2, "opencl:pocl": 2}
"""The device kinds the cluster's one node declares: two jobs of each at once on this machine's two cores."""


def _unavailable(why: str) -> None:
    # CI installs the ray extra (the Makefile's install line): there a cluster that cannot start is a failure.
    if os.environ.get("CI") == "true":
        pytest.fail(f"the Ray cluster for the campaign tests cannot start: {why}")
    pytest.skip(f"the Ray cluster for the campaign tests cannot start: {why}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """``HOST:PORT`` of a one-node cluster (``ray start --head --block``), its workers able to import the targets."""
    ray_bin = Path(sys.executable).with_name("ray")
    if importlib.util.find_spec("ray") is None or not ray_bin.exists():
        _unavailable("ray is not installed: pip install 'tunekit[ray]'")
    # Short: Ray puts unix sockets under it, whose paths may not exceed 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="tkray", dir="/tmp"))
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    command = [str(ray_bin), "start", "--head", "--block", "--disable-usage-stats", "--include-dashboard=false"]
    command += ["--num-cpus", "2", "--temp-dir", str(temp), "--resources", json.dumps(KINDS), "--port", str(port)]
    # Ports Ray would otherwise take at fixed numbers: a second test process's cluster must not collide.
    for option in ("--dashboard-agent-listen-port", "--metrics-export-port"):
        command += [option, str(_free_port())]
    log = (temp / "head.log").open("wb")
    head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while b"Ray runtime started" not in (temp / "head.log").read_bytes():
            if head.poll() is not None or time.monotonic() > deadline:
                _unavailable((temp / "head.log").read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the node's processes on SIGTERM
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def worker_env(tmp_path: Path) -> dict[str, str]:
    """The workers' settings for one test: its own cache, a records JSONL of every tune, short measurements."""
    return {
        "TUNEKIT_CACHE_DIR": str(tmp_path / "worker-cache"),
        "TUNEKIT_RECORD": str(tmp_path / "tunes.jsonl"),
        "TUNEKIT_SAMPLES": "3",
        "TUNEKIT_WARMUP_MS": "5",
        "TUNEKIT_PROGRESS": "0",
    }
