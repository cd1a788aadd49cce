"""RunPolicy: where a tune's candidates run and the limit on one run, as backend code asks for it.

Apart from the runners (:mod:`tunekit._measure.isolation`), which import the measurement and the
records: ``tunekit.backend`` exports :func:`current_run_policy`, and a backend imported with the
README's first example (``tunekit_backends.cpu``) then loads neither them nor pydantic
(tests/project/test_import_cost.py).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunekit._base.settings import IsolationMode, current
from tunekit._candidates.isolation import Isolation

if TYPE_CHECKING:
    from tunekit._base.settings_model import Settings

__all__ = ["RunPolicy", "current_run_policy", "policy_of", "running_policy"]


@dataclass(frozen=True, slots=True)
class RunPolicy:
    """Where a tune's candidates run (``mode``) and the limit on one run (``timeout_s``, None: no limit)."""

    mode: IsolationMode
    timeout_s: float | None

    @property
    def isolated(self) -> bool:
        """Whether candidates run in a worker process (where a hang is stopped), not in the caller."""
        return self.mode == "process"


def policy_of(override: Isolation | None, settings: Settings) -> RunPolicy:
    """The isolation mode and the per-run limit in force: a set's own ``override`` wins over the settings."""
    mode, timeout = settings.isolation, settings.candidate_timeout_s
    if override is not None:
        mode = override.mode
        if override.timeout_s is not None:
            timeout = override.timeout_s
    return RunPolicy(mode, None if math.isinf(timeout) else timeout)


running_policy: ContextVar[RunPolicy | None] = ContextVar("tunekit_run_policy", default=None)
"""The policy of the tune this context works for, set by ``isolation.open_runner`` while its runner is open."""


def current_run_policy() -> RunPolicy:
    """Where the candidates of the tune this code works for run, and the limit on one run.

    For a backend's ``prepare`` hook (or ``prepare_together``) that runs a candidate while
    preparing it, say a first launch that compiles: under process isolation it should leave
    that run to the isolated worker, in-process it should stay within ``timeout_s``. Hooks run
    in copies of the tune's context, on the tuner's threads, so they see the tune's policy,
    the set's ``with_isolation`` included; outside a tune it is the settings' policy.
    """
    policy = running_policy.get()
    return policy if policy is not None else policy_of(None, current())
