"""A key whose tune finds no valid candidate is not tuned again by each process waiting for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from _procs import in_child

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit._store.cache_dirs import persistent_cache
from tunekit._store.tune_failure import FailedCandidate, FailedTune
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    def candidate(name):
        def run(n):
            with open(os.environ["ATTEMPTS"], "a") as log:
                log.write(f"{os.getpid()} {name}\\n")
            time.sleep(0.2)  # long enough for the other processes to be waiting on the tune lock
            raise RuntimeError(f"{name} cannot run on this device")
        return tk.Tunable(name, run)

    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([candidate("a"), candidate("b")])
    while not os.path.exists(sys.argv[1]):  # every process starts tuning at the same moment
        time.sleep(0.005)
    client = CpuClient()
    try:
        tk.LocalTuner("doomed").execute(client.device_id, client, tunables, (1,))
    except tk.NoValidKernelFound as exc:
        print(json.dumps({"failures": exc.failures, "recorded": exc.recorded}))
    """
)


@pytest.mark.subprocess
def test_processes_waiting_on_a_failing_tune_repeat_its_error_instead_of_tuning_again(tmp_path: Path) -> None:
    """Regression: when the tune holding the lock failed, each waiting process tuned the key again in turn."""
    script = tmp_path / "doomed.py"
    script.write_text(SCRIPT)
    attempts = tmp_path / "attempts.txt"
    env = dict(os.environ, ATTEMPTS=str(attempts), TUNEKIT_RECORD=str(tmp_path / "records.jsonl"))
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    time.sleep(0.5)  # all three are running and polling for the go file
    go.touch()
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    tuners = {line.split()[0] for line in attempts.read_text().splitlines()}
    assert len(tuners) == 1, f"the key was tuned by {len(tuners)} processes"
    decisions = [json.loads(line)["decision"] for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert decisions == ["tuned"]
    expected = [["a", "RuntimeError: a cannot run on this device"], ["b", "RuntimeError: b cannot run on this device"]]
    assert [r["failures"] for r in results] == [expected] * 3
    repeated = [r["recorded"] for r in results if r["recorded"]]
    assert len(repeated) == 2, results
    for text in repeated:
        assert f"not tuned again here: process {os.uname().nodename}:" in text
        assert "found no valid candidate" in text and "failed_tune_retry_s = 60 s" in text


@tk.autotune_key
class Key:
    n: int


def _set(ran: list[str], *, working: bool = False, version: str = "") -> tk.TunableSet[Key, int]:
    def candidate(name: str) -> tk.Tunable[int]:
        def run(n: int) -> int:
            ran.append(name)
            if not working:
                raise RuntimeError(f"{name} cannot run on this device")
            return n

        return tk.Tunable(name, run, version=version)

    return tk.TunableSet(key=lambda n: Key(n=n)).with_tunables([candidate("a"), candidate("b")])


def _outcome(tunables: tk.TunableSet[Key, int]) -> str:
    """What one call does: 'winner', 'tuned' (its own tune failed) or 'recorded' (another's failure repeated)."""
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("doomed")
    try:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (1,))
    except tk.NoValidKernelFound as exc:
        return "recorded" if exc.recorded else "tuned"
    return "winner"


@pytest.mark.subprocess
def test_another_process_tunes_again_once_the_set_changes_or_the_retry_time_has_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    assert _outcome(_set(ran)) == "tuned"
    runs = len(ran)
    assert in_child(lambda: (_outcome(_set(ran)), len(ran))) == ["recorded", runs]  # nothing ran in the child
    assert in_child(lambda: _outcome(_set([], version="2"))) == "tuned"  # another checksum: tuned again
    monkeypatch.setenv("TUNEKIT_FAILED_TUNE_RETRY_S", "0.2")
    tk.configure()
    assert _outcome(_set([], version="3")) == "tuned"
    time.sleep(0.3)
    assert in_child(lambda: _outcome(_set([], version="3"))) == "tuned"


def test_the_process_whose_tune_failed_tunes_again_on_its_next_call() -> None:
    """Its failure may have come from its own inputs, or a candidate it has just fixed."""
    ran: list[str] = []
    tunables = _set(ran)
    assert [_outcome(tunables), _outcome(tunables)] == ["tuned", "tuned"]
    assert ran.count("a") == 2


@pytest.mark.subprocess
def test_a_successful_tune_removes_the_record_and_clearing_the_cache_forgets_one() -> None:
    cache = persistent_cache()
    assert cache is not None
    key_json = key_to_json(Key(n=1))
    assert _outcome(_set([])) == "tuned"
    assert cache.get_failure(CLIENT.device_id, "doomed", key_json) is not None
    assert _outcome(_set([], working=True)) == "winner"
    assert cache.get_failure(CLIENT.device_id, "doomed", key_json) is None
    assert in_child(lambda: _outcome(_set([], version="2"))) == "tuned"
    assert cache.get_failure(CLIENT.device_id, "doomed", key_json) is not None
    cache.delete()
    assert cache.get_failure(CLIENT.device_id, "doomed", key_json) is None


def test_an_unreadable_record_is_ignored_and_the_key_tuned(caplog: pytest.LogCaptureFixture) -> None:
    cache = persistent_cache()
    assert cache is not None
    tunables = _set([], working=True)
    key_json = key_to_json(Key(n=1))
    cache.put_failure(CLIENT.device_id, "doomed", key_json, tunables.checksum(), '{"schema_version": 99}')
    assert _outcome(tunables) == "winner"
    assert "unreadable failed-tune record" in caplog.text


@pytest.mark.subprocess
def test_retry_zero_records_nothing() -> None:
    tk.configure(failed_tune_retry_s=0)
    assert _outcome(_set([])) == "tuned"
    assert in_child(lambda: _outcome(_set([]))) == "tuned"
    cache = persistent_cache()
    assert cache is not None
    assert cache.get_failure(CLIENT.device_id, "doomed", key_to_json(Key(n=1))) is None


def test_the_record_is_a_versioned_json_document() -> None:
    assert _outcome(_set([])) == "tuned"
    cache = persistent_cache()
    assert cache is not None
    got = cache.get_failure(CLIENT.device_id, "doomed", key_to_json(Key(n=1)))
    assert got is not None
    record = FailedTune.model_validate_json(got[1])
    assert record.schema_version == 1 and record.process == f"{os.uname().nodename}:{os.getpid()}"
    assert record.failures == [
        FailedCandidate(name="a", reason="RuntimeError: a cannot run on this device"),
        FailedCandidate(name="b", reason="RuntimeError: b cannot run on this device"),
    ]


def _foreign_record(tunables: tk.TunableSet[Key, int], failed_at: str) -> None:
    """A failure recorded by a process on another host (its clock, its way of writing the time)."""
    cache = persistent_cache()
    assert cache is not None
    record = {"failures": [{"name": "a", "reason": "boom"}], "process": "elsewhere:1", "failed_at": failed_at}
    cache.put_failure(CLIENT.device_id, "doomed", key_to_json(Key(n=1)), tunables.checksum(), json.dumps(record))


def test_a_record_with_a_time_of_no_time_zone_is_ignored_and_the_key_tuned(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: a naive failed_at passed validation, then every other process failed with TypeError on the key."""
    tunables = _set([], working=True)
    _foreign_record(tunables, datetime.now().isoformat())
    assert _outcome(tunables) == "winner"
    assert "unreadable failed-tune record" in caplog.text


def test_a_record_dated_in_the_future_by_more_than_the_retry_time_does_not_block_the_key() -> None:
    """Regression: a record from a clock a day ahead made every other process refuse the key for a day."""
    ran: list[str] = []
    _foreign_record(_set(ran), (datetime.now(UTC) + timedelta(seconds=5)).isoformat())  # a little skew: recent
    assert (_outcome(_set(ran)), ran) == ("recorded", [])
    _foreign_record(_set(ran), (datetime.now(UTC) + timedelta(days=1)).isoformat())
    assert _outcome(_set(ran, working=True)) == "winner"


def test_a_failure_record_with_fields_of_a_newer_tunekit_is_still_repeated() -> None:
    """Regression: a field added within schema_version 1 made an older process ignore the record and tune again."""
    ran: list[str] = []
    tunables = _set(ran)
    cache = persistent_cache()
    assert cache is not None
    record = {
        "schema_version": 1,
        "failures": [{"name": "a", "reason": "boom", "stage": "compile"}],
        "process": "elsewhere:1",
        "failed_at": datetime.now(UTC).isoformat(),
        "exit_code": 3,
    }
    cache.put_failure(CLIENT.device_id, "doomed", key_to_json(Key(n=1)), tunables.checksum(), json.dumps(record))
    assert (_outcome(tunables), ran) == ("recorded", [])


def _plus_one(n: object) -> object:
    return n + 1  # type: ignore[operator]


def _words(key: Key, n: int) -> tuple[object]:
    return ("not a number",)  # every candidate fails on it


def _numbers(key: Key, n: int) -> tuple[object]:
    return (n,)


def _generated(inputs: Callable[..., tuple[object, ...]]) -> tk.TunableSet[Key, object]:
    return tk.TunableSet(key=lambda n: Key(n=n), inputs=inputs).with_tunables(
        [tk.Tunable("a", _plus_one), tk.Tunable("b", _plus_one)]
    )


@pytest.mark.subprocess
def test_another_process_tunes_again_at_once_when_the_inputs_generator_was_fixed() -> None:
    """Regression: the record ignored inputs=, so a set whose generator was fixed repeated the old error for 60 s."""
    assert _outcome(_generated(_words)) == "tuned"  # type: ignore[arg-type]
    assert in_child(lambda: _outcome(_generated(_words))) == "recorded"  # type: ignore[arg-type]  # unchanged
    assert in_child(lambda: _outcome(_generated(_numbers))) == "winner"  # type: ignore[arg-type]


def _scaled(scale: object) -> Callable[..., tuple[object, ...]]:
    return lambda key, n: (n * scale,)  # type: ignore[operator]


@pytest.mark.subprocess
def test_a_generator_capturing_other_data_is_another_generator() -> None:
    assert _outcome(_generated(_scaled("x"))) == "tuned"  # type: ignore[arg-type]  # "x" * 1 + 1: TypeError
    assert in_child(lambda: _outcome(_generated(_scaled("x")))) == "recorded"  # type: ignore[arg-type]
    assert in_child(lambda: _outcome(_generated(_scaled(2)))) == "winner"  # type: ignore[arg-type]


def _ones(n: int) -> np.ndarray:
    return np.ones(n)


def _twos(n: int) -> np.ndarray:
    return np.full(n, 2.0)


def _checked(reference: Callable[[int], np.ndarray] | None, *, rtol: float = 0.0) -> tk.TunableSet[Key, np.ndarray]:
    candidates = [tk.Tunable("a", _ones), tk.Tunable("b", _ones)]
    return tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(candidates).with_reference(reference, rtol=rtol)


@pytest.mark.subprocess
def test_another_process_tunes_again_at_once_when_the_reference_was_fixed() -> None:
    """Regression: the record ignored with_reference, so a fixed reference repeated the old error for 60 s."""
    assert _outcome(_checked(_twos)) == "tuned"  # type: ignore[arg-type]  # every candidate fails the check
    assert in_child(lambda: _outcome(_checked(_twos))) == "recorded"  # type: ignore[arg-type]
    assert in_child(lambda: _outcome(_checked(_ones))) == "winner"  # type: ignore[arg-type]


@pytest.mark.subprocess
def test_another_process_tunes_again_at_once_when_the_reference_tolerance_was_widened() -> None:
    assert _outcome(_checked(_twos)) == "tuned"  # type: ignore[arg-type]
    assert in_child(lambda: _outcome(_checked(_twos, rtol=1.0))) == "winner"  # type: ignore[arg-type]


class _CountedInputs:
    """An inputs generator (every candidate fails on what it makes) counting reads of its identity."""

    def __init__(self) -> None:
        self.reads = 0

    @property
    def fingerprint(self) -> str:
        self.reads += 1
        return "words, version 1"

    def __call__(self, key: Key, n: int) -> tuple[object]:
        return ("not a number",)


@pytest.mark.subprocess
def test_repeating_another_process_failure_works_out_the_generator_identity_once_per_set() -> None:
    """Regression: each call repeating the error re-hashed the generator's captured data (seconds for a big one)."""
    inputs = _CountedInputs()
    tunables = _generated(inputs)
    assert in_child(lambda: _outcome(tunables)) == "tuned"  # another process's failure, recorded
    assert [_outcome(tunables) for _ in range(3)] == ["recorded"] * 3
    assert inputs.reads == 1


def _dtype_picky_set() -> tk.TunableSet[Key, int]:
    def candidate(name: str) -> tk.Tunable[int]:
        def run(x: np.ndarray) -> int:
            if x.dtype != np.float32:
                raise tk.InputTypeError(f"{name}: argument 0 is {x.dtype}, the kernel declares float")
            return len(x)

        return tk.Tunable(name, run)

    return tk.TunableSet(key=lambda x: Key(n=len(x))).with_tunables([candidate("a"), candidate("b")])


def _dtype_outcome(dtype: type[np.generic]) -> str:
    tuner: tk.LocalTuner[Key, int] = tk.LocalTuner("picky")
    try:
        tuner.execute(CLIENT.device_id, CLIENT, _dtype_picky_set(), (np.zeros(8, dtype),))
    except tk.NoValidKernelFound as exc:
        return "recorded" if exc.recorded else "tuned"
    return "winner"


@pytest.mark.subprocess
def test_a_callers_wrong_dtype_is_not_remembered_for_other_processes() -> None:
    """Regression: a first call with float64 made every candidate refuse, and another process's float32 call got it."""
    assert _dtype_outcome(np.float64) == "tuned"
    assert in_child(lambda: _dtype_outcome(np.float32)) == "winner"
