"""The worker: train (or resume) the one run of a run directory, under its lock, recording a failure instead of
raising it; or several runs as one population (:func:`run_population`). The local pool starts it as ``python -m
pipeline.sweep RUN_DIR [RUN_DIR ...]``; a SLURM array task calls :func:`run_job` directly."""

from __future__ import annotations

import errno
import traceback
from pathlib import Path

from pipeline.rundir import DONE, RunDir, failure_record
from pipeline.runlock import claim_owner, run_lock
from pipeline.sweep.status import run_state

# A worker's exit status when it could not write into its run folder, not even a failure record (a full disk): the
# pool then says so, having nothing on disk to read it from.
UNRECORDED_EXIT = 74  # EX_IOERR
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(run_dir: Path, error: OSError) -> str:
    """A run stopped by a full disk is not a failed run: it resumes from its last whole checkpoint once there is
    space (the sweep says the disk is full; this line reaches the run's log if anything still fits)."""
    try:
        print(f"{run_dir}: stopped, {error}; it resumes from its last checkpoint when the sweep is rerun with space "
              "free", flush=True)
    except OSError:
        pass
    return "interrupted"


def record_failure(run_dir: Path, error: Exception) -> None:
    """Record ``error`` as the run's failure (an OSError from recording it escapes: the worker's exit status
    says it)."""
    RunDir(run_dir).write_failure(failure_record(f"{type(error).__name__}: {error}", traceback.format_exc()))


def run_one(run_dir: str | Path) -> str:
    """Train (or resume) the run in ``run_dir`` from its ``config.yaml``. Returns its state afterwards."""
    from pipeline.training.run import RunStopped, train
    from pipeline.training.runlife import lost_its_checkpoint

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
            if isinstance(error, OSError) and error.errno in DISK_FULL:
                return disk_full(run_dir, error)
            record_failure(run_dir, error)
            return "failed"
        RunDir(run_dir).clear_failure()
    return run_state(run_dir, config)


def run_population(run_dirs: list[str | Path], width: int | None = None) -> list[str]:
    """Train (or resume) the runs of ``run_dirs`` as one population, ``width`` at a time (:func:`~pipeline.
    training.run.train_population`), each from its ``config.yaml``. Returns their states afterwards. A
    failure of the whole (not of one member, which the population records itself) is recorded in every unfinished
    member's ``failed.json``."""
    from pipeline.training.run import RunBusy, RunStopped, train_population

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
        if isinstance(error, OSError) and error.errno in DISK_FULL:
            return [run_state(d, c) if run_state(d, c) in DONE else disk_full(d, error)
                    for d, c in zip(run_dirs, configs)]
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
