"""The settings model: every knob of tunekit, typed and validated by pydantic-settings.

Its own module, apart from :mod:`tunekit._base.settings` (which holds the settings in force), because
pydantic-settings costs about 140 ms to import: ``settings.configure`` loads this module when the
settings are first read (the first anchored key, the first tune), so importing tunekit does not
pay for it.
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
import warnings
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    PyprojectTomlConfigSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tunekit._base.errors import SettingsError
from tunekit._base.paths import file_in_the_way
from tunekit._base.setting_types import RECORD_STREAMS, SHORT_CIRCUIT_THRESHOLDS, AutotuneLevel, IsolationMode
from tunekit._base.url_text import redacted

__all__ = ["Settings", "read"]

_log = logging.getLogger("tunekit.settings")


class Settings(BaseSettings):
    """Every knob of tunekit, typed; read once per process (see ``tk.configure``)."""

    model_config = SettingsConfigDict(
        env_prefix="TUNEKIT_",
        toml_file="tunekit.toml",
        pyproject_toml_table_header=("tool", "tunekit"),
        extra="forbid",
        frozen=True,
    )

    autotune: bool = Field(True, description="False: run the first candidate in plan order, measure and write nothing.")
    cache: bool = Field(True, description="False: keep winners in memory only.")
    cache_dir: Path | None = Field(None, description="Directory of the persistent cache; default: the user cache dir.")
    cache_url: str | None = Field(
        None,
        description="postgresql://user@host/db: one store of winners for every process that names it (a fleet), "
        "each key tuned once among them; needs tunekit[postgres]. Unset: each host's own cache only.",
    )
    record: str | None = Field(
        None, description="Where tuning records go: a JSONL path, 'stdout' or 'stderr' (any case)."
    )
    autotune_level: AutotuneLevel = Field(
        "balanced", description="minimal squares every anchor base (fewer, coarser buckets)."
    )
    warmup: int = Field(
        1,
        ge=0,
        description="Warm-up runs of each candidate before its samples; adaptive: the last one is timed "
        "for the record and left out of the statistics.",
    )
    samples: int = Field(10, ge=1, description="Timed samples per candidate when ``adaptive`` is off.")
    adaptive: bool = Field(
        True, description="Interleaved rounds with elimination and a runoff; False: fixed samples, one after another."
    )
    warmup_ms: float = Field(  # finite: an infinite warm-up would crash the first tune
        300.0,
        ge=0,
        allow_inf_nan=False,
        description="Device warm-up before the first timed sample, in ms of device time (clocks ramp).",
    )
    min_samples: int = Field(3, ge=1, description="Kept samples every candidate gets before it can be eliminated.")
    max_samples: int = Field(10, ge=1, description="Kept samples after which the rounds stop.")
    speed_factor: float = Field(
        1.5,
        gt=1,
        description="A candidate whose median exceeds this times the leader's best sample, and whose best exceeds the "
        "leader's median, is eliminated.",
    )
    runoff_pairs: int = Field(
        100,
        ge=0,
        description="At most this many runoff rounds (one back-to-back sample of each finalist still in) decide "
        "among the close finalists, and at most 6x this many samples in all, shared by them; 0: no runoff.",
    )
    compile_workers: int | None = Field(
        None, ge=1, description="Threads running candidates' prepare (compile) hooks at once; default: the CPU count."
    )
    progress: bool = Field(True, description="Show live progress on stderr when it is a terminal.")
    progress_delay_s: float = Field(
        1.0, ge=0, description="Seconds a tune runs before its progress appears, so quick tunes stay silent."
    )
    count_hits: bool = Field(
        False, description="Count cache hits per tuner and key: a summary record per interval, an OTel counter."
    )
    count_hits_interval_s: float = Field(
        60.0, gt=0, allow_inf_nan=False, description="Seconds between two cache-hit summaries (and one at exit)."
    )
    isolation: IsolationMode = Field(
        "none", description="process: time candidates in a forked worker, so a crash or hang disqualifies only it."
    )
    candidate_timeout_s: float = Field(
        60.0, gt=0, description="Longest one run of a candidate may take before it is disqualified; inf: no limit."
    )
    tune_lock_timeout_s: float = Field(
        600.0,
        ge=0,
        description="How long a process waits for another process tuning the same key (then reads its winner) "
        "before tuning the key itself, and a search for another search holding its trial log (then resumes its "
        "trials) before refusing the log.",
    )
    failed_tune_retry_s: float = Field(
        60.0,
        ge=0,
        description="After a key's tune finds no valid candidate, other processes sharing the cache raise the same "
        "error for this long instead of tuning it again; 0: they tune it again at once.",
    )

    @model_validator(mode="after")
    def _samples_range(self) -> Settings:
        if self.max_samples < self.min_samples:
            raise ValueError(
                f"max_samples ({self.max_samples}) must be at least min_samples ({self.min_samples}); "
                "raise TUNEKIT_MAX_SAMPLES or lower TUNEKIT_MIN_SAMPLES"
            )
        return self

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, value: object, info: ValidationInfo) -> object:
        # pydantic's lax mode takes True for 1 and 3.0 for 3: tk.configure(samples=True) would tune with one
        # sample without a word. Text (an environment variable's "3") is still parsed as pydantic does.
        name = info.field_name
        whole = name in _WHOLE_NUMBERS
        if name is None or (not whole and name not in _NUMBERS):
            return value
        default = cls.model_fields[name].default
        example = f"{name}={default if default is not None else 4}"
        wanted = f"an int (e.g. {example})" if whole else f"a number (e.g. {example})"
        if isinstance(value, bool):
            raise ValueError(f"a bool is not a number; give {wanted}")
        if whole and isinstance(value, float):
            raise ValueError(f"a float for a whole-number setting; give {wanted}")
        return value

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _cache_dir_is_not_empty(cls, value: object) -> object:
        # Path("") is ".": an empty TUNEKIT_CACHE_DIR (meant as unset) would put the cache in
        # whatever directory the process runs in.
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "an empty path would put the cache in the working directory; unset it for the default "
                "(the user cache dir), or name a directory ('.' for the working directory)"
            )
        return value

    @field_validator("cache_dir")
    @classmethod
    def _cache_dir_is_not_a_file(cls, value: Path | None) -> Path | None:
        # Refused where the setting is read: otherwise the cache goes memory-only with a warning about
        # permissions, and `tunekit cache list` says nothing has been tuned there.
        try:
            is_file = value is not None and value.expanduser().is_file()
        except OSError:  # a path this process may not look at (EACCES): the cache says so when it opens
            return value
        if is_file:
            raise ValueError(f"{str(value)!r} is a file; name the directory that holds (or will hold) the cache")
        blocking = None if value is None else file_in_the_way(value.expanduser())
        if blocking is not None:
            raise ValueError(
                f"{str(value)!r} cannot be created: {str(blocking)!r} is a file, not a directory; "
                "name a directory that holds (or can hold) the cache, or move that file aside"
            )
        return value

    @field_validator("cache_url")
    @classmethod
    def _cache_url_scheme(cls, value: str | None) -> str | None:
        # Blanks mean unset, like an empty TUNEKIT_RECORD; any other scheme would be ignored without a word.
        if value is None or not value.strip():
            return None
        scheme = value.strip().partition("://")[0].lower()
        if scheme not in ("postgresql", "postgres"):
            shown = redacted(value).split("@")[-1]
            raise ValueError(
                f"{shown!r} is no postgresql:// URL; name the fleet's database as "
                "postgresql://USER@HOST:PORT/DBNAME, or unset it to keep winners in each host's own cache"
            )
        return value.strip()

    @field_validator("record", mode="before")
    @classmethod
    def _record_path(cls, value: object) -> object:
        # tk.configure(record=Path(...)) names a file as its text does; the field stays a str, as the
        # environment and config files give it.
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("record")
    @classmethod
    def _record_target(cls, value: str | None) -> str | None:
        if value is None:
            return value
        # The stream names in any case and with stray blanks, as most tools take them, so that
        # TUNEKIT_RECORD=STDOUT streams instead of writing a file named STDOUT in the working directory.
        # (A file of that name is spelled as a path: ./stdout.) Blanks alone mean unset, like "".
        name = value.strip().lower()
        if name in RECORD_STREAMS or not name:
            return name
        # Refused where the setting is read: a sink appending to a directory would warn on every record instead.
        try:
            is_dir = Path(value).expanduser().is_dir()
        except OSError:  # a path this process may not look at (EACCES): the sink warns when it writes
            return value
        if is_dir:
            raise ValueError(
                f"{value!r} is a directory; name a JSONL file in it "
                f"(e.g. {str(Path(value) / 'records.jsonl')!r}), or 'stdout' / 'stderr'"
            )
        # Refused here too: the sink would warn "[Errno 17] File exists: '<the file>'" at every record.
        blocking = file_in_the_way(Path(value).expanduser())
        if blocking is not None:
            raise ValueError(
                f"{value!r} cannot be created: {str(blocking)!r} is a file, not a directory; "
                "name a JSONL file in a directory (or one that can be created), or move that file aside"
            )
        return value

    @property
    def short_circuit_threshold(self) -> float | None:
        """The roofline fraction that ends a batch early at this autotune level (None: never)."""
        return SHORT_CIRCUIT_THRESHOLDS[self.autotune_level]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = [init_settings, env_settings]
        # A process may run in a directory it cannot look into (a dropped-privilege worker, a
        # locked-down service): then no config file there can be read, which is not an error.
        if _visible("tunekit.toml"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        if _visible("pyproject.toml"):
            sources.append(PyprojectTomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def _number_fields(kind: type) -> frozenset[str]:
    """The settings whose value is a ``kind`` (or None)."""
    return frozenset(name for name, field in Settings.model_fields.items() if field.annotation in (kind, kind | None))


_WHOLE_NUMBERS = _number_fields(int)
_NUMBERS = _number_fields(float)


def _visible(name: str) -> bool:
    """Whether ``name`` in the working directory can be looked at (it may still be absent).

    By its absolute path, as pydantic-settings opens it: a directory the process is in but
    whose parent it may not search (a 0700 temporary directory, after dropping privileges)
    answers a relative look and refuses the absolute one.
    """
    try:
        (Path.cwd() / name).stat()
    except FileNotFoundError:
        return True
    except OSError as exc:
        _log.info("not reading %s: %s", name, exc)
        return False
    return True


def read(overrides: dict[str, Any]) -> Settings:
    """The settings from the environment and config files with ``overrides`` applied, validated.

    Raises SettingsError naming each bad setting and where it came from.
    """
    try:
        with warnings.catch_warnings():
            # A working directory this process cannot look into leaves its config files out of
            # the sources (_visible); pydantic-settings then warns that their keys go unused.
            warnings.filterwarnings("ignore", r"Config key `\w+` is set in model_config but will be ignored")
            settings = Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, overrides)) from None
    except (
        tomllib.TOMLDecodeError,
        UnicodeDecodeError,
    ) as exc:  # raised bare, naming no file: the CLI would print a traceback
        raise SettingsError(
            f"invalid tunekit settings: {_unparsable_toml()} in {Path.cwd()} is not valid TOML ({exc}); "
            "fix it or move it aside"
        ) from None
    _warn_unknown_variables()
    return settings


_warned_unknown: set[str] = set()


def _warn_unknown_variables() -> None:
    """Warn once per process about each ``TUNEKIT_*`` variable that names no setting.

    The environment source reads only the variables of known settings, so a misspelt one
    (``TUNEKIT_SAMPLE=3``) would be ignored without a word and the default silently applied.
    """
    names = sorted(Settings.model_fields)
    for variable in os.environ:
        prefix, name = variable[:8].lower(), variable[8:].lower()
        if prefix != "tunekit_" or name in names or variable in _warned_unknown:
            continue
        _warned_unknown.add(variable)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean TUNEKIT_{close[0].upper()}?" if close else ""
        _log.warning("%s is not a tunekit setting and is ignored%s (docs/configuration.md lists them)", variable, hint)


def _unparsable_toml() -> str:
    """Which config file of the working directory failed to parse (pydantic-settings does not say)."""
    for name in ("tunekit.toml", "pyproject.toml"):
        try:
            tomllib.loads((Path.cwd() / name).read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return name
        except OSError:
            continue
    return "tunekit.toml or pyproject.toml"


def _describe(exc: ValidationError, overrides: dict[str, Any]) -> str:
    """Each bad setting with where it came from, read when settings are first needed (a key, a tune)."""
    parts = []
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else ""
        if not name:  # a check across settings: its message names them
            parts.append(error["msg"])
            continue
        variable = f"TUNEKIT_{name.upper()}"
        source = (
            f"tk.configure({name}=...)"
            if name in overrides
            else variable
            if variable in os.environ
            else _file_source(name)
        )
        message = error["msg"]
        if error["type"] == "extra_forbidden":  # a misspelt name in a config file or configure()
            # TUNEKIT_SAMPLES = 3 in tunekit.toml: the variable's name, where the file takes the setting's.
            bare = name.lower().removeprefix("tunekit_")
            if bare in Settings.model_fields:
                message = (
                    f"not a tunekit setting; did you mean {bare}? "
                    "(a file or tk.configure names a setting in lower case, without TUNEKIT_)"
                )
            else:
                close = difflib.get_close_matches(name, sorted(Settings.model_fields), n=1)
                message = "not a tunekit setting" + (f"; did you mean {close[0]}?" if close else "")
            if isinstance(error.get("input"), dict):  # [tunekit] in tunekit.toml, say
                message += "; settings go at the top level of tunekit.toml, or under [tool.tunekit] in pyproject.toml"
        parts.append(f"{name} = {_shown(name, error.get('input'))!r} from {source}: {message}")
    return "invalid tunekit settings: " + "; ".join(parts) + " (fix or unset them; docs/configuration.md lists each)"


def _shown(name: str, value: object) -> object:
    """The value as an error message may show it: a URL setting without its password (it ends up in logs)."""
    return redacted(value) if name == "cache_url" and isinstance(value, str) else value


def _file_source(name: str) -> str:
    """Which config file of the working directory sets ``name``, so the error names that one, not both."""
    for file, table in (("tunekit.toml", ()), ("pyproject.toml", ("tool", "tunekit"))):
        try:
            data: Any = tomllib.loads((Path.cwd() / file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        for part in table:
            data = data.get(part, {}) if isinstance(data, dict) else {}
        if isinstance(data, dict) and name in data:
            return f"{file} [tool.tunekit]" if table else file
    return "tunekit.toml or [tool.tunekit]"
