"""A profile's grid on disk: loading it, and preparing its run directories before any worker starts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.config import ConfigError, SweepConfig, load_yaml
from pipeline.provenance import check_committed
from pipeline.rundir import TO_GO, RunDir
from pipeline.sweep.status import selected, sweep_root, sweep_status


def load_sweep(file: str | Path) -> SweepConfig:
    """Load and validate a profile: every run of its grid is checked before anything starts."""
    return load_yaml(SweepConfig, file)


def other_profile(sweep: SweepConfig, file: str | Path, *, runs: bool = False, reports: bool = False) -> Path | None:
    """The profile in ``configs/`` (another file than ``file``) whose default folders this one would write into: with
    ``runs``, one of the same name (``runs/<name>/``); with ``reports``, one with the same reports folder. None when
    there is none: a profile copied under a new file name that kept ``name: cpu`` would otherwise train into
    ``runs/cpu``, archive into ``reports/cpu/finished_runs`` and overwrite ``reports/cpu``."""
    from pipeline.files import profile_files
    from pipeline.paths import CONFIG_DIR

    for other, data in profile_files(CONFIG_DIR, skip=file):
        if (runs and data.get("name") == sweep.name) or (
                reports and (data.get("reports") or data.get("name")) == (sweep.reports or sweep.name)):
            return other
    return None


def check_own_folders(sweep: SweepConfig, file: str | Path, *, runs: bool = False, reports: bool = False) -> None:
    """Refuse (:class:`ConfigError`, one line) a profile that would write into another profile's default folders:
    ``runs`` when it is to write into ``runs/<name>/``, ``reports`` into its default reports folder."""
    other = other_profile(sweep, file, runs=runs, reports=reports)
    if other is not None:
        where = " and ".join(([f"runs/{sweep.name}/"] if runs else [])
                             + ([f"reports/{sweep.reports or sweep.name}/"] if reports else []))
        raise ConfigError(f"{file}: its name {sweep.name!r}"
                          + (f" (reports: {sweep.reports!r})" if sweep.reports else "")
                          + f" is {other.relative_to(other.parents[1])}'s, so it would write into {where}, which "
                          "are that profile's: give it a name of its own (name: ...), or name its folders "
                          "(--runs-dir, --out or --to), or pass --force where the command has it")


def default_workers(sweep: SweepConfig) -> int:
    """The profile's ``workers``, else one population per visible GPU where the profile trains populations and there
    are GPUs (a population fills a GPU; more side by side only queue for it), else one per CPU core this process may
    use (its affinity). ``--workers`` overrides them all."""
    from pipeline.provenance import usable_cores, visible_gpus

    if sweep.workers:
        return sweep.workers
    gpus = visible_gpus() if (sweep.population or 1) > 1 else []
    return len(gpus) or usable_cores()


def check_only(sweep: SweepConfig, only: Sequence[str]) -> None:
    """Refuse an ``--only`` pattern that selects none of the grid's runs (a typo would otherwise run nothing and
    look done)."""
    ids = [run.run_id() for run in sweep.runs()]
    for pattern in only:
        if not any(selected(run_id, (pattern,)) for run_id in ids):
            raise ConfigError(f"--only {pattern!r} matches none of the {len(ids)} run ids of profile "
                              f"{sweep.name!r} (shell-style patterns on ids such as {ids[0]!r}; `transduce sweep "
                              f"PROFILE --status` lists them)")


def prepare(sweep: SweepConfig, runs_root: Path | None, retry_failed: bool, retry_pruned: bool = False,
            only: Sequence[str] = ()) -> list[Path]:
    """Fill the evaluation-set cache for the grid's tasks (once, here, rather than in every worker), write every
    run's config.yaml (checking a directory is not another config's; a raised budget is recorded, and the run
    extended) and list the runs to execute (``retry_pruned``: pruned runs are reopened and continue; a run that an
    older version of the plateau rule stopped, or of the pruning rule pruned, where the rule in force would not is
    reopened too, and trains on (:mod:`pipeline.sweep.rejudge`: ``rejudged_stop``, ``rejudged_prune``); ``only``:
    shell-style patterns on run ids, the runs matching none are left alone, so a grid can be split between
    machines, its deep LSTMs on a GPU say)."""
    from pipeline.data.cache import generate_eval_sets
    from pipeline.sweep.rejudge import rejudged_prune, rejudged_stop
    from pipeline.training.runlife import claim_run_directory, reopen_run

    check_only(sweep, only)
    check_committed()  # before any folder is written: the workers would refuse each run
    for task, reading in sorted({(run.task, run.length_distribution) for run in sweep.runs()
                                 if selected(run.run_id(), only)}):
        generate_eval_sets([task], length_distributions=[reading])
    adopt_renamed_runs(sweep, runs_root)
    todo = []
    for status in sweep_status(sweep, runs_root, only=only):
        if status.state != "running":  # a running run's worker owns its config until it ends
            claim_run_directory(status.config, status.run_dir)
        rejudged = ((status.state == "finished" and rejudged_stop(status.run_dir))
                    or (status.state == "pruned" and rejudged_prune(status.run_dir)))
        if (status.state == "pruned" and retry_pruned) or rejudged:
            reopen_run(status.run_dir)
            todo.append(status.run_dir)
        if status.state in TO_GO or (status.state == "failed" and retry_failed):
            RunDir(status.run_dir).clear_failure()
            todo.append(status.run_dir)
    return todo


def adopt_renamed_runs(sweep: SweepConfig, runs_root: Path | None = None) -> list[tuple[str, str]]:
    """Rename run directories made under an older run-id scheme (the hash once covered the budget) to the id their
    config has now, so that an upgrade resumes a grid instead of starting it over. A directory is adopted only if it
    is not locked and its config is a run of this grid up to the budget. Returns (old name, new name) pairs."""
    from pipeline.runlock import is_locked

    root = sweep_root(sweep, runs_root)
    wanted = {run.run_id(): run for run in sweep.runs()}
    if not root.is_dir():
        return []
    renamed = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in wanted):
        if not RunDir(directory).config_file.is_file() or is_locked(directory):
            continue
        try:
            stored = RunDir(directory).read_config()
        except Exception:  # not a run directory of ours: leave it alone
            continue
        run = wanted.get(stored.run_id())
        if run is None or run.identity() != stored.identity() or (root / stored.run_id()).exists():
            continue
        directory.rename(root / stored.run_id())
        renamed.append((directory.name, stored.run_id()))
    return renamed


def pack(run_dirs: Sequence[Path], configs: dict, size: int | None) -> list[tuple[Path, ...]]:
    """The jobs of a pool or an array: with ``size`` None or 1, a job per run, in ``run_dirs`` order; else one job
    per model (the runs that can share one: :func:`~pipeline.training.run.population_key`), holding all
    its runs, which it trains ``size`` at a time as one population, a stopped run's place taken by the next. The jobs
    come in the order of their first runs."""
    if not size or size == 1:
        return [(run_dir,) for run_dir in run_dirs]
    from pipeline.training.run import population_key

    jobs: dict[tuple, list[Path]] = {}
    for run_dir in run_dirs:
        jobs.setdefault(population_key(configs[run_dir]), []).append(run_dir)
    return [tuple(job) for job in jobs.values()]
