"""A bench script loaded as a module, for the tests of what it prints and counts (benches/ is no package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHES = Path(__file__).resolve().parents[1] / "benches"


def load_bench(script: str) -> ModuleType:
    """``benches/<script>`` as the module ``bench_<stem>``, registered as an import would register it.

    Registered because forked workers find a job function by its module's name, and a dataclass's
    annotations are resolved through its module.
    """
    name = f"bench_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, BENCHES / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
