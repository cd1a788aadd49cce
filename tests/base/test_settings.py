from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import pytest
from _procs import drop_root, in_child

import tunekit as tk
from tunekit._base import settings as _settings


def test_env_overrides_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.tunekit]\nsamples = 7\nwarmup = 4\nautotune_level = "extensive"\n')
    (tmp_path / "tunekit.toml").write_text("warmup = 2\n")
    monkeypatch.delenv("TUNEKIT_SAMPLES", raising=False)
    settings = tk.configure()
    assert (settings.samples, settings.warmup, settings.autotune_level) == (7, 2, "extensive")
    monkeypatch.setenv("TUNEKIT_WARMUP", "0")
    assert tk.configure().warmup == 0
    assert tk.configure(warmup=5).warmup == 5


def test_bad_value_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_AUTOTUNE_LEVEL", "turbo")
    with pytest.raises(ValueError, match="autotune_level"):
        tk.configure()


def test_unknown_key_in_config_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tunekit.toml").write_text("sampels = 3\n")
    with pytest.raises(ValueError, match="sampels"):
        tk.configure()


def test_a_bad_config_file_entry_names_its_file_and_the_setting_it_resembles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: it said "from tunekit.toml or [tool.tunekit]: Extra inputs are not permitted", naming neither.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tunekit.toml").write_text("sampels = 3\n")
    with pytest.raises(
        tk.SettingsError, match=r"sampels = 3 from tunekit.toml: not a tunekit setting; did you mean samples\?"
    ):
        tk.configure()
    # Regression: the environment variable's name in the file said "not a tunekit setting" and no more.
    (tmp_path / "tunekit.toml").write_text("TUNEKIT_SAMPLES = 3\n")
    with pytest.raises(
        tk.SettingsError,
        match=r"TUNEKIT_SAMPLES = 3 from tunekit.toml: not a tunekit setting; did you mean samples\? \(a file or "
        r"tk.configure names a setting in lower case, without TUNEKIT_\)",
    ):
        tk.configure()
    (tmp_path / "tunekit.toml").write_text("[tunekit]\nsamples = 3\n")
    with pytest.raises(
        tk.SettingsError, match=r"from tunekit.toml: not a tunekit setting; settings go at the top level"
    ):
        tk.configure()
    (tmp_path / "tunekit.toml").unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.tunekit]\nrunoff_pairs = -3\n")
    with pytest.raises(
        tk.SettingsError, match=r"runoff_pairs = -3 from pyproject.toml \[tool.tunekit\]: Input should be"
    ):
        tk.configure()
    with pytest.raises(
        tk.SettingsError, match=r"from tk.configure\(warmpu=...\): not a tunekit setting; did you mean warmup\?"
    ):
        tk.configure(warmpu=2)


@pytest.mark.subprocess
def test_working_directory_that_cannot_be_entered_is_not_an_error(tmp_path: Path) -> None:
    """Regression: a dropped-privilege process in a root-only directory died reading tunekit.toml."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)

    def child() -> dict[str, object]:
        os.chdir(locked)
        drop_root()
        return {"samples": tk.configure(samples=4).samples}

    assert in_child(child) == {"samples": 4}


@pytest.mark.subprocess
def test_working_directory_under_a_parent_that_cannot_be_searched_is_not_an_error(tmp_path: Path) -> None:
    """Regression: CI in a clone inside a 0700 mktemp directory died stat-ing pyproject.toml by absolute path."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    inner = locked / "project"
    inner.mkdir(mode=0o755)
    (inner / "pyproject.toml").write_text("[tool.tunekit]\nsamples = 7\n")
    (inner / "pyproject.toml").chmod(0o644)

    def child() -> dict[str, object]:
        os.chdir(inner)
        drop_root()
        return {"samples": tk.configure(samples=4).samples}

    assert in_child(child) == {"samples": 4}


@pytest.mark.subprocess
def test_a_cache_dir_or_records_path_this_process_cannot_look_at_is_no_settings_error(tmp_path: Path) -> None:
    """The checks that they are no file / no directory must not raise PermissionError from the settings."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)

    def child() -> dict[str, object]:
        drop_root()
        settings = tk.configure(cache_dir=str(locked / "cache"), record=str(locked / "records.jsonl"))
        return {"record": settings.record}

    assert in_child(child) == {"record": str(locked / "records.jsonl")}


def test_a_bad_variable_is_named_with_its_value_and_not_blamed_on_the_key_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TUNEKIT_SAMPLES=abc gave pydantic's traceback, unnamed, with a note blaming the user's key generator."""
    monkeypatch.setenv("TUNEKIT_SAMPLES", "abc")
    with pytest.raises(
        tk.SettingsError, match=r"samples = 'abc' from TUNEKIT_SAMPLES: Input should be a valid integer"
    ):
        tk.configure()
    with pytest.raises(tk.SettingsError, match=r"warmup_ms = 'inf' from tk.configure\(warmup_ms=...\)"):
        tk.configure(warmup_ms="inf", samples=3)
    monkeypatch.delenv("TUNEKIT_SAMPLES")
    monkeypatch.setenv("TUNEKIT_WARMUP_MS", "inf")  # accepted by a float field, it crashed the first tune
    with pytest.raises(tk.SettingsError, match="TUNEKIT_WARMUP_MS"):
        tk.configure()
    monkeypatch.setenv("TUNEKIT_WARMUP_MS", "0")
    monkeypatch.setenv("TUNEKIT_SAMPLES", "0")
    # As in a fresh process: the first anchored key reads the settings (exponent 0: not read yet).
    monkeypatch.setattr(_settings, "_current", None)
    monkeypatch.setattr(_settings, "_anchor_exponent", 0)

    @tk.autotune_key
    class Key:
        n: Annotated[int, tk.Anchor()]

    with pytest.raises(tk.SettingsError) as raised:
        Key(n=5)
    assert "TUNEKIT_SAMPLES" in str(raised.value)
    monkeypatch.delenv("TUNEKIT_SAMPLES")
    monkeypatch.delenv("TUNEKIT_WARMUP_MS")
    tk.configure()


def test_a_misspelt_variable_is_named_once_with_the_setting_it_resembles(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """TUNEKIT_SAMPLE=3 was ignored without a word: the default applied and nobody knew why."""
    monkeypatch.setenv("TUNEKIT_MIN_SAMPLE", "5")
    monkeypatch.setenv("TUNEKIT_NOT_A_THING_AT_ALL", "1")
    with caplog.at_level("WARNING", logger="tunekit.settings"):
        assert tk.configure().min_samples == 3
        tk.configure()
    assert sorted(r.getMessage() for r in caplog.records) == [
        "TUNEKIT_MIN_SAMPLE is not a tunekit setting and is ignored; did you mean TUNEKIT_MIN_SAMPLES? "
        "(docs/configuration.md lists them)",
        "TUNEKIT_NOT_A_THING_AT_ALL is not a tunekit setting and is ignored (docs/configuration.md lists them)",
    ]


@pytest.mark.parametrize(
    ("name", "text"),
    [("tunekit.toml", "samples = \n"), ("pyproject.toml", "[tool.tunekit\n"), ("tunekit.toml", "\udcff")],
)
def test_a_config_file_that_is_not_toml_is_a_settings_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    """A bare TOMLDecodeError naming no file escaped (the CLI printed a traceback)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    message = rf"{name} in {tmp_path} is not valid TOML \(.*\); fix it or move it aside"
    with pytest.raises(tk.SettingsError, match=message):
        tk.configure()


def test_a_record_path_that_is_a_directory_is_refused_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TUNEKIT_RECORD=<a directory> warned 'cannot append' on every record instead of failing once."""
    monkeypatch.setenv("TUNEKIT_RECORD", str(tmp_path))
    with pytest.raises(tk.SettingsError, match=r"record = .* from TUNEKIT_RECORD: .*is a directory; name a JSONL file"):
        tk.configure()
    monkeypatch.setenv("TUNEKIT_RECORD", str(tmp_path / "records.jsonl"))
    assert tk.configure().record == str(tmp_path / "records.jsonl")


def test_the_record_stream_names_are_read_in_any_case_and_a_path_stays_a_path() -> None:
    """TUNEKIT_RECORD=STDOUT was taken for a file path: the records went to a file named STDOUT."""
    given = ("STDOUT", "Stderr", " stdout ", "  ")
    assert [tk.configure(record=value).record for value in given] == ["stdout", "stderr", "stdout", ""]
    assert tk.configure(record="./STDOUT").record == "./STDOUT"  # how a file of that name is asked for


def test_a_cache_dir_that_is_a_file_is_refused_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TUNEKIT_CACHE_DIR=<a file> made the cache memory-only with a warning about permissions, and
    `tunekit cache list` said nothing had been tuned there."""
    afile = tmp_path / "cache"
    afile.write_text("")
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(afile))
    with pytest.raises(tk.SettingsError, match=r"cache_dir = .* from TUNEKIT_CACHE_DIR: .* is a file; name the dir"):
        tk.configure()
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(tmp_path / "not-yet"))
    assert tk.configure().cache_dir == tmp_path / "not-yet"


def test_an_empty_cache_dir_is_refused_instead_of_caching_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: TUNEKIT_CACHE_DIR= (meant as unset) read as Path("") == ".", the working directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", "")
    with pytest.raises(tk.SettingsError, match=r"cache_dir = '' from TUNEKIT_CACHE_DIR: .*empty path.*unset it"):
        tk.configure()
    monkeypatch.delenv("TUNEKIT_CACHE_DIR")
    with pytest.raises(tk.SettingsError, match=r"cache_dir = ' ' from tk.configure\(cache_dir=...\)"):
        tk.configure(cache_dir=" ")
    assert tk.configure(cache_dir=".").cache_dir == Path(".")
    assert not list(tmp_path.iterdir())


def test_a_cache_dir_under_a_file_is_refused_naming_the_file_in_the_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TUNEKIT_CACHE_DIR=<a file>/cache made the cache memory-only, warning only "[Errno 20] Not a directory"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("TUNEKIT_CACHE_DIR", str(afile / "cache"))
    with pytest.raises(
        tk.SettingsError, match=rf"from TUNEKIT_CACHE_DIR: .*cannot be created: '{afile}' is a file, not a directory"
    ):
        tk.configure()
    monkeypatch.delenv("TUNEKIT_CACHE_DIR")
    tk.configure()


def test_a_record_path_given_as_a_path_is_taken_as_its_text(tmp_path: Path) -> None:
    """tk.configure(record=Path(...)), a JSONL path as the docs say, was refused: 'Input should be a valid string'."""
    records = tmp_path / "records.jsonl"
    assert tk.configure(record=records).record == str(records)
    with pytest.raises(tk.SettingsError, match=r"record = .* is a directory"):
        tk.configure(record=tmp_path)


def test_configures_typed_keywords_are_the_settings() -> None:
    """tk.configure's keywords (typed for mypy) name every setting of the model, and nothing else."""
    from tunekit._base.settings_model import Settings  # noqa: PLC0415 - the model is loaded lazily by tunekit

    assert _settings.SettingsOverrides.__optional_keys__ == frozenset(Settings.model_fields)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("samples", True, r"samples = True from tk\.configure\(samples=\.\.\.\): .*a bool is not a number"),
        ("compile_workers", False, "compile_workers = False .*a bool is not a number; give an int"),
        ("warmup_ms", True, r"warmup_ms = True .*a bool is not a number; give a number \(e.g. warmup_ms=300.0\)"),
        ("samples", 3.7, r"samples = 3.7 .*a float for a whole-number setting; give an int \(e.g. samples=10\)"),
        ("runoff_pairs", 3.0, "runoff_pairs = 3.0 .*a float for a whole-number setting"),
    ],
)
def test_a_bool_or_a_float_for_a_whole_number_is_refused_naming_it(name: str, value: object, says: str) -> None:
    """Regression: pydantic's lax mode made tk.configure(samples=True) one sample, and samples=3.0 three."""
    with pytest.raises(tk.SettingsError, match=says):
        tk.configure(**{name: value})  # type: ignore[arg-type]  # what an untyped caller passes


def test_numbers_from_the_environment_and_files_are_read_as_before_and_bools_there_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TUNEKIT_SAMPLES", "3")
    monkeypatch.setenv("TUNEKIT_WARMUP_MS", "2")
    monkeypatch.setenv("TUNEKIT_SPEED_FACTOR", "2.5")
    settings = tk.configure(progress_delay_s=0, candidate_timeout_s=5)  # an int for a float setting: taken
    assert (settings.samples, settings.warmup_ms, settings.speed_factor) == (3, 2.0, 2.5)
    assert (settings.progress_delay_s, settings.candidate_timeout_s) == (0.0, 5.0)
    monkeypatch.setenv("TUNEKIT_SAMPLES", "true")  # text that is no number: refused, as it was
    with pytest.raises(tk.SettingsError, match="samples = 'true' from TUNEKIT_SAMPLES"):
        tk.configure()
    monkeypatch.delenv("TUNEKIT_SAMPLES")
    (tmp_path / "tunekit.toml").write_text("samples = true\nwarmup = 2.0\n")
    with pytest.raises(tk.SettingsError) as refused:
        tk.configure()
    assert "samples = True from tunekit.toml: Value error, a bool is not a number" in str(refused.value)
    assert "warmup = 2.0 from tunekit.toml: Value error, a float for a whole-number setting" in str(refused.value)
