"""Grid search: every run of a profile, on this machine's cores or on a SLURM cluster, resumable.

Each grid point is a run directory ``runs/<profile>/<run id>/`` (see :mod:`pipeline.training.run`). The pieces:

* :mod:`~pipeline.sweep.grid`: loading a profile, preparing its run directories;
* :mod:`~pipeline.sweep.status`: the state of every run (finished, failed, running, interrupted, pending), the time
  left, and why a run is unfinished;
* :mod:`~pipeline.runlock`: the per-run lock that keeps two workers off one run;
* :mod:`~pipeline.sweep.worker`: one run, as a worker executes it; failures recorded, never raised;
* :mod:`~pipeline.sweep.local`: the local process pool; :mod:`~pipeline.sweep.lifetime`: its workers die with it;
* :mod:`~pipeline.sweep.slurm`: the same runs as a SLURM job array through submitit.
"""

from pipeline.sweep.grid import default_workers, load_sweep, prepare
from pipeline.sweep.local import run_local
from pipeline.sweep.slurm import SubmititRun, submit_slurm
from pipeline.sweep.status import (
                                   DONE,
                                   STATES,
                                   RunStatus,
                                   run_state,
                                   run_status,
                                   summary,
                                   sweep_root,
                                   sweep_status,
                                   unfinished,
)
from pipeline.sweep.worker import run_job, run_one, run_population

__all__ = ["DONE", "STATES", "RunStatus", "SubmititRun", "default_workers", "load_sweep", "prepare", "run_local",
           "run_job", "run_one", "run_population", "run_state", "run_status", "submit_slurm", "summary", "sweep_root",
           "sweep_status", "unfinished"]
