"""CampaignJob: one tune of a campaign (a target, a device kind, a shape), with the id that names it everywhere."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tunekit._candidates.config import ParamValue

__all__ = ["CampaignJob", "ImportPath"]

ImportPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
"""``package.module:NAME``."""

_KIND = re.compile(r"^[\w.:@+-]+$")


class CampaignJob(BaseModel):
    """Tune the target ``target`` on a worker of device kind ``device`` for the inputs of ``shape``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: ImportPath = Field(description="The tk.CampaignTarget to tune, as 'package.module:NAME'.")
    device: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=_KIND.pattern)] = Field(
        description="The device kind: the Ray resource a worker with that device declares (e.g. 'opencl:a100')."
    )
    shape: dict[str, ParamValue] = Field(description="What the target's inputs() builds a call's inputs from.")

    @property
    def id(self) -> str:
        """A digest of what the job tunes: the same job in an edited campaign file keeps its id (resuming skips it)."""
        text = json.dumps([self.target, self.device, self.shape], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """``target on device {shape}`` for progress lines and errors."""
        shape = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"{self.target} on {self.device} ({shape})"
