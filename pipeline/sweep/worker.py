"""The worker: train (or resume) the one run of a run directory, under its lock, recording a failure instead of
raising it. The local pool starts it as ``python -m pipeline.sweep RUN_DIR``; a SLURM array task calls
:func:`run_one` directly."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from pipeline.provenance import git_commit
from pipeline.rundir import RunDir
from pipeline.runlock import claim_owner, run_lock
from pipeline.sweep.status import run_state


def run_one(run_dir: str | Path) -> str:
    """Train (or resume) the run in ``run_dir`` from its ``config.yaml``. Returns its state afterwards."""
    from pipeline.training.run import RunStopped, train

    run_dir = Path(run_dir)
    with run_lock(run_dir, patience=5.0) as lock:
        if not lock:
            return "running"
        claim_owner(lock)
        config = RunDir(run_dir).read_config()
        try:
            train(config, run_dir, progress=False, locked=True)
        except RunStopped as stop:  # the sweep stopped it (or the machine is going down): it resumes next time
            print(stop, flush=True)
            return "interrupted"
        except Exception as error:  # recorded, not raised: one failed run must not stop a sweep
            RunDir(run_dir).write_failure({
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
                "commit": git_commit(),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            })
            return "failed"
        RunDir(run_dir).clear_failure()
    return run_state(run_dir, config)
