"""Commands over one run: the `demo` (one run and its report), `train` it, `evaluate` its checkpoint, `inspect`
what its memory does."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pipeline.cli.app import (
    Accelerator,
    LengthReading,
    ModelName,
    Optimizer,
    SplitName,
    TaskName,
    TrackingMode,
    allow_dirty,
    allow_dirty_option,
    app,
    at_least,
    choices,
    fail,
    positive_float,
)
from pipeline.config import ConfigError, RunConfig
from pipeline.data.cache import EVAL_SET_SIZE
from pipeline.rundir import RunDir

_RUN = RunConfig()


@app.command()
def demo(
    out: Path = typer.Option(None, "--out", help="Folder of the run and its report (default: demo/ in the checkout)."),
    seed: int = typer.Option(None, "--seed", callback=at_least(0), help="Seed (default: the demo's, 0)."),
    max_batches: int = typer.Option(None, "--max-batches", callback=at_least(100),
                                    help="Batch budget (default 3,000; it stops once it has learned)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    dirty: bool = allow_dirty_option(),
) -> None:
    """A Stack-LSTM learns reversal (a few minutes of one core): a few lines here, a one-page report in demo/."""
    allow_dirty(dirty)
    from pipeline.demo import DEMO_DIR, DEMO_MAX_BATCHES, DEMO_SEED, demo_config, run_demo

    config = demo_config(seed=DEMO_SEED if seed is None else seed,
                         max_batches=max_batches or DEMO_MAX_BATCHES)
    result = run_demo(out or DEMO_DIR, config, progress=progress, echo=typer.echo)
    for line in result.lines():
        typer.echo(line)


@app.command()
def train(
    task: TaskName = typer.Option(None, "--task", show_default=_RUN.task,
                                  help="Task (default: the config's, else this)."),
    length_distribution: LengthReading = typer.Option(
        None, "--length-distribution", show_default=_RUN.length_distribution,
        help="The ITG tasks' source lengths: uniform over each window, or the grammar's own (docs/tasks.md)."),
    model: ModelName = typer.Option(None, "--model", show_default=_RUN.model.name,
                                    help="Architecture (default: the config's, else this)."),
    hidden: int = typer.Option(None, "--hidden", callback=at_least(1), show_default=str(_RUN.model.hidden),
                               help="LSTM hidden size (paper: 256 or 512)."),
    lr: float = typer.Option(None, "--lr", callback=positive_float, show_default=f"{_RUN.training.lr:g}",
                             help="Learning rate."),
    optimizer: Optimizer = typer.Option(None, "--optimizer", show_default=_RUN.training.optimizer,
                                        help="rmsprop (the paper's) or adam (at torch's defaults)."),
    max_batches: int = typer.Option(None, "--max-batches", callback=at_least(1),
                                    show_default=str(_RUN.training.max_batches),
                                    help="Batch budget; raise it on a finished run (--run-dir) to extend it."),
    seed: int = typer.Option(None, "--seed", callback=at_least(0), show_default=str(_RUN.training.seed),
                             help="Seed of the data stream and the initialisation."),
    eval_every: int = typer.Option(None, "--eval-every", callback=at_least(1),
                                   show_default=str(_RUN.training.eval_every),
                                   help="Evaluate coarse/fine every N batches."),
    checkpoint_every: int = typer.Option(None, "--checkpoint-every", callback=at_least(1),
                                         show_default=str(_RUN.training.checkpoint_every),
                                         help="Write last.ckpt (for resuming) every N batches."),
    config: Path = typer.Option(None, "--config", help="A run config YAML (see configs/run.yaml); flags override it. "
                                "Default: the --run-dir's own config.yaml if it has one, else the defaults."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default: runs/<run id>)."),
    wandb: TrackingMode = typer.Option(None, "--wandb", show_default=_RUN.tracking.wandb,
                                       help="Weights & Biases: offline (local files), online or off."),
    accelerator: Accelerator = typer.Option(Accelerator.auto, "--accelerator",
                                            help="auto (a GPU when there is one), cpu or cuda."),
    restart: bool = typer.Option(False, "--restart", help="Train the run again from batch 0, replacing its log, "
                                                          "checkpoints and results."),
    reopen: bool = typer.Option(False, "--reopen", help="Continue a run that stopped early (pruned, converged, "
                                                        "plateau) from its last checkpoint, up to --max-batches."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    dirty: bool = allow_dirty_option(),
) -> None:
    """Train one model on one task; rerun the same command to resume after an interruption."""
    allow_dirty(dirty)
    from pipeline.config import resolve_run_config
    from pipeline.training.run import RunStopped
    from pipeline.training.run import train as train_run

    stored = config is None and run_dir is not None and RunDir(run_dir).config_file.is_file()
    run_config = resolve_run_config(
        RunDir(run_dir).read_config() if stored else config, task=task and task.value,
        length_distribution=length_distribution and length_distribution.value,
        model=model and model.value, hidden=hidden, lr=lr, optimizer=optimizer and optimizer.value,
        max_batches=max_batches, seed=seed, eval_every=eval_every, checkpoint_every=checkpoint_every,
        wandb=wandb and wandb.value)
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
    far: bool = typer.Option(False, "--far", help="Instead: score the checkpoint in bands of source length out to "
                                                  "512 and write far_lengths.csv into the run (the report draws it; "
                                                  "--checkpoint last: far_lengths-last.csv)."),
    size: int = typer.Option(None, "--size", callback=at_least(1, EVAL_SET_SIZE),
                             help="Score the first N sequences of each set (default: all 1,000; a run's final "
                                  "evaluation scores its final_eval_size)."),
) -> None:
    """Re-evaluate a run's checkpoint on the cached train-, test- and long-length sets."""
    if far:
        from pipeline.training.run import measure_far_lengths

        if greedy:
            fail(ConfigError("--far scores teacher-forced, as the final evaluation does; drop --greedy"))
        if size is not None:
            fail(ConfigError(f"--size {size}: --far scores its own bands of source length; drop --size"))
        rows = measure_far_lengths(run_dir, checkpoint, accelerator=accelerator.value)
        for row in rows:
            typer.echo(f"{row['low']:>4}-{row['high']:<4} n={row['n']:<4} coarse {row['coarse']:.3f}  "
                       f"fine {row['fine']:.3f}")
        typer.echo(f"wrote {RunDir(run_dir).far_lengths_of(checkpoint)}")
        return
    from pipeline.training.run import evaluate_run

    typer.echo(json.dumps(evaluate_run(run_dir, checkpoint, greedy=greedy, accelerator=accelerator.value,
                                       size=size), indent=2))


TraceFormat = choices("TraceFormat", "png", "json")


@app.command()
def inspect(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best (the selected weights) or last."),
    split: SplitName = typer.Option(SplitName.test, "--split", help="Cached set to take the sequence from."),
    index: int = typer.Option(0, "--index", callback=at_least(0), help="Which sequence of that set."),
    source: str = typer.Option(None, "--source", help='A source given as tokens instead, e.g. "a3 a17 a5".'),
    format: TraceFormat = typer.Option(TraceFormat.png, "--format", help="png (a figure) or json (the numbers)."),
    out: Path = typer.Option(None, "--out", help="Output file (default: <run dir>/trace-<split>-<index>.<format>); "
                                                 "'-' writes JSON to standard output."),
    accelerator: Accelerator = typer.Option(Accelerator.cpu, "--accelerator", help="cpu, cuda, or auto (a GPU when "
                                                                                   "there is one)."),
) -> None:
    """Draw what a trained model does with its memory on one greedily decoded sequence: push/pop, strengths and
    read weights per step (the JM stack: its actions and its rows), the predictions and their errors (a deep LSTM or
    the Transformer: tokens, predictions, errors)."""
    from pipeline.files import atomic_write_text
    from pipeline.inspection import draw_trace, inspect_run, trace_json

    to_stdout = out is not None and str(out) == "-"
    if to_stdout and format is not TraceFormat.json:
        fail(ConfigError("--out - writes to standard output, which takes --format json, not a png figure"))
    if out is not None and not to_stdout and out.suffix.lower() != f".{format.value}":
        fail(ConfigError(f"--out {out}: a {format.value} trace is written to a .{format.value} file, got "
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
    drawn = trace.push_ends or trace.actions
    typer.echo(f"wrote {out}" + ("" if drawn else " (no memory to draw: a deep LSTM or the Transformer)"))
