"""Commands over the data: `generate` the evaluation sets, `sample` pairs, the ITG grammars' `data-report`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import typer

from pipeline.cli.app import MAX_SAMPLES, LengthReading, SplitName, TaskName, app, at_least
from pipeline.data.cache import cache_root, generate_eval_sets
from pipeline.tasks import DEFAULT_LENGTH_DISTRIBUTION, PAPER_TASK_NAMES, SPLITS, get_task


@app.command()
def generate(
    tasks: list[TaskName] = typer.Argument(None, show_default=False,
                                           help="Tasks to generate (default: the paper's five; name any other)."),
    cache_dir: Path = typer.Option(None, "--cache-dir", show_default=False,
                                   help="Where the sets are cached (default: data_cache/, or $TRANSDUCE_DATA_CACHE)."),
    force: bool = typer.Option(False, "--force", help="Regenerate sets that are already cached and valid."),
) -> None:
    """Fill the evaluation-set cache: train-, test- and long-length sets of 1000 pairs per task."""
    # Not every task by default: `make reproduce` fills the paper's cache, and a profile's sweep generates the sets
    # of its own tasks (the cross-checks of Delétang et al. among them) before training.
    names = [task.value for task in tasks] if tasks else list(PAPER_TASK_NAMES)
    start = time.perf_counter()
    with typer.progressbar(length=len(names) * len(SPLITS), label="eval sets", file=sys.stderr) as bar:
        sets = generate_eval_sets(names, cache_dir=cache_dir, force=force, progress=lambda _: bar.update(1))
    typer.echo(f"{len(sets)} evaluation sets ready in {cache_root(cache_dir)} ({time.perf_counter() - start:.1f} s)",
               err=True)


@app.command()
def sample(
    task: TaskName = typer.Argument(..., help="Task to sample from."),
    split: SplitName = typer.Option(SplitName.train, "--split", help="Source-length window."),
    length_distribution: LengthReading = typer.Option(
        DEFAULT_LENGTH_DISTRIBUTION, "--length-distribution",
        help="The ITG tasks' source lengths: uniform over the window, or the grammar's own."),
    n: int = typer.Option(5, "-n", callback=at_least(1, at_most=MAX_SAMPLES),
                          help=f"Number of pairs (at most {MAX_SAMPLES:,}: they are drawn at once)."),
    seed: int = typer.Option(0, "--seed", callback=at_least(0), help="Seed of numpy.random.default_rng."),
) -> None:
    """Print N pairs as JSON lines {"source": [...], "target": [...]}, tokens as strings."""
    chosen = get_task(task.value, length_distribution.value)
    for pair in chosen.sample_batch(np.random.default_rng(seed), split.value, n):
        typer.echo(json.dumps(chosen.decode(pair)))


@app.command("data-report")
def data_report(
    samples: int = typer.Option(100_000, "--samples", callback=at_least(1), help="Derivations per grammar."),
    seed: int = typer.Option(0, "--seed", callback=at_least(0), help="Seed of numpy.random.default_rng."),
    out: Path = typer.Option(Path("reports/data"), "--out", help="Output folder."),
) -> None:
    """Histogram the ITG grammars' sentence lengths before rejection and their acceptance rate per window."""
    from pipeline.reports.lengths import write_length_report  # matplotlib is slow to import; only this needs it

    typer.echo(f"wrote {write_length_report(out, samples, seed)}", err=True)
