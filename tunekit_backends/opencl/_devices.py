"""Every OpenCL device of this machine as a client, for ``tunekit devices``."""

from __future__ import annotations

from collections.abc import Iterator

from tunekit.backend import describe_error
from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._client import OpenCLClient

__all__ = ["found_clients"]


def found_clients() -> Iterator[tuple[str, OpenCLClient | str]]:
    """One client per OpenCL device (the ``tunekit.clients`` entry point); without pyopencl, how to get it."""
    try:
        platforms = [len(platform.get_devices()) for platform in pyopencl().get_platforms()]
    except ImportError as exc:
        # Said, not skipped: a user who installed plain `tunekit` would otherwise never learn that the
        # OpenCL devices are one extra away. The listing still exits 0: it is no error.
        yield "opencl", str(exc)
        return
    except Exception as exc:  # a broken ICD loader must not hide the other devices
        yield "opencl", describe_error(exc)
        return
    for p, count in enumerate(platforms):
        for d in range(count):
            # The label is how to select it: OpenCLClient(platform=p, device=d).
            label = f"opencl (platform={p}, device={d})"
            try:
                yield (
                    label,
                    OpenCLClient(platform=p, device=d, start_workers="first_compile"),
                )  # a listing compiles nothing
            except Exception as exc:
                yield label, describe_error(exc)
