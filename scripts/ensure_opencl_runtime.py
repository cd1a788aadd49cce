"""Make sure an OpenCL device here can build and run a kernel; install Debian's PoCL if not.

`pyopencl[pocl]` brings a PoCL whose LLVM 14 does not know recent CPUs (it fails every build
with "unknown target CPU", PoCL issue #1049, seen on AMD Zen 5). Debian's `pocl-opencl-icd`
(PoCL 3.1, LLVM 15) works there, and pyopencl's ICD loader finds it by itself. `make test`
and `make demo` run this first, so a fresh machine needs nothing installed by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGE = "pocl-opencl-icd"
PROBE = """
import numpy as np, pyopencl as cl
ok = []
for platform in cl.get_platforms():
    for device in platform.get_devices():
        try:
            ctx = cl.Context([device])
            queue = cl.CommandQueue(ctx)
            prg = cl.Program(ctx, "kernel void k(global float* a) { a[get_global_id(0)] = 2.0f; }").build()
            out = np.zeros(4, np.float32)
            buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
            prg.k(queue, (4,), None, buf)
            cl.enqueue_copy(queue, out, buf)
            queue.finish()
            if (out == 2.0).all():
                ok.append(f"{platform.name} / {device.name}")
        except Exception as exc:
            print(f"  {platform.name} / {device.name}: {str(exc).splitlines()[0]}")
print("OK: " + "; ".join(ok) if ok else "NONE")
"""


def _probe() -> bool:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    print(result.stdout.strip() or result.stderr.strip().splitlines()[-1:])
    return result.returncode == 0 and "OK: " in result.stdout


def main() -> int:
    """Exit 0 when an OpenCL device works (after installing Debian's PoCL if needed)."""
    if _probe():
        return 0
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print(
            f"no OpenCL device here can build a kernel; install Debian's PoCL: sudo apt-get install -y {PACKAGE}",
            file=sys.stderr,
        )
        return 1
    print(f"no OpenCL device can build a kernel: installing {PACKAGE} from Debian")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", PACKAGE], check=True, env=env)
    if _probe():
        return 0
    print("still no OpenCL device that can build a kernel after installing PoCL", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
