"""``tunekit devices``: every client and device found here, with its id, locator and measured peaks."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from importlib.metadata import entry_points

from tunekit._base.errors import describe_error
from tunekit._measure.client import Client, SupportsLocator, SupportsPeaks

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
    """The ``locator:`` line for a client that has one: what ``OpenCLClient(locator=...)`` takes back."""
    try:
        # Inside the try: on Python 3.11 isinstance reads the property, so a broken one raises there.
        if not isinstance(client, SupportsLocator):
            return None
        return f"locator: {client.locator}"
    except Exception as exc:  # one client's broken property must not end the listing
        return f"locator: unavailable ({describe_error(exc)})"


def _peaks(client: Client) -> str:
    if not isinstance(client, SupportsPeaks):
        return "peaks: not measurable by this client"
    try:
        peaks = client.measure_peaks()
    except Exception as exc:
        return f"peaks: measurement failed ({describe_error(exc)})"
    return (
        f"peaks: {peaks.ops_per_s / 1e9:.3g} Gop/s compute, {peaks.bytes_per_s / 1e9:.3g} GB/s memory, "
        f"{peaks.launch_overhead_ns / 1e3:.3g} us launch overhead"
    )


def devices(args: argparse.Namespace) -> int:
    """Print one block per device: backend, device id, locator (if any) and (unless --no-peaks) measured peaks."""
    for backend, client in found_clients():
        if isinstance(client, str):
            print(f"{backend}: unavailable: {client}")
            continue
        print(f"{backend}: {client.device_id}")
        if (locator := _locator(client)) is not None:
            print(f"  {locator}")
        if not args.no_peaks:
            print(f"  {_peaks(client)}", flush=True)
    return 0
