"""The campaign file: TOML or JSON, validated (pydantic) before anything starts."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tunekit._base.errors import TunekitError
from tunekit._campaign.job import ImportPath
from tunekit._candidates.config import ParamValue

__all__ = ["CampaignError", "CampaignFile", "JobEntry", "read_campaign_file"]


class CampaignError(TunekitError, ValueError):
    """A campaign that cannot start: a bad file, a target that does not import, a device kind no worker has."""


class JobEntry(BaseModel):
    """A ``[[jobs]]`` table: one target on one device kind, tuned for each of its shapes (one job per shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: ImportPath
    device: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[\w.:@+-]+$")]
    shapes: list[dict[str, ParamValue]] = Field(min_length=1)


class CampaignFile(BaseModel):
    """The whole file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    records: str = Field("records", description="Directory of the merged records, relative to the file.")
    state: str | None = Field(None, description="The resume journal, relative to the file (default: beside it).")
    max_retries: int = Field(3, ge=0, description="Ray's retries of a job whose worker died.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables set on the workers.")
    jobs: list[JobEntry] = Field(min_length=1)


def read_campaign_file(path: Path) -> CampaignFile:
    """Parse and validate ``path`` (``.toml`` or ``.json``); CampaignError naming the job and field at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CampaignError(f"cannot read the campaign file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise CampaignError(f"{path} is not valid {kind}: {exc}") from None
    try:
        return CampaignFile.model_validate(data)
    except ValidationError as exc:
        raise CampaignError(f"{path}: " + "; ".join(_problem(data, e) for e in exc.errors()[:5])) from None


def _problem(data: object, error: object) -> str:
    """One validation error as ``jobs[2] (pkg.mod:GEMM) shapes[0].m: <message>``."""
    assert isinstance(error, dict)
    loc: tuple[object, ...] = tuple(error.get("loc", ()))
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int) and isinstance(data, dict):
        jobs = data.get("jobs")
        if isinstance(jobs, list) and loc[1] < len(jobs) and isinstance(jobs[loc[1]], dict):
            target = jobs[loc[1]].get("target")
            if isinstance(target, str):
                where = where.replace(f"jobs[{loc[1]}]", f"jobs[{loc[1]}] ({target})", 1)
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "string_pattern_mismatch" and loc and loc[-1] == "target":
        message = "not an import path; write it as 'package.module:NAME'"
    elif error.get("type") == "string_pattern_mismatch" and loc and loc[-1] == "device":
        message = "a device kind is a Ray resource name of letters, digits and . : @ + - _ (e.g. 'opencl:a100')"
    return f"{where or 'the file'}: {message}"
