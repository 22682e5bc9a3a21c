"""Commands over a profile's grid: `sweep` it, list its `runs`, open their `dashboard`, `archive` them, run a
`study`."""

from __future__ import annotations

from pathlib import Path

import typer

from pipeline.cli.app import (
    ModelName,
    TaskName,
    allow_dirty,
    allow_dirty_option,
    app,
    at_least,
    choices,
    existing_runs_dir,
    fail,
    load_profile,
    remaking,
)
from pipeline.config import MAX_POPULATION, ConfigError
from pipeline.rundir import RunDir

Executor = choices("Executor", "local", "slurm")


def _workers_option():
    return typer.Option(None, "--workers", callback=at_least(1),
                        help="Local runs at a time (default: the profile's, else the CPU cores).")


def _runs_dir_option():
    return typer.Option(None, "--runs-dir", help="Where run directories go (default: runs/<profile>).")


def _report_only_option():
    return typer.Option(False, "--report-only", help="Write the report from the runs so far; train nothing.")


def _retry_failed_option():
    return typer.Option(False, "--retry-failed", help="Run failed runs again.")


@app.command()
def sweep(
    profile: Path = typer.Argument(..., help="A profile, e.g. configs/cpu.yaml (paper, cpu, smoke)."),
    executor: Executor = typer.Option(Executor.local, "--executor", help="local (a process pool) or slurm."),
    workers: int = _workers_option(),
    runs_dir: Path = _runs_dir_option(),
    retry_failed: bool = _retry_failed_option(),
    retry_pruned: bool = typer.Option(False, "--retry-pruned", help="Continue pruned runs from their checkpoints."),
    status: bool = typer.Option(False, "--status", help="Only print where the sweep stands."),
    partition: str = typer.Option(None, "--partition", help="SLURM partition (default: the profile's)."),
    time_min: int = typer.Option(None, "--time", callback=at_least(1),
                                 help="SLURM time limit per run, minutes; a run cut off is requeued and resumes."),
    array_parallelism: int = typer.Option(None, "--array-parallelism",
                                          callback=at_least(1),
                                          help="SLURM: runs of the array running at once."),
    wait: bool = typer.Option(False, "--wait", help="SLURM: wait for the jobs to finish."),
    population: int = typer.Option(None, "--population", callback=at_least(1, MAX_POPULATION), metavar="N",
                                   help="Train up to N runs that share a model as one population per worker or "
                                        "SLURM job (default: the profile's population, else 1)."),
    only: list[str] = typer.Option([], "--only", metavar="PATTERN",
                                   help="Run only the runs whose ids match this shell-style pattern (repeatable), "
                                        "e.g. '*-lstm[48]-*' to send the deep LSTMs to a GPU machine."),
    dirty: bool = allow_dirty_option(),
) -> None:
    """Run a profile's grid: skips finished runs, resumes interrupted ones, records failures and goes on."""
    allow_dirty(dirty)
    from pipeline.files import full_disk
    from pipeline.sweep import default_workers, submit_slurm, summary, sweep_root, sweep_status
    from pipeline.sweep.grid import check_only

    config = load_profile(profile, runs=runs_dir is None and not status)
    check_only(config, only)
    if status:  # with --only, the selection's runs and where they stand
        existing_runs_dir(runs_dir)
        statuses = sweep_status(config, runs_dir, only=only)
        for s in statuses:
            typer.echo(f"{s.state:12} {s.batches_done:>6}/{s.config.training.max_batches:<6} {s.run_dir.name}")
        typer.echo(summary(statuses, workers or default_workers(config)))
        _warn_damaged(s.run_dir for s in statuses if s.state == "damaged")
        if disk := full_disk(sweep_root(config, runs_dir)):
            typer.echo(f"  {disk}: runs cannot write their checkpoints or logs there")
        return
    if executor is Executor.slurm:
        submit_slurm(config, runs_dir, retry_failed, partition=partition, time_min=time_min,
                     array_parallelism=array_parallelism, wait=wait, echo=typer.echo, retry_pruned=retry_pruned,
                     only=only, population=population)
    else:
        _exit_if_unfinished(_run_local(config, runs_dir, only=only, workers=workers, retry_failed=retry_failed,
                                       retry_pruned=retry_pruned, population=population), only)


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
    from pipeline.sweep.status import selected, unfinished

    lines = unfinished([s for s in statuses if selected(s.run_dir.name, only)])
    if lines:
        typer.echo(f"{len(lines)} run(s) of the grid are not finished:", err=True)
        for line in lines:
            typer.echo(f"  {line}", err=True)
        raise typer.Exit(code=exit_code)


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
            fail(ConfigError(f"--status must be one of {', '.join(RUN_STATES)}; got {value!r}"))
    existing_runs_dir(runs_dir)
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
    links: Path = typer.Option(None, "--links", help="Where to make the folder of links (default: the runs folder, "
                                                     "or a temporary folder where it is read-only or shared)."),
) -> None:
    """One local view of a profile's training curves: every run's offline W&B run in one folder, opened with
    `wandb leet` (a terminal UI; no account, no network)."""
    from pipeline.dashboard import gather, open_dashboard, wandb_command

    existing_runs_dir(runs_dir)
    board = gather(where, runs_dir, [t.value for t in task or []], [m.value for m in model or []], links)
    command = wandb_command(board.folder)
    if board.without_wandb:
        typer.echo(f"{len(board.without_wandb)} run(s) have nothing to show yet (not started, or damaged): "
                   f"{', '.join(board.without_wandb[:5])}" + (" ..." if len(board.without_wandb) > 5 else ""),
                   err=True)
    if not board.linked:
        fail(ConfigError(f"no run of {where} has an offline W&B run to show; `transduce runs {where}` lists them"))
    typer.echo(f"{len(board.linked)} run(s) in {board.folder}, named <task>-<model>-<lr>-s<seed> (every curve "
               "drawn; Space hides one). Tab, then End: train/perplexity; N: train/coarse and fine; Esc: the list; "
               "Enter: a run's overview, its run id; q quits.", err=True)
    for name, run_id in board.legend:
        typer.echo(f"  {name.removeprefix('run-00000000_'):<28}  {run_id}", err=True)
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
    force: bool = typer.Option(False, "--force", help="Replace archived copies that hold more batches than the run "
                                                      "(refused otherwise, naming each), and archive into the "
                                                      "reports folder even where another profile file has its "
                                                      "name."),
) -> None:
    """Keep a profile's finished runs without their checkpoints (their files and the memory traces the report
    draws), and its interrupted runs with them (in unfinished_runs/ beside), so a report can be regenerated, and an
    unfinished sweep resumed where it stopped, where the runs folder was lost."""
    from pipeline.runs import ArchiveRefused, archive_runs, archive_unfinished_runs, restore_runs, unfinished_folder

    # restoring writes into the runs folder, archiving into the reports folder
    config = load_profile(profile, runs=restore and runs_dir is None, reports=not restore and to is None and not force)
    folder = to if to is not None else config.reports_dir() / "finished_runs"
    unfinished = unfinished_folder(folder)
    if not restore:
        from pipeline.reports.kinds import check_archive_folder

        existing_runs_dir(runs_dir)
        from pipeline.sweep import sweep_root

        check_archive_folder(folder, sweep_root(config, runs_dir))
        check_archive_folder(unfinished, sweep_root(config, runs_dir))
    if restore:
        if not folder.is_dir() and not unfinished.is_dir():
            if to is not None:  # an archive named and not there: a typo, said as one
                fail(ConfigError(f"no archive at {str(folder)!r}: nothing to restore"))
            # a profile that was never archived (smoke, say): its runs folder is all there is, as `make report` needs
            typer.echo(f"no archive at {folder}: nothing to restore; the runs folder is used as it is")
            return
        resumable = restore_runs(profile, unfinished, runs_dir, unfinished=True) if unfinished.is_dir() else []
        ids = restore_runs(profile, folder, runs_dir)
        typer.echo(f"restored {len(ids)} run(s) from {folder}")
        if resumable:
            typer.echo(f"restored {len(resumable)} unfinished run(s) from {unfinished}: the sweep resumes them")
    else:
        refused = None
        try:
            ids = archive_runs(profile, folder, runs_dir, force=force)
            typer.echo(f"archived {len(ids)} finished or pruned run(s), or halving winners past their rung, to "
                       f"{folder}")
        except ArchiveRefused as error:  # the others are archived; the unfinished ones are kept below all the same
            refused = error
        kept, dropped = archive_unfinished_runs(profile, unfinished, runs_dir)
        if kept or dropped:
            typer.echo(f"kept {len(kept)} unfinished run(s) with their checkpoints in {unfinished} (resumable)"
                       + (f"; dropped {len(dropped)} finished since" if dropped else ""))
        if refused is not None:
            fail(refused)


def _train_then_report(kind: str, profile: Path, workers, runs_dir, out, report_only: bool, retry_failed: bool,
                       dirty: bool, force: bool = False) -> None:
    """`study` and `screen`: check that ``out`` is (or can be) this profile's report of this ``kind`` before any
    training (:func:`pipeline.reports.kinds.check_report_folder`), run the profile's grid locally (resumable) unless
    ``report_only``, then write the kind's report from the runs so far, refused from no done run unless ``force``,
    with the command that makes it (``--report-only`` writes the same one from the same runs)."""
    allow_dirty(dirty)
    from pipeline.reports.kinds import check_report_folder

    if kind == "study":
        from pipeline.reports.recipe import write_study_report as write_report
    else:
        from pipeline.reports.screen import write_screen_report as write_report
    config = load_profile(profile, runs=runs_dir is None and not report_only, reports=out is None and not force)
    if report_only:
        existing_runs_dir(runs_dir)
    check_report_folder(out if out is not None else config.reports_dir(), kind, config.name, profile,
                        config.reports_dir(), force)
    statuses = [] if report_only else _run_local(config, runs_dir, workers=workers, retry_failed=retry_failed)
    command = remaking(kind, profile, runs_dir, out, force)
    typer.echo(f"wrote {write_report(config, profile, runs_dir, out, command=command, force=force)}")
    _exit_if_unfinished(statuses)


def _force_option():
    return typer.Option(False, "--force", help="Write the report even from no done runs, or into a folder that "
                                               "holds another profile's report or files no report wrote.")


@app.command()
def study(
    profile: Path = typer.Argument(Path("configs/recipe.yaml"), help="A study profile (default: the recipe study)."),
    workers: int = _workers_option(),
    runs_dir: Path = _runs_dir_option(),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<profile>, or the folder the "
                                                 "profile's reports: key names)."),
    report_only: bool = _report_only_option(),
    retry_failed: bool = _retry_failed_option(),
    dirty: bool = allow_dirty_option(),
    force: bool = _force_option(),
) -> None:
    """Run a seed-robustness study (its grid, resumable) and write which choices learn on how many seeds."""
    _train_then_report("study", profile, workers, runs_dir, out, report_only, retry_failed, dirty, force)


@app.command()
def screen(
    profile: Path = typer.Argument(..., help="A screen profile, e.g. configs/lstm-screen.yaml."),
    workers: int = _workers_option(),
    runs_dir: Path = _runs_dir_option(),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<profile>)."),
    report_only: bool = _report_only_option(),
    retry_failed: bool = _retry_failed_option(),
    dirty: bool = allow_dirty_option(),
    force: bool = _force_option(),
) -> None:
    """Run a screen (one change at a time against a baseline, resumable) and write how each change compares."""
    _train_then_report("screen", profile, workers, runs_dir, out, report_only, retry_failed, dirty, force)
