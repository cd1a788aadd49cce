"""TuneCache, the one home of a tuner's state, and TuneJob, one tune's values: their contracts."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import select
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest

import tunekit as tk
from tunekit._base import settings as _settings
from tunekit._keys.key import key_to_json
from tunekit._store.cache_dirs import persistent_cache
from tunekit._tune.record_device import UnverifiedSeeds
from tunekit._tune.tune_cache import Owned, TuneCache
from tunekit._tune.tune_job import TuneJob
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


CLIENT = CpuClient()
KEY = NKey(n=4)


def _set(*names: str) -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables([tk.Tunable(name, lambda n: n) for name in names])


def _tune_id(tunables: tk.TunableSet[Any, Any]) -> tuple[str, str, str, str]:
    return (CLIENT.device_id, "op", key_to_json(KEY), tunables.checksum())


def _job(tunables: tk.TunableSet[Any, Any]) -> TuneJob:
    key_json, settings = key_to_json(KEY), _settings.current()
    return TuneJob("op", CLIENT.device_id, CLIENT, tunables, KEY, key_json, (4,), settings, persistent_cache())


def test_one_call_owns_a_new_keys_tune_and_the_others_wait_for_its_ranking() -> None:
    cache, tunables = TuneCache("op", CLIENT.device_id), _set("a", "b")
    owned = cache.begin(tunables, KEY, _tune_id(tunables))
    assert isinstance(owned, Owned)
    waiting = cache.begin(_set("a", "b"), KEY, _tune_id(tunables))  # an equal set built apart waits too
    assert waiting == tk.Pending(owned.future)
    cache.settle(tunables, KEY, (1, 0), tuned=True)
    assert owned.future.result() == (1, 0)
    assert cache.begin(tunables, KEY, _tune_id(tunables)) == tk.Hit((1, 0))
    assert cache.winner_fns[id(tunables)][KEY] is tunables.tunables[1].fn
    assert cache.winner_names() == ["b"]


def test_an_abandoned_tune_raises_in_its_waiters_and_the_next_call_tunes_again() -> None:
    cache, tunables = TuneCache("op", CLIENT.device_id), _set("a")
    owned = cache.begin(tunables, KEY, _tune_id(tunables))
    assert isinstance(owned, Owned)
    cache.abandon(tunables, KEY, RuntimeError("no winner"))
    with pytest.raises(RuntimeError, match="no winner"):
        owned.future.result()
    assert isinstance(cache.begin(tunables, KEY, _tune_id(tunables)), Owned)


def test_an_equal_set_takes_a_tuned_ranking_and_state_does_not_adopt_it() -> None:
    cache, tuned, equal = TuneCache("op", CLIENT.device_id), _set("a", "b"), _set("a", "b")
    cache.seed(tuned, KEY, ["b", "a"])
    assert cache.state(equal, KEY) == tk.Hit((1, 0))
    assert id(equal) not in cache.winner_fns, "a look remembers nothing"
    assert cache.begin(equal, KEY, _tune_id(equal)) == tk.Hit((1, 0))
    assert cache.winner_fns[id(equal)][KEY] is equal.tunables[1].fn


def test_a_plan_order_serves_only_its_set_and_only_until_autotuning_is_back_on() -> None:
    cache, tunables, equal = TuneCache("op", CLIENT.device_id), _set("a", "b"), _set("a", "b")
    tk.configure(autotune=False)
    assert isinstance(cache.begin(tunables, KEY, _tune_id(tunables)), Owned)
    cache.settle(tunables, KEY, (0, 1), tuned=False)
    assert cache.ranking(tunables, KEY) == (0, 1)
    assert isinstance(cache.state(equal, KEY), tk.Miss)
    tk.configure(autotune=True)
    assert cache.ranking(tunables, KEY) == () and KEY not in cache.winner_fns[id(tunables)]


def test_seeding_names_that_are_no_candidates_is_refused() -> None:
    cache, tunables = TuneCache("op", CLIENT.device_id), _set("a")
    with pytest.raises(ValueError, match=r"none of \['z'\] is a member"):
        cache.seed(tunables, KEY, ["z"])
    cache.seed(tunables, KEY, ["z", "a"])  # names the set lacks are left out
    assert cache.ranking(tunables, KEY) == (0,)


def test_a_collected_sets_entries_are_dropped_and_clear_forgets_every_set() -> None:
    cache, kept, dropped = TuneCache("op", CLIENT.device_id), _set("a"), _set("b")
    cache.seed(kept, KEY, ["a"])
    cache.seed(dropped, KEY, ["b"])
    ident = id(dropped)
    del dropped
    gc.collect()
    assert ident not in cache.winner_fns and list(cache.winners()) == [kept]
    cache.clear()
    assert not cache.winner_fns and cache.winner_names() == []
    assert isinstance(cache.state(kept, KEY), tk.Miss), "the equal-set table is cleared too"


def test_a_stored_ranking_is_written_through_checked_against_the_set_and_demoted() -> None:
    cache, tunables = TuneCache("op", CLIENT.device_id), _set("a", "b", "c")
    job = _job(tunables)
    assert cache.stored_ranking(job) is None
    assert cache.store(job, (2, 0, 1), {})
    assert TuneCache("op", CLIENT.device_id).stored_ranking(_job(_set("a", "b", "c"))) == (2, 0, 1)
    other = _set("a", "b")
    stale = _job(other)
    assert cache.stored_ranking(stale) is None, "another checksum's row is re-tuned"
    assert cache.demote(tunables, KEY, (0, 1))
    assert cache.ranking(tunables, KEY) == (0, 1)
    assert cache.stored_ranking(_job(tunables)) == (0, 1)
    assert not cache.demote(other, KEY, (1,)), "another set's row is left as it is"


def test_a_tune_job_is_frozen_but_gathers_events() -> None:
    job = _job(_set("a"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.key = NKey(n=8)  # type: ignore[misc]
    assert job.events == [] and job.where == "tuner 'op'"


def test_unverified_seeds_warn_once_on_each_device_they_do_not_serve(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tunekit.tuner")
    seeds = UnverifiedSeeds("op")
    seeds.warn_unserved("cpu:other", CLIENT)
    assert not [r for r in caplog.records if r.name != "tunekit.doubt"], "nothing seeded: nothing to say"
    seeds.add("cpu:recorded", None)
    seeds.warn_unserved("cpu:recorded", CLIENT)
    seeds.warn_unserved("cpu:other", CLIENT)
    seeds.warn_unserved("cpu:other", CLIENT)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "serve device 'cpu:recorded'" in warning and "runs on 'cpu:other'" in warning


@pytest.mark.subprocess
@pytest.mark.parametrize("cache", [True, False])
def test_a_child_forked_while_another_thread_tunes_a_key_gets_that_key_without_hanging(
    isolated_settings: Path, cache: bool
) -> None:
    """Regression: a child forked mid-tune inherited the tune in flight, and its call for that key waited for ever
    on a thread fork() had not copied. Now it waits on the parent's tune lock and reads its winner (cache on),
    or tunes the key itself (cache off)."""
    tk.configure(cache=cache)
    parent, started, release = os.getpid(), threading.Event(), threading.Event()
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("forked_mid_tune", sinks=[records.append])

    def held_in_the_parent(n: int) -> int:
        if os.getpid() == parent and not release.is_set():
            started.set()
            release.wait(timeout=60)  # the tune is in flight, in another thread, while the main thread forks
        return n

    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable("held", held_in_the_parent), tk.Tunable("plain", lambda n: n)]
    )
    tuning = threading.Thread(target=tuner.execute, args=(CLIENT.device_id, CLIENT, tunables, (4,)))
    tuning.start()
    assert started.wait(timeout=60)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        answer = f"{tuner.execute(CLIENT.device_id, CLIENT, tunables, (4,))} {len(records)}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    release.set()
    tuning.join()
    ready, _, _ = select.select([read_end], [], [], 60)
    answer = os.read(read_end, 100).decode() if ready else "no answer: the child hangs"
    os.close(read_end)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    # The child's records: none with the cache on (it reads the parent's winner), its own tune's with it off.
    assert answer == ("4 0" if cache else "4 1"), answer
    assert len(records) == 1
