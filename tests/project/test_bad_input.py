"""Bad input from the caller: each mistake is a clear error naming the tuner, the set and the cause."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest

import tunekit as tk
from tunekit._observe.sinks import CallbackSink
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class RowsKey:
    rows: Annotated[int, tk.Anchor()]
    cols: Annotated[int, tk.Anchor()]


@tk.autotune_key
class LabelKey:
    label: str


def _row_key(x: np.ndarray) -> RowsKey:
    return RowsKey(rows=x.shape[0], cols=x.shape[1])


def _sum_set() -> tk.TunableSet[RowsKey, np.ndarray]:
    return tk.TunableSet(key=_row_key).with_tunables(
        [tk.Tunable("np_sum", lambda x: x.sum(axis=1)), tk.Tunable("einsum", lambda x: np.einsum("ij->i", x))]
    )


def test_inputs_of_the_wrong_shape_name_the_tuner_the_set_and_the_inputs() -> None:
    tuner: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("row_sum")
    with pytest.raises(IndexError) as info:
        tuner.execute(CLIENT.device_id, CLIENT, _sum_set(), (np.ones(8, np.float32),))
    note = "\n".join(info.value.__notes__)
    assert "tuner 'row_sum'" in note and "TunableSet(np_sum, einsum)" in note
    assert "_row_key" in note and "ndarray(shape=(8,), dtype=float32)" in note


@pytest.mark.parametrize(
    "wrong", [[tk.Tunable("np_sum", np.sum)], types.SimpleNamespace(key=_row_key)], ids=["list", "has_key"]
)
def test_something_else_than_a_tunable_set_is_refused_naming_the_fix(wrong: object) -> None:
    # Regression: a list of tunables failed as "'list' object has no attribute 'describe_key_fn'".
    tuner: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("row_sum")
    with pytest.raises(TypeError, match=r"tuner 'row_sum': execute\(\) takes the tk.TunableSet that init\(\) returned"):
        tuner.execute(CLIENT.device_id, CLIENT, wrong, (np.ones((4, 4)),))  # type: ignore[arg-type]


@tk.autotune_key
class ScaleKey:
    scale: float


def test_a_key_field_that_is_not_json_is_refused_before_tuning() -> None:
    tuner: tk.LocalTuner[ScaleKey, None] = tk.LocalTuner("scale")
    ran: list[int] = []
    tunables = tk.TunableSet(key=lambda s: ScaleKey(scale=s)).with_tunable(tk.Tunable("a", lambda s: ran.append(1)))
    with pytest.raises(TypeError) as info:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (float("nan"),))
    # Refused by the key as it is built (NaN is no JSON), so named with the key generator that built it.
    assert "field scale expects a finite float" in str(info.value)
    assert "key generator" in "\n".join(info.value.__notes__)
    assert "tuner 'scale' TunableSet(a)" in "\n".join(info.value.__notes__)
    assert ran == [], "nothing may run for a key that cannot be stored"


@pytest.mark.parametrize("label", [b"\xff bytes", ["a", "list"]])
def test_a_key_field_of_the_wrong_type_is_refused_by_the_key_naming_the_tuner(label: object) -> None:
    """Bytes reached the JSON check and a list the hash check; now the key refuses them when built."""
    tuner: tk.LocalTuner[LabelKey, None] = tk.LocalTuner("label")
    ran: list[int] = []
    tunables = tk.TunableSet(key=lambda s: LabelKey(label=s)).with_tunable(tk.Tunable("a", lambda s: ran.append(1)))
    assert tuner.execute(CLIENT.device_id, CLIENT, tunables, ("ok",)) is None
    runs = len(ran)
    with pytest.raises(
        TypeError, match=f"autotune key LabelKey: field label expects str, got {type(label).__name__}"
    ) as info:
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (label,))
    assert "key generator" in "\n".join(info.value.__notes__)
    assert "tuner 'label' TunableSet(a)" in "\n".join(info.value.__notes__)
    assert len(ran) == runs, "nothing may run for a refused key"


def test_a_raising_input_generator_names_the_tuner_and_the_set() -> None:
    tuner: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("gen")

    def generator(key: RowsKey, x: np.ndarray) -> tuple[np.ndarray]:
        raise MemoryError("cannot allocate the benchmark buffer")

    tunables = tk.TunableSet(key=_row_key, inputs=generator).with_tunable(tk.Tunable("np_sum", lambda x: x.sum(1)))
    with pytest.raises(tk.TunekitError, match=r"tuner 'gen': the input generator raised MemoryError: cannot alloc"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones((4, 4)),))


def test_an_input_generator_that_cannot_take_the_call_says_how_it_is_called() -> None:
    """Regression: `inputs=lambda key: ...` said only "<lambda>() takes 1 positional argument but 2 were given"."""
    tuner: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("gen_arity")
    tunables = tk.TunableSet(key=_row_key, inputs=lambda key: (np.ones((4, 4)),)).with_tunable(
        tk.Tunable("np_sum", lambda x: x.sum(1))
    )
    with pytest.raises(
        tk.TunekitError,
        match=r"takes 1 positional argument but 2 were given; it is called as inputs\(key, \*arguments\), with the "
        r"key and the 1 argument given to execute",
    ):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones((4, 4)),))


def test_long_sets_are_named_briefly() -> None:
    tunables = tk.TunableSet(key=_row_key).with_tunables([tk.Tunable(f"c{i}", len) for i in range(100)])
    assert repr(tunables) == "TunableSet(c0, c1, c2, c3, c4, c5, c6, c7, ... 92 more)"


DETERMINISM = textwrap.dedent(
    """
    import json, sys, time
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class K:
        n: int

    def candidate(name, seconds):
        def run(n):
            time.sleep(seconds)
            chosen.append(name)
        return tk.Tunable(name, run)

    client = CpuClient()
    tuner = tk.LocalTuner("pinned")
    chosen = []
    tunables = tk.TunableSet(key=lambda n: K(n=n)).with_tunables(
        [candidate("a", 0.02), candidate("b", 0.02), candidate("c", 0.0)]  # a wide gap: the machine may be loaded
    )
    if sys.argv[1] == "pin":  # the committed record, verified against these candidates and this device
        tk.Record.load_verified(sys.argv[2], tunables, client.device_id).seed(tuner, tunables, K)
    tuner.execute(client.device_id, client, tunables, (1,))
    print(json.dumps(chosen[-1]))
    """
)


def _winners(mode: str, processes: int, record: Path | None = None) -> list[str]:
    procs = [
        subprocess.Popen([sys.executable, "-c", DETERMINISM, mode, str(record)], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return [json.loads(line) for line in outputs]


@pytest.mark.slow
@pytest.mark.subprocess
def test_autotune_off_gives_the_same_winner_in_every_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _winners("tune", 1) == ["c"]  # the shared cache now holds c, measured fastest
    same_candidates = tk.TunableSet(key=lambda n: n).with_tunables([tk.Tunable(n, len) for n in ("a", "b", "c")])
    record = tk.Record("pinned", CLIENT.device_id, same_candidates.checksum())
    record.entries['{"n":1}'] = tk.RecordEntry(key={"n": 1}, winner="b", ranking=["b", "c"], median_ns=1.0, samples=10)
    record.save(tmp_path / "pinned.json")
    monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")
    assert _winners("pin", 4, tmp_path / "pinned.json") == ["b"] * 4  # the committed record beats the cache
    assert _winners("plan", 4) == ["a"] * 4  # nothing pinned: plan order, never a measurement


@tk.autotune_key
class LenKey:
    n: int


def _in_place(x: np.ndarray, out: np.ndarray) -> None:
    np.multiply(x, 2, out=out)


def _check_records(tunables: tk.TunableSet[LenKey, object], name: str) -> tk.AutotuneRecord:
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[LenKey, object] = tk.LocalTuner(name, sinks=[CallbackSink(records.append)])
    tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.arange(4.0), np.zeros(4)))
    (record,) = records
    return record


def test_a_candidate_returning_none_where_an_output_is_expected_is_told_why() -> None:
    base = tk.TunableSet(key=lambda x, out: LenKey(n=len(x))).with_tunables(
        [tk.Tunable("in_place", _in_place), tk.Tunable("returns", lambda x, out: x * 2)]
    )
    for name, tunables in (("with-fn", base.with_reference(lambda x, out: x * 2)), ("baseline", base.with_reference())):
        record = _check_records(tunables, name)
        in_place = next(c for c in record.candidates if c.name == "in_place")
        assert in_place.stage == "check"
        assert in_place.error is not None and in_place.error.startswith("returned None where an output was expected")
        assert "outputs=[positions]" in in_place.error
        assert record.winner == "returns", "a None must not become the baseline the others are held to"


def test_a_reference_returning_none_stops_the_tune_naming_the_fix() -> None:
    tunables = (
        tk.TunableSet(key=lambda x, out: LenKey(n=len(x)))
        .with_tunables([tk.Tunable("returns", lambda x, out: x * 2)])
        .with_reference(_in_place)
    )
    tuner: tk.LocalTuner[LenKey, object] = tk.LocalTuner("bad-reference")
    # The reference is at fault, not a candidate: the tune stops with the tuner named.
    with pytest.raises(tk.TunekitError, match=r"(?s)tuner 'bad-reference'.*the reference returned None"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.arange(4.0), np.zeros(4)))
