"""mypy catches a user's type errors through the generics of LocalTuner, TunableSet, Tunable and KernelTemplate."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

HEADER = textwrap.dedent(
    """
    from typing import Annotated
    import numpy as np
    import tunekit as tk
    from tunekit_backends.cpu import CpuClient

    @tk.autotune_key
    class SumKey:
        n: Annotated[int, tk.Anchor()]
        dtype: str

    TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")

    def good(x: np.ndarray) -> np.ndarray:
        return np.asarray(x.sum(axis=1))

    def bad(x: np.ndarray) -> int:
        return 1
    """
)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module's runs: a cold run re-reads numpy, pydantic and tunekit (~10 s), a warm one ~0.5 s.

    It starts empty each session, so it never holds an older tunekit; mypy re-checks any module whose source changed.
    """
    return tmp_path_factory.mktemp("mypy_cache")


def _mypy(tmp_path: Path, cache: Path, body: str, header: str = HEADER) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "user_code.py"
    source.write_text(header + textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(source)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


@pytest.mark.slow
def test_correct_user_code_passes(tmp_path: Path, mypy_cache: Path) -> None:
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
                .with_tunable(tk.Tunable("good", good))
                .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1))))
            return TUNER.execute(client.device_id, client, tunables, (x,))
        k: SumKey = SumKey(n=3, dtype="f")
        TUNER.clear(stored=True)  # what the docs' snippets call before a tune they show
        """,
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.slow
def test_a_dtype_field_given_an_arrays_dtype_type_checks(tmp_path: Path, mypy_cache: Path) -> None:
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        @tk.autotune_key
        class DtypeKey:
            n: Annotated[int, tk.Anchor()]
            dtype: np.dtype

        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = tk.TunableSet(key=lambda x: DtypeKey(n=x.shape[1], dtype=x.dtype)).with_tunable(
                tk.Tunable("good", good)
            )
            return tk.LocalTuner[DtypeKey, np.ndarray]("t").execute(client.device_id, client, tunables, (x,))

        def width(key: DtypeKey) -> int:
            return key.n * key.dtype.itemsize
        """,
    )
    assert result.returncode == 0, result.stdout


def _assert_only_these_errors(tmp_path: Path, result: subprocess.CompletedProcess[str], wrong: dict[str, str]) -> None:
    """mypy flagged each line holding a ``wrong`` call with its message, and no other line."""
    assert result.returncode == 1, result.stdout
    source = (tmp_path / "user_code.py").read_text().splitlines()
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    for call, message in wrong.items():
        line = 1 + next(i for i, text in enumerate(source) if call in text)
        assert any(f":{line}: error:" in error and message in error for error in errors), (call, result.stdout)
    assert len({error.split(":")[1] for error in errors}) == len(wrong), result.stdout  # the correct lines pass


def test_tunable_returning_wrong_type_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
                .with_tunable(tk.Tunable("bad", bad))
                .with_tunable(tk.Tunable("good", good)))
            return TUNER.execute(client.device_id, client, tunables, (x,))
        """,
    )
    assert result.returncode == 1
    assert 'incompatible type "Callable[[], TunableSet[SumKey, int | ndarray' in result.stdout


def test_wrong_key_type_and_wrong_field_are_type_errors(tmp_path: Path, mypy_cache: Path) -> None:
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        def width(x: np.ndarray) -> int:
            return int(x.shape[1])

        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(key=width).with_tunable(tk.Tunable("good", good)))
            return TUNER.execute(client.device_id, client, tunables, (x,))
        k = SumKey(n="3", dtype="f")
        """,
    )
    assert result.returncode == 1
    assert "TunableSet[int, ndarray" in result.stdout
    assert 'Argument "n" to "SumKey" has incompatible type "str"' in result.stdout


def test_a_bounds_function_sees_the_sets_key_type(tmp_path: Path, mypy_cache: Path) -> None:
    """with_bounds took (Any, tuple): a misspelt key field in the bounds lambda passed mypy and failed mid-tune."""
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        tunables = (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
            .with_tunable(tk.Tunable("good", good))
            .with_bounds(lambda key, inputs: tk.Bounds(tk.Work(compute_ops=key.n, bytes=4 * key.n)))
            .with_bounds(lambda key, inputs: tk.Bounds(tk.Work(compute_ops=key.rows, bytes=4 * key.n)))
        )
        """,
    )
    assert result.returncode == 1
    assert result.stdout.count("error:") == 1, result.stdout
    assert '"SumKey" has no attribute "rows"' in result.stdout


def test_a_client_timing_in_float_nanoseconds_is_a_client(tmp_path: Path, mypy_cache: Path) -> None:
    """Client.profile said tuple[T, int], where the docs and the tuner take any finite number of ns (an event timer's
    float): a typed client of one's own was refused by mypy at execute()."""
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        import time
        from collections.abc import Callable
        from typing import TypeVar

        T = TypeVar("T")

        class EventClient:
            @property
            def device_id(self) -> str:
                return "events:v1"

            def profile(self, run: Callable[[], T]) -> tuple[T, float]:
                start = time.perf_counter()
                output = run()
                return output, (time.perf_counter() - start) * 1e9

            def sync(self) -> None:
                pass

        def row_sum(client: EventClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
                .with_tunable(tk.Tunable("good", good)))
            return TUNER.execute(client.device_id, client, tunables, (x,))
        """,
    )
    assert result.returncode == 0, result.stdout


def test_from_space_with_a_lambda_key_type_checks_and_carries_the_key(tmp_path: Path, mypy_cache: Path) -> None:
    # from_space(..., key=lambda x: SumKey(...)) failed mypy with "Cannot infer type of lambda".
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        from collections.abc import Callable

        SPACE = tk.Space(AXIS=[1], SCALE=[1, 2])

        def build(c: tk.Config) -> Callable[[np.ndarray], np.ndarray]:
            return good

        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(
                lambda: tk.TunableSet.from_space(
                    SPACE, build, key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype))
                ).with_search(max_evals=2)
            )
            return TUNER.execute(client.device_id, client, tunables, (x,))

        wrong_key = TUNER.init(lambda: tk.TunableSet.from_space(SPACE, build, key=lambda x: int(x.shape[1])))
        """,
    )
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors, result.stdout
    assert all(":35: error:" in line for line in errors), result.stdout  # only the wrong key's line
    assert 'expected "SumKey"' in result.stdout


def test_a_search_results_best_needs_no_none_check(tmp_path: Path, mypy_cache: Path) -> None:
    # tk.search never returns a result without a winner, yet best was typed Trial | None, so the
    # documented `result.best.config` failed mypy --strict with 'Item "None" ... has no attribute'.
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        SPACE = tk.Space(SCALE=[1, 2])

        def best_name(client: CpuClient, x: np.ndarray) -> str:
            result = tk.search(SPACE, lambda c: good, client, (x,), tuner="row_sum", max_evals=2)
            return result.best.config.name

        def best_ms(client: CpuClient, x: np.ndarray) -> float:
            # Regression: best.score was typed float | None, so this correct line failed mypy --strict.
            return tk.search(SPACE, lambda c: good, client, (x,), tuner="row_sum", max_evals=2).best.score / 1e6
        """,
    )
    assert result.returncode == 0, result.stdout


def test_a_misspelt_strategy_name_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    # strategy was typed StrategyName | str, so mypy passed "bayes" and the search failed at run time.
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        SPACE = tk.Space(SCALE=[1, 2])
        CHOSEN: tk.StrategyName = "model_ils"

        def search(client: CpuClient, x: np.ndarray) -> None:
            tk.search(SPACE, lambda c: good, client, (x,), tuner="a", strategy=CHOSEN)
            tk.search(SPACE, lambda c: good, client, (x,), tuner="b", strategy="bayes")
            tk.TunableSet(key=lambda x: SumKey(n=1, dtype="f")).with_search(strategy="simulated_annealing")
        """,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, result.stdout
    assert "'bayes'" in errors[0] and "'simulated_annealing'" in errors[1], result.stdout


@pytest.mark.slow
def test_a_set_or_a_dict_of_values_is_a_type_error_and_ordered_values_are_not(tmp_path: Path, mypy_cache: Path) -> None:
    # Space's values were typed Iterable[ParamValue], so mypy passed tk.Space(A={1, 2}), refused at run time.
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        from tunekit_backends.opencl import KernelTemplate

        PARAMS: dict[str, tk.ParamValues] = {"N": np.arange(1, 5), "F": np.linspace(0.5, 1.0, 3)}
        ORDERED = tk.Space(
            L=[1, 2], T=("a", "b"), R=range(3), P=tk.pow2(64, 256), A=np.array([True, False]), G=iter([1, 2]),
            restrict=None,
            **PARAMS,
        )
        TEMPLATE = KernelTemplate("__kernel void k() {}", "k", {"B": np.arange(2)}, geometry=lambda c, k: ((1,), None))
        A_SET = tk.Space(A={1, 2})
        A_FROZENSET = tk.Space(A=frozenset({1, 2}))
        A_DICT = tk.Space(A={1: "one", 2: "two"})
        """,
    )
    source = (tmp_path / "user_code.py").read_text().splitlines()
    refused = [str(n) for n, line in enumerate(source, 1) if line.startswith(("A_SET", "A_FROZENSET", "A_DICT"))]
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == refused, result.stdout
    assert all('Argument "A" to "Space" has incompatible type' in line for line in errors), result.stdout


TEMPLATE_HEADER = textwrap.dedent(
    """
    from typing import Any
    import tunekit as tk
    from tunekit_backends.opencl import KernelTemplate, OpenCLClient

    @tk.autotune_key
    class MatKey:
        m: int

    @tk.autotune_key
    class VecKey:
        n: int

    SOURCE = "__kernel void k(__global float* x) { x[get_global_id(0)] = B; }"

    def mat_geometry(config: tk.Config, key: MatKey) -> tuple[tuple[int], None]:
        return (key.m,), None

    def mat_key(x: Any, m: Any) -> MatKey:
        return MatKey(m=int(m))

    def vec_key(x: Any, n: Any) -> VecKey:
        return VecKey(n=int(n))

    MAT = KernelTemplate(SOURCE, "k", {"B": [1, 2]}, geometry=mat_geometry)
    """
)


def test_a_kernel_template_carries_its_key_type(tmp_path: Path, mypy_cache: Path) -> None:
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        typed: KernelTemplate[MatKey] = MAT  # inferred from the geometry's key parameter

        def mat_set(client: OpenCLClient) -> tk.TunableSet[MatKey, Any]:
            return MAT.tunable_set(client, key=mat_key)

        VEC: KernelTemplate[VecKey] = KernelTemplate(
            SOURCE, "k", {"B": [1]}, geometry=lambda c, key: ((key.n,), None), applies=lambda c, key: key.n > 0
        )

        def vec_set(client: OpenCLClient) -> tk.TunableSet[VecKey, Any]:
            return VEC.tunable_set(client, key=vec_key)

        untyped = KernelTemplate(SOURCE, "k", {"B": [1]}, geometry=lambda c, key: ((key.n,), None))  # K: Any
        bare: KernelTemplate = untyped
        """,
        TEMPLATE_HEADER,
    )
    assert result.returncode == 0, result.stdout


def test_a_kernel_template_of_another_key_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    """Regression: KernelTemplate was not generic, so a template for MatKey made sets of any key mypy accepted."""
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        def wrong_key(client: OpenCLClient) -> None:
            MAT.tunable_set(client, key=vec_key)

        def wrong_set(client: OpenCLClient) -> tk.TunableSet[VecKey, Any]:
            return MAT.tunable_set(client, key=mat_key)

        def wants_vec(template: KernelTemplate[VecKey]) -> None: ...

        wants_vec(MAT)

        VEC: KernelTemplate[VecKey] = KernelTemplate(SOURCE, "k", {"B": [1]}, geometry=lambda c, key: ((key.m,), None))
        """,
        TEMPLATE_HEADER,
    )
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 4, result.stdout
    assert '"tunable_set" of "KernelTemplate" has incompatible type "Callable[[Any, Any], VecKey]"' in errors[0]
    assert 'expected "TunableSet[VecKey, Any]"' in errors[1] and "TunableSet[MatKey, Any]" in errors[1]
    assert '"wants_vec" has incompatible type "KernelTemplate[MatKey]"; expected "KernelTemplate[VecKey]"' in errors[2]
    assert '"VecKey" has no attribute "m"' in errors[3]


def test_seeding_a_record_checks_the_key_class_against_the_tuner(tmp_path: Path, mypy_cache: Path) -> None:
    # Record.seed took LocalTuner[Any, Any], TunableSet[Any, Any] and any type: a wrong key class type-checked.
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        @tk.autotune_key
        class OtherKey:
            m: int

        def seed(record: tk.Record) -> None:
            tunables = TUNER.init(lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
                .with_tunable(tk.Tunable("good", good)))
            record.seed(TUNER, tunables, SumKey)
            record.seed(TUNER, tunables, OtherKey)
        """,
    )
    assert result.returncode == 1, result.stdout
    source = (tmp_path / "user_code.py").read_text().splitlines()
    wrong = 1 + next(i for i, line in enumerate(source) if "record.seed(TUNER, tunables, OtherKey)" in line)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and f":{wrong}: error:" in errors[0] and '"seed" of "Record"' in errors[0], result.stdout


def test_changing_a_config_is_a_type_error_and_reading_it_is_not(tmp_path: Path, mypy_cache: Path) -> None:
    # Config refuses every change at run time, but mypy --strict passed config.update(...) and config["x"] = 1.
    mutations = {
        'config["BLOCK"] = 128': "Invalid index type",
        'del config["BLOCK"]': '"__delitem__" of "Config"',
        'config |= {"BLOCK": 128}': '"__ior__" of "Config"',
        'config.update({"BLOCK": 128})': '"update" of "Config"',
        "config.update(BLOCK=128)": '"update" of "Config"',
        'config.pop("BLOCK")': '"pop" of "Config"',
        'config.setdefault("BLOCK", 128)': '"setdefault" of "Config"',
        "config.clear()": 'Missing positional argument "config_is_immutable" in call to "clear" of "Config"',
        "config.popitem()": 'Missing positional argument "config_is_immutable" in call to "popitem" of "Config"',
    }
    # One function per mutation: each returns NoReturn, so mypy skips what follows it in a function.
    body = "".join(f"def change_{i}(config: tk.Config) -> None:\n    {line}\n" for i, line in enumerate(mutations))
    result = _mypy(
        tmp_path,
        mypy_cache,
        body
        + textwrap.dedent(
            """
            import json
            from collections.abc import Mapping

            def total(params: Mapping[str, int]) -> int:
                return sum(params.values())

            def read(config: tk.Config) -> str:
                changed = config.to_dict()
                changed["BLOCK"] = 128
                changed.update(VEC=2)
                merged: dict[str, object] = {**config, "VEC": 2} | dict(config)
                return json.dumps({"config": config, "total": total(config), "block": config["BLOCK"], **merged})
            """
        ),
    )
    assert result.returncode == 1, result.stdout
    source = (tmp_path / "user_code.py").read_text().splitlines()
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    for mutation, message in mutations.items():
        line = 1 + source.index(f"    {mutation}")
        found = [error for error in errors if f":{line}: error:" in error]
        assert any(message in error for error in found), (mutation, found, result.stdout)
    flagged = {int(error.split(":")[1]) for error in errors}
    assert len(flagged) == len(mutations), result.stdout


def test_tk_bench_checks_the_arguments_against_the_function(tmp_path: Path, mypy_cache: Path) -> None:
    """tk.bench(fn, *args): mypy holds each argument to fn's parameter, and the result's figures are typed."""
    wrong = {
        'tk.bench(scale, X, "2", samples=5)': '"Callable[[ndarray[tuple[int], dtype[floating[_32Bit]]], str], object]"',
        "tk.bench(scale, X)": '"Callable[[ndarray[tuple[int], dtype[floating[_32Bit]]]], object]"',
        "tk.bench(timed, X)": 'Argument 1 to "bench" has incompatible type "BenchResult"',
    }
    result = _mypy(
        tmp_path,
        mypy_cache,
        textwrap.dedent(
            """
            def scale(x: np.ndarray, factor: float) -> np.ndarray:
                return x * factor

            X = np.ones(8, np.float32)
            timed: tk.BenchResult = tk.bench(scale, X, 2.0, client=CpuClient(), samples=5, cold=False)
            median: float = timed.median_ns
            """
        )
        + "\n".join(wrong),
    )
    assert result.returncode == 1, result.stdout
    source = (tmp_path / "user_code.py").read_text().splitlines()
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == len(wrong), result.stdout
    for call, message in wrong.items():
        line = 1 + source.index(call)
        assert any(f":{line}: error:" in error and message in error for error in errors), (call, result.stdout)


def test_a_group_priority_of_another_key_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    # TuneGroup's priority and Tunable.group's took the key as Any: a priority written for another key class
    # type-checked, and failed mid-tune with an AttributeError.
    wrong = {
        "OTHER_GROUP = tk.TuneGroup[SumKey]": '"SumKey" has no attribute "m"',
        ".group(BY_OTHER, lambda key: 0)": 'has incompatible type "TuneGroup[OtherKey]"; expected "TuneGroup[SumKey]"',
        ".group(LONG, other_priority)": '"Callable[[OtherKey], int]"; expected "Callable[[SumKey], int]"',
        ".group(LONG, lambda key: key.rows)": '"SumKey" has no attribute "rows"',
        '.group(tk.TuneGroup("inline", lambda key: key.rows)': '"SumKey" has no attribute "rows"',
    }
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        @tk.autotune_key
        class OtherKey:
            m: int

        def other_priority(key: OtherKey) -> int:
            return key.m

        LONG = tk.TuneGroup("long", lambda key: 1 if key.n >= 4096 else -1)  # as the docs write it: key is Any
        TYPED: tk.TuneGroup[SumKey] = tk.TuneGroup("typed", lambda key: key.n)
        BY_OTHER = tk.TuneGroup("other", other_priority)

        def typed_tunable() -> tk.Tunable[np.ndarray]:  # an Out-only annotation holds a typed group
            return tk.Tunable("typed_fn", good).group(TYPED, lambda key: key.n)

        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
                .with_tunable(tk.Tunable("good", good))
                .with_tunable(tk.Tunable("long", good).group(LONG, lambda key: 0))
                .with_tunable(tk.Tunable("typed", good).group(TYPED, lambda key: key.n % 2))
                .with_tunable(typed_tunable()))
            return TUNER.execute(client.device_id, client, tunables, (x,))

        SET = tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype))).with_tunable(tk.Tunable("g", good))
        OTHER_GROUP = tk.TuneGroup[SumKey]("other", lambda key: key.m)
        SET.with_tunable(tk.Tunable("a", good).group(BY_OTHER, lambda key: 0))
        SET.with_tunable(tk.Tunable("b", good).group(LONG, other_priority))
        SET.with_tunable(tk.Tunable("c", good).group(LONG, lambda key: key.rows))
        SET.with_tunable(tk.Tunable("d", good).group(tk.TuneGroup("inline", lambda key: key.rows), lambda key: 0))
        """,
    )
    _assert_only_these_errors(tmp_path, result, wrong)


def test_a_record_and_a_search_result_carry_their_key_class(tmp_path: Path, mypy_cache: Path) -> None:
    # tk.search(key=), Record.add, add_tune and get took the key as object: a search for another key class
    # committed to a record, or a lookup with another key class, type-checked and failed (or went wrong) at run time.
    wrong = {
        "record.add(OtherKey(m=1), other)": 'Argument 1 to "add" of "Record" has incompatible type "OtherKey"',
        "record.add(SumKey(n=1, dtype='f'), other)": '"SearchResult[OtherKey]"; expected "SearchResult[SumKey]"',
        "loaded.get(OtherKey(m=1))": 'Argument 1 to "get" of "Record" has incompatible type "OtherKey"',
        "loaded.get(SumKey)": 'incompatible type "type[SumKey]"; expected "SumKey"',
        "record.add_tune(tune, OtherKey)": '"type[OtherKey]"; expected "type[SumKey]"',
        "OtherKey(m=1) in loaded": 'Unsupported operand types for in ("OtherKey" and "Record[SumKey]")',
    }
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        from collections.abc import Callable

        @tk.autotune_key
        class OtherKey:
            m: int

        SPACE = tk.Space(AXIS=[1])

        def build(c: tk.Config) -> Callable[[np.ndarray], np.ndarray]:
            return good

        def sum_key(x: np.ndarray) -> SumKey:
            return SumKey(n=x.shape[1], dtype=str(x.dtype))

        def untyped(record: tk.Record, result: tk.SearchResult) -> tk.SearchResult:  # bare: any key, as before
            record.add(OtherKey(m=1), result)
            return result

        def commit(client: CpuClient, x: np.ndarray, tune: tk.AutotuneRecord) -> None:
            tunables = tk.TunableSet.from_space(SPACE, build, key=sum_key)
            found = tk.search(SPACE, build, client, (x,), tuner="row_sum", key=sum_key(x), max_evals=1)
            record = tk.Record.for_tunables(TUNER, client, tunables)
            record.add(sum_key(x), found)
            record.add(sum_key(x), tk.search(SPACE, build, client, (x,), tuner="row_sum", max_evals=1))
            record.add_tune(tune, SumKey)
            loaded = tk.Record.load_verified("r.json", tunables, client, tuner=TUNER)
            entry = loaded.get(sum_key(x))
            other = tk.search(SPACE, build, client, (x,), tuner="row_sum", key=OtherKey(m=1), max_evals=1)
            record.add(OtherKey(m=1), other)
            record.add(SumKey(n=1, dtype='f'), other)
            loaded.get(OtherKey(m=1))
            loaded.get(SumKey)
            record.add_tune(tune, OtherKey)
            assert sum_key(x) in loaded and OtherKey(m=1) in loaded
        """,
    )
    _assert_only_these_errors(tmp_path, result, wrong)


def test_an_inputs_generator_of_another_key_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    # inputs= took (*Any) -> tuple: a generator written for another key class, or without the key parameter,
    # type-checked and failed (or built the wrong inputs) at the first tune.
    wrong = {
        "tk.TunableSet(key=sum_key, inputs=other_inputs)": 'Argument "key" to "TunableSet" has incompatible type',
        "tk.TunableSet(key=sum_key, inputs=no_key)": 'Argument "key" to "TunableSet" has incompatible type',
        "tk.TunableSet(key=sum_key, inputs=returns_array)": 'expected "InputGenerator[SumKey] | None"',
        "inputs=other_inputs).with_search": '"from_space" of "TunableSet" has incompatible type',
    }
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        from typing import Any

        @tk.autotune_key
        class OtherKey:
            m: int

        def sum_key(x: np.ndarray) -> SumKey:
            return SumKey(n=x.shape[1], dtype=str(x.dtype))

        def inputs(key: SumKey, x: np.ndarray) -> tuple[np.ndarray]:
            return (np.ones((4, key.n)),)

        def renamed(k: SumKey, array: np.ndarray) -> tuple[np.ndarray]:
            return (array,)

        def variadic(key: SumKey, *args: Any) -> tuple[Any, ...]:
            return args

        def other_inputs(key: OtherKey, x: np.ndarray) -> tuple[np.ndarray]:
            return (x,)

        def no_key(x: np.ndarray) -> tuple[np.ndarray]:
            return (x,)

        def returns_array(key: SumKey, x: np.ndarray) -> np.ndarray:
            return x

        SPACE = tk.Space(AXIS=[1])

        def build(c: tk.Config) -> Any:
            return good

        def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
            tunables = TUNER.init(lambda: tk.TunableSet(
                key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)),
                inputs=lambda key, x: (np.ones((4, key.n)),),
            ).with_tunable(tk.Tunable("good", good)))
            return TUNER.execute(client.device_id, client, tunables, (x,))

        tk.TunableSet(key=sum_key, inputs=inputs)
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)), inputs=renamed)
        tk.TunableSet(key=sum_key, inputs=variadic)
        tk.TunableSet.from_space(SPACE, build, key=sum_key, inputs=inputs)
        tk.TunableSet(key=sum_key, inputs=other_inputs)
        tk.TunableSet(key=sum_key, inputs=no_key)
        tk.TunableSet(key=sum_key, inputs=returns_array)
        tk.TunableSet.from_space(SPACE, build, key=sum_key, inputs=other_inputs).with_search(max_evals=1)
        """,
    )
    _assert_only_these_errors(tmp_path, result, wrong)


def test_a_misspelt_setting_or_a_wrong_type_to_configure_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    # tk.configure took **Any: every one of these passed mypy (samples="10" even passed at run time, coerced).
    wrong = {
        'tk.configure(samples="10")': 'Argument "samples" to "configure" has incompatible type "str"; expected "int"',
        'tk.configure(isolation="processes")': "expected \"Literal['none', 'process']\"",
        'tk.configure(autotune_level="max")': 'Argument "autotune_level" to "configure" has incompatible type',
        "tk.configure(record=3)": 'Argument "record" to "configure" has incompatible type "int"',
        "tk.configure(sampels=3)": 'Unexpected keyword argument "sampels" for "configure"',
    }
    result = _mypy(
        tmp_path,
        mypy_cache,
        textwrap.dedent(
            """
            from pathlib import Path
            from typing import Any

            settings: tk.Settings = tk.configure(record=Path("r.jsonl"), cache=False, samples=5, isolation="process")
            tk.configure(cache_dir=Path("~/c"), candidate_timeout_s=float("inf"), compile_workers=None, warmup_ms=100)
            OVERRIDES: dict[str, Any] = {"samples": 3}
            tk.configure(**OVERRIDES)
            """
        )
        + "\n".join(wrong),
    )
    assert result.returncode == 1, result.stdout
    source = (tmp_path / "user_code.py").read_text().splitlines()
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    for call, message in wrong.items():
        line = 1 + source.index(call)
        assert any(f":{line}: error:" in error and message in error for error in errors), (call, result.stdout)
    assert len({error.split(":")[1] for error in errors}) == len(wrong), result.stdout  # the correct lines pass


def test_a_bounds_function_returning_no_bounds_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    # with_bounds took (key, inputs) -> object: a function returning tk.Work (not tk.Bounds) passed mypy and
    # raised TunekitError at the first tune on a client with peaks (and never on one without).
    result = _mypy(
        tmp_path,
        mypy_cache,
        """
        tunables = (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=str(x.dtype)))
            .with_tunable(tk.Tunable("good", good))
            .with_bounds(lambda key, inputs: tk.Bounds(tk.Work(compute_ops=key.n, bytes=4 * key.n)))
            .with_bounds(lambda key, inputs: tk.Bounds([tk.Work(compute_ops=1, bytes=1)], launch_overhead=5.0))
            .with_bounds(lambda key, inputs: tk.Work(compute_ops=key.n, bytes=4 * key.n))
        )
        """,
    )
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len({error.split(":")[1] for error in errors}) == 1, result.stdout
    assert 'Incompatible return value type (got "Work", expected "Bounds")' in result.stdout, result.stdout


CLIENTS = textwrap.dedent(
    """
    from tunekit_backends.opencl import OpenCLClient

    def clients(cpu: CpuClient, cl: OpenCLClient, tunables: tk.TunableSet[SumKey, np.ndarray], x: np.ndarray) -> None:
        TUNER.execute(cpu.device_id, cpu, tunables, (x,))
        TUNER.execute(cl.device_id, cl, tunables, (x,))
        each: tk.Client = cpu
        each = cl
        name: str = each.device_id
    """
)


@pytest.mark.slow
def test_the_cpu_and_opencl_clients_are_clients_with_a_read_only_device_id(tmp_path: Path, mypy_cache: Path) -> None:
    """Their device_id is typed as Client's property (a cached value at run time): read-only, a str."""
    result = _mypy(tmp_path, mypy_cache, CLIENTS)
    assert result.returncode == 0, result.stdout
    result = _mypy(tmp_path, mypy_cache, CLIENTS + "    cpu.device_id = 'another'\n    cl.device_id = 'another'\n")
    assert result.returncode == 1, result.stdout
    assert result.stdout.count('Property "device_id" defined in') == 2, result.stdout


@pytest.mark.slow
def test_the_cpu_and_opencl_clients_are_clients_to_pyright(tmp_path: Path) -> None:
    """Regression: a cached_property device_id matched no Client protocol under pyright (reportArgumentType)."""
    pyright = Path(sys.executable).with_name("pyright")
    if not pyright.exists():
        pytest.skip("pyright is not installed in this environment (pip install pyright)")
    source = tmp_path / "user_code.py"
    source.write_text(HEADER + textwrap.dedent(CLIENTS))
    result = subprocess.run(
        [str(pyright), str(source)], capture_output=True, text=True, check=False, cwd=Path(__file__).parents[2]
    )
    assert result.returncode == 0 and "0 errors" in result.stdout, result.stdout
