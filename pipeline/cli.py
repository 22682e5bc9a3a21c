"""The `transduce` command line: a thin layer over library functions that the tests call directly.

Arguments are checked by Typer (choices, ranges) before any work starts, so a bad task name, split or count ends
with a usage error that names the value and lists what is allowed, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from enum import Enum
from pathlib import Path

import numpy as np
import typer

from pipeline import __version__
from pipeline.data.cache import DEFAULT_CACHE_DIR, generate_eval_sets
from pipeline.tasks import SPLITS, TASK_NAMES, get_task

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015).",
)

# Choices for Typer, built from the registries so that the CLI can never disagree with the library.
TaskName = Enum("TaskName", {name: name for name in TASK_NAMES}, type=str)
SplitName = Enum("SplitName", {name: name for name in SPLITS}, type=str)


def _at_least(minimum: int):
    """A Typer callback rejecting integers below ``minimum`` with a message that shows the value given."""

    def check(value: int) -> int:
        if value < minimum:
            raise typer.BadParameter(f"got {value}; it must be an integer >= {minimum}")
        return value

    return check


@app.callback()
def main() -> None:
    """Reproduce 'Learning to Transduce with Unbounded Memory' (Grefenstette et al., 2015)."""


@app.command()
def version() -> None:
    """Print the pipeline's version."""
    typer.echo(__version__)


@app.command()
def generate(
    tasks: list[TaskName] = typer.Argument(None, help="Tasks to generate (default: all).", show_default=False),
    cache_dir: Path = typer.Option(Path(DEFAULT_CACHE_DIR), "--cache-dir", help="Where the sets are cached."),
    force: bool = typer.Option(False, "--force", help="Regenerate sets that are already cached and valid."),
) -> None:
    """Fill the evaluation-set cache: train-, test- and long-length sets of 1000 pairs per task."""
    names = [task.value for task in tasks] if tasks else list(TASK_NAMES)
    start = time.perf_counter()
    with typer.progressbar(length=len(names) * len(SPLITS), label="eval sets", file=sys.stderr) as bar:
        sets = generate_eval_sets(names, cache_dir=cache_dir, force=force, progress=lambda _: bar.update(1))
    typer.echo(f"{len(sets)} evaluation sets ready in {cache_dir} ({time.perf_counter() - start:.1f} s)", err=True)


@app.command()
def sample(
    task: TaskName = typer.Argument(..., help="Task to sample from."),
    split: SplitName = typer.Option(SplitName.train, "--split", help="Source-length window."),
    n: int = typer.Option(5, "-n", callback=_at_least(1), help="Number of pairs."),
    seed: int = typer.Option(0, "--seed", callback=_at_least(0), help="Seed of numpy.random.default_rng."),
) -> None:
    """Print N pairs as JSON lines {"source": [...], "target": [...]}, tokens as strings."""
    chosen = get_task(task.value)
    for pair in chosen.sample_batch(np.random.default_rng(seed), split.value, n):
        typer.echo(json.dumps(chosen.decode(pair)))


@app.command("data-report")
def data_report(
    samples: int = typer.Option(100_000, "--samples", callback=_at_least(1), help="Derivations per grammar."),
    seed: int = typer.Option(0, "--seed", callback=_at_least(0), help="Seed of numpy.random.default_rng."),
    out: Path = typer.Option(Path("reports/data"), "--out", help="Output folder."),
) -> None:
    """Histogram the ITG grammars' sentence lengths before rejection and their acceptance rate per window."""
    from pipeline.tasks.lengths import write_length_report  # matplotlib is slow to import; only this needs it

    typer.echo(f"wrote {write_length_report(out, samples, seed)}", err=True)


if __name__ == "__main__":  # pragma: no cover
    app()
