"""Every listing fits 80 and 200 columns with short device ids, shows everything whole with --wide or piped,
and prints --json that validates against the schema `tunekit schema NAME` publishes."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Annotated

import jsonschema
import numpy as np
import pytest
from _command import run

import tunekit as tk
from tunekit._base.short_id import short_device_id
from tunekit._cli.main import main
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import OpenCLClient

CLIENT = CpuClient()
LONG_NAME = "fused_bias_add_gelu[VEC=8,BLOCK=256,UNROLL=4,DTYPE=float32,METHOD=direct]"
"""A candidate name as long as a search's: what a table wraps in its column, never cuts."""


@tk.autotune_key
class WideKey:
    n: Annotated[int, tk.Anchor()]
    dtype: str


@pytest.fixture
def records(tmp_path: Path) -> Path:
    """Two keys of a real tuner on this CPU, one candidate with a long name, recorded and cached."""
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    # A short tuner name leaves the 80-column summary a few characters to spare: with `listing_sum` its
    # columns' floors filled the room exactly, so a measured margin or cost one digit longer (a loaded
    # machine) made the table fold the short words this test expects whole.
    tuner: tk.LocalTuner[WideKey, np.ndarray] = tk.LocalTuner("lst_sum")
    tunables = (
        tk.TunableSet(key=lambda x: WideKey(n=x.shape[0], dtype=str(x.dtype)))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(keepdims=True)))
        .with_tunable(tk.Tunable(LONG_NAME, lambda x: np.atleast_1d(np.einsum("i->", x))))
    )
    for n in (1000, 100_000):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(n),))
    return path


def _listings(records: Path) -> list[tuple[str, ...]]:
    return [("records", "summary", str(records)), ("cache", "list"), ("cache", "show", "lst_sum")]


WHOLE_WORDS = (
    "lst_sum",
    "np_sum",
    "float64",
    "interleaved",
    "rounds",
    "paired",
    "runoff",
    "samples",
    "measured",
    "runner-up",
)
"""Words a narrow table keeps whole: each is as often in it as in the --wide one (80 columns split `interleave` `d`)."""


def test_each_listing_fits_80_and_200_columns_with_the_short_device_id(records: Path) -> None:
    assert len(CLIENT.device_id) > 40  # else there is nothing to shorten
    short = short_device_id(CLIENT.device_id)
    for args in _listings(records):
        wide = run(*args, "--wide", env={"COLUMNS": "80"}).stdout
        for width in (80, 200):
            out = run(*args, env={"COLUMNS": str(width)}).stdout
            too_long = [line for line in out.splitlines() if len(line) > width]
            assert not too_long, (args, width, too_long)
            assert short in out and CLIENT.device_id not in out, (args, width, out)
            split = [word for word in WHOLE_WORDS if out.count(word) != wide.count(word)]
            assert not split, (args, width, split, out)
            # Regression: `cache show` left a `,` (and a `]`) alone on a line, folded off a long name.
            lone = [line for line in out.splitlines() if line.strip() and not re.search(r"\w", line)]
            assert not lone, (args, width, lone, out)
        assert CLIENT.device_id in wide and LONG_NAME in wide, args


def test_piped_output_keeps_each_row_on_one_line(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: piped, output was cut at a guessed 80 columns, wrapping values mid-word.
    monkeypatch.delenv("COLUMNS", raising=False)
    for args in _listings(records):
        lines = run(*args).stdout.splitlines()
        assert any(LONG_NAME in line for line in lines), args
    listed = run("cache", "list").stdout.splitlines()
    assert any('{"dtype":"float64","n":1024}' in line and "lst_sum" in line for line in listed), listed


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("records-summary", ("records", "summary", "{records}")),
        ("cache-list", ("cache", "list")),
        ("cache-show", ("cache", "show", "lst_sum")),
    ],
)
def test_json_output_validates_against_its_published_schema(records: Path, name: str, args: tuple[str, ...]) -> None:
    schema = json.loads(run("schema", name).stdout)
    document = json.loads(run(*(a.format(records=records) for a in args), "--json", env={"COLUMNS": "40"}).stdout)
    jsonschema.validate(document, schema)
    devices = {entry["device_id"] for entry in document.get("keys", document.get("winners", document.get("entries")))}
    assert devices == {CLIENT.device_id}
    with pytest.raises(jsonschema.ValidationError):  # the schema does check: a document without its fields fails
        jsonschema.validate({"schema_version": 1}, schema)


def test_cache_show_json_gives_every_candidate(records: Path) -> None:
    shown = json.loads(run("cache", "show", "lst_sum", "--key", "n=1024", "--json").stdout)
    (entry,) = shown["entries"]
    assert {c["name"] for c in entry["candidates"]} == {"np_sum", LONG_NAME}
    assert entry["key"] == {"dtype": "float64", "n": 1024} and entry["winner"] in entry["ranking"]


def test_wide_and_json_are_one_or_the_other(records: Path) -> None:
    assert "not allowed with argument" in run("cache", "list", "--wide", "--json", check=2).stderr


def test_times_are_in_us_where_the_output_cannot_show_mu(records: Path) -> None:
    """µs on a UTF-8 output; us, and no UnicodeEncodeError, on an ASCII one (a C locale)."""
    assert "µs" in run("cache", "list").stdout
    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    with contextlib.redirect_stdout(ascii_out):
        assert main(["cache", "show", "lst_sum"]) == 0
    text = raw.getvalue().decode("ascii")
    assert " us" in text and "decided:" in text


def test_the_short_form_is_stable_and_tells_apart_ids_that_start_alike() -> None:
    pocl = "opencl:Portable Computing Language|OpenCL 3.0 PoCL 6.0|cpu-haswell|driver 6.0|OpenCL 3.0"
    other = pocl.replace("haswell", "skylake")
    assert short_device_id(pocl) == short_device_id(pocl)
    assert short_device_id(pocl) != short_device_id(other)
    assert short_device_id(pocl).startswith("opencl:Portable Computin~") and len(short_device_id(pocl)) == 31
    assert short_device_id("simulated") == "simulated"  # a short id is shown whole


@pytest.mark.opencl
def test_devices_fit_80_and_200_columns_with_the_short_pocl_id() -> None:
    pocl = OpenCLClient(flush_cache=False, platform=0, device=0, compile_in="thread").device_id
    assert len(pocl) > 80
    for width in (80, 200):
        out = run("devices", "--no-peaks", env={"COLUMNS": str(width)}).stdout
        assert all(len(line) <= width for line in out.splitlines()), out
        assert short_device_id(pocl) in out and pocl not in out
    assert pocl in run("devices", "--no-peaks", "--wide", env={"COLUMNS": "80"}).stdout
    document = json.loads(run("devices", "--no-peaks", "--json").stdout)
    jsonschema.validate(document, json.loads(run("schema", "devices").stdout))
    assert pocl in {d["device_id"] for d in document["devices"]}
