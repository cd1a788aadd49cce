"""The trial log: resume after a kill, refuse foreign logs, one search at a time."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kt_cache import write_cache

import tunekit as tk
from tunekit._base.file_lock import lock_file
from tunekit._search.strategies import IteratedLocalSearch
from tunekit._store.trials import TrialLog, key_log_path
from tunekit_backends.replay import ReplayClient, ReplayData, load_kernel_tuner_cache


@pytest.fixture
def data(tmp_path: Path) -> ReplayData:
    return load_kernel_tuner_cache(write_cache(tmp_path / "c.json"))


def run(data: ReplayData, log: Path, **kw: object) -> tk.SearchResult:
    client = ReplayClient(data)
    args: dict[str, object] = {"tuner": "t", "max_evals": 25, "seed": 4, "log": log, "batch": 3} | kw
    return tk.search(data.space, client.kernel, client, (), **args)  # type: ignore[arg-type]


def test_the_log_is_a_header_and_one_line_per_trial(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "trials.jsonl"
    result = run(data, log)
    lines = log.read_text().splitlines()
    header = tk.TrialLogHeader.model_validate_json(lines[0])
    assert (header.tuner, header.device_id, header.space_hash) == ("t", "replay:" + data.gpu, data.space.hash)
    assert header.schema_version == 1
    entries = [tk.TrialEntry.model_validate_json(line) for line in lines[1:]]
    assert [(e.batch, e.batch_size) for e in entries[:4]] == [(0, 3), (0, 3), (0, 3), (1, 3)]
    trials = [tk.TrialEntry.model_validate_json(line) for line in lines[1:]]
    assert [t.config for t in trials] == [t.config.to_dict() for t in result.trials]
    assert {t.status for t in trials} <= {"measured", "failed"}


def test_resume_after_a_kill_mid_line_skips_measured_trials_and_reaches_the_same_winner(
    data: ReplayData, tmp_path: Path
) -> None:
    # The default, adaptive schedule eliminates against batchmates: the batch the kill cuts (its
    # first trial written whole, its second half written) is measured again as a whole. The resumed
    # strategy observes every logged trial before it proposes, so its path then differs from the
    # uninterrupted run's, and reaches the same winner here.
    assert tk.settings().adaptive
    full = tmp_path / "full.jsonl"
    reference = run(data, full)
    lines = full.read_bytes().splitlines(keepends=True)
    batches = [json.loads(line)["batch"] for line in lines[1:]]
    # The first batch of three after the first four trials: lines[1 + first] opens it.
    first = next(i for i in range(4, len(batches) - 2) if batches[i - 1] != batches[i] == batches[i + 2])
    killed = tmp_path / "killed.jsonl"
    killed.write_bytes(b"".join(lines[: 2 + first]) + lines[2 + first][: len(lines[2 + first]) // 2])
    resumed = run(data, killed)
    assert sum(t.resumed for t in resumed.trials) == first
    assert [t.config for t in resumed.trials][:first] == [t.config for t in reference.trials][:first]
    assert resumed.best.config == reference.best.config
    assert resumed.evaluations == 25 and resumed.stopped_by == "max_evals"
    kept, appended = first + 1, 25 - first
    assert len(killed.read_text().splitlines()) == 1 + kept + appended, "the half line was cut, the rest appended"
    for line in killed.read_text().splitlines():
        json.loads(line)


def test_a_rerun_of_a_finished_log_measures_nothing(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log)
    again = run(data, log)
    assert all(t.resumed for t in again.trials)


@pytest.mark.parametrize(
    "rerun", [{"max_evals": 40}, {"max_evals": 40, "seed": 9}, {"max_evals": 40, "strategy": "random"}]
)
def test_a_resume_that_proposes_other_configurations_keeps_every_logged_trial(
    data: ReplayData, tmp_path: Path, rerun: dict[str, object]
) -> None:
    """A resume with a larger budget (or another seed or strategy) dropped the logged trials it did not propose."""
    log = tmp_path / "t.jsonl"
    first = run(data, log, max_evals=20)
    resumed = run(data, log, **rerun)
    logged = {t.config for t in first.trials}
    assert logged <= {t.config for t in resumed.trials}, "every logged trial is one of the resumed search's"
    assert resumed.evaluations == 40 and resumed.stopped_by == "max_evals"
    assert len(log.read_text().splitlines()) == 1 + 40, "20 logged + 20 measured: the budget counts the log"
    assert sum(t.resumed for t in resumed.trials) == 20


def test_a_rerun_with_a_smaller_budget_than_the_log_holds_measures_nothing(data: ReplayData, tmp_path: Path) -> None:
    """Every logged trial is kept, not the log's first max_evals: those cut could hold the log's best."""
    log = tmp_path / "t.jsonl"
    first = run(data, log, max_evals=20)
    smaller = run(data, log, max_evals=5, strategy="random", seed=9)
    assert smaller.evaluations == 20 and all(t.resumed for t in smaller.trials)
    assert {t.config for t in smaller.trials} == {t.config for t in first.trials}
    assert len(log.read_text().splitlines()) == 1 + 20


@pytest.mark.parametrize(
    ("change", "field"),
    [({"tuner": "other"}, "tuner"), ({"key_space": True}, "space_hash")],
)
def test_a_log_from_another_search_is_refused(
    data: ReplayData, tmp_path: Path, change: dict[str, object], field: str
) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log)
    if "key_space" in change:
        other = tk.Space(X=[1, 2], Y=[16])
        with pytest.raises(tk.TrialLogError, match=field):
            TrialLog.open(log, tuner="t", space=other, device_id="replay:" + data.gpu)
    else:
        with pytest.raises(tk.TrialLogError, match=f"{field}='t'.*another log path"):
            run(data, log, **change)


def test_a_log_under_the_home_directory_is_written_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """log="~/t.jsonl" created a directory named "~" in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    TrialLog.open("~/logs/t.jsonl", tuner="t", space=tk.Space(A=[1]), device_id="d").close()
    assert (tmp_path / "home" / "logs" / "t.jsonl").is_file() and not (tmp_path / "~").exists()


LIMIT = 1024


def test_a_log_from_another_space_says_what_changed(tmp_path: Path) -> None:
    """The refusal named two space hashes only, so nobody could tell which edit made the log foreign."""
    global LIMIT
    log = tmp_path / "t.jsonl"
    TrialLog.open(log, tuner="t", space=tk.Space(A=[1, 2], B=[8]), device_id="d").close()
    with pytest.raises(tk.TrialLogError, match=r"\(A was \[1, 2\], is \[1, 2, 4\]; parameter B is gone\)"):
        TrialLog.open(log, tuner="t", space=tk.Space(A=[1, 2, 4]), device_id="d")
    log.unlink()
    TrialLog.open(log, tuner="t", space=tk.Space(A=[1, 2], restrict=lambda c: c.A <= LIMIT), device_id="d").close()
    LIMIT = 2
    try:
        with pytest.raises(tk.TrialLogError, match=r"restrictions were \[.*LIMIT=1024'\], are \[.*LIMIT=2'\]"):
            TrialLog.open(log, tuner="t", space=tk.Space(A=[1, 2], restrict=lambda c: c.A <= LIMIT), device_id="d")
    finally:
        LIMIT = 1024


def test_a_log_from_another_device_is_refused(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log)
    with pytest.raises(tk.TrialLogError, match="device_id"):
        TrialLog.open(log, tuner="t", space=data.space, device_id="another gpu")


def test_a_log_measured_with_other_build_code_is_refused(data: ReplayData, tmp_path: Path) -> None:
    """tk.search answered an edited kernel's configurations with the old code's timings from its log."""
    log = tmp_path / "t.jsonl"
    client = ReplayClient(data)

    def build(config: tk.Config) -> Callable[..., None]:
        return client.kernel(config)

    def edited(config: tk.Config) -> Callable[..., None]:
        kernel = client.kernel(config)
        return lambda: (kernel(), kernel())[0]

    tk.search(data.space, build, client, (), tuner="t", max_evals=5, log=log)
    assert tk.search(data.space, build, client, (), tuner="t", max_evals=5, log=log).evaluations == 5
    with pytest.raises(tk.TrialLogError, match=r"t\.jsonl was measured with other code: the search's build"):
        tk.search(data.space, edited, client, (), tuner="t", max_evals=5, log=log)
    # A log written before the build was kept has none in its header: resumed as before.
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    del header["build"]
    log.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    resumed = tk.search(data.space, edited, client, (), tuner="t", max_evals=5, log=log)
    assert all(t.resumed for t in resumed.trials)


def test_a_corrupt_middle_line_is_refused_not_guessed(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log)
    lines = log.read_text().splitlines()
    lines[3] = '{"kind": "trial", "config": {"X": 99}}'
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(tk.TrialLogError, match="line 4"):
        run(data, log)


def test_a_file_that_is_not_a_trial_log_is_refused(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    log.write_text('{"hello": 1}\n')
    with pytest.raises(tk.TrialLogError, match="header"):
        run(data, log)


def test_two_searches_cannot_write_one_log(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    holder = TrialLog.open(log, tuner="t", space=data.space, device_id="replay:" + data.gpu)
    try:
        with pytest.raises(tk.TrialLogError, match="in use"):
            run(data, log)
    finally:
        holder.close()
    assert run(data, log).evaluations == 25, "usable once the other search is done"


def test_a_version_1_log_without_batches_is_resumed_whole(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "v1.jsonl"
    reference = run(data, log)
    lines = log.read_text().splitlines()
    old = [lines[0]]
    for line in lines[1:]:
        entry = json.loads(line)
        del entry["batch"], entry["batch_size"]
        old.append(json.dumps(entry | {"schema_version": 1}))
    log.write_text("\n".join(old) + "\n")
    again = run(data, log)
    assert all(t.resumed for t in again.trials) and len(again.trials) == len(reference.trials)


def test_a_log_that_is_a_directory_is_refused_with_a_file_to_use(data: ReplayData, tmp_path: Path) -> None:
    """log= pointing at a directory raised a raw IsADirectoryError."""
    with pytest.raises(tk.TrialLogError, match=r"is a directory; give a file path, e.g. log='.*trials.jsonl'"):
        run(data, tmp_path)
    assert not (tmp_path.parent / f"{tmp_path.name}.lock").exists()


def test_a_log_under_a_file_is_refused_naming_the_file(data: ReplayData, tmp_path: Path) -> None:
    """log="out/trials.jsonl" where out is a file raised "[Errno 17] File exists: 'out'", naming neither the log nor
    what to do."""
    client = ReplayClient(data)
    (tmp_path / "out").write_text("")
    for log in (tmp_path / "out" / "trials.jsonl", tmp_path / "out" / "sub" / "trials.jsonl"):
        message = re.escape(f"trial log {log}: {tmp_path / 'out'} is a file, not a directory; give log= a file path")
        with pytest.raises(tk.TrialLogError, match=message):
            tk.search(data.space, client.kernel, client, (), tuner="t", max_evals=2, log=log)


def test_a_corrupt_line_is_described_on_one_line(data: ReplayData, tmp_path: Path) -> None:
    """The error carried pydantic's multi-line dump of the input and its documentation URL."""
    log = tmp_path / "t.jsonl"
    run(data, log)
    lines = log.read_text().splitlines()
    lines[2] = "{bad"
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(tk.TrialLogError) as raised:
        run(data, log)
    message = str(raised.value)
    assert "\n" not in message and "errors.pydantic.dev" not in message and "input_value" not in message
    assert message.startswith(f"{log}: line 3 is corrupt (") and "Invalid JSON" in message


def test_a_corrupt_line_deleted_as_the_error_says_resumes_the_other_trials(data: ReplayData, tmp_path: Path) -> None:
    """The error said only to move the log aside, throwing away every trial to drop one bad line."""
    log = tmp_path / "t.jsonl"
    reference = run(data, log)
    lines = log.read_text().splitlines()
    bad = json.loads(lines[5])
    lines[5] = lines[5][:40]
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(tk.TrialLogError, match="line 6 is corrupt .*; delete that line to keep the other trials"):
        run(data, log)
    del lines[5]
    log.write_text("\n".join(lines) + "\n")
    again = run(data, log)
    # The deleted trial's batch is unfinished in the log now: its other trials are dropped, as a kill's are.
    batch = {
        data.space.config(json.loads(line)["config"]) for line in lines[1:] if json.loads(line)["batch"] == bad["batch"]
    }
    resumed = {t.config for t in again.trials if t.resumed}
    assert len(batch) == bad["batch_size"] - 1 and not batch & resumed
    assert len(resumed) == len(reference.trials) - bad["batch_size"] and again.evaluations == 25


def test_blank_lines_in_a_log_are_no_trials(data: ReplayData, tmp_path: Path) -> None:
    """A blank line (an editor's, or `echo >> log`) was refused as a corrupt line."""
    log = tmp_path / "t.jsonl"
    reference = run(data, log)
    lines = log.read_text().splitlines()
    log.write_text("\n".join([*lines[:3], "", *lines[3:], "  "]) + "\n\n")
    again = run(data, log, max_evals=30)
    assert sum(t.resumed for t in again.trials) == len(reference.trials) == 25 and again.evaluations == 30
    assert [json.loads(line)["config"] for line in log.read_text().splitlines()[1:] if line.strip()][-5:] == [
        t.config.to_dict() for t in again.trials if not t.resumed
    ]


def test_a_log_with_fields_of_a_newer_tunekit_is_resumed(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a field added within schema_version 1 made an older tunekit call the log corrupt."""
    log = tmp_path / "newer.jsonl"
    reference = run(data, log)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    lines[0]["host"] = "gpu-7"
    lines[0]["space"]["notes"] = "from a newer tunekit"
    for entry in lines[1:]:
        entry["energy_j"] = 0.5
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    again = run(data, log)
    assert all(t.resumed for t in again.trials) and len(again.trials) == len(reference.trials)


def test_a_key_log_path_sits_beside_the_base_with_the_key_in_its_name() -> None:
    base = Path("tuning") / "gemm.jsonl"
    key = {"dtype": "f/32", "n": 4096}
    path = key_log_path(base, tuner="gemm", device_id="gpu0", key=key, checksum="c1")
    assert path.parent == base.parent
    stem, readable, digest, suffix = path.name.split(".")
    assert (stem, readable, suffix, len(digest)) == ("gemm", "dtype=f_32,n=4096", "jsonl", 8)
    other_device = key_log_path(base, tuner="gemm", device_id="gpu1", key=key, checksum="c1")
    assert other_device != path and other_device.name.startswith("gemm.dtype=f_32,n=4096.")
    # Changed kernels (another checksum) must not be answered from the old code's log.
    assert key_log_path(base, tuner="gemm", device_id="gpu0", key=key, checksum="c2") != path
    assert key_log_path(Path("log"), tuner="t", device_id="d", key=None, checksum="c").name.startswith("log.")


def test_a_log_reached_through_a_symlink_is_locked_as_the_file_itself(data: ReplayData, tmp_path: Path) -> None:
    """Each path to a log took its own lock: two searches, one through a symlink, wrote one log at once."""
    log = tmp_path / "t.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    holder = TrialLog.open(link, tuner="t", space=data.space, device_id="replay:" + data.gpu)
    try:
        with pytest.raises(tk.TrialLogError, match="in use"):
            run(data, log)
    finally:
        holder.close()


_HOLD = """
import sys
from tunekit._store.trials import TrialLog
from tunekit_backends.replay import load_kernel_tuner_cache

data = load_kernel_tuner_cache(sys.argv[1])
with TrialLog.open(sys.argv[2], tuner="t", space=data.space, device_id="replay:" + data.gpu):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


@pytest.mark.subprocess
def test_a_log_reached_through_a_hard_link_is_locked_as_the_file_itself(data: ReplayData, tmp_path: Path) -> None:
    """The lock sat beside the real path, and a hard link is a second real path: two processes wrote one log."""
    log = tmp_path / "a" / "t.jsonl"
    log.parent.mkdir()
    run(data, log, max_evals=5)
    link = tmp_path / "b" / "t.jsonl"
    link.parent.mkdir()
    os.link(log, link)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(data.path), str(link)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        tk.configure(tune_lock_timeout_s=0)  # not waited for: the holder ends only once this test says so
        with pytest.raises(tk.TrialLogError, match=r"in use by another search \(it may be reached by .* a hard link"):
            run(data, log)
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0
    assert run(data, log).evaluations == 25, "usable once the other search is done"
    assert link.read_bytes() == log.read_bytes()
    assert sorted(p.name for p in tmp_path.rglob("*.lock")) == [], "no lock file is left beside the log"


@pytest.mark.parametrize("text", ["notes\nthe last line, with no newline", '{"lr": 0.1}'])
def test_a_file_that_is_not_a_trial_log_is_left_as_it_is(data: ReplayData, tmp_path: Path, text: str) -> None:
    """A file given as log= by mistake lost its last line, or all of it to a header when it had one line."""
    log = tmp_path / "notes.txt"
    log.write_text(text)
    with pytest.raises(tk.TrialLogError, match="not a tunekit trial log|not a tunekit trial-log header"):
        run(data, log)
    assert log.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "notes.txt"], "no lock file was left beside it"


def test_another_tunekit_file_given_as_log_is_named_for_what_it_is(data: ReplayData, tmp_path: Path) -> None:
    """Regression: a committed record was refused as "the first line is not a trial-log header (Invalid JSON: EOF
    while parsing an object)", about a valid file whose first line is the "{" of an indented document."""
    record = tmp_path / "gemm.json"
    tk.Record("replayed", "d", "abc").save(record)
    kt_cache = write_cache(tmp_path / "kt.json")
    for path, what in ((record, r"a committed record \(tk.Record.save\)"), (kt_cache, "a Kernel Tuner cache file")):
        before = path.read_bytes()
        with pytest.raises(
            tk.TrialLogError, match=rf"is not a tunekit trial log \(it is {what}\) and was left as it is"
        ):
            run(data, path)
        assert path.read_bytes() == before


def test_a_half_written_header_starts_the_log_again(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log)
    log.write_bytes(log.read_bytes()[:40])  # killed while writing the header
    assert run(data, log).evaluations == 25
    tk.TrialLogHeader.model_validate_json(log.read_text().splitlines()[0])


@tk.autotune_key
class _Size:
    n: int


def test_one_budget_with_a_log_for_two_keys_is_refused_saying_one_log_per_key(data: ReplayData, tmp_path: Path) -> None:
    """docs/search.md says to keep one tk.Budget for every search; with log= in it, the second key's tk.search was
    refused saying only "give this search another log path"."""
    budget = tk.Budget(max_evals=4, log=tmp_path / "t.jsonl")
    client = ReplayClient(data)
    tk.search(data.space, client.kernel, client, (), tuner="t", key=_Size(n=1), budget=budget)
    with pytest.raises(tk.TrialLogError) as raised:
        tk.search(data.space, client.kernel, client, (), tuner="t", key=_Size(n=2), budget=budget)
    assert str(raised.value) == (
        f"{tmp_path / 't.jsonl'} was written for key={{'n': 1}}, but this search has key={{'n': 2}}: its trials do not "
        "apply here; give this search another log path, one per key (a log holds one search; a set's "
        "with_search(log=...) makes a file per key itself) (or delete the old log)"
    )
    per_key = dataclasses.replace(budget, log=tmp_path / "t.n=2.jsonl")
    assert tk.search(data.space, client.kernel, client, (), tuner="t", key=_Size(n=2), budget=per_key).evaluations == 4


def test_another_searchs_log_keeps_its_half_written_last_line(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    run(data, log, tuner="other")
    text = log.read_text() + '{"kind": "trial", "con'
    log.write_text(text)
    with pytest.raises(tk.TrialLogError, match="tuner='other'"):
        run(data, log)
    assert log.read_text() == text


@pytest.mark.parametrize(("line", "version"), [(0, 2), (3, 3)])
def test_a_log_of_another_schema_version_is_refused_as_another_tunekits(
    data: ReplayData, tmp_path: Path, line: int, version: int
) -> None:
    """A newer tunekit's header or trial was called 'not a trial-log header' or 'corrupt'."""
    log = tmp_path / "t.jsonl"
    run(data, log)
    lines = log.read_text().splitlines()
    lines[line] = json.dumps(json.loads(lines[line]) | {"schema_version": version})
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(tk.TrialLogError, match=f"line {line + 1} is a .* of schema_version {version}.*another tunekit"):
        run(data, log)


@pytest.mark.parametrize("bad", ["version", "corrupt"])
def test_a_log_refused_for_one_of_its_lines_keeps_its_half_written_tail(
    data: ReplayData, tmp_path: Path, bad: str
) -> None:
    """The half-written last line was cut before the lines were read, so a refused log was changed anyway."""
    log = tmp_path / "t.jsonl"
    run(data, log)
    lines = log.read_text().splitlines()
    lines[2] = json.dumps(json.loads(lines[2]) | {"schema_version": 3}) if bad == "version" else "{not json"
    text = "\n".join(lines) + '\n{"config": {"BLO'
    log.write_text(text)
    with pytest.raises(tk.TrialLogError, match="line 3"):
        run(data, log)
    assert log.read_text() == text


def test_closing_a_trial_log_twice_leaves_other_files_alone(tmp_path: Path) -> None:
    """A second release unlocked and closed the descriptor number again, which another file had taken since."""

    release = lock_file(tmp_path / "t.jsonl")
    assert release is not None
    release()
    with open(tmp_path / "other", "w") as other:  # takes the freed descriptor number
        release()
        other.write("still open")
    assert (tmp_path / "other").read_text() == "still open"


class _Sleepy:
    """An objective whose every measurement takes 0.1 s of wall time."""

    space = tk.Space(A=range(10), B=range(10))

    def __init__(self) -> None:
        self.measured: list[tk.Config] = []

    def measure(self, config: tk.Config) -> tk.Outcome:
        self.measured.append(config)
        time.sleep(0.1)
        return tk.Measured(tk.BenchmarkDurations((1000 + 10 * config.A + config.B,)))

    def remaining(self) -> int | None:
        return None


def test_a_resumed_search_counts_the_logged_time_against_max_seconds(tmp_path: Path) -> None:
    """Regression: each run got the whole max_seconds again, while max_evals counted the logged trials."""
    log = tmp_path / "t.jsonl"
    first = tk.tune_objective(_Sleepy(), tuner="t", device_id="d", strategy="random", max_evals=4, log=log)
    assert first.evaluations == 4  # at least 0.4 s logged
    again = _Sleepy()
    resumed = tk.tune_objective(again, tuner="t", device_id="d", strategy="random", max_seconds=0.2, log=log)
    assert again.measured == [], "the logged 0.4 s already spent the 0.2 s budget"
    assert resumed.stopped_by == "max_seconds" and resumed.earlier_seconds >= 0.4
    assert resumed.best.config == first.best.config


class _Bowl:
    """A deterministic objective over 288 configurations, recording what it measures."""

    space = tk.Space(A=range(12), B=range(6), C=["x", "y", "z", "w"])

    def __init__(self) -> None:
        self.measured: list[tk.Config] = []

    def measure(self, config: tk.Config) -> tk.Outcome:
        self.measured.append(config)
        cost = 1000 + (config.A - 9) ** 2 * 50 + (config.B - 2) ** 2 * 80 + "xyzw".index(config.C) * 30
        return tk.Measured(tk.BenchmarkDurations((cost,)))

    def remaining(self) -> int | None:
        return None


def test_a_resume_with_another_max_evals_counts_and_keeps_every_logged_trial(tmp_path: Path) -> None:
    """Regression: model_ils's other path measured 26 more trials for max_evals 30 -> 40, and 20 dropped the best."""
    log = tmp_path / "t.jsonl"
    first = tk.tune_objective(_Bowl(), tuner="t", device_id="d", strategy="model_ils", max_evals=30, log=log)
    larger = _Bowl()
    grown = tk.tune_objective(larger, tuner="t", device_id="d", strategy="model_ils", max_evals=40, log=log)
    assert len(larger.measured) == 10 and not set(larger.measured) & {t.config for t in first.trials}
    assert grown.evaluations == 40 and {t.config for t in grown.trials} >= {t.config for t in first.trials}
    smaller = _Bowl()
    cut = tk.tune_objective(smaller, tuner="t", device_id="d", strategy="model_ils", max_evals=20, log=log)
    assert smaller.measured == [] and cut.stopped_by == "max_evals"
    assert cut.evaluations == 40 and cut.best.score == min(t.score for t in grown.trials if t.score is not None)


def test_a_resumed_strategy_observes_every_logged_trial_before_it_proposes_and_never_proposes_one(
    tmp_path: Path,
) -> None:
    """A resume observed only the logged trials its strategy proposed again: it searched blind to the rest."""
    log = tmp_path / "t.jsonl"
    first = tk.tune_objective(_Bowl(), tuner="t", device_id="d", strategy="random", max_evals=12, seed=1, log=log)
    logged = {t.config for t in first.trials}
    events: list[tuple[str, tk.Config]] = []

    class Recording:
        def __init__(self, space: tk.Space, rng: np.random.Generator) -> None:
            self.inner = IteratedLocalSearch(space, rng)

        def propose(self, n: int) -> list[tk.Config]:
            proposals = self.inner.propose(n)
            events.extend(("propose", c) for c in proposals)
            return proposals

        def observe(self, config: tk.Config, score: float | None) -> None:
            events.append(("observe", config))
            self.inner.observe(config, score)

    bowl = _Bowl()
    resumed = tk.tune_objective(bowl, tuner="t", device_id="d", strategy=Recording, max_evals=20, seed=2, log=log)
    first_proposal = next(i for i, (what, _) in enumerate(events) if what == "propose")
    assert {c for what, c in events[:first_proposal] if what == "observe"} == logged
    assert not {c for what, c in events if what == "propose"} & logged, "a logged trial was proposed again"
    assert len(bowl.measured) == 8 and resumed.evaluations == 20 and resumed.stopped_by == "max_evals"


def test_model_ils_resumed_from_a_log_climbs_from_its_best(tmp_path: Path) -> None:
    """Resumed from 30 logged random trials, model_ils drew 10 more at random, blind to the log's best (1130 stayed).

    Improved on the log's best in 3 of 12 seeds then; one of the 10 is a random point by design (the
    search is past a fifth of its budget), and a climb can spend the other 9 without finding the next step.
    """
    improved, tried, seed = 0, 0, 0
    while tried < 12:
        seed += 1
        log = tmp_path / f"t{seed}.jsonl"
        first = tk.tune_objective(
            _Bowl(), tuner="t", device_id="d", strategy="random", max_evals=30, seed=seed, log=log
        )
        if first.best.score == 1000:  # the bowl's minimum: the log leaves no room to improve
            continue
        more = _Bowl()
        grown = tk.tune_objective(
            more, tuner="t", device_id="d", strategy="model_ils", max_evals=40, seed=seed + 100, log=log
        )
        assert len(more.measured) == 10
        tried += 1
        improved += grown.best.score < first.best.score
    assert improved >= 10, f"10 informed trials improved on the log's best in {improved} of 12 seeds"


def _wait_for(found: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not found():
        assert time.monotonic() < deadline, f"no {what} in {timeout_s:g} s"
        time.sleep(0.02)


@pytest.mark.subprocess
def test_a_second_process_searching_the_same_new_key_waits_for_the_log_and_resumes_it(tmp_path: Path) -> None:
    """Regression: with the cache off, a second process tuning the same new key with log= failed at once: "in use"."""
    script = Path(__file__).resolve().parents[1] / "_shared_log.py"
    gate = tmp_path / "gate"
    gate.mkdir()
    base = tmp_path / "logs" / "rows.jsonl"
    env = {**os.environ, "TUNEKIT_CACHE": "0"}  # no cache, no tune lock: the log's lock is all they share
    command = [sys.executable, str(script), str(base), str(gate)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        _wait_for((gate / "started").exists, "first candidate run of the first process")
        said = tmp_path / "second.stderr"
        with said.open("w") as stderr:
            second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        waiting = "is in use by another search; waiting"
        _wait_for(lambda: waiting in said.read_text() or second.poll() is not None, "wait said by the second")
        assert waiting in said.read_text() and second.poll() is None, said.read_text()[-3000:]
    finally:
        (gate / "go").touch()  # the first measures on and ends, whatever happened above
        out_first, err_first = first.communicate(timeout=300)
        out_second = second.communicate(timeout=300)[0] if second is not None else ""
    assert first.returncode == 0, err_first[-3000:]
    assert second is not None and second.returncode == 0, said.read_text()[-3000:]
    measured, resumed = json.loads(out_first), json.loads(out_second)
    assert (measured["evaluations"], measured["resumed"]) == (3, 0)
    assert (resumed["evaluations"], resumed["resumed"]) == (3, 3), "the second measured its trials again"
    (log,) = base.parent.iterdir()
    assert len(log.read_text().splitlines()) == 1 + 3, "one header, the first process's three trials"


@pytest.mark.subprocess
def test_a_log_held_past_the_wait_is_refused_saying_what_to_do(data: ReplayData, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(data.path), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        tk.configure(tune_lock_timeout_s=0.2)
        with pytest.raises(
            tk.TrialLogError,
            match=r"in use by another search .*, still after waiting 0.2 s for it \(tune_lock_timeout_s\); let it end "
            r"and run this search again, which resumes the trials it logged \(TUNEKIT_TUNE_LOCK_TIMEOUT_S",
        ):
            run(data, log)
    finally:
        holder.communicate("", timeout=60)
    assert run(data, log).evaluations == 25, "usable once the other search is done"
