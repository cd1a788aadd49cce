"""Record sinks: the JSONL file sink creates its file as a plain write would."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tunekit as tk
from tunekit._observe.sinks import sink_from_setting
from tunekit_backends.cpu import CpuClient


@pytest.mark.subprocess
def test_a_new_records_file_gets_the_mode_a_plain_open_would(tmp_path: Path) -> None:
    """The file was created 0644 whatever the umask, so a group-writable setup (umask 002) could not share it."""
    # The umask is per process and changing it here would race with other threads: a child sets it.
    script = (
        "import os, stat, sys\n"
        "import tunekit as tk\n"
        "os.umask(0o002)\n"
        "record = tk.AutotuneRecord(tuner='t', device_id='cpu:test', key={'n': 8}, checksum='c',\n"
        "                           decision='disabled', winner='a', stored=False, wall_time_s=0.0)\n"
        "tk.JsonlSink(sys.argv[1]).emit(record)\n"
        "print(oct(stat.S_IMODE(os.stat(sys.argv[1]).st_mode)))\n"
    )
    path = tmp_path / "records.jsonl"
    out = subprocess.run([sys.executable, "-c", script, str(path)], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == oct(0o664)
    assert path.read_text().count("\n") == 1


def test_something_that_is_no_sink_is_refused_where_it_is_given() -> None:
    """A non-callable was accepted and then failed at every record, each failure only logged: the records were lost."""
    with pytest.raises(TypeError, match=r"add_record_sink\(\) takes a record sink .* got int"):
        tk.add_record_sink(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"LocalTuner 'x': sinks= takes a record sink .* got str"):
        tk.LocalTuner("x", sinks=["records.jsonl"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"LocalTuner 'x': sinks= takes a list of sinks, got builtin_function"):
        tk.LocalTuner("x", sinks=print)  # type: ignore[arg-type]
    space = tk.Space(A=[1, 2])
    with pytest.raises(TypeError, match=r"tk.search\(sinks=...\) takes a record sink"):
        tk.search(space, lambda c: lambda: c.A, CpuClient(), (), tuner="t", sinks=[None])  # type: ignore[list-item]


def test_a_single_sink_not_in_a_list_is_refused_by_search_and_tune_objective(tmp_path: Path) -> None:
    """tk.search(sinks=tk.JsonlSink(path)) failed as "'JsonlSink' object is not iterable", and a path string was
    refused one character at a time; LocalTuner already said to pass a list."""
    space = tk.Space(A=[1, 2])
    sink = tk.JsonlSink(tmp_path / "records.jsonl")
    told = r"takes a list of sinks, got JsonlSink; a single one goes in a list: sinks=\[sink\]"
    with pytest.raises(TypeError, match=r"tk.search\(sinks=...\) " + told):
        tk.search(space, lambda c: lambda: c.A, CpuClient(), (), tuner="t", sinks=sink)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tk.search\(sinks=...\) takes a list of sinks, got str"):
        tk.search(space, lambda c: lambda: c.A, CpuClient(), (), tuner="t", sinks="records.jsonl")

    class Objective:
        space = tk.Space(A=[1, 2])

        def measure(self, config: tk.Config) -> tk.Outcome:
            return tk.Measured(tk.BenchmarkDurations((config.A,)))

        def remaining(self) -> int | None:
            return None

    with pytest.raises(TypeError, match=r"tk.tune_objective\(sinks=...\) " + told):
        tk.tune_objective(Objective(), tuner="t", device_id="d", sinks=sink)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"LocalTuner 'x': sinks= " + told):
        tk.LocalTuner("x", sinks=sink)  # type: ignore[arg-type]
    assert not sink.path.exists()


def test_a_sink_that_could_never_write_is_refused_when_it_is_made(tmp_path: Path) -> None:
    """JsonlSink(directory) and StreamSink("stdout") were accepted, then failed at every record, only logged."""
    with pytest.raises(ValueError, match=r"JsonlSink\(.*\): that is a directory; name a JSONL file in it"):
        tk.JsonlSink(tmp_path)
    with pytest.raises(TypeError, match=r"JsonlSink takes the path of a JSONL file, got int"):
        tk.JsonlSink(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"StreamSink takes a text stream .* got str; for a file path use tk.JsonlSink"):
        tk.StreamSink("stdout")  # type: ignore[arg-type]
    assert tk.JsonlSink(tmp_path / "new" / "records.jsonl").path.name == "records.jsonl"  # created at the first record
    tk.StreamSink(sys.stderr)


@tk.autotune_key
class _Key:
    n: int


def test_a_plain_callable_in_a_tuners_sinks_receives_its_records() -> None:
    """LocalTuner(sinks=[records.append]) logged "no attribute 'emit'" at every decision instead of recording it."""
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[_Key, int] = tk.LocalTuner("callable_sink", sinks=[records.append])
    tunables = tk.TunableSet(key=_Key).with_tunable(tk.Tunable("same", lambda n: n))
    client = CpuClient()
    assert tuner.execute(client.device_id, client, tunables, (3,)) == 3
    assert [(r.tuner, r.winner) for r in records] == [("callable_sink", "same")]


def test_a_global_sink_is_removed_by_the_callable_that_was_added() -> None:
    """remove_record_sink(records.append) found nothing (add_record_sink had wrapped it) and said nothing:
    the sink went on receiving, and keeping, every later record of the process."""
    records: list[tk.AutotuneRecord] = []
    tk.add_record_sink(records.append)
    tk.remove_record_sink(records.append)
    client = CpuClient()
    tunables = tk.TunableSet(key=_Key).with_tunable(tk.Tunable("same", lambda n: n))
    tuner: tk.LocalTuner[_Key, int] = tk.LocalTuner("removed_sink")
    assert tuner.execute(client.device_id, client, tunables, (3,)) == 3
    assert records == []
    returned = tk.add_record_sink(records.append)  # what add_record_sink returned still removes it
    tk.remove_record_sink(returned)
    tuner.clear()
    assert tuner.execute(client.device_id, client, tunables, (4,)) == 4
    assert records == []


def test_a_records_file_named_by_the_setting_and_a_tuners_sink_gets_each_record_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TUNEKIT_RECORD=records.jsonl beside sinks=[tk.JsonlSink("records.jsonl")] wrote every record twice."""
    monkeypatch.chdir(tmp_path)
    tuner: tk.LocalTuner[_Key, int] = tk.LocalTuner("one_line", sinks=[tk.JsonlSink(tmp_path / "records.jsonl")])
    other = tk.add_record_sink(tk.JsonlSink("other.jsonl"))
    tk.configure(record="records.jsonl")  # the same file, spelt relative to the working directory
    try:
        client = CpuClient()
        tunables = tk.TunableSet(key=_Key).with_tunable(tk.Tunable("same", lambda n: n))
        assert tuner.execute(client.device_id, client, tunables, (3,)) == 3
    finally:
        tk.configure()
        tk.remove_record_sink(other)
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 1
    assert len((tmp_path / "other.jsonl").read_text().splitlines()) == 1  # another file still gets its own


def test_a_records_path_setting_starting_with_a_tilde_is_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TUNEKIT_RECORD='~/records.jsonl' (quoted, or from tunekit.toml) created a directory named '~' in the cwd."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    sink = sink_from_setting("~/records/r.jsonl")
    assert isinstance(sink, tk.JsonlSink) and sink.path == tmp_path / "home" / "records" / "r.jsonl"


_TUNE_ONCE = (
    "from typing import Annotated\n"
    "import tunekit as tk\n"
    "from tunekit_backends.cpu import CpuClient\n"
    "@tk.autotune_key\n"
    "class K:\n"
    "    n: Annotated[int, tk.Anchor()]\n"
    "client = CpuClient()\n"
    "tunables = tk.TunableSet(key=lambda n: K(n=n)).with_tunable(tk.Tunable('same', lambda n: n))\n"
    "tk.LocalTuner('streamed').execute(client.device_id, client, tunables, (3,))\n"
)


@pytest.mark.subprocess
@pytest.mark.parametrize(("setting", "stream"), [("STDOUT", "stdout"), ("Stderr", "stderr"), (" stdout\n", "stdout")])
def test_a_record_stream_name_in_any_case_streams_instead_of_making_a_file(
    setting: str, stream: str, tmp_path: Path
) -> None:
    """TUNEKIT_RECORD=STDOUT (or Stderr) wrote a file named STDOUT in the working directory instead of streaming."""
    env = {**os.environ, "TUNEKIT_RECORD": setting, "TUNEKIT_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", _TUNE_ONCE], cwd=tmp_path, env=env, check=False, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in getattr(out, stream).splitlines() if line.startswith("{")]
    assert [tk.AutotuneRecord.model_validate_json(line).tuner for line in lines] == ["streamed"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


@pytest.mark.subprocess
def test_a_record_path_under_a_file_is_refused_naming_the_file_in_the_way(tmp_path: Path) -> None:
    """TUNEKIT_RECORD=<a file>/records.jsonl only warned "[Errno 17] File exists" at every record, naming no fix."""
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    env = {**os.environ, "TUNEKIT_RECORD": str(afile / "records.jsonl"), "TUNEKIT_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", _TUNE_ONCE], cwd=tmp_path, env=env, check=False, capture_output=True, text=True
    )
    assert out.returncode != 0
    told = (
        f"SettingsError: invalid tunekit settings: record = '{afile}/records.jsonl' from TUNEKIT_RECORD: "
        f"Value error, '{afile}/records.jsonl' cannot be created: '{afile}' is a file, not a directory; "
        "name a JSONL file in a directory (or one that can be created), or move that file aside"
    )
    assert told in out.stderr, out.stderr
    assert "Errno" not in out.stderr
    with pytest.raises(ValueError, match=rf"it cannot be created, '{afile}' is a file, not a directory; name a JSONL"):
        tk.JsonlSink(afile / "sub" / "records.jsonl")


def test_a_file_made_in_the_way_after_the_sink_is_named_in_its_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file created where the records' directory should be was reported as "[Errno 17] File exists: ..." alone."""
    sink = tk.JsonlSink(tmp_path / "later" / "records.jsonl")
    (tmp_path / "later").write_text("")
    record = tk.AutotuneRecord(
        tuner="t",
        device_id="cpu:test",
        key={"n": 8},
        checksum="c",
        decision="disabled",
        winner="a",
        stored=False,
        wall_time_s=0.0,
    )
    with caplog.at_level("WARNING", logger="tunekit.records"):
        sink.emit(record)
        sink.emit(record)  # the same cause is not logged again
    assert [r.getMessage() for r in caplog.records] == [
        f"cannot append a tuning record to {tmp_path}/later/records.jsonl: {tmp_path}/later is a file, not a "
        "directory; move it aside or name another path (not logged again for this cause; the sink's .lost counts "
        "the records not kept)"
    ]
    assert sink.lost == 2


def test_a_file_put_in_the_way_after_the_settings_were_read_does_not_fail_the_tune(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """JsonlSink now refuses a path under a file; made from TUNEKIT_RECORD at the first record, that must only warn."""
    tk.configure(record=str(tmp_path / "later" / "records.jsonl"), samples=3)
    (tmp_path / "later").write_text("")
    client = CpuClient()
    tunables = tk.TunableSet(key=_Key).with_tunable(tk.Tunable("same", lambda n: n))
    with caplog.at_level("WARNING", logger="tunekit.records"):
        assert tk.LocalTuner("in_the_way").execute(client.device_id, client, tunables, (3,)) == 3
    assert any(f"'{tmp_path}/later' is a file, not a directory" in r.getMessage() for r in caplog.records)
    (tmp_path / "later").unlink()
    tk.LocalTuner("in_the_way_again").execute(client.device_id, client, tunables, (3,))
    assert (tmp_path / "later" / "records.jsonl").read_text().count("\n") == 1


@tk.autotune_key
class _LenKey:
    n: int


def test_a_failing_sink_is_logged_by_its_function_and_without_tunekits_own_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: it was logged as "record sink <...CallbackSink object at 0x...> failed", its traceback chained
    ("During handling of the above exception") to the KeyError of the cache miss the tuner was handling."""

    def keep_in_database(record: tk.AutotuneRecord) -> None:
        raise ValueError("database is down")

    client = CpuClient()
    tunables = tk.TunableSet(key=lambda n: _LenKey(n=n)).with_tunable(tk.Tunable("only", lambda n: n))
    with caplog.at_level(logging.ERROR, logger="tunekit.records"):
        tuner: tk.LocalTuner[_LenKey, int] = tk.LocalTuner("sink_failing", sinks=[keep_in_database])
        assert tuner.execute(client.device_id, client, tunables, (3,)) == 3
    (logged,) = [r for r in caplog.records if r.name == "tunekit.records"]
    assert "keep_in_database" in logged.getMessage() and "object at 0x" not in logged.getMessage()
    assert "database is down" in caplog.text and "KeyError" not in caplog.text
