"""LocalTuner.init: one set per call site and per what its factory captured (client, dtype), never a stale one."""

from __future__ import annotations

import functools
import gc
import logging
import types
import weakref
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._tune.built_sets import MAX_SETS
from tunekit_backends.cpu import CpuClient
from tunekit_backends.simulated import SimulatedClient

CPU = CpuClient()


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _key(*inputs: Any) -> NKey:
    return NKey(n=len(inputs[0]) if hasattr(inputs[0], "__len__") else 1)


def _device_set(client: SimulatedClient) -> tk.TunableSet[NKey, None]:
    """Candidates bound to ``client``, as an OpenCL set binds its kernels to the client's queue."""
    return (
        tk.TunableSet(key=_key)
        .with_tunable(tk.Tunable("fast", client.kernel(1_000)))
        .with_tunable(tk.Tunable("slow", client.kernel(9_000)))
    )


def test_each_client_gets_the_set_built_for_it() -> None:
    # Regression: init kept sets by the factory's code alone, so gpu:1's calls ran the kernels bound to gpu:0.
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("two_devices")

    def op(client: SimulatedClient, x: np.ndarray) -> None:
        return tuner.execute(client.device_id, client, tuner.init(lambda: _device_set(client)), (x,))

    gpu0, gpu1 = SimulatedClient(device_id="gpu:0"), SimulatedClient(device_id="gpu:1")
    x = np.ones(8)
    for caller, other in ((gpu0, gpu1), (gpu1, gpu0), (gpu0, gpu1), (gpu1, gpu0)):
        before = (caller.busy_ns, other.busy_ns)
        op(caller, x)
        assert caller.busy_ns > before[0] and other.busy_ns == before[1]
    assert tuner.init(lambda: _device_set(gpu0)) is not tuner.init(lambda: _device_set(gpu1))
    assert tuner.tuner("gpu:0").winners_names() == tuner.tuner("gpu:1").winners_names() == ["fast"]


def test_a_factory_capturing_another_value_builds_another_set_and_equal_values_share_it() -> None:
    # Regression: a factory capturing the factor built the set once, so every later factor scaled by the first one.
    tuner: tk.LocalTuner[NKey, np.ndarray] = tk.LocalTuner("captured_value")
    built: list[str] = []

    def make(dtype: str) -> tk.TunableSet[NKey, np.ndarray]:
        built.append(dtype)
        return tk.TunableSet(key=_key).with_tunable(tk.Tunable("cast", lambda x: x.astype(dtype)))

    def cast(x: np.ndarray, dtype: str) -> np.ndarray:
        return tuner.execute(CPU.device_id, CPU, tuner.init(lambda: make(dtype)), (x,))

    x = np.arange(4)
    assert cast(x, "float32").dtype == np.float32
    assert cast(x, "float64").dtype == np.float64
    assert cast(x, "".join(["float", "32"])).dtype == np.float32  # an equal str, not the same object
    assert built == ["float32", "float64"]


class _Builder:
    def __init__(self, client: SimulatedClient) -> None:
        self.client = client

    def build(self) -> tk.TunableSet[NKey, None]:
        return _device_set(self.client)


def test_bound_methods_and_partials_are_told_apart_by_what_they_bind() -> None:
    # Regression: a bound method was keyed by its function's code, and a partial by itself (one set kept per call).
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("bound")
    gpu0, gpu1 = SimulatedClient(device_id="gpu:0"), SimulatedClient(device_id="gpu:1")
    first, second = _Builder(gpu0), _Builder(gpu1)
    assert tuner.init(first.build) is tuner.init(first.build)
    assert tuner.init(first.build) is not tuner.init(second.build)
    assert tuner.init(functools.partial(_device_set, gpu0)) is tuner.init(functools.partial(_device_set, gpu0))
    assert tuner.init(functools.partial(_device_set, gpu0)) is not tuner.init(functools.partial(_device_set, gpu1))
    assert len(tuner._sets) == 4


def test_a_set_built_for_a_captured_object_is_forgotten_when_the_object_is() -> None:
    # A factory capturing the call's array builds a set per call: neither the sets nor the arrays may accumulate.
    tuner: tk.LocalTuner[NKey, np.ndarray] = tk.LocalTuner("per_call_capture")

    def twice(dtype: np.dtype[Any]) -> tk.TunableSet[NKey, np.ndarray]:
        return tk.TunableSet(key=_key).with_tunable(tk.Tunable(f"twice_{dtype}", lambda y: 2 * y))

    def op(x: np.ndarray) -> tuple[np.ndarray, tk.TunableSet[NKey, np.ndarray], tk.TunableSet[NKey, np.ndarray]]:
        dtype = x.dtype
        tunables = tuner.init(lambda: twice(dtype))
        return tuner.execute(CPU.device_id, CPU, tunables, (x,)), tunables, tuner.init(lambda: twice(x.dtype))

    once: list[weakref.ref[tk.TunableSet[NKey, np.ndarray]]] = []
    per_call: list[weakref.ref[tk.TunableSet[NKey, np.ndarray]]] = []
    for n in range(5):
        x = np.ones(n + 1)
        doubled, by_dtype, by_array = op(x)
        np.testing.assert_array_equal(doubled, 2 * x)
        once.append(weakref.ref(by_dtype))
        per_call.append(weakref.ref(by_array))
        del by_dtype, by_array, x
        gc.collect()
    # A captured dtype compares by value: one set for every call. The set built for each array went with it.
    assert once[0]() is not None and all(ref() is once[0]() for ref in once)
    assert all(ref() is None for ref in per_call)
    assert len(tuner._sets) == 1


def test_a_factory_capturing_something_new_at_every_call_is_bounded_and_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tuner: tk.LocalTuner[NKey, int] = tk.LocalTuner("unbounded")
    caplog.set_level(logging.WARNING, logger="tunekit.tuner")

    def op(n: int) -> None:
        shape = [n]  # a list: nothing tells when it is gone, so its set is held until pushed out
        tuner.init(lambda: tk.TunableSet(key=_key).with_tunable(tk.Tunable("n", lambda *_: shape[0])))

    for n in range(MAX_SETS + 10):
        op(n)
    assert len(tuner._sets) == MAX_SETS
    (warning,) = [r.getMessage() for r in caplog.records if "init() has built more than" in r.getMessage()]
    assert "captures values that differ from call to call (shape)" in warning and "test_built_sets.py:" in warning


def test_a_lambda_binding_the_client_as_a_default_is_told_apart_by_it() -> None:
    # The loop idiom lambda client=client: ... captures nothing; only its defaults name the client.
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("default_bound")
    gpu0, gpu1 = SimulatedClient(device_id="gpu:0"), SimulatedClient(device_id="gpu:1")
    sets = [tuner.init(lambda client=client: _device_set(client)) for client in (gpu0, gpu1, gpu0)]  # type: ignore[misc]
    assert sets[0] is sets[2] is not sets[1]
    assert [t.tunables[0].fn._client for t in sets] == [gpu0, gpu1, gpu0]  # type: ignore[attr-defined]


_BUILT: list[int] = []
PLAIN: tk.LocalTuner[NKey, None] = tk.LocalTuner("plain_index")


def _counted(tag: int = 0) -> tk.TunableSet[NKey, None]:
    _BUILT.append(tag)
    return tk.TunableSet(key=_key).with_tunable(tk.Tunable("only", lambda x: None))


def _plain_site() -> tk.TunableSet[NKey, None]:
    return PLAIN.init(lambda: _counted())  # noqa: PLW0108 - the user's idiom: a lambda capturing nothing


def test_a_capture_free_lambda_is_found_by_its_code_and_rebuilt_once_evicted_or_cleared() -> None:
    """init's hot path finds such a set by id() of its code: an evicted or cleared entry must not be found there."""
    PLAIN.clear()
    _BUILT.clear()
    first = _plain_site()
    assert _plain_site() is first and _BUILT == [0]  # found again, by its code
    (factory_code,) = [c for c in _plain_site.__code__.co_consts if isinstance(c, types.CodeType)]
    assert id(factory_code) in PLAIN._sets.plain  # through the hot path's index
    for i in range(1, MAX_SETS + 1):  # as many other sets, one per argument: the first is evicted
        PLAIN.init(functools.partial(_counted, i))
    assert len(_BUILT) == MAX_SETS + 1
    again = _plain_site()
    assert again is not first and len(_BUILT) == MAX_SETS + 2
    PLAIN.clear()
    assert _plain_site() is not again and len(_BUILT) == MAX_SETS + 3


_TEMPLATE = "def factory():\n    return lambda: make()\n"


def test_equal_lambdas_of_two_modules_made_from_one_template_build_each_its_own_set() -> None:
    """Regression: a capture-free lambda was known by its code, and code equality leaves out the file and the
    globals: ops/f32.py's ``lambda: make()`` found the set ops/f16.py's built, with f16's kernels."""
    tuner: tk.LocalTuner[NKey, str] = tk.LocalTuner("templated")
    factories = []
    for dtype in ("f16", "f32"):
        set_of_module = tk.TunableSet(key=_key).with_tunable(tk.Tunable(dtype, lambda x, d=dtype: d))
        namespace: dict[str, Any] = {"make": lambda s=set_of_module: s}
        exec(compile(_TEMPLATE, f"ops/{dtype}.py", "exec"), namespace)  # as importing the two modules does
        factories.append(namespace["factory"]())
    assert factories[0].__code__ == factories[1].__code__ and factories[0].__code__ is not factories[1].__code__
    f16, f32 = (tuner.init(factory) for factory in factories)
    assert f16.names == ("f16",) and f32.names == ("f32",)
    assert tuner.init(factories[1]) is f32 and tuner.init(factories[0]) is f16


def _sum_set(dtype: np.dtype) -> tk.TunableSet[NKey, float]:
    return tk.TunableSet(key=_key).with_tunable(tk.Tunable(f"sum_{dtype}", lambda a: float(a.sum())))


def test_a_factory_capturing_each_calls_array_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """An array captured per call died with its call and took its set along: a set built at every call, no warning."""
    tuner: tk.LocalTuner[NKey, float] = tk.LocalTuner("captures_the_input")
    caplog.set_level(logging.WARNING, logger="tunekit.tuner")

    def op(x: np.ndarray) -> float:
        tunables = tuner.init(lambda: _sum_set(x.dtype))  # captures x, where only its dtype matters
        return tuner.execute(CPU.device_id, CPU, tunables, (x,))

    for _ in range(MAX_SETS + 2):
        assert op(np.ones(4)) == 4.0
    assert len(tuner._sets) < MAX_SETS  # each array is gone after its call, and its set with it
    (warning,) = [r.getMessage() for r in caplog.records if "init() has built more than" in r.getMessage()]
    assert "captures values that differ from call to call (x)" in warning and "test_built_sets.py:" in warning
    caplog.clear()
    once: tk.LocalTuner[NKey, float] = tk.LocalTuner("captures_the_dtype")

    def op_dtype(x: np.ndarray) -> float:
        dtype = x.dtype  # what the set depends on, equal at every call
        return once.execute(CPU.device_id, CPU, once.init(lambda: _sum_set(dtype)), (x,))

    for _ in range(MAX_SETS + 2):
        assert op_dtype(np.ones(4)) == 4.0
    assert len(once._sets) == 1 and "init() has built" not in caplog.text


_BUILT_FOR: list[str] = []


class _Context:
    """What a factory captures by identity (an OpenCL context, say), which its set does not hold."""

    def __init__(self, name: str) -> None:
        self.name = name


def _counted_set(context: _Context) -> tk.TunableSet[NKey, None]:
    _BUILT_FOR.append(context.name)
    return tk.TunableSet(key=_key).with_tunable(tk.Tunable(context.name, lambda x: None))


def test_a_capturing_lambda_is_found_by_the_objects_it_captured_and_only_while_they_live() -> None:
    """init's hot path finds such a set by the ids of its code and captures: never another object's set."""
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("captured_index")
    _BUILT_FOR.clear()

    def site(context: _Context) -> tk.TunableSet[NKey, None]:
        return tuner.init(lambda: _counted_set(context))  # docs/concepts.md's idiom: a module-level builder

    a, b = _Context("a"), _Context("b")
    first = site(a)
    assert site(a) is first and site(b) is not first and site(b) is site(b)
    assert _BUILT_FOR == ["a", "b"] and len(tuner._sets.captured) == 2
    del b
    gc.collect()  # the entry watched b: it leaves the index with it, before b's id can be reused
    assert len(tuner._sets.captured) == 1
    for name in "cdefg":  # new objects, one of which may well reuse b's id: each gets its own set
        assert site(_Context(name)).names == (name,)
    assert site(a) is first and _BUILT_FOR == ["a", "b", "c", "d", "e", "f", "g"]
    tuner.clear()
    assert not tuner._sets.captured and site(a) is not first and _BUILT_FOR[-1] == "a"


def test_a_rebound_capture_finds_the_set_of_its_new_value() -> None:
    """The ids are read at every call: a captured variable assigned again is another key, not the old set."""
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("captured_rebound")
    client = SimulatedClient(device_id="gpu:0")
    factory = lambda: _device_set(client)  # noqa: E731 - one function object, its cell rebound below
    first = tuner.init(factory)
    assert tuner.init(factory) is first
    client = SimulatedClient(device_id="gpu:1")
    second = tuner.init(factory)
    assert second is not first and second.tunables[0].fn._client is client  # type: ignore[attr-defined]


def test_captures_that_may_change_keep_to_the_slow_path_and_evicted_sets_leave_the_index() -> None:
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner("captured_slow")
    gpu0 = SimulatedClient(device_id="gpu:0")
    helper = functools.partial(_device_set, gpu0)  # a partial's own arguments may differ from call to call
    first, again = (tuner.init(lambda: helper()) for _ in range(2))  # noqa: PLW0108 - a lambda capturing it
    assert first is again
    assert not tuner._sets.captured  # compared by what the partial binds, each time
    sizes = list(range(MAX_SETS + 5))
    kept = [
        tuner.init(lambda n=n: tk.TunableSet(key=_key).with_tunable(tk.Tunable("n", lambda x: None)))  # type: ignore[misc]
        for n in sizes
    ]
    assert len(kept) == len(sizes) and len(tuner._sets) == MAX_SETS
    assert len(tuner._sets.captured) == MAX_SETS  # the evicted sets left the index with their entries
