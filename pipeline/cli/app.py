"""The `transduce` command line's frame: the Typer app with its one error boundary, the choices its options take
(built from the registries, so the CLI cannot disagree with the library) and the checks they share. Arguments are
checked by Typer before any work starts: a bad task name, split or count is a usage error naming the value and what
is allowed, never a traceback."""

from __future__ import annotations

import errno
import math
import os
import signal
import sys
import typing
from enum import Enum
from pathlib import Path

import typer
from typer.core import TyperGroup

from pipeline import __version__
from pipeline.config import MODEL_NAMES, ConfigError, TrainingConfig
from pipeline.tasks import LENGTH_DISTRIBUTIONS, SPLITS, TASK_NAMES


class Commands(TyperGroup):
    """The command line's one error boundary. Whatever a command meets that a user can act on comes out as one line
    on standard error and exit status 2, never a traceback: a :class:`ConfigError` (bad input, a damaged run, a
    refused report, each naming the offending value), and an :class:`OSError` from the filesystem (a read-only or
    missing folder, a file where a folder should be), named with its path."""

    # `transduce --help` lists the commands in the order a researcher meets them, whichever file registered them
    ORDER = ("version", "demo", "generate", "sample", "data-report", "train", "evaluate", "inspect", "sweep", "runs",
             "dashboard", "archive", "study", "screen", "report", "params", "bench")

    def list_commands(self, ctx):
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: self.ORDER.index(name) if name in self.ORDER else len(self.ORDER))

    def format_commands(self, ctx, formatter):
        """Each command with the first sentence of its help, whole and wrapped (Click cuts it at ~45 columns with
        "...", mid-sentence)."""
        from click.utils import make_default_short_help

        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, make_default_short_help(command.help or "", max_length=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as error:
            fail(error)
        except BrokenPipeError:
            # The reader of standard output went away (`transduce ... | head`): no filesystem problem to report. Stop
            # quietly with the status of a process killed by SIGPIPE, as a Unix tool does, and point standard output
            # at /dev/null so that the interpreter's final flush does not fail again (Python's "Note on SIGPIPE").
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):  # standard output that is no file (a test's capture)
                pass
            raise SystemExit(128 + signal.SIGPIPE) from None
        except OSError as error:
            where = f" ({error.filename})" if error.filename else ""
            remedy = ("free some space on that disk (what was there is kept whole), or write elsewhere"
                      if error.errno == errno.ENOSPC else "check that the folder exists, is a folder and is writable, "
                      "or give another")
            fail(OSErrorLine(f"{error.strerror or error}{where}: {remedy} (--runs-dir, --out, --to, "
                             "$TRANSDUCE_DATA_CACHE)"))


class OSErrorLine(Exception):
    """An OSError said in one line."""


app = typer.Typer(
    cls=Commands,
    add_completion=False,
    # Click's own help, not Typer's rich panels: those print every flag with a type, "--restore <bool>", as if it took
    # a value, and wrap command summaries where their docstrings wrap
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015).",
)

def choices(name: str, *values: str) -> type[Enum]:
    """A string Enum whose members are ``values``: how Typer lists and checks an option's allowed values."""
    return Enum(name, {value: value for value in values}, type=str)


# Choices for Typer, built from the registries so that the CLI can never disagree with the library.
TaskName = choices("TaskName", *TASK_NAMES)
SplitName = choices("SplitName", *SPLITS)
LengthReading = choices("LengthReading", *LENGTH_DISTRIBUTIONS)
ModelName = choices("ModelName", *MODEL_NAMES)
TrackingMode = choices("TrackingMode", "offline", "online", "off")
Optimizer = choices("Optimizer", *typing.get_args(typing.get_type_hints(TrainingConfig)["optimizer"]))


Accelerator = choices("Accelerator", "auto", "cpu", "cuda")

MAX_SAMPLES = 100_000  # `sample -n`: pairs are drawn as one array (-n 99999999999 asked numpy for 745 GiB)


def at_least(minimum: int, at_most: int | None = None):
    """A Typer callback rejecting integers below ``minimum`` (or above ``at_most``) with a message that shows the
    value given (an option left out, None, passes)."""

    def check(value: int | None) -> int | None:
        if value is not None and value < minimum:
            raise typer.BadParameter(f"got {value}; it must be an integer >= {minimum}")
        if value is not None and at_most is not None and value > at_most:
            raise typer.BadParameter(f"got {value}; it must be an integer <= {at_most:,}")
        return value

    return check


@app.callback()
def main() -> None:
    """Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015)."""


@app.command()
def version() -> None:
    """Print the pipeline's version."""
    typer.echo(__version__)


def positive_float(value: float | None) -> float | None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise typer.BadParameter(f"got {value}; it must be a finite number > 0")
    return value


def fail(error: Exception) -> None:
    typer.echo(f"Error: {error}", err=True)
    raise typer.Exit(code=2)


def load_profile(profile: Path, *, runs: bool = False, reports: bool = False):
    """A profile, validated (a ConfigError names the key; the boundary says it in one line). ``runs`` / ``reports``:
    the command is to write into the profile's default runs / reports folder, which must not be another profile's
    (``check_own_folders``)."""
    from pipeline.sweep import load_sweep
    from pipeline.sweep.grid import check_own_folders

    config = load_sweep(profile)
    check_own_folders(config, profile, runs=runs, reports=reports)
    return config


def existing_runs_dir(runs_dir: Path | None) -> None:
    """A command that only reads a profile's runs (report, runs, dashboard, archive, sweep --status, --report-only)
    refuses a ``--runs-dir`` that is not a folder: a typo would otherwise read as a sweep with no runs, and archive
    nothing, list every run as pending, or write an empty report with --force. (Commands that train create it.)"""
    if runs_dir is not None and not runs_dir.is_dir():
        what = "is not a folder" if runs_dir.exists() else "does not exist"
        fail(ConfigError(f"--runs-dir {str(runs_dir)!r} {what}: a command that reads runs needs the folder that holds "
                         "them (default: runs/<profile name>)"))


def remaking(command: str, profile: Path, runs_dir: Path | None, out: Path | None, force: bool = False) -> str:
    """The command that makes a profile's report again, as its "Made by" line records it: the folders it was read
    from and written to where they are not the profile's defaults, and ``--force`` where it was given, each word
    quoted as a shell needs it."""
    from pipeline.provenance import command_line

    return command_line("transduce", command, profile, *(("--runs-dir", runs_dir) if runs_dir is not None else ()),
                        *(("--out", out) if out is not None else ()), *(("--force",) if force else ()))


ALLOW_DIRTY_HELP = ("Train on a checkout with uncommitted changes to tracked files (runs record the commit as "
                    "'-dirty'); refused otherwise.")


def allow_dirty_option():
    return typer.Option(False, "--allow-dirty", help=ALLOW_DIRTY_HELP)


def allow_dirty(allowed: bool) -> None:
    """``--allow-dirty``: for this command and every worker it starts (they inherit the environment)."""
    if allowed:
        import os

        from pipeline.provenance import ALLOW_DIRTY_ENV

        os.environ[ALLOW_DIRTY_ENV] = "1"
