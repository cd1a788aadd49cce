"""Two programs sharing a cache and a tuner name: an edited set re-tunes quietly, a different set warns."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tunekit as tk
from tunekit._base.persisted import STORED
from tunekit._observe.event_text import describe_events
from tunekit._tune.stale import _same_operation, report_stale
from tunekit._values.records import SharedTunerName
from tunekit._values.set_origin import SetOrigin

# Two programs of one service: "matmul" and "conv" are different operations that both ended up
# named "shared". EDIT=1 is the matmul program after an edit (one candidate's version bumped).
PROGRAM = textwrap.dedent(
    """
    import os, sys
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    def matmul_key(n):
        return Key(n=n)

    def conv_key(n):
        return Key(n=n)

    if sys.argv[1] == "matmul":
        version = "2" if os.environ.get("EDIT") == "1" else ""
        tunables = tk.TunableSet(key=matmul_key).with_tunables(
            [tk.Tunable("naive", lambda n: n, version=version), tk.Tunable("tiled", lambda n: n + 0)]
        )
    else:
        tunables = tk.TunableSet(key=conv_key).with_tunables(
            [tk.Tunable("direct", lambda n: n), tk.Tunable("winograd", lambda n: n + 0)]
        )
    client = CpuClient()
    tuner = tk.LocalTuner("shared")
    for n in sys.argv[2:]:
        tuner.execute(client.device_id, client, tunables, (int(n),))
    """
)


def _run(tmp_path: Path, program: str, *keys: int, **env: str) -> tuple[str, list[str]]:
    """Run one program over ``keys``; its stderr and the decisions of its records."""
    err, records = _run_records(tmp_path, program, *keys, **env)
    return err, [r.decision for r in records]


def _run_records(tmp_path: Path, program: str, *keys: int, **env: str) -> tuple[str, list[tk.AutotuneRecord]]:
    """Run one program over ``keys``; its stderr and its records."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    records = tmp_path / "records.jsonl"
    records.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, str(script), program, *map(str, keys)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(
            os.environ,
            TUNEKIT_CACHE_DIR=str(tmp_path / "cache"),
            TUNEKIT_RECORD=str(records),
            TUNEKIT_PROGRESS="0",
            **env,
        ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = records.read_text().splitlines() if records.exists() else []
    return done.stderr, [tk.AutotuneRecord.model_validate_json(line) for line in lines]


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_different_set_under_the_same_name_in_another_process_warns_once_naming_both(tmp_path: Path) -> None:
    """Regression: across processes a different set under one name looked like an edit, re-tuned silently each start."""
    assert _run(tmp_path, "matmul", 1, 2)[1] == ["tuned", "tuned"]
    err, decisions = _run(tmp_path, "conv", 1, 2)
    assert decisions == ["tuned", "tuned"]  # it still tunes: its candidates have no stored winner
    assert err.count("was tuned by a different tunable set under the same tuner name") == 1, err  # once, not per key
    assert "key generator __main__:matmul_key with candidates naive, tiled" in err
    assert "uses key generator __main__:conv_key with candidates direct, winograd" in err
    assert 'tk.LocalTuner("shared_2")' in err
    # ... and the matmul program, run again, is told the same from its side.
    err, decisions = _run(tmp_path, "matmul", 1)
    assert decisions == ["tuned"]
    assert "(key generator __main__:conv_key with candidates direct, winograd)" in err


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_different_set_under_the_same_name_leaves_an_event_in_every_record_it_re_tunes(tmp_path: Path) -> None:
    """Regression: the shared-name warning went to the log only; records (and their sinks) showed a plain tune."""
    _run(tmp_path, "matmul", 1, 2)
    err, records = _run_records(tmp_path, "conv", 1, 2)
    assert err.count("different tunable set") == 1  # the log says it once per pair of sets ...
    for record in records:  # ... every record of a tune it causes carries it
        shared = [e for e in record.events if e.kind == "shared_tuner_name"]
        assert len(shared) == 1, record.events
        event = shared[0]
        assert isinstance(event, SharedTunerName)
        assert event.stored.key_fn == "__main__:matmul_key" and event.stored.candidates == ("naive", "tiled")
        assert event.current.key_fn == "__main__:conv_key" and event.current.candidates == ("direct", "winograd")
    lines = describe_events(records[0].events)  # in words, once (not also as the generic JSON line)
    assert sum("different tunable set under the same tuner name" in line for line in lines) == 1, lines
    assert not any(line.startswith("shared_tuner_name") for line in lines), lines
    # An edit of the set re-tunes without the event.
    _run(tmp_path, "matmul", 1)
    assert all(
        e.kind != "shared_tuner_name" for r in _run_records(tmp_path, "matmul", 1, EDIT="1")[1] for e in r.events
    )


@pytest.mark.slow
@pytest.mark.subprocess
def test_an_edited_set_in_another_process_re_tunes_without_a_warning(tmp_path: Path) -> None:
    assert _run(tmp_path, "matmul", 1)[1] == ["tuned"]
    err, decisions = _run(tmp_path, "matmul", 1, EDIT="1")
    assert decisions == ["tuned"]  # the checksum changed: re-tuned, as before
    assert "different tunable set" not in err, err
    assert _run(tmp_path, "matmul", 1, EDIT="1")[1] == []  # and its winner is reused from then on


def test_a_row_stored_before_origins_were_kept_counts_as_an_edit() -> None:
    value = tk.CacheValue.model_validate_json('{"schema_version": 1, "winner": "a", "ranking": ["a"]}')
    assert value.origin is None


def test_an_origin_keeps_a_bounded_sample_of_a_large_set() -> None:
    @tk.autotune_key
    class Key:
        n: int

    tunables = tk.TunableSet(key=lambda n: Key(n=n)).with_tunables(
        [tk.Tunable(f"c{i}", lambda n: n) for i in range(40)]
    )
    origin = SetOrigin.of(tunables)
    assert origin.key_fn.endswith(":test_an_origin_keeps_a_bounded_sample_of_a_large_set.<locals>.<lambda>")
    assert len(origin.candidates) == 16 and origin.candidate_count == 40
    assert origin.describe().endswith("c15, ... 24 more")
    assert SetOrigin.model_validate_json(origin.model_dump_json()) == origin


SPACE_PROGRAM = textwrap.dedent(
    """
    import os
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class Key:
        n: int

    def key(n):
        return Key(n=n)

    params = {"BLOCK": [16, 32], "UNROLL": range(1, 17)}
    if os.environ.get("EDIT") == "front":
        params["BLOCK"] = [8, 16, 32]  # a value in front: each of the 16 first names (the ones a row keeps) changes
    elif os.environ.get("EDIT") == "param":
        params["VEC"] = [1, 2]  # a parameter added: every name changes
    tunables = tk.TunableSet.from_space(tk.Space(**params), lambda config: (lambda n: n), key=key)
    client = CpuClient()
    tk.LocalTuner("spaced").execute(client.device_id, client, tunables, (1,))
    """
)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_space_given_a_new_parameter_or_first_value_re_tunes_without_a_warning(tmp_path: Path) -> None:
    """Regression: those edits change every candidate name a row keeps, and were called a different set."""
    script = tmp_path / "spaced.py"
    script.write_text(SPACE_PROGRAM)
    env = dict(os.environ, TUNEKIT_CACHE_DIR=str(tmp_path / "cache"), TUNEKIT_PROGRESS="0")
    for edit in ("", "front", "param"):
        done = subprocess.run(
            [sys.executable, str(script)],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(env, EDIT=edit),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "different tunable set" not in done.stderr, done.stderr


def test_spaces_of_unrelated_parameters_under_one_key_generator_still_warn() -> None:
    def origin(*candidates: str) -> SetOrigin:
        return SetOrigin(key_fn="ops:shape_key", candidates=candidates, candidate_count=len(candidates))

    assert _same_operation(origin("BLOCK=16,VEC=1"), origin("BLOCK=8,VEC=1,UNROLL=2"))
    assert not _same_operation(origin("BLOCK=16,VEC=1"), origin("TILE=8,WPT=2"))
    assert not _same_operation(origin("BLOCK=16,VEC=1"), origin("BLOCK=8,TILE=2"))  # neither within the other
    assert not _same_operation(origin("naive", "tiled"), origin("direct", "winograd"))


def test_origins_that_differ_only_in_a_newer_tunekits_fields_warn_once() -> None:
    """Regression: the once-per-pair warning compared origins with the extra fields a newer tunekit stored in each row,
    so a field differing from row to row repeated the warning for every key."""

    @tk.autotune_key
    class Key:
        n: int

    def other_key(n: int) -> Key:
        return Key(n=n)

    tunables = tk.TunableSet(key=other_key).with_tunable(tk.Tunable("mine", lambda n: n))
    caught: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: caught.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("tunekit").addHandler(handler)
    try:
        for n in range(3):
            stored = SetOrigin.model_validate(
                {"key_fn": "theirs:conv_key", "candidates": ["direct"], "candidate_count": 1, "written_at": n},
                context=STORED,  # as read back from a newer tunekit's cache row
            )
            assert report_stale("extras_once", "dev", Key(n=n), stored, tunables) is not None
    finally:
        logging.getLogger("tunekit").removeHandler(handler)
    assert len([m for m in caught if "extras_once" in m]) == 1, caught
