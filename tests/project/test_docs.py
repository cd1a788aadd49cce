"""The docs run: every python block of every page (and of the README) is executed, in order, as a reader would."""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import logging
import os
import re
import shlex
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import tunekit as tk
import tunekit._observe.hit_count as hit_count
import tunekit._observe.observers as observers
import tunekit._observe.sinks as sinks
from tunekit._cli.main import _parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A fence at any indentation (a block inside a list item), closed at the same indentation.
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<language>[\w-]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```[ ]*$", re.S | re.M)
# What a block may be tagged: python runs; the others are shown, not run (shell and output, a diagram, config).
LANGUAGES = {"python", "bash", "text", "mermaid", "toml"}
PAGES = sorted([*DOCS.glob("*.md"), ROOT / "README.md"])
# opencl.md and from-kernel-tuner.md compile in worker processes; robustness.md isolates candidates in worker
# processes; quickstart.md runs its shell blocks (where it is run with them).
MARKS = {
    "opencl.md": [pytest.mark.opencl, pytest.mark.subprocess, pytest.mark.slow],
    "from-kernel-tuner.md": [pytest.mark.opencl, pytest.mark.subprocess, pytest.mark.slow],
    "robustness.md": [pytest.mark.subprocess],
    "quickstart.md": [pytest.mark.subprocess],  # its shell blocks run `tunekit` on what its python blocks wrote
}


def _blocks(page: Path) -> list[tuple[str, str]]:
    text = page.read_text(encoding="utf-8")
    return [(m["language"], textwrap.dedent(m["code"])) for m in FENCE.finditer(text)]


# A page's first python block may start by naming the file it is (`# mylib/kernels.py`): the page then runs as
# that module, so an import path to what it defines (a campaign's target, "mylib.kernels:ROW_SUM") resolves as
# in the reader's project, not under a name of this test's own.
MODULE_FILE = re.compile(r"# (?P<path>\w+(?:/\w+)*)\.py\n")


def _module_name(page: Path) -> str:
    """The module a page's snippets run as: the file its first python block names, else ``docs_page``."""
    first = next((code for language, code in _blocks(page) if language == "python"), "")
    named = MODULE_FILE.match(first)
    return named["path"].replace("/", ".") if named else "docs_page"


def _python_pages() -> Iterator[object]:
    for page in PAGES:
        if page.name != "quickstart.md" and any(language == "python" for language, _ in _blocks(page)):
            yield pytest.param(page, id=page.name, marks=MARKS.get(page.name, []))


@contextlib.contextmanager
def _fresh_page_module(where: Path, name: str = "docs_page") -> Iterator[types.ModuleType]:
    """A real module ``name`` to run a page in (key classes resolve their annotations there), in directory ``where``.

    The sinks, observers, settings and log level a page sets are undone after it, as a new process starts
    without them, so pages (and two runs of one page) do not leak into each other.
    """
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(where)
        monkeypatch.setattr(sys, "path", list(sys.path))  # a page that makes a package (libraries.md) imports it
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setattr(observers, "_observers", observers._observers)
        counter = hit_count.current_counter()
        kept = list(sinks.global_sinks())
        level = logging.getLogger("tunekit").level
        try:
            yield module
        finally:
            for sink in sinks.global_sinks():
                if sink not in kept:
                    tk.remove_record_sink(sink)
            logging.getLogger("tunekit").setLevel(level)
            if hit_count.current_counter() is not counter:
                # A page that turned count_hits on started the process's counter, an observer the restored
                # observers no longer hold: a later test's first read from the cache file went uncounted.
                hit_count.stop_hit_counter()
            tk.configure()  # a page's overrides end with it, as they end with a reader's process
            fusion = sys.modules.get("tunekit_backends.opencl._fusion")
            if fusion is not None:  # the ops a page registered (opencl.md) go with it: a name is registered once
                for name, op in list(fusion.OPS.items()):
                    if getattr(op.numpy, "__module__", None) == module.__name__:
                        del fusion.OPS[name]
            module.__dict__.clear()
            for name, imported in list(sys.modules.items()):
                if str(getattr(imported, "__file__", None) or "").startswith(str(where)):
                    del sys.modules[name]
            gc.collect()  # the page's tunable sets release their keys before the next page tunes


@pytest.fixture
def page_module(tmp_path: Path) -> Iterator[types.ModuleType]:
    """A fresh module to run a page in, in a fresh directory (the test's own cache directory is beside it)."""
    with _fresh_page_module(tmp_path) as module:
        yield module


def _run_python(code: str, where: str, module: types.ModuleType) -> None:
    exec(compile(code, where, "exec"), module.__dict__)


def _run_bash(code: str, where: str) -> None:
    """Runs a shell block in the working directory, with this venv's `tunekit` first on the PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, f"{where}:\n{code}\n{done.stdout}\n{done.stderr}"


def test_every_block_is_tagged_with_a_known_language() -> None:
    wrong = [
        f"{page.name} block {number}: {language or 'untagged'}"
        for page in PAGES
        for number, (language, _) in enumerate(_blocks(page), start=1)
        if language not in LANGUAGES
    ]
    assert wrong == [], f"tag each block with one of {sorted(LANGUAGES)}"


@pytest.mark.parametrize("page", list(_python_pages()))
def test_every_python_block_of_the_page_runs_in_order(page: Path, tmp_path: Path) -> None:
    with _fresh_page_module(tmp_path, _module_name(page)) as module:
        for number, (language, code) in enumerate(_blocks(page), start=1):
            if language == "python":
                _run_python(code, f"{page.name} block {number}", module)


@pytest.mark.subprocess
def test_every_quickstart_block_runs(tmp_path: Path, page_module: types.ModuleType) -> None:
    blocks = _blocks(DOCS / "quickstart.md")
    assert len(blocks) >= 5
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    for number, (language, code) in enumerate(blocks, start=1):
        if language == "python":
            _run_python(code, f"quickstart.md block {number}", page_module)
        elif language == "bash":
            _run_bash(code, f"quickstart.md block {number}")
        else:
            pytest.fail(f"quickstart block {number} is {language or 'untagged'}: this test cannot run it")
    tk.remove_record_sink(sink)
    assert [r.key for r in records if r.tuner == "row_sum"] == [
        {"n": 1024, "dtype": "float32"},
        {"n": 4096, "dtype": "float32"},
    ]
    (grouped,) = [r for r in records if r.tuner == "quickstart_row_sum"]
    assert {c.name: c.status for c in grouped.candidates} == {"np_sum": "measured", "einsum": "skipped"}
    assert "<svg" in (tmp_path / "report.html").read_text()


def _rerun_pages() -> Iterator[object]:
    for page in PAGES:
        if any(language == "python" for language, _ in _blocks(page)):
            yield pytest.param(page, id=page.name, marks=[*MARKS.get(page.name, []), pytest.mark.slow])


@pytest.mark.parametrize("page", list(_rerun_pages()))
def test_every_page_runs_again_against_the_cache_its_first_run_filled(page: Path, tmp_path: Path) -> None:
    """A reader who runs a page's snippets twice (one cache, one directory) sees the second run pass too.

    The second run's calls are served by the winners the first stored, so a snippet that needs a tune
    (to show its record, its events, its prepare hook) has to make that tune happen itself.
    """
    for run in ("first", "second"):
        with _fresh_page_module(tmp_path, _module_name(page)) as module:
            for number, (language, code) in enumerate(_blocks(page), start=1):
                where = f"{page.name} block {number}, {run} run"
                if language == "python":
                    _run_python(code, where, module)
                elif language == "bash" and page.name == "quickstart.md":
                    _run_bash(code, where)


def test_the_quickstart_starts_with_the_readme_example() -> None:
    readme = [code for language, code in _blocks(ROOT / "README.md") if language == "python"]
    quickstart = [code for language, code in _blocks(DOCS / "quickstart.md") if language == "python"]
    assert readme[0] == quickstart[0], "README and quickstart examples drifted apart"


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [
        name for name in tk.Settings.model_fields if f"`{name}`" not in page or f"`TUNEKIT_{name.upper()}`" not in page
    ]
    assert not missing, f"docs/configuration.md lacks a row for: {missing}"


def test_every_docs_page_is_in_the_nav_once() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert [p for p in pages if f" {p}" not in nav] == []
    # A page listed twice shows twice on the site.
    assert [p for p in pages if nav.count(f" {p}\n") > 1] == []


def test_every_logger_is_under_tunekit_and_documented() -> None:
    page = (DOCS / "observability.md").read_text(encoding="utf-8")
    names = {
        match.group(1)
        for folder in ("tunekit", "tunekit_backends")
        for source in (ROOT / folder).rglob("*.py")
        for match in re.finditer(r"""getLogger\(["']([^"']+)["']\)""", source.read_text(encoding="utf-8"))
    }
    assert names and all(name.startswith("tunekit.") for name in names), names
    assert sorted(name for name in names if f"`{name}`" not in page) == [], "add them to docs/observability.md"


def test_every_layer_is_on_the_architecture_page() -> None:
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    layers = sorted(p.parent.name for p in (ROOT / "tunekit").glob("_*/__init__.py"))
    assert [layer for layer in layers if f"`{layer}`" not in page] == [], "add them to docs/architecture.md"


def _shell_commands(line: str) -> Iterator[list[str]]:
    """The simple commands of one shell line: split at pipes, `&&` and `;`, a redirection's target left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    command: list[str] | None = []
    for word in [*lexer, ";"]:
        if set(word) <= set("|&;<>()"):
            if command:
                yield command
            command = None if word[0] in "<>" else []  # the word after a redirection is its file
        elif command is None:
            command = []
        else:
            command.append(word)


def _shell_lines(page: Path) -> Iterator[str]:
    """The lines a page's bash blocks run, and those its text blocks show typed after `$ `."""
    for language, code in _blocks(page):
        for line in code.splitlines():
            if language == "bash":
                yield line
            elif language == "text" and line.startswith("$ "):
                yield line[2:]


def _tunekit_invocations(page: Path) -> Iterator[list[str]]:
    """Each `tunekit ...` of a page's shell lines, as its arguments."""
    for line in _shell_lines(page):
        for words in _shell_commands(line):
            command = list(itertools.dropwhile(lambda w: re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w), words))  # VAR=x
            if command and command[0] == "tunekit":
                yield command[1:]


def test_every_tunekit_command_the_docs_show_is_one_the_cli_accepts() -> None:
    """Shell blocks are not run (they need a cluster, a database, a live file): each command is parsed as tunekit is."""
    parser = _parser()
    refused = []
    shown = 0
    for page in PAGES:
        for arguments in _tunekit_invocations(page):
            shown += 1
            try:
                with contextlib.redirect_stderr(io.StringIO()) as said:
                    parser.parse_args(arguments)
            except SystemExit:
                refused.append(f"{page.name}: tunekit {shlex.join(arguments)}: {said.getvalue().strip()}")
    assert shown >= 40, "the shell blocks' commands were not found"
    assert refused == []


def test_every_test_the_docs_name_exists() -> None:
    """A page citing a test as evidence (`tests/x/test_y.py::test_z`, `test_y.py::test_z`) cites one that is there."""
    tests = {path.name: path for path in (ROOT / "tests").rglob("test_*.py")}
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"\b(?:tests/(?:\w+/)*)?(test_\w+\.py)(?:::(test_\w+))?", text):
            path = tests.get(match[1])
            cited = ROOT / match[0].split("::")[0]
            if path is None or ("/" in match[0] and not cited.exists()):
                missing.append(f"{page.name}: {match[0]}: no such file")
            elif match[2] and not re.search(rf"^\s*def {match[2]}\(", path.read_text(encoding="utf-8"), re.M):
                missing.append(f"{page.name}: {match[0]}: no such test")
    assert missing == []


def test_the_package_docstring_flow_runs(page_module: types.ModuleType) -> None:
    """`help(tunekit)` shows the whole flow as a `::` block: it runs, as the pages' snippets do."""
    doc = tk.__doc__ or ""
    literal = re.search(r"::\n\n(?P<code>(?:    .*\n|\n)+)", doc)
    assert literal is not None, "the package docstring lost its example"
    _run_python(textwrap.dedent(literal["code"]), "tunekit.__doc__", page_module)
    assert "row_sum" in page_module.__dict__ and page_module.TUNER.name == "row_sum"
