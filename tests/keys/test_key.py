from __future__ import annotations

import copy
import dataclasses
import enum
import json
import math
from typing import Annotated, Literal

import numpy as np
import pytest

import tunekit as tk
from tunekit._keys.key import anchored_fields, key_to_json, off_buckets


@tk.autotune_key
class Key:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(base=4, max=4096)]
    batch: int
    dtype: str


class Layout(enum.Enum):
    ROW = "row"
    COL = "col"


def test_only_annotated_fields_are_anchored() -> None:
    key = Key(n=1000, rows=5, batch=1000, dtype="float32")
    assert (key.n, key.rows, key.batch, key.dtype) == (1024, 16, 1000, "float32")
    assert Key(n=100_000, rows=100_000, batch=3, dtype="f").rows == 4096


def test_keys_in_one_bucket_are_equal_and_hash_alike() -> None:
    a = Key(n=900, rows=10, batch=1, dtype="f")
    b = Key(n=1000, rows=16, batch=1, dtype="f")
    assert a == b
    assert hash(a) == hash(b)
    assert key_to_json(a) == '{"batch":1,"dtype":"f","n":1024,"rows":16}'


def test_key_is_frozen() -> None:
    key = Key(n=1, rows=1, batch=1, dtype="f")
    with pytest.raises(AttributeError):
        key.n = 3  # type: ignore[misc]


def test_anchored_field_needs_an_int() -> None:
    with pytest.raises(TypeError, match=r"field n expects int \(not bool\), anchored, got str '12'"):
        Key(n="12", rows=1, batch=1, dtype="f")  # type: ignore[arg-type]


@pytest.mark.parametrize("level", ["balanced", "minimal"])
def test_an_anchored_field_below_one_is_refused_naming_the_key_and_the_field(level: str) -> None:
    # anchor()'s own "x >= 1" named neither the key nor the field, so a zero-length batch left users guessing
    tk.configure(autotune_level=level)
    try:
        with pytest.raises(ValueError, match=r"autotune key Key: field n is anchored, so it takes a size >= 1, got 0;"):
            Key(n=0, rows=1, batch=1, dtype="f")  # base 2: the inline path
        with pytest.raises(ValueError, match=r"field rows is anchored, .* got -3; handle an empty \(0\) or negative"):
            Key(n=1, rows=-3, batch=1, dtype="f")  # base 4: anchor() itself
    finally:
        tk.configure()


def test_enum_and_literal_fields_serialise() -> None:
    @tk.autotune_key
    class LayoutKey:
        layout: Layout
        mode: Literal["fast", "exact"]

    assert key_to_json(LayoutKey(layout=Layout.COL, mode="fast")) == '{"layout":"col","mode":"fast"}'


def test_unserialisable_field_type_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"BadKey\.shape.*JSON.*for a shape, one int field per dimension"):

        @tk.autotune_key
        class BadKey:
            shape: list[int]

    with pytest.raises(TypeError, match=r"TupleKey\.shape.*for a shape, one int field per dimension, e\.g\. rows"):

        @tk.autotune_key
        class TupleKey:
            shape: tuple[int, ...]

    with pytest.raises(TypeError, match=r"ArrayKey\.a.*or np\.dtype$"):  # no shape advice for what is no shape

        @tk.autotune_key
        class ArrayKey:
            a: np.ndarray


class Pair(enum.Enum):
    SMALL = (1, 2)
    LARGE = (3, 4)


class Opaque(enum.Enum):
    ONLY = object()


def test_an_enum_whose_values_are_not_json_scalars_is_refused_at_definition() -> None:
    # Regression: accepted, then a tuple value was stored as a JSON list no member matched, an object() failed at tune.
    with pytest.raises(TypeError, match=r"TupleKey\.which has type Pair, whose member SMALL has the value \(1, 2\)"):

        @tk.autotune_key
        class TupleKey:
            which: Pair

    with pytest.raises(TypeError, match=r"ObjectKey\.which has type Opaque, whose member ONLY has the value"):

        @tk.autotune_key
        class ObjectKey:
            which: Opaque


def test_anchor_on_non_int_refused_at_definition() -> None:
    with pytest.raises(TypeError, match="int fields"):

        @tk.autotune_key
        class BadKey:
            size: Annotated[float, tk.Anchor()]


def test_a_bare_anchor_class_or_two_anchors_are_refused_at_definition() -> None:
    # Regression: Annotated[int, tk.Anchor] (no parentheses) anchored nothing, silently, so every size was tuned;
    # two tk.Anchor()s were applied one after the other.
    with pytest.raises(TypeError, match=r"BareKey.n: write tk.Anchor\(\) with parentheses"):

        @tk.autotune_key
        class BareKey:
            n: Annotated[int, tk.Anchor]

    with pytest.raises(TypeError, match=r"TwiceKey.n: has more than one tk.Anchor\(\); give it one"):

        @tk.autotune_key
        class TwiceKey:
            n: Annotated[int, tk.Anchor(), tk.Anchor(base=4)]


def test_minimal_level_squares_the_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEKIT_AUTOTUNE_LEVEL", "minimal")
    tk.configure()
    assert Key(n=1000, rows=5, batch=1, dtype="f").n == 1024
    assert Key(n=1100, rows=5, batch=1, dtype="f").n == 4096
    assert Key(n=1000, rows=5, batch=1, dtype="f").rows == 16
    assert Key(n=1000, rows=17, batch=1, dtype="f").rows == 256


def test_subclass_keeps_parent_anchors() -> None:
    @tk.autotune_key
    class Wider(Key):
        cols: Annotated[int, tk.Anchor(max=64)]

    key = Wider(n=1000, rows=5, batch=1, dtype="f", cols=1000)
    assert (key.n, key.rows, key.cols) == (1024, 16, 64)


def test_defaults_are_anchored_too() -> None:
    @tk.autotune_key
    class WithDefault:
        dtype: str
        n: Annotated[int, tk.Anchor()] = 100

    assert WithDefault(dtype="f").n == 128


@tk.autotune_key
class Typed:
    n: int
    size: Annotated[int, tk.Anchor()]
    alpha: float
    dtype: str
    transpose: bool


def _typed(**overrides: object) -> Typed:
    fields: dict[str, object] = {"n": 5, "size": 1000, "alpha": 1.5, "dtype": "f32", "transpose": False}
    return Typed(**{**fields, **overrides})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("n", "5", "int (not bool)"),
        ("n", 5.0, "int (not bool)"),
        ("n", True, "int (not bool)"),
        ("n", None, "int (not bool)"),
        ("n", np.float64(5.0), "int (not bool)"),
        ("size", "1000", "int (not bool), anchored"),
        ("size", False, "int (not bool), anchored"),
        ("alpha", "1.5", "a finite float (an int is converted)"),
        ("alpha", True, "a finite float (an int is converted)"),
        ("dtype", 32, "str"),
        ("transpose", 1, "bool"),
        ("transpose", "yes", "bool"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_key_field_type_and_value(
    field: str, value: object, expected: str
) -> None:
    """Regression: a plain int field took "5", so the key was tuned and stored under {"n":"5"}."""
    with pytest.raises(TypeError) as caught:
        _typed(**{field: value})
    assert str(caught.value) == (
        f"autotune key Typed: field {field} expects {expected}, got {type(value).__name__} {value!r}; "
        "convert the value before building the key"
    )


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf")])
def test_a_float_field_refuses_nan_and_infinity_when_the_key_is_built(value: object) -> None:
    """NaN passed the key's check and failed at the first execute, as JSON the cache could not write."""
    with pytest.raises(TypeError, match=r"^autotune key Typed: field alpha expects a finite float \(an int is conv"):
        _typed(alpha=value)
    assert _typed(alpha=np.float32(1.5)).alpha == 1.5 and _typed(alpha=-0.0).alpha == 0.0


def test_an_array_given_as_a_key_value_is_named_by_shape_and_the_fix_is_its_shape() -> None:
    """key=KeyClass with array inputs built Key(n=array): the error printed the whole array over many lines, and
    said to "convert the value"."""
    with pytest.raises(TypeError) as caught:
        _typed(n=np.zeros((512, 256), dtype=np.float32))
    assert str(caught.value) == (
        "autotune key Typed: field n expects int (not bool), got ndarray of shape (512, 256), dtype float32; "
        "build the key from the array's shape or dtype, not the array: key=lambda x, ...: Typed(n=x.shape[0], ...)"
    )


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(TypeError) as caught:
        _typed(n="7" * 5000)
    assert f"got str '{'7' * 199}... (5002 characters); convert the value" in str(caught.value)


def test_numpy_scalars_count_as_the_python_values_they_hold() -> None:
    """Regression: an np.int64 field value built the key, then failed at lookup as not JSON-serialisable."""
    key = _typed(n=np.int64(5), size=np.uint16(1000), alpha=np.float32(1.5), dtype=np.str_("f32"), transpose=np.True_)
    assert key == _typed(transpose=True)
    assert [type(getattr(key, f)) for f in ("n", "size", "alpha", "dtype", "transpose")] == [int, int, float, str, bool]
    assert key_to_json(key) == key_to_json(_typed(transpose=True))
    with pytest.raises(TypeError, match="field n expects int"):
        _typed(n=np.array([5]))  # an array is not a scalar, even of one element


def test_an_int_for_a_float_field_is_stored_as_a_float_so_both_share_one_cache_row() -> None:
    key = _typed(alpha=2)
    assert type(key.alpha) is float
    assert key_to_json(key) == key_to_json(_typed(alpha=2.0))


def test_subclasses_of_int_and_str_are_stored_as_plain_values() -> None:
    class Size(enum.IntEnum):
        BIG = 4096

    class Dtype(enum.StrEnum):
        F32 = "f32"

    key = _typed(n=Size.BIG, dtype=Dtype.F32)
    assert (type(key.n), key.n, type(key.dtype), key.dtype) == (int, 4096, str, "f32")


def test_enum_fields_take_a_member_or_its_value_and_literals_their_exact_values() -> None:
    @tk.autotune_key
    class Choice:
        layout: Layout
        mode: Literal["fast", "exact"]
        level: Literal[1, 2] = 1

    assert Choice(layout="col", mode="fast").layout is Layout.COL  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"field layout expects a Layout member \(or its value\), got str 'diag'"):
        Choice(layout="diag", mode="fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"field mode expects one of 'fast', 'exact', got str 'slow'"):
        Choice(layout=Layout.ROW, mode="slow")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"field level expects one of 1, 2, got bool True"):
        Choice(layout=Layout.ROW, mode="fast", level=True)  # type: ignore[arg-type]


def test_defaults_and_inherited_fields_are_checked_too() -> None:
    with pytest.raises(TypeError, match=r"autotune key WithBadDefault: field n expects int"):

        @tk.autotune_key
        class WithBadDefault:
            n: int = "8"  # type: ignore[assignment]

        WithBadDefault()

    @tk.autotune_key
    class Child(Typed):
        extra: int = 0

    with pytest.raises(TypeError, match=r"autotune key Child: field n expects int"):
        Child(n="5", size=1, alpha=1.0, dtype="f", transpose=False)  # type: ignore[arg-type]


def test_a_post_init_of_the_users_own_runs_after_the_checks_and_anchoring() -> None:
    """Anchoring used to replace a key's own __post_init__, which then never ran."""
    seen: list[int] = []

    @tk.autotune_key
    class Checked:
        n: Annotated[int, tk.Anchor()]

        def __post_init__(self) -> None:
            seen.append(self.n)
            if self.n > 1 << 20:
                raise ValueError("n too large for this operation")

    assert Checked(n=np.int32(1000)).n == 1024  # type: ignore[arg-type]
    assert seen == [1024]
    with pytest.raises(ValueError, match="too large"):
        Checked(n=(1 << 20) + 1)


def test_a_key_rebuilt_from_its_stored_json_is_the_same_key() -> None:
    """Regression: an Enum field rebuilt from its stored value (as record seeding does) held the raw value."""

    @tk.autotune_key
    class Stored:
        n: Annotated[int, tk.Anchor()]
        alpha: float
        layout: Layout
        mode: Literal["fast", "exact"]
        flag: bool

    key = Stored(n=1000, alpha=2, layout=Layout.COL, mode="fast", flag=True)
    rebuilt = Stored(**json.loads(key_to_json(key)))
    assert rebuilt == key and hash(rebuilt) == hash(key)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_class_that_is_already_a_dataclass_is_refused_at_definition(frozen: bool) -> None:
    # Over @dataclass the first key raised FrozenInstanceError (and skipped checks and anchors);
    # over @dataclass(frozen=True), "Cannot overwrite attribute __setattr__".
    with pytest.raises(TypeError, match=r"Plain is already a @dataclass; remove its @dataclass decorator"):

        @tk.autotune_key
        @dataclasses.dataclass(frozen=frozen)
        class Plain:
            n: Annotated[int, tk.Anchor()]


def test_applying_autotune_key_twice_says_the_class_is_already_a_key() -> None:
    # Stacked @tk.autotune_key said "already a @dataclass; remove its @dataclass decorator", which it never had.
    with pytest.raises(TypeError, match=r"Twice is already an autotune key; apply @tk.autotune_key once") as info:

        @tk.autotune_key
        @tk.autotune_key
        class Twice:
            n: Annotated[int, tk.Anchor()]

    assert "@dataclass" not in str(info.value)

    @tk.autotune_key
    class Base:
        n: Annotated[int, tk.Anchor()]

    @tk.autotune_key
    class Sub(Base):  # a subclass decorated once is a key of its own, not a second application
        m: int

    assert Sub(n=5, m=2).n == 8
    with pytest.raises(TypeError, match=r"Sub is already an autotune key.*class Extended\(Sub\)"):
        tk.autotune_key(Sub)


@tk.autotune_key
class Clamped:
    n: Annotated[int, tk.Anchor(min=3, max=3000)]
    tag: str


def test_off_buckets_says_which_anchored_values_another_level_would_move() -> None:
    """What Record.add asks of a key: could it have been built at the record's level (exponent 2: minimal)?"""

    assert anchored_fields(Key) == ("n", "rows") and anchored_fields(Clamped) == ("n",)
    assert anchored_fields(Layout) == ()
    key = Key(n=2000, rows=5, batch=1000, dtype="f")  # n=2048, rows=16
    assert off_buckets(key, 1) == {}
    assert off_buckets(key, 2) == {"n": 4096}  # 2048 is no power of 4; 16 is a power of 16 (base 4 squared)
    assert off_buckets(Key(n=2, rows=64, batch=1, dtype="f"), 2) == {"n": 4, "rows": 256}
    # min and max are buckets as given at every level, though anchoring 3 again would give 4.
    assert off_buckets(Clamped(n=1, tag="a"), 2) == {} and off_buckets(Clamped(n=5000, tag="a"), 2) == {}


def test_a_str_field_holding_a_lone_surrogate_is_refused_when_the_key_is_built() -> None:
    """Regression: the key was tuned and stored, then its record could not be written as UTF-8 JSON."""
    with pytest.raises(ValueError, match=r"autotune key Key: field dtype holds a lone surrogate \('f\\udc80'\)"):
        Key(n=1, rows=1, batch=1, dtype="f\udc80")
    assert Key(n=1, rows=1, batch=1, dtype="é").dtype == "é"  # text that is not ASCII but valid is kept


def test_an_anchored_int_too_long_to_print_gets_a_short_clear_error() -> None:
    """Regression: an int past Python's 4300-digit str limit made the error message about it raise."""
    with pytest.raises(ValueError, match=r"size >= 1, got <an int of \d+ bits, too long to print>"):
        Key(n=-(10**5000), rows=1, batch=1, dtype="f")
    huge = Key(n=10**5000, rows=1, batch=1, dtype="f")  # anchors to a power of two as long
    with pytest.raises(
        TypeError, match=r"key Key\(n=<an int of \d+ bits, too long to print>, rows=1, .* at most 4300 digits"
    ):
        key_to_json(huge)


@tk.autotune_key
class DtypeKey:
    n: Annotated[int, tk.Anchor()]
    dtype: np.dtype


def test_a_dtype_field_takes_the_arrays_dtype_and_stores_its_name() -> None:
    x = np.ones((2, 1000), np.float32)
    key = DtypeKey(n=x.shape[1], dtype=x.dtype)
    assert key.dtype is x.dtype and key.n == 1024
    assert key_to_json(key) == '{"dtype":"float32","n":1024}'
    # The name a str field would store (str(x.dtype)): a cache written by either finds the other's rows.
    assert key_to_json(key) == key_to_json(Key(n=1000, rows=1, batch=1, dtype=str(x.dtype))).replace(
        ',"rows":1', ""
    ).replace('"batch":1,', "")
    rebuilt = DtypeKey(**json.loads(key_to_json(key)))  # as the cache and records rebuild it
    assert rebuilt == key and hash(rebuilt) == hash(key) and rebuilt.dtype == np.float32
    assert DtypeKey(n=1000, dtype=np.float32) == key  # a scalar type stands for its dtype
    assert DtypeKey(n=1000, dtype=">f4") != key and key_to_json(DtypeKey(n=1, dtype=">f4")) == '{"dtype":">f4","n":1}'


def test_a_dtype_field_refuses_what_is_no_dtype_and_a_dtype_its_name_cannot_rebuild() -> None:
    for value in (32, None, "float23", np.ones(3)):
        with pytest.raises(
            TypeError, match=r"autotune key DtypeKey: field dtype expects a numpy dtype \(or its name\)"
        ):
            DtypeKey(n=1, dtype=value)
    structured = DtypeKey(n=1, dtype=np.dtype([("a", np.float32)]))
    with pytest.raises(TypeError, match=r"field dtype holds the dtype .* does not rebuild it, so it cannot be stored"):
        key_to_json(structured)


def test_keys_compare_by_class_and_fields_and_copy_as_keys() -> None:
    @tk.autotune_key
    class Twin:
        n: Annotated[int, tk.Anchor()]
        dtype: np.dtype

    key = DtypeKey(n=1000, dtype=np.float32)
    assert Twin(n=1000, dtype=np.float32) != key  # equal fields, another key class
    assert copy.deepcopy(key) == key and copy.copy(key) == key
    assert dataclasses.replace(key, n=2000) == DtypeKey(n=2048, dtype=np.float32)
    assert repr(key) == "DtypeKey(n=1024, dtype=dtype('float32'))"
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.dtype = np.dtype(np.float64)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del key.n  # type: ignore[misc]
    assert not hasattr(key, "__dict__")


def test_defaults_factories_keyword_only_and_init_false_fields_build_as_dataclasses_do() -> None:
    @tk.autotune_key
    class Rich:
        n: Annotated[int, tk.Anchor()]
        tags: str = dataclasses.field(default_factory=lambda: "t")
        fixed: int = dataclasses.field(default=3, init=False)
        level: int = dataclasses.field(default=1, kw_only=True)

    key = Rich(5, level=2)
    assert (key.n, key.tags, key.fixed, key.level) == (8, "t", 3, 2)
    assert key_to_json(key) == '{"fixed":3,"level":2,"n":8,"tags":"t"}'
    with pytest.raises(TypeError):
        Rich(5, 2)  # type: ignore[misc]  # level is keyword-only


def test_a_key_class_with_its_own_equality_is_refused_at_definition() -> None:
    # Winners are found by (class, *fields): an __eq__ of the key's own would disagree with that lookup.
    with pytest.raises(TypeError, match=r"Custom defines __eq__ and __hash__; an autotune key compares by its class"):

        @tk.autotune_key
        class Custom:
            n: int

            def __eq__(self, other: object) -> bool:
                return True

            def __hash__(self) -> int:
                return 0


def test_super_in_a_key_subclass_post_init_reaches_the_parents() -> None:
    """Regression: the key class is rebuilt with slots, and super() in its methods named the class as written."""
    seen: list[str] = []

    @tk.autotune_key
    class Parent:
        n: int

        def __post_init__(self) -> None:
            seen.append("parent")
            if self.n < 0:
                raise ValueError("n must be >= 0")

    @tk.autotune_key
    class Child(Parent):
        m: int = 1

        def __post_init__(self) -> None:
            super().__post_init__()
            seen.append("child")

    assert Child(n=1, m=2).m == 2
    assert seen == ["parent", "child"]
    with pytest.raises(ValueError, match="n must be >= 0"):
        Child(n=-1)


def test_a_post_init_sets_a_derived_init_false_field_as_on_a_frozen_dataclass() -> None:
    """Regression: object.__setattr__ in __post_init__ (the dataclass idiom) hit the read-only property."""

    @tk.autotune_key
    class Derived:
        m: int
        n: int
        total: int = dataclasses.field(default=0, init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "total", self.m * self.n)

    key = Derived(m=2, n=3)
    assert key.total == 6
    assert key == Derived(m=2, n=3)
    assert hash(key) == hash(Derived(m=2, n=3))
    assert key_to_json(key) == '{"m":2,"n":3,"total":6}'
    with pytest.raises(dataclasses.FrozenInstanceError):
        object.__setattr__(key, "total", 7)


def test_a_key_naming_a_type_local_to_its_function_resolves_it() -> None:
    """Under `from __future__ import annotations` (this module's), a local Enum was "name 'Mode' is not defined"."""

    class Mode(enum.Enum):
        FAST = "fast"

    @tk.autotune_key
    class LocalKey:
        n: Annotated[int, tk.Anchor()]
        mode: Mode

    assert LocalKey(n=5, mode="fast") == LocalKey(n=8, mode=Mode.FAST)
    with pytest.raises(TypeError, match="field mode expects a Mode member"):
        LocalKey(n=5, mode="slow")  # type: ignore[arg-type]


def test_a_key_naming_a_type_nowhere_defined_says_where_it_must_be() -> None:
    with pytest.raises(
        TypeError, match=r"name 'Nowhere' is not defined; a field's type must be importable in the key's"
    ):

        @tk.autotune_key
        class Unresolved:
            n: Nowhere  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize("kind", [np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_a_numpy_integer_builds_the_key_an_int_builds_at_every_call(kind: type) -> None:
    """Its type is converted inline from its second call on: both calls, anchored or not, give the int's key."""

    @tk.autotune_key
    class Split:
        n: Annotated[int, tk.Anchor()]
        k: int

    for _ in range(3):  # the first call takes the slow path and learns the type; the later ones do not
        key = Split(n=kind(100), k=kind(7))
        assert key == Split(n=100, k=7) and hash(key) == hash(Split(n=100, k=7))
        assert (type(key.n), key.n, type(key.k), key.k) == (int, 128, int, 7)
        assert key_to_json(key) == '{"k":7,"n":128}'
    for _ in range(2):  # numpy's bool is no int, learned or not
        with pytest.raises(TypeError, match=r"field k expects int \(not bool\), got bool np.True_"):
            Split(n=kind(100), k=np.True_)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="field n is anchored, so it takes a size >= 1"):
        Split(n=kind(0), k=kind(1))


@pytest.mark.parametrize("level", ["balanced", "minimal"])
@pytest.mark.parametrize("base", [2, 3, 4, 8, 16])
def test_every_anchor_base_buckets_as_anchor_does(base: int, level: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power-of-two base is a shift in the generated __init__, any other Anchor.apply: both agree with anchor()."""
    monkeypatch.setenv("TUNEKIT_AUTOTUNE_LEVEL", level)
    tk.configure()
    exponent = 2 if level == "minimal" else 1

    @tk.autotune_key
    class Bounded:
        free: Annotated[int, tk.Anchor(base=base)]
        capped: Annotated[int, tk.Anchor(base=base, max=4096)]
        floored: Annotated[int, tk.Anchor(base=base, min=3)]

    sizes = [*range(1, 1100), 4095, 4096, 4097, 2**40 - 1, 2**40, 2**40 + 1, 2**70 + 3]
    for x in sizes:
        key = Bounded(free=x, capped=x, floored=x)
        power = base**exponent
        assert key.free == tk.anchor(x, base=power)
        assert key.capped == tk.anchor(x, base=power, max=4096)
        assert key.floored == tk.anchor(x, base=power, min=3)


def test_an_enum_field_given_a_value_takes_the_member_of_that_type_and_value() -> None:
    class Mode(enum.Enum):
        ONE = 1
        HALF = 0.5
        NAME = "one"
        ALIAS = 1  # an alias of ONE: the same member

    @tk.autotune_key
    class ModeKey:
        mode: Mode

    assert [ModeKey(mode=v).mode for v in (1, 0.5, "one", np.int64(1))] == [Mode.ONE, Mode.HALF, Mode.NAME, Mode.ONE]  # type: ignore[arg-type]
    for wrong in (True, 1.0, "ONE", [1]):  # True == 1 and 1.0 == 1, yet each writes other JSON; a list is unhashable
        with pytest.raises(TypeError, match=r"field mode expects a Mode member \(or its value\)"):
            ModeKey(mode=wrong)  # type: ignore[arg-type]


def test_a_literal_field_takes_its_values_by_type_and_refuses_others_clearly() -> None:
    @tk.autotune_key
    class LitKey:
        layout: Literal["row", "col"]
        mixed: Literal[1, "a", False] = 1

    assert LitKey(layout="row") == LitKey(layout=np.str_("row"))  # type: ignore[arg-type]  # a numpy str, unwrapped
    assert LitKey(layout="col", mixed="a").mixed == "a" and LitKey(layout="col", mixed=False).mixed is False
    for field, wrong in (("layout", "diag"), ("layout", ["row"]), ("mixed", True), ("mixed", 1.0), ("mixed", 0)):
        with pytest.raises(TypeError, match=f"field {field} expects one of"):
            LitKey(**{"layout": "row", field: wrong})  # type: ignore[arg-type]
