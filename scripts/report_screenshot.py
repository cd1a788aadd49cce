"""Render a tunekit HTML report in headless Chromium, check it drew, and save the screenshot for the docs.

    apt-get install -y chromium          # Debian's package
    python scripts/report_screenshot.py  # tunes the demo in a scratch cache, writes docs/img/report.png

With a records file as argument, reports that file instead of running the demo.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "img" / "report.png"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("report_screenshot: no chromium on PATH (Debian: apt-get install -y chromium)")


def _records(scratch: Path) -> Path:
    records = scratch / "records.jsonl"
    env = {**os.environ, "TUNEKIT_CACHE_DIR": str(scratch / "cache"), "TUNEKIT_RECORD": str(records)}
    subprocess.run([sys.executable, "-m", "tunekit", "demo"], check=True, env=env, cwd=ROOT)
    return records


def main() -> int:
    browser = _chromium()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        records = Path(sys.argv[1]) if len(sys.argv) > 1 else _records(scratch)
        report = scratch / "report.html"
        subprocess.run([sys.executable, "-m", "tunekit", "report", str(records), "-o", str(report)], check=True)
        flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        dom = subprocess.run(
            [*flags, "--dump-dom", report.as_uri()], check=True, capture_output=True, text=True, timeout=120
        ).stdout
        plots = dom.count("<svg")
        if plots < 2 or "tunekit report" not in dom:
            sys.exit(f"report_screenshot: Chromium's DOM has {plots} plots; the report did not render")
        OUTPUT.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [*flags, "--window-size=1100,1400", f"--screenshot={OUTPUT}", report.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )
    width, height = struct.unpack(">II", OUTPUT.read_bytes()[16:24])  # the PNG header's IHDR chunk
    print(f"rendered {plots} plots; screenshot {width}x{height} written to {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
