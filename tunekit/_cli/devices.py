"""``tunekit devices``: every client and device found here, with its id, locator and measured peaks."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from importlib.metadata import entry_points

from tunekit._base.errors import describe_error
from tunekit._base.short_id import short_device_id
from tunekit._base.units import format_duration_ns
from tunekit._cli.listings import DeviceEntry, DeviceList
from tunekit._cli.table import Output, fixed, print_json
from tunekit._measure.client import Client, DevicePeaks, SupportsLocator, SupportsPeaks

__all__ = ["CLIENTS_GROUP", "devices", "found_clients"]


CLIENTS_GROUP = "tunekit.clients"
"""The entry-point group where a backend names its ``found_clients() -> Iterator[(label, client or reason)]``."""


def found_clients() -> Iterator[tuple[str, Client | str]]:
    """(backend, client) for each device every installed backend finds; a backend that cannot start yields its reason.

    Backends are found by entry point, so a third-party backend lists its devices here by declaring one.
    """
    for entry in sorted(entry_points(group=CLIENTS_GROUP), key=lambda e: e.name):
        try:
            find = entry.load()
        except ImportError:  # its optional extra is not installed: not an error for a listing
            continue
        except Exception as exc:
            yield entry.name, describe_error(exc)
            continue
        yield from find()


def _locator(client: Client) -> str | None:
    """What ``OpenCLClient(locator=...)`` takes back, for a client that has one."""
    try:
        # Inside the try: on Python 3.11 isinstance reads the property, so a broken one raises there.
        if not isinstance(client, SupportsLocator):
            return None
        return client.locator
    except Exception as exc:  # one client's broken property must not end the listing
        return f"unavailable ({describe_error(exc)})"


def _peaks(client: Client, measure: bool) -> DevicePeaks | str:
    """The measured peaks, or why there are none."""
    if not measure:
        return "not measured (--no-peaks)"
    if not isinstance(client, SupportsPeaks):
        return "not measurable by this client"
    try:
        return client.measure_peaks()
    except Exception as exc:
        return f"measurement failed ({describe_error(exc)})"


def _entry(backend: str, client: Client | str, measure: bool) -> DeviceEntry:
    if isinstance(client, str):
        return DeviceEntry(
            backend=backend,
            device_id=None,
            device_short=None,
            locator=None,
            unavailable=client,
            ops_per_s=None,
            bytes_per_s=None,
            launch_overhead_ns=None,
            peaks_note=None,
        )
    peaks = _peaks(client, measure)
    measured = peaks if isinstance(peaks, DevicePeaks) else None
    return DeviceEntry(
        backend=backend,
        device_id=client.device_id,
        device_short=short_device_id(client.device_id),
        locator=_locator(client),
        unavailable=None,
        ops_per_s=measured.ops_per_s if measured else None,
        bytes_per_s=measured.bytes_per_s if measured else None,
        launch_overhead_ns=measured.launch_overhead_ns if measured else None,
        peaks_note=peaks if isinstance(peaks, str) else None,
    )


def _peaks_cells(entry: DeviceEntry) -> tuple[str, str, str]:
    """Compute, memory and launch overhead; else why they are not known, and dashes."""
    if entry.ops_per_s is None or entry.bytes_per_s is None:
        return (entry.peaks_note or "-", "-", "-")
    return (
        f"{entry.ops_per_s / 1e9:.3g} Gop/s",
        f"{entry.bytes_per_s / 1e9:.3g} GB/s",
        format_duration_ns(entry.launch_overhead_ns),
    )


def devices(args: argparse.Namespace) -> int:
    """A table of the devices: backend, device id, locator and (unless --no-peaks) measured peaks.

    Backends that could not start are listed below it with their reason. The table prints once
    every device is measured (seconds each): its columns need every width first.
    """
    out = Output.of(args)
    entries = [_entry(backend, client, not args.no_peaks) for backend, client in found_clients()]
    if args.json:
        print_json(DeviceList(devices=entries))
        return 0
    found = [e for e in entries if e.device_id is not None]
    if found:
        peaks = () if args.no_peaks else (fixed("compute"), fixed("memory"), fixed("launch"))
        rows = [(out.device(e.device_id or ""), *(() if args.no_peaks else _peaks_cells(e))) for e in found]
        separate = [
            (e.backend, device, e.locator or "-", *rest) for e, (device, *rest) in zip(found, rows, strict=True)
        ]
        if out.fits(("backend", fixed("device"), "locator", *peaks), separate):
            out.table(("backend", fixed("device"), "locator", *peaks), separate)
        else:
            # Too narrow for both: a locator names its backend and device (`opencl:platform=0,device=0`, what
            # the backend label `opencl (platform=0, device=0)` says again), so one column shows the locator,
            # or the backend where there is none, and neither is split mid-word at 80 columns.
            merged = [(e.locator or e.backend, device, *rest) for e, (device, *rest) in zip(found, rows, strict=True)]
            out.table(("locator or backend", fixed("device"), *peaks), merged)
    for e in entries:
        if e.unavailable is not None:
            out.line(f"{e.backend}: unavailable: {e.unavailable}")
    return 0
