"""OpenCL templates under process isolation: a variant that never ends is blamed after the set's limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tunekit as tk
from tunekit_backends.opencl import OpenCLClient

pytestmark = pytest.mark.opencl

pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")

TESTS = Path(__file__).resolve().parents[1]

_HUNG_AFTER_S = 300
# The set's own limit. Loose enough that the good variant's fresh worker (interpreter, pyopencl,
# PoCL's first launch) ends within it on a loaded 2-core machine: at 2 s it timed out under load 6.
_LIMIT_S = 8.0


def _tune_in_child(compile_in: str, timeout_s: float) -> tk.AutotuneRecord:
    """Tune ``_hanging_opencl``'s template in a fresh interpreter; a hang there fails the test instead of hanging it."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        # Well above the set's own limit: a run held to this instead fails the message asserts, not the clock.
        TUNEKIT_CANDIDATE_TIMEOUT_S="20",
    )
    command = [sys.executable, "-c", "import _hanging_opencl; _hanging_opencl.main()", compile_in, str(timeout_s)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=_HUNG_AFTER_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"compile_in={compile_in!r}: the tune hung its caller (killed after {_HUNG_AFTER_S} s)")
    assert done.returncode == 0, done.stderr[-3000:]
    return tk.AutotuneRecord.model_validate_json(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_kernel_that_never_ends_is_blamed_in_the_isolated_worker_when_variants_compile_in_threads() -> None:
    """Regression: compile_in="thread" first-launched every variant in the caller, which then waited forever."""
    record = _tune_in_child("thread", _LIMIT_S)
    outcome = {c.name: (c.status, c.stage, c.error) for c in record.candidates}
    assert outcome["spin[MODE=1]"] == ("failed", "timeout", f"timeout after {_LIMIT_S:g} s"), outcome
    assert outcome["spin[MODE=0]"][0] == "measured", outcome
    assert record.winner == "spin[MODE=0]"


@pytest.mark.slow
@pytest.mark.subprocess
def test_compile_workers_hold_a_hanging_first_launch_to_the_sets_own_timeout() -> None:
    """Regression: with_isolation(timeout_s=2) gave way to candidate_timeout_s in the compile workers."""
    record = _tune_in_child("process", _LIMIT_S)
    outcome = {c.name: (c.status, c.stage, c.error or "") for c in record.candidates}
    status, stage, error = outcome["spin[MODE=1]"]
    assert (status, stage) == ("failed", "compile"), outcome
    assert "hung a compile worker" in error and f"within {_LIMIT_S:g} s" in error, error
    assert outcome["spin[MODE=0]"][0] == "measured", outcome
    assert record.winner == "spin[MODE=0]"


def test_process_isolation_without_a_worker_factory_is_refused_before_any_variant_runs() -> None:
    """Regression: TUNEKIT_ISOLATION=process forked the OpenCL client; every variant hung to its limit, then
    NoValidKernelFound (8 variants: 8 minutes)."""
    import _hanging_opencl  # noqa: PLC0415 - it imports pyopencl (the opencl extra), skipped above when missing

    tk.configure(isolation="process", candidate_timeout_s=2)
    client, tunables, inputs = _hanging_opencl._tune(
        OpenCLClient(flush_cache=False, compile_in="thread"), _hanging_opencl.N
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    tuner = tk.LocalTuner[_hanging_opencl.SpinKey, Any]("unforked-opencl")
    try:
        with pytest.raises(tk.TunekitError) as raised:
            tuner.execute(client.device_id, client, tunables, inputs)
        with pytest.raises(tk.TunekitError, match=r"the set's with_isolation\('process'\) has no worker factory"):
            tuner.execute(client.device_id, client, tunables.with_isolation("process", timeout_s=2), inputs)
    finally:
        tk.remove_record_sink(sink)
        client.close()
    message = str(raised.value)
    assert not isinstance(raised.value, tk.NoValidKernelFound), message
    assert "tuner 'unforked-opencl': isolation='process'" in message, message
    assert "an OpenCL context does not survive fork()" in message, message
    assert "with_isolation('process', worker=build)" in message and "TUNEKIT_ISOLATION=none" in message, message
    assert records == []  # nothing was tuned, so nothing recorded


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_searched_template_runs_under_process_isolation_through_execute_with_a_worker_factory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The route tk.search's refusal of an OpenCL client names: with_search and a worker factory, through execute."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    import _searched_opencl  # noqa: PLC0415 - it imports pyopencl (the opencl extra), skipped above when missing

    client, tunables, inputs = _searched_opencl.searched(OpenCLClient(flush_cache=False, compile_in="thread"), 64)
    isolated = tunables.with_isolation("process", timeout_s=60, worker=_searched_opencl.build)
    records: list[tk.AutotuneRecord] = []
    tuner = tk.LocalTuner[_searched_opencl.FillKey, Any]("searched-isolated", sinks=[records.append])
    try:
        tuner.execute(client.device_id, client, isolated, inputs).wait()
    finally:
        client.close()
    (record,) = records
    (ended,) = [e for e in record.events if isinstance(e, tk.SearchEnded)]
    assert (ended.evaluations, ended.stopped_by) == (4, "max_evals")
    assert record.winner is not None and {c.status for c in record.candidates} == {"measured"}
