"""Campaign files and jobs are checked before anything starts; a worker's job and the merge, without Ray."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from _campaign_targets import ROW_SUM_TUNER

import tunekit as tk
from tunekit._campaign.journal import DoneJob, Journal
from tunekit._campaign.merge import RecordMerger
from tunekit._campaign.progress import CampaignProgress
from tunekit._campaign.result import JobResult
from tunekit._campaign.worker import tune_job
from tunekit._cli.main import main

GOOD_JOB = """
[[jobs]]
target = "_campaign_targets:ROW_SUM"
device = "cpu-numpy"
shapes = [{rows = 8, n = 100}, {rows = 8, n = 200}]
"""


def _write(tmp_path: Path, text: str, name: str = "release.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_file_declares_one_job_per_shape_with_paths_relative_to_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "records = 'tuned'\nmax_retries = 1\n[env]\nTUNEKIT_SAMPLES = '5'\n" + GOOD_JOB)
    campaign = tk.Campaign.load(path)
    assert [job.shape for job in campaign.jobs] == [{"rows": 8, "n": 100}, {"rows": 8, "n": 200}]
    assert {job.device for job in campaign.jobs} == {"cpu-numpy"}
    assert campaign.records == tmp_path / "tuned"
    assert campaign.journal_path == tmp_path / "tuned" / ".campaign-journal.json"
    assert (campaign.env, campaign.max_retries) == ({"TUNEKIT_SAMPLES": "5"}, 1)


def test_a_json_file_is_read_as_json(tmp_path: Path) -> None:
    jobs = [{"target": "_campaign_targets:ROW_SUM", "device": "cpu-numpy", "shapes": [{"rows": 4, "n": 8}]}]
    campaign = tk.Campaign.load(_write(tmp_path, json.dumps({"jobs": jobs}), "release.json"))
    assert len(campaign.jobs) == 1


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        (
            GOOD_JOB + '[[jobs]]\ntarget = "not an import path"\ndevice = "cpu-numpy"\nshapes = [{n = 1}]\n',
            r"jobs\[1\] \(not an import path\)\.target: not an import path; write it as 'package\.module:NAME'",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "cpu-numpy"\nshape = [{n = 1}]\n',
            r"jobs\[0\] \(_campaign_targets:ROW_SUM\)\.shape: Extra inputs are not permitted",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "cpu-numpy"\nshapes = []\n',
            r"jobs\[0\] \(_campaign_targets:ROW_SUM\)\.shapes: List should have at least 1 item",
        ),
        (
            '[[jobs]]\ntarget = "no_such_package.kernels:GEMM"\ndevice = "cpu-numpy"\nshapes = [{n = 1}]\n',
            r"jobs\[0\] \(no_such_package\.kernels:GEMM\) shapes\[0\]: target 'no_such_package\.kernels:GEMM': "
            r"importing no_such_package\.kernels failed \(ModuleNotFoundError",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:NO_SUCH"\ndevice = "cpu-numpy"\nshapes = [{n = 1}]\n',
            r"jobs\[0\] .*: target '_campaign_targets:NO_SUCH': module _campaign_targets has no NO_SUCH",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM_TUNER"\ndevice = "cpu-numpy"\nshapes = [{n = 1}]\n',
            r"target '_campaign_targets:ROW_SUM_TUNER' is a LocalTuner, not a tk\.CampaignTarget",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "opencl:pocl"\nshapes = [{rows = 1, n = 1}]\n',
            r"jobs\[0\] .*: device 'opencl:pocl' is not a kind the target _campaign_targets:ROW_SUM runs on; "
            r"it knows \['cpu-numpy'\]",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "cpu-numpy"\nshapes = [{rows = 1}]\n',
            r"jobs\[0\] \(_campaign_targets:ROW_SUM\) shapes\[0\]: shape \{'rows': 1\} lacks \['n'\]",
        ),
        (
            GOOD_JOB + GOOD_JOB,
            r"jobs\[1\] \(_campaign_targets:ROW_SUM\) shapes\[0\] is the same job as .*jobs\[0\] .* shapes\[0\]",
        ),
        (
            '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "my gpu"\nshapes = [{rows = 1, n = 1}]\n',
            r"jobs\[0\] \(_campaign_targets:ROW_SUM\)\.device: a device kind is a Ray resource name of letters",
        ),
        ("records = 'x'\n", r"jobs: Field required"),
        ("[[jobs]\n", r"is not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_job_and_field(tmp_path: Path, jobs: str, message: str) -> None:
    with pytest.raises(tk.CampaignError, match=message):
        tk.Campaign.load(_write(tmp_path, jobs))


def test_a_job_built_in_code_is_checked_the_same_way(tmp_path: Path) -> None:
    job = tk.CampaignJob(target="_campaign_targets:ROW_SUM", device="gpu", shape={"rows": 1, "n": 1})
    with pytest.raises(tk.CampaignError, match=r"job 0: device 'gpu' is not a kind the target"):
        tk.Campaign(jobs=[job], records=tmp_path)


def test_without_the_ray_extra_a_run_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives `import ray`
    campaign = tk.Campaign.load(_write(tmp_path, GOOD_JOB))
    with pytest.raises(
        ImportError, match=r"tunekit campaigns run their jobs on a Ray cluster: pip install 'tunekit\[ray\]'"
    ):
        campaign.run(progress=False)


def _job_json(rows: int, n: int) -> str:
    return tk.CampaignJob(
        target="_campaign_targets:ROW_SUM", device="cpu-numpy", shape={"rows": rows, "n": n}
    ).model_dump_json()


def test_a_job_tunes_once_then_reads_the_winner_back_from_the_cache(isolated_settings: Path) -> None:
    ROW_SUM_TUNER.clear()  # winners another test left in this process's memory
    first = JobResult.model_validate_json(tune_job(_job_json(4, 40)))
    ROW_SUM_TUNER.clear()  # as a fresh worker process: only the cache knows the winner
    second = JobResult.model_validate_json(tune_job(_job_json(4, 40)))
    assert (first.decision, second.decision) == ("tuned", "stored")
    entry, again = first.record.entries[0], second.record.entries[0]
    assert entry.key == {"rows": 4, "n": 40}
    assert (again.winner, again.ranking, again.median_ns) == (entry.winner, entry.ranking, entry.median_ns)
    assert first.record.model_copy(update={"entries": []}) == second.record.model_copy(update={"entries": []})


def test_a_journaled_job_is_skipped_only_while_its_winner_is_in_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = tk.Campaign.load(_write(tmp_path, GOOD_JOB))

    ROW_SUM_TUNER.clear()
    journal = Journal(campaign.journal_path)
    merger = RecordMerger(campaign.records)
    for job in campaign.jobs:  # what a run that finished both jobs left
        result = JobResult.model_validate_json(tune_job(job.model_dump_json()))
        path = merger.merge(result.record, job.device)
        entry = result.record.entries[0]
        journal.add(
            job.id, DoneJob(record=path.name, key=entry.key, winner=entry.winner, decision="tuned", host="h", pid=1)
        )
    again = campaign.run(address="127.0.0.1:1", progress=False)  # no cluster there: nothing may need one
    assert (len(again.skipped), again.finished) == (2, ())

    record = tk.Record.load(path)
    del record.entries[json.dumps({"n": 200, "rows": 8}, separators=(",", ":"))]
    record.save(path)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"tunekit\[ray\]"):  # the job whose winner left the record runs again
        campaign.run(progress=False)


def test_a_file_in_the_way_of_a_record_is_refused_not_replaced(tmp_path: Path) -> None:
    ROW_SUM_TUNER.clear()
    result = JobResult.model_validate_json(tune_job(_job_json(4, 48)))
    merger = RecordMerger(tmp_path)
    path = merger.path_for(result.record, "cpu-numpy")
    path.write_text("my notes\n")
    with pytest.raises(FileExistsError, match="holds something that is no committed record"):
        merger.merge(result.record, "cpu-numpy")
    assert path.read_text() == "my notes\n"


def test_the_command_says_what_is_wrong_with_a_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path, '[[jobs]]\ntarget = "_campaign_targets:ROW_SUM"\ndevice = "gpu"\nshapes = [{rows = 1, n = 1}]\n'
    )
    assert main(["campaign", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tunekit: {path}: jobs[0] (_campaign_targets:ROW_SUM) shapes[0]: device 'gpu' is not a kind")
    assert err.count("\n") == 1


def test_a_worker_with_autotuning_off_refuses_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")
    tk.configure()
    with pytest.raises(RuntimeError, match=r"autotuning is off on this worker \(TUNEKIT_AUTOTUNE=0\)"):
        tune_job(_job_json(4, 56))


def test_a_second_device_id_of_one_kind_gets_its_own_record(tmp_path: Path) -> None:
    ROW_SUM_TUNER.clear()
    result = JobResult.model_validate_json(tune_job(_job_json(4, 64)))
    other = result.record.model_copy(update={"device_id": result.record.device_id + " (another driver)"})
    merger = RecordMerger(tmp_path)
    first, second = merger.merge(result.record, "cpu-numpy"), merger.merge(other, "cpu-numpy")
    assert first.name == "campaign_row_sum.cpu-numpy.json"
    assert second.name.startswith("campaign_row_sum.cpu-numpy.") and second != first
    assert tk.Record.load(first).device_id == result.record.device_id
    assert tk.Record.load(second).device_id == other.device_id


def test_a_journal_that_is_no_journal_is_refused_naming_what_to_do(tmp_path: Path) -> None:
    campaign = tk.Campaign.load(_write(tmp_path, GOOD_JOB))
    campaign.journal_path.parent.mkdir(parents=True)
    campaign.journal_path.write_text("[]")
    with pytest.raises(tk.CampaignError, match=r"is no campaign journal .*; delete it to run every job again"):
        campaign.run(progress=False)


def test_progress_lines_show_every_candidate_name_and_error_as_written(
    isolated_settings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Names and errors are text, not rich markup: `[vec=8]` is a configuration, `[/x]` no closing tag."""
    ROW_SUM_TUNER.clear()
    job = tk.CampaignJob.model_validate_json(_job_json(4, 72))
    result = JobResult.model_validate_json(tune_job(_job_json(4, 72)))
    entry = result.record.entries[0].model_copy(update={"winner": "gelu[vec=8,block=512]", "median_ns": 2510.0})
    named = result.model_copy(update={"record": result.record.model_copy(update={"entries": [entry]})})
    with CampaignProgress(2, shown=True) as progress:
        progress.finished(job, named)
        progress.failed(job, "KeyError: '[/x]' [bold]")
    err = capsys.readouterr().err
    assert f"-> gelu[vec=8,block=512] ({tk.format_duration_ns(2510.0)}, on {result.host}," in err
    assert "failed _campaign_targets:ROW_SUM on cpu-numpy (rows=4, n=72): KeyError: '[/x]' [bold]" in err


def test_an_address_nothing_listens_on_is_refused_at_once(tmp_path: Path) -> None:
    """ray.init retried such an address for many minutes, printing a warning every few seconds."""
    pytest.importorskip("ray")
    with socket.socket() as probe:  # a port just freed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    campaign = tk.Campaign.load(_write(tmp_path, GOOD_JOB))
    with pytest.raises(tk.CampaignError, match=rf"no Ray cluster answers at 127.0.0.1:{port} .*ray start --head"):
        campaign.run(address=f"127.0.0.1:{port}", progress=False)


def test_the_closing_line_names_the_records_directory_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "runs[b]"
    where.mkdir()
    campaign = tk.Campaign.load(_write(where, GOOD_JOB))
    ROW_SUM_TUNER.clear()
    journal, merger = Journal(campaign.journal_path), RecordMerger(campaign.records)
    for job in campaign.jobs:  # both finished by an earlier run: this one needs no cluster
        result = JobResult.model_validate_json(tune_job(job.model_dump_json()))
        path, entry = merger.merge(result.record, job.device), result.record.entries[0]
        journal.add(
            job.id, DoneJob(record=path.name, key=entry.key, winner=entry.winner, decision="tuned", host="h", pid=1)
        )
    capsys.readouterr()
    campaign.run(address="127.0.0.1:1", progress=True)
    assert f"records in {campaign.records}" in capsys.readouterr().err
