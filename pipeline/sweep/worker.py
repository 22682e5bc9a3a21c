"""The worker: train (or resume) the one run of a run directory, under its lock, recording a failure instead of
raising it; or several runs as one population (:func:`run_population`). The local pool starts it as ``python -m
pipeline.sweep RUN_DIR [RUN_DIR ...]``; a SLURM array task calls :func:`run_job` directly."""

from __future__ import annotations

import traceback
from pathlib import Path

from pipeline.rundir import DONE, RunDir, failure_record
from pipeline.runlock import claim_owner, run_lock
from pipeline.sweep.status import run_state


def run_one(run_dir: str | Path) -> str:
    """Train (or resume) the run in ``run_dir`` from its ``config.yaml``. Returns its state afterwards."""
    from pipeline.training.run import RunStopped, lost_its_checkpoint, train

    run_dir = Path(run_dir)
    with run_lock(run_dir, patience=5.0) as lock:
        if not lock:
            return "running"
        claim_owner(lock)
        config = RunDir(run_dir).read_config()
        try:
            train(config, run_dir, progress=False, locked=True, restart=lost_its_checkpoint(run_dir, config))
        except RunStopped as stop:  # the sweep stopped it (or the machine is going down): it resumes next time
            print(stop, flush=True)
            return "interrupted"
        except Exception as error:  # recorded, not raised: one failed run must not stop a sweep
            RunDir(run_dir).write_failure(failure_record(f"{type(error).__name__}: {error}", traceback.format_exc()))
            return "failed"
        RunDir(run_dir).clear_failure()
    return run_state(run_dir, config)


def run_population(run_dirs: list[str | Path], width: int | None = None) -> list[str]:
    """Train (or resume) the runs of ``run_dirs`` as one population, ``width`` at a time (:func:`~pipeline.
    training.population_run.train_population`), each from its ``config.yaml``. Returns their states afterwards. A
    failure of the whole (not of one member, which the population records itself) is recorded in every unfinished
    member's ``failed.json``."""
    from pipeline.training.population_run import train_population
    from pipeline.training.run import RunBusy, RunStopped

    run_dirs = [Path(d) for d in run_dirs]
    configs = [RunDir(d).read_config() for d in run_dirs]
    try:
        train_population(configs, run_dirs, width=width, restart_lost=True)
    except RunBusy as busy:  # another process trains one of them: leave them all for the next pass
        print(busy, flush=True)
        return [run_state(d, c) for d, c in zip(run_dirs, configs)]
    except RunStopped as stop:
        print(stop, flush=True)
        return ["interrupted"] * len(run_dirs)
    except Exception as error:  # recorded, not raised, as for one run
        failure = failure_record(f"{type(error).__name__}: {error}", traceback.format_exc())
        for d, c in zip(run_dirs, configs):
            if run_state(d, c) not in DONE:
                RunDir(d).write_failure(failure)
        return [run_state(d, c) for d, c in zip(run_dirs, configs)]
    for d, c in zip(run_dirs, configs):
        if run_state(d, c) in DONE:
            RunDir(d).clear_failure()
    return [run_state(d, c) for d, c in zip(run_dirs, configs)]


def run_job(run_dirs: str | Path | list, width: int | None = None) -> list[str]:
    """One job of a pool or an array: one run (:func:`run_one`) or a population, ``width`` members at a time
    (:func:`run_population`)."""
    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    return [run_one(run_dirs[0])] if len(run_dirs) == 1 else run_population(list(run_dirs), width)
