"""Render a tunekit HTML report in headless Chromium, check it drew, and save screenshots for the docs.

    apt-get install -y chromium           # Debian's package
    python scripts/report_screenshot.py   # two real tunes on the CPU, then docs/img/report*.png

It tunes a two-parameter space (rows per block x reduction method of a numpy row-norm kernel)
for three sizes, twice, each run in its own process with its own cache and records file, as
two runs on different days would be; then ``tunekit report`` of both files. The screenshots:
the top of the page (summary, cost, the key x candidate grid), the history, and one key's
section (time against each parameter, the heat map, every sample). With records files as
arguments, reports those instead of tuning.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "img"
# (file, what part of the page, window height): the top (summary, cost, grid), the history, one key's section.
SHOTS = (("report.png", None, 1450), ("report-history.png", "history", 900), ("report-key.png", "key", 1900))
SIZES = (4_096, 32_768, 131_072)
BLOCKS = (64, 256, 1024, 4096, 16384)
METHODS = ("einsum", "square_sum", "norm")


@tk.autotune_key
class RowsKey:
    rows: Annotated[int, tk.Anchor()]


def _tune() -> None:
    """One run: tune every size of the row-norm space on the CPU client (records go where TUNEKIT_RECORD says)."""

    def kernel(block: int, method: str) -> tk.Tunable[np.ndarray]:
        def run(x: np.ndarray) -> np.ndarray:
            out = np.empty(x.shape[0], dtype=x.dtype)
            for start in range(0, x.shape[0], block):
                part = x[start : start + block]
                if method == "einsum":
                    out[start : start + block] = np.einsum("ij,ij->i", part, part)
                elif method == "square_sum":
                    out[start : start + block] = (part * part).sum(axis=1)
                else:
                    out[start : start + block] = np.linalg.norm(part, axis=1) ** 2
            return out

        # Named as a kernel template names its configurations, so the report reads them as a space.
        return tk.Tunable(f"row_norms[BLOCK={block},METHOD={method}]", run)

    client = CpuClient()
    tunables = tk.TunableSet(key=lambda x: RowsKey(rows=x.shape[0])).with_tunables(
        [kernel(block, method) for block in BLOCKS for method in METHODS]
    )
    tuner: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("row_norms")
    rng = np.random.default_rng(0)
    for rows in SIZES:
        tuner.execute(client.device_id, client, tunables, (rng.random((rows, 64), dtype=np.float32),))


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("report_screenshot: no chromium on PATH (Debian: apt-get install -y chromium)")


def _records(scratch: Path) -> list[Path]:
    runs = []
    for run in (1, 2):
        records = scratch / f"run{run}.jsonl"
        env = {
            **os.environ,
            "TUNEKIT_CACHE_DIR": str(scratch / f"cache{run}"),
            "TUNEKIT_RECORD": str(records),
            "TUNEKIT_PROGRESS": "0",
        }
        subprocess.run([sys.executable, __file__, "--tune"], check=True, env=env, cwd=ROOT)
        runs.append(records)
    return runs


def _part(report: Path, part: str) -> Path:
    """The page with only its history, or only its second key's section, in its body.

    Headless Chromium screenshots the top of a page only, so each part is given a page of its own,
    with the report's own head and style.
    """
    html = report.read_text(encoding="utf-8")
    head = html[: html.index("<body>") + len("<body>")]
    first_key = html.index('<section class="key-section">')
    if part == "history":
        body = html[html.index('<h2 id="history">') : first_key]
    else:
        body = '<section class="key-section">' + html.split('<section class="key-section">')[2].split("</section>")[0]
    page = report.with_name(f"{part}.html")
    page.write_text(f"{head}{body}</body></html>", encoding="utf-8")
    return page


def main() -> int:
    if sys.argv[1:] == ["--tune"]:
        _tune()
        return 0
    browser = _chromium()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        records = [Path(a) for a in sys.argv[1:]] or _records(scratch)
        report = scratch / "report.html"
        subprocess.run(
            [sys.executable, "-m", "tunekit", "report", *map(str, records), "-o", str(report)], check=True, cwd=ROOT
        )
        flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        dom = subprocess.run(
            [*flags, "--dump-dom", report.as_uri()], check=True, capture_output=True, text=True, timeout=120
        ).stdout
        plots = dom.count("<svg")
        if plots < 4 or '<table class="summary">' not in dom:
            sys.exit(f"report_screenshot: Chromium's DOM has {plots} plots; the report did not render")
        IMAGES.mkdir(parents=True, exist_ok=True)
        for name, part, height in SHOTS:
            target = IMAGES / name
            page = report if part is None else _part(report, part)
            subprocess.run(
                [*flags, f"--window-size=1150,{height}", f"--screenshot={target}", page.as_uri()],
                check=True,
                capture_output=True,
                timeout=120,
            )
            width, tall = struct.unpack(">II", target.read_bytes()[16:24])  # the PNG header's IHDR chunk
            print(f"screenshot {width}x{tall} written to {target.relative_to(ROOT)}")
        print(f"rendered {plots} plots from {len(records)} records files ({report.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
