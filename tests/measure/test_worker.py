"""Isolated workers on a real OpenCL device: a kernel that never ends and a Python abort() are disqualified.

OpenCL state does not survive fork(), so these candidates run in a *spawned* worker that
rebuilds client, kernels and buffers with ``build`` below, imported by name. The factories
told which device to build for are tested on two simulated devices (``_two_devices.py``).
"""

from __future__ import annotations

import faulthandler
import math
import os
import time
from pathlib import Path
from typing import Any

import _two_devices
import numpy as np
import pytest

import tunekit as tk
from tunekit._candidates.isolation import Isolation, factory_keywords
from tunekit_backends.opencl import OpenCLClient

N = 1 << 14

SOURCE = """
__kernel void spin(__global float* out, __global const float* x, volatile __global const int* stop) {
    int i = get_global_id(0);
    while (stop[0] == 0) { out[i] += 1.0f; }   /* stop is 0 and nothing sets it: never ends */
}
__kernel void slow(__global float* out, __global const float* x, volatile __global const int* stop) {
    int i = get_global_id(0);
    float acc = x[i];
    for (int k = 0; k < 4000; ++k) { acc = acc * 0.999f + 0.5f; }
    out[i] = x[i] * 0.5f + (acc > 1e30f ? 1.0f : 0.0f);   /* the same answer as fast, after busy work */
}
__kernel void fast(__global float* out, __global const float* x, volatile __global const int* stop) {
    int i = get_global_id(0);
    out[i] = x[i] * 0.5f;
}
"""


@tk.autotune_key
class SizeKey:
    n: int


def _abort(*args: Any) -> Any:
    faulthandler.disable()  # pytest's faulthandler would print the worker's stack on the terminal
    os.abort()


def build_checked(key: dict[str, Any]) -> tuple[OpenCLClient, tk.TunableSet[SizeKey, Any], tuple[Any, ...]]:
    """``build`` with a correctness reference: out = x / 2."""
    client, tunables, inputs = build(key)
    return client, tunables.with_reference(lambda out, x, stop: x * np.float32(0.5), outputs=[0]), inputs


def build(key: dict[str, Any]) -> tuple[OpenCLClient, tk.TunableSet[SizeKey, Any], tuple[Any, ...]]:
    """The tune, built from the key's fields alone: in the caller and again in every worker."""
    return _build_on(OpenCLClient(flush_cache=False, start_workers="first_compile"), key)


def _build_on(
    client: OpenCLClient, key: dict[str, Any]
) -> tuple[OpenCLClient, tk.TunableSet[SizeKey, Any], tuple[Any, ...]]:
    cl = client._cl
    program = cl.Program(client.context, SOURCE).build()
    n = int(key["n"])

    def fresh(*_: Any) -> tuple[Any, ...]:
        queue = client.queue
        return (
            cl.array.zeros(queue, n, np.float32),
            cl.array.to_device(queue, np.ones(n, np.float32)),
            cl.array.to_device(queue, np.zeros(1, np.int32)),
        )

    def launcher(name: str) -> tk.Tunable[Any]:
        kernel = cl.Kernel(program, name)
        return tk.Tunable(name, lambda out, x, stop: kernel(client.queue, (n,), None, out.data, x.data, stop.data))

    tunables = tk.TunableSet(key=lambda out, x, stop: SizeKey(n=n), inputs=fresh).with_tunables(
        [launcher("spin"), tk.Tunable("abort", _abort), launcher("slow"), launcher("fast")]
    )
    # A kernel's first launch builds its work-group code: done here, in a worker's set-up (which has its
    # own generous limit), so the candidate timeout bounds runs of built kernels only.
    for tunable in tunables.tunables[2:]:
        tunable.fn(*fresh()).wait()
    return client, tunables, fresh()


def _timeout_s(tunables: tk.TunableSet[SizeKey, Any]) -> int:
    """A candidate timeout that scales with how fast this machine runs "slow" now: 100 of its runs, at least 3 s.

    "spin" never ends, so any limit fails it; "slow" and "fast" must never meet it, however loaded the machine.
    """
    assert tunables.inputs is not None
    scratch = tunables.inputs(SizeKey(n=N))  # fresh buffers: the caller's must stay untouched until the winner runs
    slow = tunables.tunables[2]
    started = time.perf_counter()
    slow.fn(*scratch).wait()
    return max(3, math.ceil(100 * (time.perf_counter() - started)))


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize("factory", [build, build_checked], ids=["timed", "checked"])
def test_opencl_infinite_loop_and_python_abort_are_disqualified_in_a_spawned_worker(factory: Any) -> None:
    # With a reference the two die in the correctness check, which runs in the worker too; without, when timed.
    client, tunables, inputs = factory({"n": N})
    timeout_s = _timeout_s(tunables)
    isolated = tunables.with_isolation("process", timeout_s=timeout_s, worker=factory)
    tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner("opencl-isolated")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        event = tuner.execute(client.device_id, client, isolated, inputs)
    finally:
        tk.remove_record_sink(sink)
    event.wait()
    assert np.all(inputs[0].get() == 0.5), "the winner ran on the caller's real buffers"
    (record,) = records
    outcome = {c.name: (c.status, c.stage, c.error) for c in record.candidates}
    assert outcome["spin"] == ("failed", "timeout", f"timeout after {timeout_s} s")
    assert outcome["abort"] == ("failed", "crash", "crashed: signal 6 (SIGABRT)")
    assert outcome["slow"][0] == outcome["fast"][0] == "measured"
    assert record.winner == "fast"
    checked = {e.name: e.passed for e in record.events if e.kind == "check"}
    assert checked == ({"slow": True, "fast": True} if factory is build_checked else {})


@pytest.mark.opencl
def test_a_worker_factory_must_be_importable_by_name() -> None:
    _, tunables, _ = build({"n": 16})
    with pytest.raises(ValueError, match="top level of an importable module"):
        tunables.with_isolation("process", worker=lambda key: build(key))  # noqa: PLW0108 - a lambda is the point
    with pytest.raises(ValueError, match="needs isolation mode 'process'"):
        tunables.with_isolation("none", worker=build)


def _mismatched(key: dict[str, Any]) -> tuple[OpenCLClient, tk.TunableSet[SizeKey, Any], tuple[Any, ...]]:
    client, tunables, inputs = build(key)
    return client, tk.TunableSet(key=tunables.key, inputs=tunables.inputs).with_tunables(tunables.tunables[2:]), inputs


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_worker_that_builds_other_candidates_fails_every_candidate_once_with_the_reason() -> None:
    client, tunables, inputs = build({"n": 64})
    safe = tk.TunableSet(key=tunables.key, inputs=tunables.inputs).with_tunables(tunables.tunables[2:])  # slow, fast
    wrong = safe.with_isolation("process", timeout_s=30, worker=build)  # builds spin, abort, slow, fast
    tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner("opencl-mismatch")
    with pytest.raises(tk.NoValidKernelFound) as info:
        tuner.execute(client.device_id, client, wrong, inputs)
    reasons = {reason for _, reason in info.value.failures}
    assert len(reasons) == 1 and "could not set up" in next(iter(reasons)) and "'spin'" in next(iter(reasons))


def _tune_on(device_id: str, factory: Any, client: tk.Client | None = None, n: int = 5) -> tk.AutotuneRecord:
    """Tune ``_two_devices.SET`` for ``n`` on one simulated device in workers ``factory`` builds; its record."""
    isolated = _two_devices.SET.with_isolation("process", timeout_s=60, worker=factory)
    tuner: tk.LocalTuner[_two_devices.NKey, int] = tk.LocalTuner(f"two-devices-{factory.__name__}")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        assert tuner.execute(device_id, client or _two_devices.DEVICES[device_id], isolated, (n,)) == n
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    return record


@pytest.mark.subprocess
def test_a_worker_factory_builds_for_the_device_of_each_tune() -> None:
    """Regression: the factory got only the key's fields, so every device but its default failed the device check."""
    for device_id in ("sim-device:1", "sim-device:0"):
        record = _tune_on(device_id, _two_devices.build)
        assert record.device_id == device_id
        assert {c.name: c.status for c in record.candidates} == {"long": "measured", "short": "measured"}


@pytest.mark.subprocess
def test_a_factory_of_the_key_alone_still_works_and_a_wrong_device_fails_the_check() -> None:
    with pytest.raises(tk.NoValidKernelFound) as info:
        _tune_on("sim-device:1", _two_devices.build_default)
    reasons = {reason for _, reason in info.value.failures}
    assert reasons == {
        "the worker process could not set up (_two_devices:build_default): "
        "TunekitError: its client is 'sim-device:0', the caller's 'sim-device:1'"
    }


def test_how_a_worker_factory_is_called_is_decided_when_the_set_is_built() -> None:
    located = {"device_id", "locator"}
    assert factory_keywords(_two_devices.build) == factory_keywords(_two_devices.build_positional) == {"device_id"}
    assert factory_keywords(_two_devices.build_located) == located
    assert factory_keywords(_two_devices.build_located_only) == {"locator"}
    # **kwargs alone is no device_id: a wrapper forwarding it to build(key_fields) worked before device_id existed.
    assert factory_keywords(_two_devices.build_any) == factory_keywords(_two_devices.build_default) == set()
    assert factory_keywords(_two_devices.build_locator_positional_only) == set()
    isolation = _two_devices.SET.with_isolation("process", worker=_two_devices.build_positional).isolation
    assert isolation == Isolation("process", None, "_two_devices:build_positional", worker_device_id=True)
    isolation = _two_devices.SET.with_isolation("process", worker=_two_devices.build_located_only).isolation
    assert isolation == Isolation("process", None, "_two_devices:build_located_only", worker_locator=True)
    for factory in (_two_devices.build_two_fields, _two_devices.build_nothing):
        with pytest.raises(ValueError, match=r"calls it build\(key_fields\), optionally with device_id="):
            _two_devices.SET.with_isolation("process", worker=factory)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_worker_factory_builds_on_the_device_of_the_client_that_called_execute() -> None:
    """Regression: a factory was told only the device id, so with two identical devices slot 1 was timed on slot 0."""
    for slot in (1, 0):
        client = _two_devices.SLOTS[f"sim-slot:{slot}"]
        for factory in (_two_devices.build_located, _two_devices.build_located_only):
            # Another key for each slot: identical devices share winners, so the second would not tune.
            record = _tune_on(client.device_id, factory, client, n=10 + slot)
            assert {c.name: c.status for c in record.candidates} == {"long": "measured", "short": "measured"}


@pytest.mark.subprocess
def test_a_worker_built_on_another_device_of_the_same_model_fails_the_check() -> None:
    """Regression: a factory without locator= built the first identical device, and its timings passed as slot 1's."""
    client = _two_devices.SLOTS["sim-slot:1"]
    with pytest.raises(tk.NoValidKernelFound) as info:
        _tune_on(client.device_id, _two_devices.build_first_slot, client)
    reasons = {reason for _, reason in info.value.failures}
    assert reasons == {
        "the worker process could not set up (_two_devices:build_first_slot): TunekitError: its client is at "
        "'sim-slot:0', the caller's at 'sim-slot:1': take locator= in the worker factory and build the client on "
        "that device (e.g. OpenCLClient(locator=locator))"
    }


def build_located(
    key: dict[str, Any], *, device_id: str, locator: str | None
) -> tuple[OpenCLClient, tk.TunableSet[SizeKey, Any], tuple[Any, ...]]:
    """``build``'s slow and fast candidates on the device at ``locator``; it notes the locator it is given."""
    with open(os.environ["LOCATOR_LOG_FOR_TESTS"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {locator}\n")
    client, tunables, inputs = _build_on(
        OpenCLClient(flush_cache=False, device_id=device_id, locator=locator, compile_in="thread"), key
    )
    return client, tk.TunableSet(key=tunables.key, inputs=tunables.inputs).with_tunables(tunables.tunables[2:]), inputs


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_an_opencl_worker_factory_is_given_the_locator_of_the_client_that_called_execute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "locators.txt"
    monkeypatch.setenv("LOCATOR_LOG_FOR_TESTS", str(log))  # the spawned worker inherits the environment
    caller = OpenCLClient(flush_cache=False, compile_in="thread")
    client, tunables, inputs = build_located({"n": 256}, device_id=caller.device_id, locator=caller.locator)
    assert client.locator == caller.locator
    isolated = tunables.with_isolation("process", timeout_s=60, worker=build_located)
    tuner: tk.LocalTuner[SizeKey, Any] = tk.LocalTuner("opencl-located")
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner.execute(client.device_id, client, isolated, inputs).wait()
    finally:
        tk.remove_record_sink(sink)
        client.close()
        caller.close()
    (record,) = records
    assert {c.name: c.status for c in record.candidates} == {"slow": "measured", "fast": "measured"}
    given = [line.split(" ", 1) for line in log.read_text().splitlines()]
    assert [locator for pid, locator in given if int(pid) != os.getpid()] == [caller.locator]
