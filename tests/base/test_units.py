"""The one duration formatter, and its ASCII spelling of microseconds where the output cannot show µ."""

from __future__ import annotations

import contextlib
import io

from tunekit._base.units import format_duration_ns


def test_a_duration_takes_a_readable_unit() -> None:
    assert [format_duration_ns(v) for v in (12, 4_500, 3_250_000, 2e9, None)] == [
        "12 ns",
        "4.5 µs",
        "3.25 ms",
        "2 s",
        "-",
    ]


def test_microseconds_are_us_where_the_output_cannot_show_mu() -> None:
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    with contextlib.redirect_stdout(ascii_out):
        assert format_duration_ns(4_500) == "4.5 us"
    utf8_err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(utf8_err), contextlib.redirect_stderr(utf8_err):
        assert format_duration_ns(4_500) == "4.5 µs"
