"""Record sinks: the JSONL file sink creates its file as a plain write would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_new_records_file_gets_the_mode_a_plain_open_would(tmp_path: Path) -> None:
    """The file was created 0644 whatever the umask, so a group-writable setup (umask 002) could not share it."""
    # The umask is per process and changing it here would race with other threads: a child sets it.
    script = (
        "import os, stat, sys\n"
        "import tunekit as tk\n"
        "os.umask(0o002)\n"
        "record = tk.AutotuneRecord(tuner='t', device_id='cpu:test', key={'n': 8}, checksum='c',\n"
        "                           decision='disabled', winner='a', stored=False, wall_time_s=0.0)\n"
        "tk.JsonlSink(sys.argv[1]).emit(record)\n"
        "print(oct(stat.S_IMODE(os.stat(sys.argv[1]).st_mode)))\n"
    )
    path = tmp_path / "records.jsonl"
    out = subprocess.run([sys.executable, "-c", script, str(path)], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == oct(0o664)
    assert path.read_text().count("\n") == 1
