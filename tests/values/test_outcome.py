"""Outcomes: what a candidate's measurement came to, checked where it is made."""

from __future__ import annotations

import pytest

import tunekit as tk


def test_a_failure_stage_that_does_not_exist_is_refused_where_it_is_made() -> None:
    # Failed("too slow", "slow") was recorded as stage 'slow', then resumed from the trial log as 'run'.
    with pytest.raises(ValueError, match=r"tk.Failed stage must be one of 'compile', 'check', 'run'.*got 'slow'"):
        tk.Failed("too slow", "slow")  # type: ignore[arg-type]
