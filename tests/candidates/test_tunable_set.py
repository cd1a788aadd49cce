"""TunableSet: building sets, appending tunables, immutability."""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._candidates.tunable_set import TunableSet
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class Key:
    n: int


def _key() -> Key:
    return Key(1)


def test_from_space_builds_a_large_set_with_a_few_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """from_space copied the whole set once per configuration: quadratic (10^5 points took 40 s)."""
    copies = 0
    copy = TunableSet._copy

    def counting_copy(self: TunableSet[Any, Any]) -> TunableSet[Any, Any]:
        nonlocal copies
        copies += 1
        return copy(self)

    monkeypatch.setattr(TunableSet, "_copy", counting_copy)
    space = tk.Space(A=range(200), B=range(100))
    tunables = tk.TunableSet.from_space(space, lambda c: lambda: None, key=_key)
    assert copies <= 4
    assert len(tunables.tunables) == 20_000
    assert tunables.names == tuple(c.name for c in space)
    assert tunables.index_of("A=199,B=99") == 19_999
    assert tunables.extras["space"] is space


def test_with_tunables_appends_in_order_and_leaves_the_original_alone() -> None:
    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", lambda: 1))
    grown = base.with_tunables([tk.Tunable("b", lambda: 2), tk.Tunable("c", lambda: 3)])
    assert grown.names == ("a", "b", "c")
    assert [grown.index_of(n) for n in grown.names] == [0, 1, 2]
    assert base.names == ("a",) and base.index_of("b") is None


def test_with_tunables_refuses_duplicates_and_non_tunables() -> None:
    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", lambda: 1))
    with pytest.raises(ValueError, match="duplicate tunable name 'a'"):
        base.with_tunables([tk.Tunable("b", lambda: 2), tk.Tunable("a", lambda: 3)])
    with pytest.raises(ValueError, match="duplicate tunable name 'b'"):
        base.with_tunables([tk.Tunable("b", lambda: 2), tk.Tunable("b", lambda: 3)])
    with pytest.raises(TypeError, match="takes a tk.Tunable"):
        base.with_tunable(lambda: 1)  # type: ignore[arg-type]
    assert base.names == ("a",) and base.index_of("b") is None
    # Regression: one Tunable instead of a list failed as "'Tunable' object is not iterable".
    with pytest.raises(TypeError, match=r"with_tunables\(\) takes a list of tk.Tunable; .* use with_tunable"):
        base.with_tunables(tk.Tunable("c", lambda: 3))  # type: ignore[arg-type]


def test_with_short_circuit_takes_only_a_bool() -> None:
    # bool("false") is True: the string switched the short circuit on.
    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", lambda: 1))
    with pytest.raises(TypeError, match=r"with_short_circuit\(\) takes True or False, got 'false'"):
        base.with_short_circuit("false")  # type: ignore[arg-type]
    assert base.with_short_circuit(False).short_circuit is False


def test_a_checksum_extra_without_a_stable_text_is_refused() -> None:
    # object()'s text holds its address, so the checksum changed every process and every key was re-tuned.
    base = tk.TunableSet(key=_key).with_tunable(tk.Tunable("a", lambda: 1))
    with pytest.raises(TypeError, match=r"with_extra\('checksum:model', ...\): a checksum extra must be a str.*object"):
        base.with_extra("checksum:model", object())
    assert base.with_extra("checksum:model", "v2").checksum() != base.with_extra("checksum:model", "v3").checksum()
    assert base.with_extra("anything", object()).checksum() == base.checksum()  # not hashed: any value


def test_a_tunable_version_must_be_a_str() -> None:
    # It is hashed as text: version=3 and version="3" were the same version, an object a new one per process.
    with pytest.raises(TypeError, match=r"Tunable 'a': version must be a str, got 3; pass version='3'"):
        tk.Tunable("a", lambda: 1, version=3)  # type: ignore[arg-type]


def test_from_space_refuses_a_space_too_big_to_walk() -> None:
    """One tunable per configuration of 10^12 points walked the product (weeks) before running out of memory."""
    space = tk.Space(restrict=lambda c: c.A % 2 == 0, **{name: range(1000) for name in "ABCD"})
    with pytest.raises(ValueError, match=r"from_space\(\) makes one tunable per valid configuration.*tk.search"):
        tk.TunableSet.from_space(space, lambda c: lambda: None, key=_key)


def test_from_space_refuses_a_space_whose_restrictions_reject_everything() -> None:
    """An empty space gave an empty set, which failed at its first execute saying to add tunables with with_tunable."""
    space = tk.Space(BLOCK=[64, 128], restrict=[lambda c: c.BLOCK >= 128, lambda c: c.BLOCK < 128])
    with pytest.raises(ValueError, match=r"from_space\(\): the space has no valid configuration.*all 2 points"):
        tk.TunableSet.from_space(space, lambda c: lambda: None, key=_key)


_CHECKSUM_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import tunekit as tk
import kernels
print(tk.TunableSet.from_space(tk.Space(BLOCK=[1, 2, 4]), kernels.build, key=lambda n: n).checksum())
"""


def _checksum_in_a_new_process(folder: Path, module_text: str) -> str:
    (folder / "kernels.py").write_text(module_text)
    done = subprocess.run(
        [sys.executable, "-c", _CHECKSUM_SCRIPT, str(folder)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(tk.__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
@pytest.mark.subprocess
def test_from_space_checksum_follows_the_build_code_across_processes(tmp_path: Path) -> None:
    """An edited build kept the set's checksum: the old kernels' cached winners, trial logs and records were re-used."""
    original = (
        "FACTOR = 2\n\n"
        "def _scale(x, block):\n    return x * block * FACTOR\n\n"
        "def build(config):\n    return lambda x: _scale(x, config.BLOCK)\n"
    )
    first = _checksum_in_a_new_process(tmp_path, original)
    # Comments and layout are not the code: the same checksum in a new process.
    relaid = original.replace("def build(config):\n", "# the kernel\ndef build(config):  # one per BLOCK\n\n")
    assert _checksum_in_a_new_process(tmp_path, relaid) == first
    assert _checksum_in_a_new_process(tmp_path, original.replace("x * block", "x + block")) != first  # a helper
    assert _checksum_in_a_new_process(tmp_path, original.replace("config.BLOCK)", "config.BLOCK + 1)")) != first
    # Values read are not the code (an unseeded array or a path would differ per process): bump version= for those.
    assert _checksum_in_a_new_process(tmp_path, original.replace("FACTOR = 2", "FACTOR = 3")) == first


@pytest.mark.subprocess
def test_from_space_checksum_is_the_same_in_every_process_and_checkout_running_the_same_build(tmp_path: Path) -> None:
    """A build reading an unseeded array or __file__ got a new checksum per process or per clone: always re-tuned."""
    module = (
        "import os\nimport numpy as np\n\n"
        "WEIGHTS = np.random.rand(8)\nHERE = os.path.dirname(__file__)\n\n"
        "def build(config):\n"
        "    source = os.path.join(os.path.dirname(__file__), 'k.cl')\n"
        "    return lambda x: (x * WEIGHTS[config.BLOCK], source, HERE)\n"
    )
    first, second = tmp_path / "clone1", tmp_path / "clone2"
    first.mkdir()
    second.mkdir()
    assert _checksum_in_a_new_process(first, module) == _checksum_in_a_new_process(second, module)


def test_from_space_checksum_of_a_bound_build_ignores_the_objects_changing_state() -> None:
    """A client's method as build: its clock and counters move as it runs, and each later set re-tuned."""

    class Kernels:
        def __init__(self) -> None:
            self.calls = 0

        def build(self, config: tk.Config) -> Any:
            self.calls += 1
            return lambda: config.A

        def compile(self, source: str, config: tk.Config) -> Any:
            self.calls += 1
            return lambda: (source, config.A)

    kernels = Kernels()
    space = tk.Space(A=[1, 2])
    before = TunableSet.from_space(space, kernels.build, key=_key).checksum()
    partial_before = TunableSet.from_space(space, functools.partial(kernels.compile, "src"), key=_key).checksum()
    kernels.build(space.config(A=1))
    assert TunableSet.from_space(space, kernels.build, key=_key).checksum() == before
    assert (
        TunableSet.from_space(space, functools.partial(kernels.compile, "src"), key=_key).checksum() == partial_before
    )
    assert TunableSet.from_space(space, functools.partial(kernels.build), key=_key).checksum() != partial_before


@tk.autotune_key
class Rows:
    n: int


def _build_refusing_two(config: tk.Config) -> Any:
    if config.B == 2:
        raise ValueError("B=2 does not build")
    return lambda x: x * config.B


@pytest.mark.subprocess
@pytest.mark.parametrize("isolation", ["none", "process"])
@pytest.mark.parametrize("checked", [False, True])
def test_a_from_space_build_that_raises_is_a_compile_failure(isolation: str, checked: bool) -> None:
    """build(config) raising was reported as stage 'run' in the record and NoValidKernelFound, not 'compile'."""
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[Rows, Any] = tk.LocalTuner(f"lazy-{isolation}-{checked}", sinks=[records.append])
    tunables = tk.TunableSet.from_space(tk.Space(B=[1, 2, 3]), _build_refusing_two, key=lambda x: Rows(len(x)))
    tunables = tunables.with_isolation("process") if isolation == "process" else tunables
    # With a reference, the build first runs in the correctness check, not in the timed runs.
    tunables = tunables.with_reference(lambda x: x * 3, rtol=1e-9) if checked else tunables
    client = CpuClient()
    tuner.execute(client.device_id, client, tunables, (np.ones(4),))
    failed = [(c.name, c.stage, c.error) for c in records[-1].candidates if c.status == "failed"]
    assert ("B=2", "compile", "ValueError: B=2 does not build") in failed, failed


def test_a_from_space_build_that_raises_outside_a_tune_raises_its_own_error() -> None:
    """The compile stage is a tune's verdict: a cached winner launched by the caller still raises the build's error."""
    tunables = tk.TunableSet.from_space(tk.Space(B=[2]), _build_refusing_two, key=lambda x: Rows(len(x)))
    with pytest.raises(ValueError, match="B=2 does not build"):
        tunables.tunables[0].fn(np.ones(4))


@pytest.mark.parametrize("restricted", [False, True])
def test_from_space_names_and_builds_every_configuration_as_the_space_walks_it(restricted: bool) -> None:
    """from_space names its tunables from texts made once per value: they must still be config.name, in walk order."""
    space = tk.Space(
        A=[1, 2.5, -3],
        B=["x", "y"],
        C=[True, False],
        D=tk.pow2(1, 8),
        restrict=(lambda c: c.D * c.A > 1) if restricted else None,
    )
    tunables = tk.TunableSet.from_space(space, _build_refusing_two, key=_key)
    configs = list(space)
    assert tunables.names == tuple(c.name for c in configs)
    assert [t.fn.config for t in tunables.tunables] == configs  # type: ignore[attr-defined]
    assert [tunables.index_of(c.name) for c in configs] == list(range(len(configs)))
    with pytest.raises(ValueError, match="duplicate tunable name"):
        tunables.with_tunable(tk.Tunable(configs[0].name, lambda: None))
    assert tunables.extras["space"] is space and tunables.checksum() == tunables.with_extra("x", 1).checksum()


def test_from_space_leaves_the_garbage_collector_as_it_found_it() -> None:
    """from_space pauses the collector while it builds the set; a restriction that raises must not leave it off."""

    def broken(c: tk.Config) -> bool:
        raise RuntimeError("no")

    assert gc.isenabled()
    tk.TunableSet.from_space(tk.Space(A=[1, 2]), _build_refusing_two, key=_key)
    assert gc.isenabled()
    with pytest.raises(ValueError, match="raised RuntimeError"):
        tk.TunableSet.from_space(tk.Space(A=[1, 2], restrict=broken), _build_refusing_two, key=_key)
    assert gc.isenabled()
    gc.disable()
    try:
        tk.TunableSet.from_space(tk.Space(A=[1, 2]), _build_refusing_two, key=_key)
        assert not gc.isenabled(), "a caller's disabled collector was switched on"
    finally:
        gc.enable()


def test_from_space_refuses_a_key_without_an_autotune_key_before_walking_the_space() -> None:
    """A key generator returning no autotune key was refused only after the whole space was walked."""
    walked: list[tk.Config] = []

    def counting(c: tk.Config) -> bool:
        walked.append(c)
        return True

    def plain() -> int:
        return 1

    with pytest.raises(TypeError, match="not an @tk.autotune_key class"):
        tk.TunableSet.from_space(tk.Space(A=[1, 2], restrict=counting), _build_refusing_two, key=plain)
    assert walked == []


_SCRIPT_WITH_FACTORY = """
import numpy as np
import tunekit as tk
from tunekit_backends.cpu import CpuClient

def build_worker(key, *, device_id, locator):
    return CpuClient(), make_set(), (np.ones(key["n"]),)

def make_set():
    return tk.TunableSet(key=lambda x: len(x)).with_tunable(tk.Tunable("sum", lambda x: float(x.sum())))

make_set().with_isolation("process", timeout_s=5, worker=build_worker)
"""


@pytest.mark.subprocess
def test_a_worker_factory_in_the_script_being_run_is_refused_saying_where_to_move_it(tmp_path: Path) -> None:
    """Regression: the docs' factory snippet pasted into a script (so defined in __main__) was refused without
    saying what to do about it: the docs' own test ran the snippet in an importable module."""
    script = tmp_path / "tune.py"
    script.write_text(_SCRIPT_WITH_FACTORY)
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(tk.__file__).parent.parent)},
    )
    assert done.returncode == 1
    advice = (
        "the worker process imports it by name; build_worker is defined in the script being run (__main__): "
        "move it to a module of its own beside the script (e.g. workers.py) and import it from there "
        "(from workers import build_worker)"
    )
    assert done.stderr.strip().splitlines()[-1].endswith(advice), done.stderr
