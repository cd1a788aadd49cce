"""Campaigns on a real local Ray cluster: every winner lands in the record and the workers' cache, once.

Nothing is mocked: the cluster is `ray start --head` on this machine (started once for the
module, stopped after it), the jobs tune numpy operations on the CPU and an OpenCL kernel on
PoCL, a worker is SIGKILLed while it runs a job, and a campaign's own process is SIGKILLed
half-way and run again.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _campaign_targets import ROW_SUM_TUNER, _row_sum_set

import tunekit as tk
from tunekit._campaign.fleet import TASK_NAME
from tunekit_backends.cpu import CpuClient

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.opencl]

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


_USERS_RAY = ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""The user's own Ray settings, which would point the test's processes at another cluster or token."""


@pytest.fixture(scope="module", autouse=True)
def _ray_of_its_own() -> Iterator[None]:
    """The test's cluster and every process that joins it (this one's ray.init, the CLI's) run without token auth.

    Ray 2.5x turns token authentication on when ``~/.ray/auth_token`` exists (and writes one for a
    new local cluster): on a machine whose user ran ``ray get-auth-token --generate`` every
    campaign here failed with InvalidAuthToken. ``RAY_AUTH_MODE=disabled`` keeps the local cluster
    apart from the user's Ray configuration, and from writing into their home; set in this
    process's environment, it reaches the head, its workers and the CLI runs, which inherit it.
    """
    saved = {name: os.environ.get(name) for name in (*_USERS_RAY, "RAY_AUTH_MODE")}
    for name in _USERS_RAY:
        os.environ.pop(name, None)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
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


def _tuned_counts(path: Path) -> collections.Counter[tuple[str, str]]:
    """How many times each (tuner, key) was measured, from the workers' records JSONL.

    One tune's record sent twice counts once: a worker killed after its sinks had the record and before
    the cache forgot it leaves it to be sent again, the same record with the same timestamp (the
    at-least-once delivery docs/robustness.md states). A second measurement has a timestamp of its own.
    """
    tunes: set[tuple[str, str, object]] = set()
    for line in tk.read_records(path):
        assert isinstance(line, tk.RecordLine), line
        if line.record.decision == "tuned":
            tunes.add((line.record.tuner, _canonical(line.record.key), line.record.timestamp))
    return collections.Counter((tuner, key) for tuner, key, _ in tunes)


def _canonical(key: object) -> str:
    """A key as records and caches name it (``key_to_json``)."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def _journal_done(path: Path) -> int:
    try:
        return len(json.loads(path.read_text())["done"])
    except (OSError, ValueError):  # not written yet (it is replaced atomically, so never half)
        return 0


def _busy_worker(cache_dir: Path) -> int | None:
    """The pid of a Ray worker running a job of this test's campaign (its environment names the test's cache)."""
    mark = f"TUNEKIT_CACHE_DIR={cache_dir}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            title = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if title.startswith(f"ray::{TASK_NAME}".encode()) and mark in environ.split(b"\0"):
            return int(entry)
    return None


def _jobs() -> list[tk.CampaignJob]:
    """44 jobs of distinct keys: 24 numpy row sums and 8 slow tunes on the CPU, 12 kernels on PoCL."""
    jobs = [
        tk.CampaignJob(target="_campaign_targets:ROW_SUM", device="cpu-numpy", shape={"rows": rows, "n": n})
        for rows in (8, 16, 32)
        for n in (64, 96, 128, 160, 192, 224, 256, 288)
    ]
    jobs += [
        tk.CampaignJob(target="_campaign_targets:SCALE", device="opencl:pocl", shape={"n": 1000 + 100 * i})
        for i in range(12)
    ]
    # Slow enough that a worker is caught running one.
    jobs += [
        tk.CampaignJob(target="_campaign_targets:NAP", device="cpu-numpy", shape={"n": i, "ms": 15}) for i in range(8)
    ]
    return jobs


def _key_of(job: tk.CampaignJob) -> tuple[str, str]:
    name = {"_campaign_targets:ROW_SUM": "campaign_row_sum", "_campaign_targets:SCALE": "campaign_opencl_scale"}
    tuner = name.get(job.target, "campaign_nap")
    key = {"n": job.shape["n"]} if tuner != "campaign_row_sum" else dict(job.shape)
    return tuner, _canonical(key)


def test_a_campaign_with_a_worker_killed_mid_job_commits_every_winner_measured_once(
    ray_address: str, tmp_path: Path
) -> None:
    env = worker_env(tmp_path)
    jobs = _jobs()
    assert len(jobs) >= 40
    # A job that raises on its worker: reported, not retried, and the others go on.
    refused = tk.CampaignJob(target="_campaign_targets:CHECKED_ROW_SUM", device="cpu-numpy", shape={"n": -1})
    campaign = tk.Campaign(jobs=[refused, *jobs], records=tmp_path / "records", env=env)
    outcome: list[tk.CampaignResult | BaseException] = []

    def run() -> None:
        try:
            outcome.append(campaign.run(address=ray_address, progress=False))
        except BaseException as exc:
            outcome.append(exc)

    driver = threading.Thread(target=run)
    driver.start()
    killed: list[int] = []
    deadline = time.monotonic() + 240
    while driver.is_alive() and not killed and time.monotonic() < deadline:
        if _journal_done(campaign.journal_path) >= 6 and (pid := _busy_worker(Path(env["TUNEKIT_CACHE_DIR"]))):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.01)
    driver.join(300)
    assert not driver.is_alive(), "the campaign did not finish"
    assert killed, "no worker was caught running a job: the campaign ended before one could be killed"
    result = outcome[0]
    assert isinstance(result, tk.CampaignResult), result
    assert result.failed == ((refused, "ValueError: n=-1 is no size"),)
    assert len(result.finished) == len(jobs)

    # Measured once each: the killed job's tune never finished (or finished and was read back from the cache).
    counts = _tuned_counts(Path(env["TUNEKIT_RECORD"]))
    assert set(counts) == {_key_of(job) for job in jobs}
    assert max(counts.values()) == 1, [k for k, c in counts.items() if c > 1]

    # Every winner is in its record and in the workers' cache, and the two agree.
    cache = tk.PersistentCache(Path(env["TUNEKIT_CACHE_DIR"]))
    records = {tk.Record.load(path).tuner: tk.Record.load(path) for path in result.records}
    assert set(records) == {"campaign_row_sum", "campaign_opencl_scale", "campaign_nap"}
    for job in jobs:
        tuner, key = _key_of(job)
        entry = records[tuner].entries[key]
        stored = cache.get(records[tuner].device_id, tuner, key)
        assert isinstance(stored, tuple), (job, stored)
        assert stored[1].winner == entry.winner
    # The CPU record is one production verifies and seeds from.
    client = CpuClient()
    verified = tk.Record.load_verified(
        tmp_path / "records" / "campaign_row_sum.cpu-numpy.json", _row_sum_set(client), client, tuner=ROW_SUM_TUNER
    )
    assert len(verified.entries) == 24

    # Run again without the refused job: the journal lists every other job, none runs (nor does Ray start).
    again = tk.Campaign(jobs=jobs, records=tmp_path / "records", env=env).run(address="127.0.0.1:1", progress=False)
    assert (len(again.skipped), again.finished) == (len(jobs), ())


def _write_campaign(tmp_path: Path, jobs: int) -> Path:
    env = worker_env(tmp_path)
    shapes = ", ".join(f"{{n = {i}, ms = 20}}" for i in range(jobs))
    text = "records = 'records'\n\n[env]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in env.items())
    text += f"\n[[jobs]]\ntarget = '_campaign_targets:NAP'\ndevice = 'cpu-numpy'\nshapes = [{shapes}]\n"
    path = tmp_path / "release.toml"
    path.write_text(text)
    return path


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tunekit", "campaign", "run", *args]


def test_a_campaign_killed_half_way_resumes_and_measures_nothing_twice(ray_address: str, tmp_path: Path) -> None:
    path = _write_campaign(tmp_path, 8)
    journal = tmp_path / "records" / ".campaign-journal.json"
    env = dict(os.environ, PYTHONPATH=str(HERE))
    first = subprocess.Popen(
        _cli(str(path), "--address", ray_address), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while _journal_done(journal) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.poll() is None, f"the campaign ended before it could be killed: {first.communicate()}"
    first.kill()
    first.communicate()
    done_before = _journal_done(journal)
    assert 2 <= done_before < 8

    second = subprocess.run(
        _cli(str(path), "--address", ray_address), env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert second.returncode == 0, second.stderr
    assert f"{done_before} of 8 jobs finished in an earlier run: skipped" in second.stderr

    counts = _tuned_counts(tmp_path / "tunes.jsonl")
    assert set(counts) == {("campaign_nap", _canonical({"n": i})) for i in range(8)}
    assert max(counts.values()) == 1, [k for k, c in counts.items() if c > 1]
    record = tk.Record.load(tmp_path / "records" / "campaign_nap.cpu-numpy.json")
    assert len(record.entries) == 8
    assert _journal_done(journal) == 8


def test_a_device_kind_no_worker_has_is_refused_before_any_job_starts(ray_address: str, tmp_path: Path) -> None:
    jobs = [tk.CampaignJob(target="_campaign_targets:SCALE_ON_A_GPU", device="opencl:gpu", shape={"n": 1000})]
    campaign = tk.Campaign(jobs=jobs, records=tmp_path / "records", env=worker_env(tmp_path))
    with pytest.raises(tk.CampaignError, match=r"no worker of the Ray cluster has the device kind 'opencl:gpu'"):
        campaign.run(address=ray_address, progress=False)
    assert not (tmp_path / "tunes.jsonl").exists()
