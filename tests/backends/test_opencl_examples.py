"""The OpenCL examples tune on PoCL at small sizes and their winners match numpy."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyopencl", reason="pip install 'tunekit[opencl]'")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "opencl"))

import bias_gelu
import sgemm
import softmax

from tunekit_backends.opencl import OpenCLClient

pytestmark = [pytest.mark.slow, pytest.mark.opencl, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False)
    yield client
    client.close()


@pytest.mark.parametrize(
    ("run", "shape"),
    [(bias_gelu.run, (64, 48)), (softmax.run, (24, 40)), (sgemm.run, (64, 32, 96))],
    ids=["bias_gelu", "softmax", "sgemm"],
)
def test_example_tunes_and_reports(client: OpenCLClient, run: object, shape: tuple[int, ...]) -> None:
    result = run(client, *shape)  # type: ignore[operator]
    # run() itself asserts the winner's output against numpy; here: the report is coherent.
    assert result.tuned_now
    assert 0 < result.winner_ns <= result.worst_ns
    assert result.rate(result.winner_ns) > 0
    again = run(client, *shape)  # type: ignore[operator]
    assert not again.tuned_now and again.winner == result.winner
