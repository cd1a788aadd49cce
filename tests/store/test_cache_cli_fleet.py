"""``tunekit cache list / show / clear`` on the fleet's PostgreSQL store: what a host with TUNEKIT_CACHE_URL sees.

The winners are tuned for real by a tuner that publishes them to a real database (the worker's
server, a fresh database per test); the commands then run as on another host, whose own cache
directory is empty: whatever they list, they read from the database.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from pathlib import Path

import jsonschema
import psycopg
import pytest
from _cache_keys import CLIENT, tunables
from _command import run
from pg_server import PgServer

import tunekit as tk
from tunekit._base.short_id import short_device_id
from tunekit._cli.cache import _Shown
from tunekit._cli.error import CliError
from tunekit._store.pg_store import PostgresStore, redacted

TUNER = "fleet_cli"


pytestmark = pytest.mark.usefixtures("own_fleet_stores")


@pytest.fixture
def fleet(pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Three winners of one tuner, tuned on a "tuning host" and published to the fleet's database; the
    environment then that of another host (an empty cache directory of its own) naming the same database."""
    monkeypatch.setenv("TUNEKIT_CACHE_URL", pg_url)
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(tmp_path / "tuning-host"))
    tk.configure()
    tuner: tk.LocalTuner[object, int] = tk.LocalTuner(TUNER)
    for i in (1, 2, 3):
        tuner.execute(CLIENT.device_id, CLIENT, tunables(), (i,))
    assert _keys(pg_url) == {'{"i":1}', '{"i":2}', '{"i":3}'}
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(tmp_path / "other-host"))
    tk.configure()
    return pg_url


def _keys(url: str) -> set[str]:
    with psycopg.connect(url) as connection:
        return {str(k) for (k,) in connection.execute("SELECT key FROM tunekit_winners").fetchall()}


def _with_password(url: str) -> str:
    """The URL with a password (the test server trusts local connections, so any password is let in)."""
    return url.replace("postgresql://tunekit@", "postgresql://tunekit:s3cret-pw@", 1)


@pytest.mark.subprocess
def test_with_a_fleet_url_list_shows_the_fleets_winners_and_says_so(fleet: str) -> None:
    listed = run("cache", "list").stdout
    lines = listed.splitlines()
    assert lines[0] == f"store: fleet {redacted(fleet)}", listed
    assert f"device {short_device_id(CLIENT.device_id)}" in listed
    assert all(any(TUNER in line and f'{{"i":{i}}}' in line for line in lines) for i in (1, 2, 3)), listed
    # This host's own cache holds nothing: --store local says so, and names its file.
    local = run("cache", "list", "--store", "local")
    assert local.stdout == "" and "no tuning cache at" in local.stderr and "other-host" in local.stderr


@pytest.mark.subprocess
def test_the_listing_names_the_store_without_its_password(fleet: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_CACHE_URL", _with_password(fleet))
    for args in (("cache", "list"), ("cache", "show", TUNER), ("cache", "list", "--json")):
        done = run(*args)
        assert "s3cret-pw" not in done.stdout + done.stderr, args
        assert "tunekit:***@" in done.stdout, (args, done.stdout)


@pytest.mark.subprocess
def test_without_a_fleet_url_the_local_cache_is_shown(fleet: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUNEKIT_CACHE_URL")
    tk.configure()
    tuner: tk.LocalTuner[object, int] = tk.LocalTuner("local_only")
    tuner.execute(CLIENT.device_id, CLIENT, tunables(), (7,))
    listed = run("cache", "list").stdout
    assert listed.splitlines()[0].startswith("store: local cache ") and "other-host" in listed.splitlines()[0]
    assert "local_only" in listed and TUNER not in listed
    document = json.loads(run("cache", "list", "--json").stdout)
    assert document["store"] == "local" and document["cache"].endswith(tk.PersistentCache.FILENAME)


@pytest.mark.subprocess
def test_show_gives_every_candidate_of_a_fleet_winner(fleet: str) -> None:
    shown = run("cache", "show", TUNER, "--key", "i=2").stdout
    assert shown.splitlines()[0] == f"store: fleet {redacted(fleet)}"
    assert f'{TUNER} {{"i":2}}' in shown and "double" in shown and "twice" in shown
    assert '{"i":1}' not in shown
    missing = run("cache", "show", "no_such_tuner", check=2).stderr
    assert "no tuner named 'no_such_tuner' in the fleet store" in missing and TUNER in missing


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("name", "args"), [("cache-list", ("cache", "list")), ("cache-show", ("cache", "show", TUNER))]
)
def test_fleet_json_names_its_store_and_validates_against_the_schema(
    fleet: str, monkeypatch: pytest.MonkeyPatch, name: str, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv("TUNEKIT_CACHE_URL", _with_password(fleet))
    schema = json.loads(run("schema", name).stdout)
    assert "store" in schema["properties"]
    document = json.loads(run(*args, "--json").stdout)
    jsonschema.validate(document, schema)
    assert document["store"] == "fleet" and document["cache"] == redacted(_with_password(fleet))
    entries = document.get("winners", document.get("entries"))
    assert sorted(e["key"]["i"] for e in entries) == [1, 2, 3]
    with pytest.raises(jsonschema.ValidationError):  # the field is checked, not just allowed
        jsonschema.validate({**document, "store": "somewhere"}, schema)


@pytest.mark.subprocess
def test_clear_removes_fleet_winners_by_filter_and_asks_as_for_the_local_cache(fleet: str, tmp_path: Path) -> None:
    refused = run("cache", "clear", check=2).stderr  # no terminal to ask on: --yes or nothing
    assert "pass --yes" in refused and "3 stored winners from the fleet store" in refused
    assert len(_keys(fleet)) == 3
    one = run("cache", "clear", "--yes", "--key", "i=2").stdout
    assert f"removed 1 stored winner with i=2 from the fleet store {redacted(fleet)}" in one
    assert _keys(fleet) == {'{"i":1}', '{"i":3}'}
    unknown = run("cache", "clear", "--yes", "--tuner", "nope", check=2).stderr
    assert "no tuner named 'nope' in the fleet store" in unknown
    device = run("cache", "clear", "--yes", "--device", short_device_id(CLIENT.device_id), "--tuner", TUNER).stdout
    assert "removed 2 stored winners of tuner 'fleet_cli' on device" in device and "fleet store" in device
    assert _keys(fleet) == set()
    assert "nothing to clear: no stored winners in the fleet store" in run("cache", "clear").stdout
    # The tuning host's own cache is its own: clearing the fleet's winners left its copies alone.
    assert len(list(tk.PersistentCache(tmp_path / "tuning-host").rows())) == 3


@pytest.mark.subprocess
def test_clear_of_the_local_cache_leaves_the_fleets_winners(fleet: str, tmp_path: Path) -> None:
    assert "no tuning cache at" in run("cache", "clear", "--store", "local").stdout
    assert len(_keys(fleet)) == 3


def test_fleet_asked_for_without_a_url_names_the_setting() -> None:
    for args in (("cache", "list"), ("cache", "show", TUNER), ("cache", "clear", "--yes")):
        error = run(*args, "--store", "fleet", check=2).stderr
        assert "TUNEKIT_CACHE_URL is not set" in error and "--store local" in error, (args, error)


def test_an_unreachable_database_is_one_clear_line_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://fleet:pw-not-shown@127.0.0.1:{port}/winners"
    monkeypatch.setenv("TUNEKIT_CACHE_URL", url)
    for args in (("cache", "list"), ("cache", "show", TUNER), ("cache", "clear", "--yes"), ("cache", "list", "--json")):
        done = run(*args, check=1)  # run() asserts no traceback
        assert done.stdout == "", args
        assert f"cannot reach the fleet store {redacted(url)} (TUNEKIT_CACHE_URL)" in done.stderr, (args, done.stderr)
        assert "pw-not-shown" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_missing_postgres_extra_is_one_line_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what importing it does when it is not installed
    monkeypatch.setenv("TUNEKIT_CACHE_URL", "postgresql://tunekit@/nowhere")
    error = run("cache", "list", check=1).stderr
    assert "pip install 'tunekit[postgres]'" in error and len(error.strip().splitlines()) == 1, error
    assert "no tuning cache at" in run("cache", "list", "--store", "local").stderr  # the local cache needs no extra


@pytest.mark.subprocess
def test_a_database_that_goes_away_during_a_command_is_an_error_not_an_empty_listing(
    own_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = own_server.create_database()
    store = PostgresStore(url)
    try:
        assert store.problem() is None  # as the command found it at its start
        shown = _Shown("fleet", store.where, store)
        assert list(shown.rows()) == [] and shown.owners() == set()  # up and empty: nothing wrong
        own_server.kill()
        with caplog.at_level(logging.CRITICAL, logger="tunekit.cache"):  # the store's own outage warning
            for read in (shown.rows, shown.owners):
                with pytest.raises(CliError, match="stopped answering") as raised:
                    read()
                assert raised.value.code == 1
    finally:
        store.close()


@pytest.mark.subprocess
def test_export_reads_the_fleets_winners_into_the_bundle_a_local_export_writes(fleet: str, tmp_path: Path) -> None:
    assert "exported 3 winners" in run("cache", "export", "-o", str(tmp_path / "fleet.json")).stderr
    tuning_host = ("--cache-dir", str(tmp_path / "tuning-host"))
    run("cache", "export", "--store", "local", "-o", str(tmp_path / "local.json"), *tuning_host)
    # The fleet's rows are the tuning host's, in the same format: the two bundles are the same file.
    assert (tmp_path / "fleet.json").read_text() == (tmp_path / "local.json").read_text()
    assert len(json.loads((tmp_path / "fleet.json").read_text())["entries"]) == 3
    filtered = json.loads(run("cache", "export", "--key", "i=2").stdout)
    assert [e["key"] for e in filtered["entries"]] == ['{"i":2}']
    assert "nothing to export" in run("cache", "export", "--store", "local", check=2).stderr  # this host has none


@pytest.mark.subprocess
def test_a_fleet_bundle_imports_into_another_fleet_store_whose_hosts_then_tune_nothing(
    fleet: str, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundle = tmp_path / "winners.json"
    run("cache", "export", "-o", str(bundle))
    other = pg_server.create_database()
    try:
        monkeypatch.setenv("TUNEKIT_CACHE_URL", other)
        imported = run("cache", "import", str(bundle)).stdout
        assert imported.strip() == f"imported 3 winners into the fleet store {redacted(other)}", imported
        again = run("cache", "import", str(bundle)).stdout
        assert "imported 0 winners" in again and "3 already stored, unchanged" in again, again
        assert _keys(other) == {'{"i":1}', '{"i":2}', '{"i":3}'}
        # A host of that other fleet, with an empty cache of its own: every winner comes from the store.
        monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(tmp_path / "host-of-the-other-fleet"))
        tk.configure()
        records: list[tk.AutotuneRecord] = []
        tuner: tk.LocalTuner[object, int] = tk.LocalTuner(TUNER, sinks=[records.append])
        for i in (1, 2, 3):
            tuner.execute(CLIENT.device_id, CLIENT, tunables(), (i,))
        assert records == []
        # --store local imports into this host's own cache, as without a fleet.
        local = run("cache", "import", "--store", "local", str(bundle), "--cache-dir", str(tmp_path / "fresh")).stdout
        assert local.startswith("imported 3 winners into ") and str(tmp_path / "fresh") in local, local
    finally:
        tk.configure()
        pg_server.drop_database(other)
