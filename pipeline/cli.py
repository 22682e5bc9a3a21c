"""The `transduce` command line: a thin layer over library functions that the tests call directly.

Arguments are checked by Typer (choices, ranges) before any work starts, so a bad task name, split or count ends
with a usage error that names the value and lists what is allowed, never a traceback.
"""

from __future__ import annotations

import json
import math
import sys
import time
from enum import Enum
from pathlib import Path

import numpy as np
import typer
from typer.core import TyperGroup

from pipeline import __version__
from pipeline.config import MODEL_NAMES, ConfigError, RunConfig
from pipeline.data.cache import cache_root, generate_eval_sets
from pipeline.rundir import RunDir
from pipeline.tasks import DEFAULT_LENGTH_DISTRIBUTION, LENGTH_DISTRIBUTIONS, SPLITS, TASK_NAMES, get_task


class Commands(TyperGroup):
    """The command line's one error boundary. Whatever a command meets that a user can act on comes out as one line
    on standard error and exit status 2, never a traceback: a :class:`ConfigError` (bad input, a damaged run, a
    refused report, each naming the offending value), and an :class:`OSError` from the filesystem (a read-only or
    missing folder, a file where a folder should be), named with its path."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as error:
            _fail(error)
        except OSError as error:
            where = f" ({error.filename})" if error.filename else ""
            _fail(OSErrorLine(f"{error.strerror or error}{where}: check that the folder exists, is a folder and is "
                              "writable, or give another (--runs-dir, --out, --to, $TRANSDUCE_DATA_CACHE)"))


class OSErrorLine(Exception):
    """An OSError said in one line."""


app = typer.Typer(
    cls=Commands,
    add_completion=False,
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


Accelerator = choices("Accelerator", "auto", "cpu", "cuda")

MAX_SAMPLES = 100_000  # `sample -n`: pairs are drawn as one array (-n 99999999999 asked numpy for 745 GiB)


def _at_least(minimum: int, at_most: int | None = None):
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


@app.command()
def generate(
    tasks: list[TaskName] = typer.Argument(None, help="Tasks to generate (default: all).", show_default=False),
    cache_dir: Path = typer.Option(None, "--cache-dir", show_default=False,
                                   help="Where the sets are cached (default: data_cache/, or $TRANSDUCE_DATA_CACHE)."),
    force: bool = typer.Option(False, "--force", help="Regenerate sets that are already cached and valid."),
) -> None:
    """Fill the evaluation-set cache: train-, test- and long-length sets of 1000 pairs per task."""
    names = [task.value for task in tasks] if tasks else list(TASK_NAMES)
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
    n: int = typer.Option(5, "-n", callback=_at_least(1, at_most=MAX_SAMPLES),
                          help=f"Number of pairs (at most {MAX_SAMPLES:,}: they are drawn at once)."),
    seed: int = typer.Option(0, "--seed", callback=_at_least(0), help="Seed of numpy.random.default_rng."),
) -> None:
    """Print N pairs as JSON lines {"source": [...], "target": [...]}, tokens as strings."""
    chosen = get_task(task.value, length_distribution.value)
    for pair in chosen.sample_batch(np.random.default_rng(seed), split.value, n):
        typer.echo(json.dumps(chosen.decode(pair)))


@app.command("data-report")
def data_report(
    samples: int = typer.Option(100_000, "--samples", callback=_at_least(1), help="Derivations per grammar."),
    seed: int = typer.Option(0, "--seed", callback=_at_least(0), help="Seed of numpy.random.default_rng."),
    out: Path = typer.Option(Path("reports/data"), "--out", help="Output folder."),
) -> None:
    """Histogram the ITG grammars' sentence lengths before rejection and their acceptance rate per window."""
    from pipeline.reports.lengths import write_length_report  # matplotlib is slow to import; only this needs it

    typer.echo(f"wrote {write_length_report(out, samples, seed)}", err=True)


def _positive_float(value: float | None) -> float | None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise typer.BadParameter(f"got {value}; it must be a finite number > 0")
    return value


def _fail(error: Exception) -> None:
    typer.echo(f"Error: {error}", err=True)
    raise typer.Exit(code=2)


_RUN = RunConfig()


@app.command()
def train(
    task: TaskName = typer.Option(None, "--task", show_default=_RUN.task,
                                  help="Task (default: the config's, else this)."),
    length_distribution: LengthReading = typer.Option(
        None, "--length-distribution", show_default=_RUN.length_distribution,
        help="The ITG tasks' source lengths: uniform over each window, or the grammar's own (docs/tasks.md)."),
    model: ModelName = typer.Option(None, "--model", show_default=_RUN.model.name,
                                    help="Architecture (default: the config's, else this)."),
    hidden: int = typer.Option(None, "--hidden", callback=_at_least(1), show_default=str(_RUN.model.hidden),
                               help="LSTM hidden size (paper: 256 or 512)."),
    lr: float = typer.Option(None, "--lr", callback=_positive_float, show_default=f"{_RUN.training.lr:g}",
                             help="RMSProp learning rate."),
    max_batches: int = typer.Option(None, "--max-batches", callback=_at_least(1),
                                    show_default=str(_RUN.training.max_batches),
                                    help="Batch budget; raise it on a finished run (--run-dir) to extend it."),
    seed: int = typer.Option(None, "--seed", callback=_at_least(0), show_default=str(_RUN.training.seed),
                             help="Seed of the data stream and the initialisation."),
    eval_every: int = typer.Option(None, "--eval-every", callback=_at_least(1),
                                   show_default=str(_RUN.training.eval_every),
                                   help="Evaluate coarse/fine every N batches."),
    checkpoint_every: int = typer.Option(None, "--checkpoint-every", callback=_at_least(1),
                                         show_default=str(_RUN.training.checkpoint_every),
                                         help="Write last.ckpt (for resuming) every N batches."),
    config: Path = typer.Option(None, "--config", help="A run config YAML (see configs/run.yaml); flags override it. "
                                "Default: the --run-dir's own config.yaml if it has one, else the defaults."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default: runs/<run id>)."),
    wandb: str = typer.Option(None, "--wandb", show_default=_RUN.tracking.wandb, help="offline, online or off."),
    accelerator: Accelerator = typer.Option(Accelerator.auto, "--accelerator",
                                            help="auto (a GPU when there is one), cpu or cuda."),
    restart: bool = typer.Option(False, "--restart", help="Train the run again from batch 0, replacing its log, "
                                                          "checkpoints and results."),
    reopen: bool = typer.Option(False, "--reopen", help="Continue a run that stopped early (pruned, converged, "
                                                        "plateau) from its last checkpoint, up to --max-batches."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Train one model on one task; rerun the same command to resume after an interruption."""
    from pipeline.config import resolve_run_config
    from pipeline.training.run import RunStopped
    from pipeline.training.run import train as train_run

    stored = config is None and run_dir is not None and RunDir(run_dir).config_file.is_file()
    run_config = resolve_run_config(
        RunDir(run_dir).read_config() if stored else config, task=task and task.value,
        length_distribution=length_distribution and length_distribution.value,
        model=model and model.value, hidden=hidden, lr=lr,
        max_batches=max_batches, seed=seed, eval_every=eval_every, checkpoint_every=checkpoint_every,
        wandb=wandb)
    try:
        results = train_run(run_config, run_dir, progress=progress, restart=restart, reopen=reopen,
                            accelerator=accelerator.value)
    except RunStopped as stop:
        typer.echo(f"Stopped: {stop}", err=True)
        raise typer.Exit(code=stop.exit_code) from None
    typer.echo(json.dumps(results, indent=2))


@app.command()
def evaluate(
    run_dir: Path = typer.Argument(..., help="A run directory written by `transduce train`."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best (the selected weights) or last."),
    greedy: bool = typer.Option(False, "--greedy", help="Decode step by step instead of one teacher-forced pass."),
    accelerator: Accelerator = typer.Option(Accelerator.cpu, "--accelerator", help="cpu, cuda, or auto (a GPU when "
                                                                                   "there is one)."),
) -> None:
    """Re-evaluate a run's checkpoint on the cached train-, test- and long-length sets."""
    from pipeline.training.run import evaluate_run

    typer.echo(json.dumps(evaluate_run(run_dir, checkpoint, greedy=greedy, accelerator=accelerator.value),
                          indent=2))


ParamsFormat = choices("ParamsFormat", "table", "json")


@app.command()
def params(
    format: ParamsFormat = typer.Option(ParamsFormat.table, "--format", help="table (markdown) or json."),
    output: Path = typer.Option(None, "--output", help="Also write the markdown table to this file."),
) -> None:
    """Trainable parameters of every (model, hidden) beside the paper's Table 2."""
    from pipeline.provenance import provenance
    from pipeline.reports.table2 import parameter_table, table2_markdown

    table = parameter_table()
    markdown = table2_markdown(table, provenance("transduce params" + (f" --output {output}" if output else "")))
    if format is ParamsFormat.json:
        rows = [{"model": r.model, "hidden": int(r.hidden), "params": int(r.params)} for r in table.itertuples()]
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(markdown)
    if output is not None:
        from pipeline.files import atomic_write_text

        atomic_write_text(output, markdown)


def _load_profile(profile: Path):
    from pipeline.sweep import load_sweep

    return load_sweep(profile)


Executor = choices("Executor", "local", "slurm")


@app.command()
def sweep(
    profile: Path = typer.Argument(..., help="A profile, e.g. configs/cpu.yaml (paper, cpu, smoke)."),
    executor: Executor = typer.Option(Executor.local, "--executor", help="local (a process pool) or slurm."),
    workers: int = typer.Option(None, "--workers", callback=_at_least(1),
                                help="Local runs at a time (default: the profile's, else the CPU cores)."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="Where run directories go (default: runs/<profile>)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed runs again."),
    retry_pruned: bool = typer.Option(False, "--retry-pruned", help="Continue pruned runs from their checkpoints."),
    status: bool = typer.Option(False, "--status", help="Only print where the sweep stands."),
    partition: str = typer.Option(None, "--partition", help="SLURM partition (default: the profile's)."),
    time_min: int = typer.Option(None, "--time", callback=_at_least(1),
                                 help="SLURM time limit per run, minutes; a run cut off is requeued and resumes."),
    array_parallelism: int = typer.Option(None, "--array-parallelism",
                                          callback=_at_least(1),
                                          help="SLURM: runs of the array running at once."),
    wait: bool = typer.Option(False, "--wait", help="SLURM: wait for the jobs to finish."),
    only: list[str] = typer.Option([], "--only", metavar="PATTERN",
                                   help="Run only the runs whose ids match this shell-style pattern (repeatable), "
                                        "e.g. '*-lstm[48]-*' to send the deep LSTMs to a GPU machine."),
) -> None:
    """Run a profile's grid: skips finished runs, resumes interrupted ones, records failures and goes on."""
    from pipeline.sweep import default_workers, submit_slurm, summary, sweep_status
    from pipeline.sweep.grid import check_only

    config = _load_profile(profile)
    check_only(config, only)
    if status:
        statuses = sweep_status(config, runs_dir)
        for s in statuses:
            typer.echo(f"{s.state:12} {s.batches_done:>6}/{s.config.training.max_batches:<6} {s.run_dir.name}")
        typer.echo(summary(statuses, workers or default_workers(config)))
        _warn_damaged(s.run_dir for s in statuses if s.state == "damaged")
        return
    if executor is Executor.slurm:
        submit_slurm(config, runs_dir, retry_failed, partition=partition, time_min=time_min,
                     array_parallelism=array_parallelism, wait=wait, echo=typer.echo, retry_pruned=retry_pruned,
                     only=only)
    else:
        _exit_if_unfinished(_run_local(config, runs_dir, only=only, workers=workers, retry_failed=retry_failed,
                                       retry_pruned=retry_pruned), only)


def _run_local(config, runs_dir, only=(), **options):
    """The local pool over a profile (sweep, study); stopped from outside (SIGTERM, Ctrl-C), it says so, lists the
    unfinished runs and exits with the signal's status (143, 130)."""
    from pipeline.sweep import run_local, sweep_status
    from pipeline.sweep.local import SweepStopped

    try:
        return run_local(config, runs_dir, echo=typer.echo, only=only, **options)
    except SweepStopped as stop:
        typer.echo(f"Stopped by {stop.why}: the same command resumes the sweep where it stopped.", err=True)
        _exit_if_unfinished(sweep_status(config, runs_dir), only, exit_code=stop.exit_code)
        raise typer.Exit(code=stop.exit_code) from None


def _warn_damaged(run_dirs) -> None:
    """One line per damaged run on standard error, naming the file and what is wrong with it."""
    for run_dir in run_dirs:
        typer.echo(f"Warning: damaged run: {RunDir(run_dir).damage()}", err=True)


def _exit_if_unfinished(statuses, only=(), exit_code: int = 1) -> None:
    """A sweep succeeds only when every run of its grid (or of its ``--only`` selection) is finished; otherwise it
    says which and why, and exits ``exit_code`` (1; a stopped sweep, its signal's: so that `make reproduce` fails
    too)."""
    from pipeline.sweep import unfinished
    from pipeline.sweep.grid import selected

    lines = unfinished([s for s in statuses if selected(s.run_dir.name, only)])
    if lines:
        typer.echo(f"{len(lines)} run(s) of the grid are not finished:", err=True)
        for line in lines:
            typer.echo(f"  {line}", err=True)
        raise typer.Exit(code=exit_code)


@app.command()
def report(
    profile: Path = typer.Argument(..., help="The profile whose finished runs to report, e.g. configs/cpu.yaml."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="Where its run directories are (default: runs/<profile>)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<profile>, or the folder the "
                                                 "profile's reports: key names)."),
    force: bool = typer.Option(False, "--force", help="Write the report even from no done runs, or from fewer than "
                                                      "the report already there counted."),
) -> None:
    """Write Table 3 (beside the paper's), Table 2 and the figures from finished runs; trains nothing."""
    from pipeline.reports.build import write_report

    config = _load_profile(profile)
    typer.echo(f"wrote {write_report(config, profile, runs_dir, out, force=force)}")


TraceFormat = choices("TraceFormat", "png", "json")


@app.command()
def inspect(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best (the selected weights) or last."),
    split: SplitName = typer.Option(SplitName.test, "--split", help="Cached set to take the sequence from."),
    index: int = typer.Option(0, "--index", callback=_at_least(0), help="Which sequence of that set."),
    source: str = typer.Option(None, "--source", help='A source given as tokens instead, e.g. "a3 a17 a5".'),
    format: TraceFormat = typer.Option(TraceFormat.png, "--format", help="png (a figure) or json (the numbers)."),
    out: Path = typer.Option(None, "--out", help="Output file (default: <run dir>/trace-<split>-<index>.<format>); "
                                                 "'-' writes JSON to standard output."),
    accelerator: Accelerator = typer.Option(Accelerator.cpu, "--accelerator", help="cpu, cuda, or auto (a GPU when "
                                                                                   "there is one)."),
) -> None:
    """Draw what a trained model does with its memory on one greedily decoded sequence: push/pop, strengths and
    read weights per step, the predictions and their errors (a deep LSTM: tokens, predictions, errors)."""
    from pipeline.files import atomic_write_text
    from pipeline.inspection import draw_trace, inspect_run, trace_json

    to_stdout = out is not None and str(out) == "-"
    if to_stdout and format is not TraceFormat.json:
        _fail(ConfigError("--out - writes to standard output, which takes --format json, not a png figure"))
    if out is not None and not to_stdout and out.suffix.lower() != f".{format.value}":
        _fail(ConfigError(f"--out {out}: a {format.value} trace is written to a .{format.value} file, got "
                          f"{out.suffix or 'no extension'!r} (--format png or json picks the kind)"))
    trace = inspect_run(run_dir, checkpoint, split.value, index, source.split() if source is not None else None,
                        accelerator=accelerator.value)
    if to_stdout:
        typer.echo(trace_json(trace), nl=False)
        return
    name = "source" if source is not None else f"{split.value}-{index}"
    out = out or Path(run_dir) / f"trace-{name}.{format.value}"
    if format is TraceFormat.json:
        atomic_write_text(out, trace_json(trace))
    else:
        draw_trace(trace, out)
    typer.echo(f"wrote {out}" + ("" if trace.push_ends else " (a deep LSTM: no memory to draw)"))


RunsFormat = choices("RunsFormat", "table", "csv", "json")


@app.command()
def runs(
    where: Path = typer.Argument(..., help="A profile (configs/cpu.yaml) or a folder of run directories."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="For a profile: where its runs are (default: runs/<name>)."),
    task: list[TaskName] = typer.Option(None, "--task", help="Only these tasks (repeatable)."),
    model: list[ModelName] = typer.Option(None, "--model", help="Only these models (repeatable)."),
    status: list[str] = typer.Option(None, "--status", help="Only runs in these states: finished, pruned, failed, "
                                                            "damaged, running, interrupted, pending (repeatable)."),
    format: RunsFormat = typer.Option(RunsFormat.table, "--format", help="table, csv or json."),
) -> None:
    """List runs: id, task, model, hidden, lr, seed, status, batches, training perplexity, accuracies."""
    from pipeline.runs import RUN_STATES, list_runs

    for value in status or []:
        if value not in RUN_STATES:
            _fail(ConfigError(f"--status must be one of {', '.join(RUN_STATES)}; got {value!r}"))
    table = list_runs(where, runs_dir, warn=lambda line: typer.echo(f"Warning: {line}", err=True),
                      tasks=[t.value for t in task or []], models=[m.value for m in model or []])
    if status:
        table = table[table.status.isin(status)]
    if format is RunsFormat.csv:
        typer.echo(table.to_csv(index=False), nl=False)
    elif format is RunsFormat.json:
        typer.echo(table.to_json(orient="records", indent=1))
    else:
        typer.echo(table.to_string(index=False, na_rep="—") if not table.empty else "no runs")


@app.command()
def dashboard(
    where: Path = typer.Argument(..., help="A profile (configs/cpu.yaml) or a folder of run directories."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="For a profile: where its runs are (default: runs/<name>)."),
    task: list[TaskName] = typer.Option(None, "--task", help="Only these tasks (repeatable)."),
    model: list[ModelName] = typer.Option(None, "--model", help="Only these models (repeatable)."),
    print_only: bool = typer.Option(False, "--print-only", help="Gather the runs and print the command that opens "
                                                                "them, without opening the viewer."),
) -> None:
    """One local view of a profile's training curves: every run's offline W&B run in one folder, opened with
    `wandb leet` (a terminal UI; no account, no network)."""
    from pipeline.dashboard import gather, open_dashboard, wandb_command

    board = gather(where, runs_dir, [t.value for t in task or []], [m.value for m in model or []])
    command = wandb_command(board.folder)
    if board.without_wandb:
        typer.echo(f"{len(board.without_wandb)} run(s) have nothing to show yet (not started, or damaged): "
                   f"{', '.join(board.without_wandb[:5])}" + (" ..." if len(board.without_wandb) > 5 else ""),
                   err=True)
    if not board.linked:
        _fail(ConfigError(f"no run of {where} has an offline W&B run to show; `transduce runs {where}` lists them"))
    typer.echo(f"{len(board.linked)} run(s) in {board.folder}", err=True)
    if print_only:
        typer.echo(" ".join(command))
        return
    open_dashboard(board)


@app.command()
def archive(
    profile: Path = typer.Argument(..., help="A profile, e.g. configs/cpu.yaml."),
    to: Path = typer.Option(None, "--to", help="The archive folder (default: finished_runs/ in the profile's reports "
                                               "folder)."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="Where the profile's runs are (default: runs/<profile>)."),
    restore: bool = typer.Option(False, "--restore", help="The other way: copy archived runs the runs folder lacks "
                                                          "back into it (nothing there is overwritten)."),
) -> None:
    """Keep a profile's finished runs without their checkpoints (their files and the memory traces the report
    draws), so a report can be regenerated, and an unfinished sweep resumed, where the runs folder was lost."""
    from pipeline.runs import archive_runs, restore_runs

    config = _load_profile(profile)
    folder = to if to is not None else config.reports_dir() / "finished_runs"
    if restore:
        if not folder.is_dir():
            if to is not None:  # an archive named and not there: a typo, said as one
                _fail(ConfigError(f"no archive at {str(folder)!r}: nothing to restore"))
            # a profile that was never archived (smoke, say): its runs folder is all there is, as `make report` needs
            typer.echo(f"no archive at {folder}: nothing to restore; the runs folder is used as it is")
            return
        ids = restore_runs(profile, folder, runs_dir)
        typer.echo(f"restored {len(ids)} run(s) from {folder}")
    else:
        ids = archive_runs(profile, folder, runs_dir)
        typer.echo(f"archived {len(ids)} finished or pruned run(s) to {folder}")


@app.command()
def study(
    profile: Path = typer.Argument(Path("configs/recipe.yaml"), help="A study profile (default: the recipe study)."),
    workers: int = typer.Option(None, "--workers", callback=_at_least(1),
                                help="Local runs at a time (default: the profile's, else the CPU cores)."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="Where run directories go (default: runs/<profile>)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<profile>, or the folder the "
                                                 "profile's reports: key names)."),
    report_only: bool = typer.Option(False, "--report-only", help="Write the report from the runs so far; train "
                                                                  "nothing."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed runs again."),
) -> None:
    """Run a seed-robustness study (its grid, resumable) and write which choices learn on how many seeds."""
    from pipeline.reports.kinds import check_kind
    from pipeline.reports.recipe import write_study_report

    config = _load_profile(profile)
    check_kind(out if out is not None else config.reports_dir(), "study")  # before any training (a profile's report)
    statuses = [] if report_only else _run_local(config, runs_dir, workers=workers, retry_failed=retry_failed)
    # the command that makes the report (--report-only writes the same one from the same runs)
    typer.echo(f"wrote {write_study_report(config, profile, runs_dir, out, command=f'transduce study {profile}')}")
    _exit_if_unfinished(statuses)


@app.command()
def bench(
    rounds: int = typer.Option(11, "--rounds", callback=_at_least(7),  # pipeline.bench.DEFAULT_ROUNDS (tested)
                               help="Timing rounds, at least 7 (the median is reported)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda on a GPU machine (writes bench-cuda.*)."),
    profile: bool = typer.Option(False, "--profile", help="Instead: where the time of one training batch of the "
                                                          "Stack- and DeQue-LSTM goes (reports/bench-profile.md)."),
) -> None:
    """Time and memory of a training batch of each model beside a plain nn.LSTM; writes reports/bench.{md,json}."""
    from pipeline.bench import DEFAULT_ROUNDS, run_benchmark, write_profile

    if profile:
        typer.echo(f"wrote {write_profile(out, echo=typer.echo)}")
        return

    command = ("transduce bench" + (f" --rounds {rounds}" if rounds != DEFAULT_ROUNDS else "")
               + (f" --out {out}" if out else "")
               + (f" --device {device}" if device != "cpu" else ""))
    try:
        result = run_benchmark(rounds, out, echo=typer.echo, command=command, device=device)
    except ValueError as error:
        _fail(error)
    for check in result["targets"]:
        typer.echo(f"{'met' if check['met'] else 'NOT MET'}: {check['what']} = {check['measured']:g} "
                   f"(limit {check['limit']:g})")


if __name__ == "__main__":  # pragma: no cover
    app()
