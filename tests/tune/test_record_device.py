"""A committed record on the same device model under another software stack is used with a warning, not re-tuned."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit.backend import SupportsDeviceModel
from tunekit_backends.cpu import CpuClient
from tunekit_backends.opencl import KernelTemplate, OpenCLClient


@tk.autotune_key
class Shape:
    n: Annotated[int, tk.Anchor()]


def key_of(x: Any, *rest: Any) -> Shape:
    return Shape(n=len(x))


SPACE = tk.Space(K=[1, 2, 3])


def _builder(ran: list[int]) -> Callable[[tk.Config], Any]:
    """The build of candidates that say which of them ran (their output is ``x * K``), so a served winner is seen."""

    def build(config: tk.Config) -> Any:
        k = int(config.K)

        def run(x: np.ndarray) -> np.ndarray:
            ran.append(k)
            return x * k

        return run

    return build


def cpu_set(ran: list[int]) -> tk.TunableSet[Shape, np.ndarray]:
    return tk.TunableSet.from_space(SPACE, _builder(ran), key=key_of)


def searched(ran: list[int], client: CpuClient, n: int) -> tk.SearchResult:
    """A real search of ``cpu_set(ran)``'s candidates on the CPU for ``Shape(n=n)``, with the set's build."""
    return tk.search(SPACE, _builder(ran), client, (np.ones(n, np.float32),), tuner="scale", key=Shape(n=n))


def committed_on_cpu(path: Path, client: CpuClient, ran: list[int]) -> tuple[tk.Record, tk.TunableSet[Shape, Any]]:
    """A record of a real search on the CPU, saved at ``path``."""
    tunables = cpu_set(ran)
    record = tk.Record.for_tunables("scale", client, tunables)
    record.add(Shape(n=1000), searched(ran, client, 1000))
    record.save(path)
    return record, tunables


def rewritten(path: Path, **fields: object) -> dict[str, Any]:
    """The record at ``path`` with ``fields`` as another machine or stack would have written them (None: absent)."""
    doc: dict[str, Any] = json.loads(path.read_text())
    for name, value in fields.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    path.write_text(json.dumps(doc, indent=2))
    return doc


def older_numpy(device_id: str) -> str:
    """``device_id`` as a CpuClient under numpy 1.26.4 with OpenBLAS 0.3.21 writes it."""
    model, _, _ = device_id.partition(":numpy-")
    return f"{model}:numpy-1.26.4:openblas-0.3.21"


def test_the_clients_say_their_model_the_part_of_their_id_an_upgrade_leaves() -> None:
    client = CpuClient()
    assert isinstance(client, SupportsDeviceModel)
    assert client.device_id.startswith(client.device_model + ":numpy-")
    assert "numpy" not in client.device_model


def test_a_record_of_another_numpy_on_this_cpu_is_used_with_a_warning_and_serves_its_winner(tmp_path: Path) -> None:
    """Regression: a numpy upgrade changed the device id, load_verified refused the record, production re-tuned."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    ran: list[int] = []
    made, tunables = committed_on_cpu(path, client, ran)
    assert json.loads(path.read_text())["device_model"] == client.device_model
    measured_on = older_numpy(client.device_id)
    rewritten(path, device_id=measured_on)
    tuner: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale")
    record = tk.Record.load_verified(path, tunables, client, tuner=tuner)
    assert len(record.warnings) == 1
    (warning,) = record.warnings
    assert measured_on in warning and client.device_id in warning and "same device model" in warning
    assert "re-tune on this stack and commit" in warning
    decisions: list[tk.AutotuneRecord] = []
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale", sinks=[decisions.append])
    assert record.seed(production, tunables, Shape) == 1
    ran.clear()
    out = production.execute(client.device_id, client, tunables, (np.ones(1000, np.float32),))
    winner = made.entries[key_to_json(Shape(n=1000))].config
    assert winner is not None
    assert decisions == [] and ran == [winner["K"]], "the committed winner ran once, nothing was measured"
    assert out[0] == winner["K"]


def test_a_record_used_under_another_stack_keeps_where_it_was_measured(tmp_path: Path) -> None:
    """Saved again, it must not be relabelled as measured on the running stack, nor take its winners."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    ran: list[int] = []
    _, tunables = committed_on_cpu(path, client, ran)
    measured_on = older_numpy(client.device_id)
    rewritten(path, device_id=measured_on)
    record = tk.Record.load_verified(path, tunables, client)
    assert record.device_id == measured_on and record.running_device_id == client.device_id
    record.save(path)
    record.save(tmp_path / "copy.json")
    for saved in (path, tmp_path / "copy.json"):
        doc = json.loads(saved.read_text())
        assert doc["device_id"] == measured_on and doc["device_model"] == client.device_model
    # A winner measured here would be saved as measured under the record's stack: refused, saying how to refresh.
    with pytest.raises(tk.RecordMismatch, match=r"same device model under another software stack.*into a new record"):
        record.add(Shape(n=64), searched(ran, client, 64))


def test_a_record_of_another_cpu_model_is_refused_naming_both(tmp_path: Path) -> None:
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    other = "cpu:AMD EPYC 7763 64-Core Processor:128c:x86_64"
    rewritten(path, device_id=f"{other}:numpy-2.1.0:openblas-0.3.27", device_model=other)
    with pytest.raises(tk.RecordMismatch) as refused:
        tk.Record.load_verified(path, tunables, client)
    assert f"measured on device model {other!r}" in str(refused.value)
    assert f"this is model {client.device_model!r}" in str(refused.value)


def test_a_record_without_a_device_model_takes_only_its_exact_device_id(tmp_path: Path) -> None:
    """As before device models: a record written without one is refused under another stack, used under its own."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    rewritten(path, device_model=None, device_id=older_numpy(client.device_id))
    with pytest.raises(tk.RecordMismatch, match=r"measured on device .*does not say its device model"):
        tk.Record.load_verified(path, tunables, client)
    rewritten(path, device_id=client.device_id)
    record = tk.Record.load_verified(path, tunables, client)
    assert record.warnings == ()
    # Its exact device id is the client's: the record learns the model, and keeps it when saved.
    record.save(path)
    assert json.loads(path.read_text())["device_model"] == client.device_model


def test_a_device_id_given_as_a_string_takes_only_the_exact_id(tmp_path: Path) -> None:
    """The str form is unchanged: without the client, its model is unknown, so another stack is refused."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    assert tk.Record.load_verified(path, tunables, client.device_id).warnings == ()
    rewritten(path, device_id=older_numpy(client.device_id))
    with pytest.raises(tk.RecordMismatch, match=r"pass the running client, which says its model, instead"):
        tk.Record.load_verified(path, tunables, client.device_id)


def test_seed_goes_to_the_running_devices_tuner_and_refuses_another(tmp_path: Path) -> None:
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    measured_on = older_numpy(client.device_id)
    rewritten(path, device_id=measured_on)
    record = tk.Record.load_verified(path, tunables, client)
    local: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale")
    assert record.seed(local.tuner(client.device_id), tunables, Shape) == 1
    with pytest.raises(tk.RecordMismatch, match=r"this tuner runs on 'cpu:elsewhere'"):
        record.seed(local.tuner("cpu:elsewhere"), tunables, Shape)
    # Loaded without verifying, the record knows no running device: another stack's tuner is refused, saying how.
    with pytest.raises(
        tk.RecordMismatch,
        match=r"verify this one with the running client first \(tk.Record.load_verified\(path, tunables, client",
    ):
        tk.Record.load(path).seed(local.tuner(client.device_id), tunables, Shape)


def test_a_plain_load_seeded_for_another_device_id_says_why_the_running_one_tunes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: seed of a plain load filled the record's device's tuner; the running device re-tuned silently."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    ran: list[int] = []
    _, tunables = committed_on_cpu(path, client, ran)
    measured_on = older_numpy(client.device_id)
    rewritten(path, device_id=measured_on)
    decisions: list[tk.AutotuneRecord] = []
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale", sinks=[decisions.append])
    assert tk.Record.load(path).seed(production, tunables, Shape) == 1
    x = np.ones(1000, np.float32)
    with caplog.at_level("WARNING", logger="tunekit"):
        production.execute(client.device_id, client, tunables, (x,))
        production.execute(client.device_id, client, tunables, (x,))
    said = [r.getMessage() for r in caplog.records if "seeded into it" in r.getMessage()]
    assert len(said) == 1, "said once, at the first call on the device"
    assert measured_on in said[0] and client.device_id in said[0] and "tuned here" in said[0]
    assert "tk.Record.load_verified(path, tunables, client" in said[0]
    assert [d.decision for d in decisions] == ["tuned"]
    # Verified with the client, the same record serves the running device: nothing tuned, nothing to say.
    caplog.clear()
    decisions.clear()
    verified: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale", sinks=[decisions.append])
    tk.Record.load_verified(path, tunables, client).seed(verified, tunables, Shape)
    with caplog.at_level("WARNING", logger="tunekit"):
        verified.execute(client.device_id, client, tunables, (x,))
    assert decisions == [] and not [r for r in caplog.records if "seeded into it" in r.getMessage()]


def test_a_plain_load_seeded_after_the_tuner_ran_on_another_device_id_says_why_it_tunes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: seeded into a tuner that had already run on the device, a plain load's miss tuned silently."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    measured_on = older_numpy(client.device_id)
    rewritten(path, device_id=measured_on)
    decisions: list[tk.AutotuneRecord] = []
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale", sinks=[decisions.append])
    with caplog.at_level("WARNING", logger="tunekit"):
        production.execute(client.device_id, client, tunables, (np.ones(500, np.float32),))
    assert not [r for r in caplog.records if r.name != "tunekit.doubt"], "nothing seeded yet, nothing to say"
    assert tk.Record.load(path).seed(production, tunables, Shape) == 1
    with caplog.at_level("WARNING", logger="tunekit"):
        production.execute(client.device_id, client, tunables, (np.ones(1000, np.float32),))
        production.execute(client.device_id, client, tunables, (np.ones(2000, np.float32),))
    said = [r.getMessage() for r in caplog.records if "seeded into it" in r.getMessage()]
    assert len(said) == 1, "said once, at the device's first key tuned after the seed"
    assert measured_on in said[0] and client.device_id in said[0] and "tuned here" in said[0]
    assert "tk.Record.load_verified(path, tunables, client" in said[0]
    assert [d.decision for d in decisions] == ["tuned", "tuned", "tuned"]


def test_a_plain_load_of_another_device_model_says_to_commit_one_measured_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    rewritten(path, device_id="cpu:Other CPU:numpy-2", device_model="cpu:Other CPU")
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale")
    tk.Record.load(path).seed(production, tunables, Shape)
    with caplog.at_level("WARNING", logger="tunekit"):
        production.execute(client.device_id, client, tunables, (np.ones(1000, np.float32),))
    (said,) = [r.getMessage() for r in caplog.records if "seeded into it" in r.getMessage()]
    assert "another device model ('cpu:Other CPU'" in said and "commit a record measured on this one" in said
    assert "load_verified" not in said


def test_a_plain_load_seeded_for_the_running_device_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    decisions: list[tk.AutotuneRecord] = []
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("scale", sinks=[decisions.append])
    tk.Record.load(path).seed(production, tunables, Shape)
    with caplog.at_level("WARNING", logger="tunekit"):
        production.execute(client.device_id, client, tunables, (np.ones(1000, np.float32),))
    assert decisions == [] and not [r for r in caplog.records if r.name != "tunekit.doubt"]


class _NoModel(CpuClient):
    @property
    def device_model(self) -> str:
        return ""


def test_a_client_with_an_empty_device_model_is_refused(tmp_path: Path) -> None:
    """An empty model would match every other client's empty one: said, not compared."""
    client = CpuClient()
    path = tmp_path / "scale.json"
    _, tunables = committed_on_cpu(path, client, [])
    with pytest.raises(TypeError, match=r"the client's device_model must be a non-empty str, got '' from _NoModel"):
        tk.Record.load_verified(path, tunables, _NoModel())
    with pytest.raises(TypeError, match=r"load_verified\(device_id=...\) takes the client .* got 3"):
        tk.Record.load_verified(path, tunables, 3)  # type: ignore[arg-type]


FILL = """
__kernel void fill(__global float* y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = (float)(BLOCK);
}
"""


@pytest.mark.slow
@pytest.mark.opencl
def test_an_opencl_record_of_another_driver_is_used_and_another_device_refused(tmp_path: Path) -> None:
    """Regression: a driver upgrade changed the OpenCL device id, and the committed record was refused."""
    cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

    client = OpenCLClient(flush_cache=False, compile_in="thread")
    assert isinstance(client, SupportsDeviceModel)
    device = client.device
    assert client.device_model == f"opencl:{device.platform.name}|{device.name}"
    template = KernelTemplate(FILL, "fill", {"BLOCK": [8, 16, 32]}, geometry=lambda c, k: ((k.n,), (int(c.BLOCK),)))
    tunables = template.tunable_set(client, key=lambda y, n: Shape(n=int(n)))
    y = cla.zeros(client.queue, 64, np.float32)

    def build(config: tk.Config) -> Any:
        index = tunables.index_of(template.name_of(config))
        assert index is not None
        return tunables.tunables[index].fn

    record = tk.Record.for_tunables("fill", client, tunables)
    entry = record.add(
        Shape(n=64), tk.search(template.space, build, client, (y, np.int32(64)), tuner="fill", key=Shape(n=64))
    )
    path = tmp_path / "fill.json"
    record.save(path)
    # As the next driver release writes the id: the platform's and driver's versions moved, the hardware did not.
    upgraded = client.device_id.replace(f"driver {device.driver_version}", "driver 99.1").replace(
        device.platform.version, "OpenCL 3.0 PoCL 99.1 Linux"
    )
    assert upgraded != client.device_id
    rewritten(path, device_id=upgraded)
    verified = tk.Record.load_verified(path, tunables, client, tuner="fill")
    assert len(verified.warnings) == 1 and upgraded in verified.warnings[0]
    decisions: list[tk.AutotuneRecord] = []
    production: tk.LocalTuner[Shape, Any] = tk.LocalTuner("fill", sinks=[decisions.append])
    assert verified.seed(production, tunables, Shape) == 1
    y.fill(0)
    production.execute(client.device_id, client, tunables, (y, np.int32(64)))
    client.sync()
    assert entry.config is not None
    assert decisions == [] and set(y.get().tolist()) == {float(entry.config["BLOCK"])}, "the committed winner ran"
    # Another GPU on the same platform is another model: refused, naming both.
    rewritten(path, device_model=f"opencl:{device.platform.name}|Some Other GPU")
    with pytest.raises(tk.RecordMismatch, match=r"measured on device model .*Some Other GPU.* this is model"):
        tk.Record.load_verified(path, tunables, client)
