"""The ``tunekit`` command: the argument parser, and each sub-command bound to the function that runs it.

User mistakes (a missing file, an unknown tuner, a malformed bundle) end with one line on
stderr and exit code 2; data problems found by a command (corrupt records, invalid cache
rows) with exit code 1, and so does a ``cache clear`` the user answered no to.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from tunekit._base.errors import SettingsError
from tunekit._base.settings import configure
from tunekit._base.version import __version__
from tunekit._cli import (
    cache as _cache,
    campaign as _campaign,
    demo as _demo,
    devices as _devices,
    records as _records,
)
from tunekit._cli.error import CliError
from tunekit._cli.listings import LISTINGS

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake told in one line starting ``tunekit:``, exit code 2, as for every other mistake.

    argparse's own error prints the usage block and then ``tunekit cache list: error: ...``.
    Sub-commands' parsers are of this class too (``add_subparsers`` makes them of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tunekit").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"tunekit: {where}{message} (`{self.prog} --help` lists the arguments)\n")


Command = Callable[[argparse.Namespace], int]
"""A sub-command: runs with the parsed arguments, returns the exit code."""


def _command(parser: argparse.ArgumentParser, target: Command) -> None:
    """Bind ``target`` to run when this sub-command is chosen."""
    parser.set_defaults(target=target, command_parser=parser)


def _count(text: str) -> int:
    """An argparse type: an int >= 0 (``int`` alone would take ``-n -3`` as 0 and show nothing, silently)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _owners(parser: argparse.ArgumentParser, *, tuner: bool = True) -> None:
    if tuner:
        parser.add_argument("--tuner", help="only this tuner's entries")
    parser.add_argument("--device", help="only this device's entries (its id, or the short form tables show)")


def _filters(parser: argparse.ArgumentParser, *, tuner: bool = True) -> None:
    _owners(parser, tuner=tuner)
    parser.add_argument(
        "--key", action="append", default=[], metavar="FIELD=VALUE", help="only keys with this field value (repeatable)"
    )


def _age(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than", metavar="AGE", help="only winners tuned longer ago than AGE (30d, 12h, 90m, 45s, 2w)"
    )


def _store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        choices=_cache.STORES,
        help="the fleet's database (TUNEKIT_CACHE_URL) or this host's own cache; default: fleet when "
        "TUNEKIT_CACHE_URL is set, else local",
    )


def _listing(parser: argparse.ArgumentParser) -> None:
    """The options of every listing: the full text instead of a table fitted to the terminal, or JSON for a script."""
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--wide", action="store_true", help="full device ids and values, never wrapped")
    shown.add_argument("--json", action="store_true", help="JSON for scripts (its schema: `tunekit schema NAME`)")


def _cache_dir(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir`` after a ``cache`` action too, where an operator types it (``tunekit cache list --cache-dir B``).

    SUPPRESS: when not given here, the top-level option's value stands (a sub-parser's default would overwrite it).
    """
    parser.add_argument(
        "--cache-dir", default=argparse.SUPPRESS, help="the cache directory to use instead of TUNEKIT_CACHE_DIR"
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tunekit", description="Autotuning that measures on the real device.")
    parser.add_argument("--version", action="store_true", help="print tunekit's version and exit")
    parser.add_argument("--cache-dir", help="the cache directory to use instead of TUNEKIT_CACHE_DIR")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    _command(commands.add_parser("demo", help="tune the examples on this machine and print a table"), _demo.demo)

    devices = commands.add_parser("devices", help="list the devices tunekit can tune on, with their peaks")
    devices.add_argument("--no-peaks", action="store_true", help="skip measuring peak compute and bandwidth")
    _listing(devices)
    _command(devices, _devices.devices)

    cache = commands.add_parser("cache", help="inspect and move the persistent cache of winners")
    cache_commands = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    _command(cache_commands.add_parser("path", help="print the cache file's path"), _cache.path)
    listing = cache_commands.add_parser("list", help="one line per stored winner")
    _filters(listing)
    _age(listing)
    _listing(listing)
    _store(listing)
    _command(listing, _cache.list_rows)
    show = cache_commands.add_parser("show", help="every candidate's result for one tuner's keys")
    show.add_argument("tuner")
    _filters(show, tuner=False)
    _listing(show)
    _store(show)
    _command(show, _cache.show)
    clear = cache_commands.add_parser("clear", help="delete stored winners (all, or those matching the filters)")
    _filters(clear)
    _age(clear)
    clear.add_argument("-y", "--yes", action="store_true", help="clear without asking (needed where no terminal asks)")
    _store(clear)
    _command(clear, _cache.clear)
    export = cache_commands.add_parser("export", help="write winners to a committable JSON bundle")
    export.add_argument("-o", "--output", help="bundle file to write (default: stdout)")
    _filters(export)
    _store(export)
    _command(export, _cache.export)
    load = cache_commands.add_parser("import", help="store the winners of a bundle in this cache or the fleet's")
    load.add_argument("bundle")
    load.add_argument("--keep-existing", action="store_true", help="do not replace winners already stored here")
    _store(load)
    _command(load, _cache.import_bundle)
    verify = cache_commands.add_parser("verify", help="check every row against the schema")
    _command(verify, _cache.verify)
    for action in cache_commands.choices.values():
        _cache_dir(action)

    records = commands.add_parser("records", help="read records files (JSONL)")
    record_commands = records.add_subparsers(dest="records_command", metavar="ACTION", required=True)
    summary = record_commands.add_parser("summary", help="per tuner and key: winner, runner-up, margin, cost")
    summary.add_argument("file")
    summary.add_argument("--tuner", help="only this tuner's keys")
    summary.add_argument(
        "--key", action="append", default=[], metavar="FIELD=VALUE", help="only keys with this field value (repeatable)"
    )
    _listing(summary)
    _command(summary, _records.summary)
    tail = record_commands.add_parser("tail", help="print records as they are appended (Ctrl-C stops)")
    tail.add_argument("file")
    tail.add_argument("-n", "--lines", type=_count, default=10, help="existing records to show first (default 10)")
    _command(tail, _records.tail)

    schema = commands.add_parser("schema", help="print the JSON schema of AutotuneRecord or of a listing's --json")
    schema.add_argument("name", nargs="?", default="record", choices=("record", *LISTINGS), help="default: record")
    _command(schema, _records.schema)

    campaign = commands.add_parser("campaign", help="tune a declared list of jobs on a Ray cluster")
    campaign_commands = campaign.add_subparsers(dest="campaign_command", metavar="ACTION", required=True)
    campaign_run = campaign_commands.add_parser("run", help="run a campaign file's jobs not finished yet")
    campaign_run.add_argument("file", help="the campaign file (TOML or JSON)")
    campaign_run.add_argument("--address", help="the Ray cluster's address, HEAD:PORT (default: as ray.init finds it)")
    campaign_run.add_argument(
        "--max-retries", type=_count, help="re-runs of a job whose worker died (default: the file's)"
    )
    campaign_run.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    _command(campaign_run, _campaign.run)

    report = commands.add_parser("report", help="write a self-contained HTML report of one or more records files")
    report.add_argument("files", nargs="+", metavar="FILE", help="records files; several: runs to compare")
    report.add_argument("-o", "--output", default="report.html", help="HTML file to write (default: report.html)")
    _command(report, _records.report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tunekit`` command; returns the exit code."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Told by the sub-command's parser, whose --help lists what it takes; argparse's own
        # check reports them from the top level, pointing at `tunekit --help`.
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        print(f"tunekit {__version__}")
        return 0
    target: Command | None = getattr(args, "target", None)
    if target is None:
        parser.print_help()
        return 2
    try:
        if args.cache_dir is not None:
            try:
                configure(cache_dir=args.cache_dir)
            except SettingsError as error:  # it says the value came "from tk.configure(cache_dir=...)"
                raise CliError(str(error).replace("from tk.configure(cache_dir=...)", "from --cache-dir")) from None
        return int(target(args))
    except CliError as error:
        print(f"tunekit: {error}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tunekit ... | head` closed the pipe: not an error
        sys.stderr.close()
        return 0
    except SettingsError as error:  # it names each bad setting and where it came from
        print(f"tunekit: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
