"""Choosing the client's device while its compile workers start: the client returns first, the probe settles later."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from _broken_opencl import broken_device

import tunekit as tk
from tunekit_backends.opencl import KernelTemplate, OpenCLClient, _selection
from tunekit_backends.opencl._compile_starts import FAILED_STARTS, command_for

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

DOUBLE = "__kernel void double_it(__global float* y, const int n) { int i = get_global_id(0); y[i] = 2.0f * i; }"


@tk.autotune_key
class SizeKey:
    n: Annotated[int, tk.Anchor()]


@pytest.fixture
def gated_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Compile workers wait, before Python even starts, until the returned file exists: none is ready before that."""
    gate = tmp_path / "gate"
    python = tmp_path / "gated-python"
    python.write_text(
        f"#!/bin/sh\nwhile [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.02; done\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    yield gate
    gate.touch()  # a worker left waiting would sleep on


def _probing(client: OpenCLClient) -> bool:
    """Whether the client's probe thread is running (it ends once the device is chosen, or the client closed)."""
    thread = client._selection._thread
    assert thread is None or thread.name == "tunekit-opencl-probe"
    return thread is not None and thread in threading.enumerate()


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_the_client_returns_before_its_first_worker_is_ready_and_probes_once_one_is(
    gated_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready_at_probe: list[int] = []
    probe = _selection.probe

    def watched(cl_: Any, context: Any) -> str | None:  # the real probe, with the pool's state when it runs
        ready_at_probe.append(len(client._selection._pools[0]._alive))
        return probe(cl_, context)

    monkeypatch.setattr(_selection, "probe", watched)
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        (pool,) = client._selection._pools
        # Returned while both workers wait at the gate: neither is ready, and the probe has not run.
        assert client._selection.pending and not pool._alive and pool._starting == 2 and ready_at_probe == []
        assert repr(client) == "OpenCLClient(choosing its device)"  # a repr never waits
        gated_python.touch()
        assert client.compile_pool is pool  # waits for the probe, which waited for a worker
        assert not client._selection.pending and ready_at_probe[0] >= 1
        assert client.compile_in == "process" and client.device.name in repr(client)
        n = 64
        y = cla.zeros(client.queue, n, np.float32)
        template = KernelTemplate(DOUBLE, "double_it", {"BLOCK": [8, 16]}, geometry=lambda c, k: ((k.n,), (c.BLOCK,)))
        tunables = template.tunable_set(client, key=lambda *a: SizeKey(n=int(a[-1])))
        tk.LocalTuner[SizeKey, Any]("selection-open").execute(client.device_id, client, tunables, (y, np.int32(n)))
        np.testing.assert_array_equal(y.get(), 2.0 * np.arange(n, dtype=np.float32))
    finally:
        client.close()
    assert not _probing(client)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_closing_a_client_whose_probe_is_pending_stops_it_and_its_workers_and_leaks_nothing(
    gated_python: Path,
) -> None:
    client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    (pool,) = client._selection._pools
    with pool._ready:
        workers = set(pool._launched)
    assert client._selection.pending and len(workers) == 2 and _probing(client)
    how = command_for(*pool._where)
    client.close()  # the probe's thread has ended when it returns
    assert not _probing(client) and not client._selection.pending
    assert all(w.process.poll() is not None for w in workers)
    deadline = time.monotonic() + 60
    while pool._starting and time.monotonic() < deadline:  # the threads that awaited the workers see the kill
        time.sleep(0.01)
    assert pool._starting == 0 and FAILED_STARTS.state(how) == (0, None)  # a kill is no failed start
    # Nothing was chosen: what needs the device says the client was closed, blaming nothing else.
    with pytest.raises(tk.ClientClosed, match=r"was closed \(OpenCLClient\.close\(\)\) before it chose its device"):
        _ = client.device_id
    with pytest.raises(tk.ClientClosed):
        _ = client.compile_pool


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_selected_device_whose_compiler_fails_is_refused_at_the_first_compile_and_the_tune_blames_no_variant(
    isolated_settings: Path,
) -> None:
    broken = broken_device()
    if broken is None:
        pytest.skip("every OpenCL device here compiles (PoCL's LLVM 14 wheel on a CPU it does not know has one)")
    platform, device = broken
    says = rf"no OpenCL device matching platform={platform}, device={device} can build a trivial kernel: {platform}:"
    client = OpenCLClient(flush_cache=False, platform=platform, device=device, compile_in="process")
    try:
        # The only match: known at once, so inputs can be made while the probe runs.
        assert client.device.int_ptr == cl.get_platforms()[platform].get_devices()[device].int_ptr
        n = 64
        y = cla.zeros(client.queue, n, np.float32)
        template = KernelTemplate(DOUBLE, "double_it", {"BLOCK": [8, 16]}, geometry=lambda c, k: ((k.n,), (c.BLOCK,)))
        tunables = template.tunable_set(client, key=lambda *a: SizeKey(n=int(a[-1])))
        records: list[tk.AutotuneRecord] = []
        sink = tk.add_record_sink(records.append)
        try:
            with pytest.raises(tk.ClientClosed, match=says):  # the tune stops: no variant is to blame
                tk.LocalTuner[SizeKey, Any]("selection-broken").execute(
                    client.device_id, client, tunables, (y, np.int32(n))
                )
        finally:
            tk.remove_record_sink(sink)
        assert records == []
        with pytest.raises(RuntimeError, match=says):
            client.warm_up(1_000_000)
        thread = client._selection._thread
        assert thread is not None
        thread.join(60)  # it ends once it has refused the device, with nothing left to wait for
        assert not _probing(client)
        deadline = time.monotonic() + 60  # a worker killed while starting is uncounted by the thread awaiting it
        while any(p._starting for p in client._selection._pools) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(not p._alive and not p._starting for p in client._selection._pools)  # its workers stopped
    finally:
        client.close()
    # Where the probe builds in this process anyway, the client is not made at all.
    for kwargs in ({"compile_in": "thread"}, {"start_workers": "first_compile"}):
        with pytest.raises(RuntimeError, match=says):
            OpenCLClient(flush_cache=False, platform=platform, device=device, **kwargs)  # type: ignore[arg-type]


def _broken_first_vendors(tmp_path: Path) -> Path | None:
    """An ICD vendors directory whose first device fails to compile and a later one works, if this machine allows."""
    broken = broken_device()
    if broken is None:
        return None
    working = [Path(p) for p in sorted(Path("/etc/OpenCL/vendors").glob("*.icd"))]
    bundled = Path(cl.__file__).parent / ".libs"
    libraries = [bundled / line.strip() for line in (bundled / "pocl.icd").read_text().splitlines() if line.strip()]
    if not working or not libraries:
        return None
    # ocl-icd loads a directory in readdir order, which the file system decides: try both namings.
    for names in (("a", "b"), ("b", "a")):
        vendors = tmp_path / f"vendors-{''.join(names)}"
        vendors.mkdir()
        (vendors / f"{names[0]}.icd").write_text(f"{libraries[0]}\n")
        (vendors / f"{names[1]}.icd").write_text(working[0].read_text())
        listing = "import pyopencl as cl; print(cl.get_platforms()[0].get_devices()[0].name)"
        env = dict(os.environ, OCL_ICD_VENDORS=str(vendors))
        first = subprocess.run([sys.executable, "-c", listing], env=env, capture_output=True, text=True, check=False)
        broken_name = cl.get_platforms()[broken[0]].get_devices()[broken[1]].name
        if first.returncode == 0 and first.stdout.strip() == broken_name:
            return vendors
    return None


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_by_default_a_first_device_whose_compiler_fails_is_skipped_for_the_next_while_the_client_returns_at_once(
    tmp_path: Path,
) -> None:
    vendors = _broken_first_vendors(tmp_path)
    if vendors is None:
        pytest.skip("no broken OpenCL device here to list first (PoCL's LLVM 14 wheel on a CPU it does not know)")
    code = textwrap.dedent(
        """
        import logging, pyopencl as cl
        from tunekit_backends.opencl import OpenCLClient
        logging.basicConfig(format="%(levelname)s %(message)s")
        first = cl.get_platforms()[0].get_devices()[0]
        client = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1)
        print("pending", client._selection.pending, client._selection.known is None)
        (refused, *_) = client._selection._pools
        pool = client.compile_pool
        print("chose", client.device.name != first.name, pool is not refused and pool._where[1] == client.device.name)
        print("refused", refused._closed and not refused._alive, client.locator)
        client.close()
        """
    )
    env = dict(os.environ, OCL_ICD_VENDORS=str(vendors), POCL_CACHE_DIR=str(tmp_path / "pocl"))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    # Two devices match: the client returns before either is probed, and its device waits for the probes.
    assert done.stdout.splitlines()[:2] == ["pending True True", "chose True True"], done.stdout
    assert done.stdout.splitlines()[2].startswith("refused True opencl:platform="), done.stdout
    assert "WARNING skipping OpenCL device 0:0 " in done.stderr and "its compiler fails a trivial build" in done.stderr
