"""Grid search: every run of a profile, on this machine's cores or on a SLURM cluster, resumable.

Each grid point is a run directory ``runs/<profile>/<run id>/`` (see :mod:`pipeline.training.run`). A run is

* **finished** once ``results.json`` exists: never trained again;
* **failed** when ``failed.json`` exists (an exception or a NaN loss, with the traceback): left alone unless
  ``retry_failed``; the sweep goes on with the other runs;
* **running** while a worker holds the exclusive lock on ``<run dir>/.lock``: the lock dies with its process, even
  under ``kill -9``, so an orphaned worker can never be joined by a second one on the same run;
* **interrupted** when it has a checkpoint but no worker: it resumes from ``last.ckpt``;
* **pending** otherwise.

Local pool: one subprocess per run (``python -m pipeline.sweep RUN_DIR``), ``workers`` at a time (default: the
CPU cores), one torch thread each, output in ``<run dir>/train.log``. SLURM: one array task per run through
submitit, same run directories, same worker, so the same resume; a task cut off by its time limit is requeued
and continues from its checkpoint.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipeline.config import RunConfig, SweepConfig, from_dict, load_yaml
from pipeline.paths import RUNS_DIR
from pipeline.provenance import git_commit
from pipeline.training.logging import atomic_write_text, read_complete_rows

STATES = ("finished", "failed", "running", "interrupted", "pending")


def load_sweep(file: str | Path) -> SweepConfig:
    """Load and validate a profile: every run of its grid is checked before anything starts."""
    return load_yaml(SweepConfig, file)


def sweep_root(sweep: SweepConfig, runs_root: Path | None = None) -> Path:
    return Path(runs_root) if runs_root is not None else RUNS_DIR / sweep.name


# ----------------------------------------------------------------------------------------------------------------
# One run, as a worker executes it.


@contextmanager
def run_lock(run_dir: Path, patience: float = 0.0):
    """Hold the run's exclusive lock for the duration. Yields False when another process holds it for longer than
    ``patience`` seconds (a status probe holds it for microseconds; a worker, for the whole run)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".lock", "w") as handle:
        deadline = time.monotonic() + patience
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_one(run_dir: str | Path) -> str:
    """Train (or resume) the run in ``run_dir`` from its ``config.yaml``. Returns its state afterwards."""
    from pipeline.training.run import train

    run_dir = Path(run_dir)
    with run_lock(run_dir, patience=5.0) as acquired:
        if not acquired:
            return "running"
        config = from_dict(RunConfig, yaml.safe_load((run_dir / "config.yaml").read_text()))
        try:
            train(config, run_dir, progress=False)
        except Exception as error:  # recorded, not raised: one failed run must not stop a sweep
            atomic_write_text(run_dir / "failed.json", json.dumps({
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
                "commit": git_commit(),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            }, indent=2) + "\n")
            return "failed"
        (run_dir / "failed.json").unlink(missing_ok=True)
        return "finished"


# ----------------------------------------------------------------------------------------------------------------
# State of a sweep.


@dataclass(frozen=True)
class RunStatus:
    config: RunConfig
    run_dir: Path
    state: str
    batches_done: int
    seconds: float  # wall seconds of training so far

    @property
    def batches_left(self) -> int:
        return 0 if self.state in ("finished", "failed") else self.config.training.max_batches - self.batches_done


def is_locked(run_dir: Path) -> bool:
    if not (run_dir / ".lock").exists():
        return False
    with run_lock(run_dir) as acquired:
        return not acquired


def run_state(run_dir: Path) -> str:
    """One of :data:`STATES`, read off the run directory."""
    if (run_dir / "results.json").exists():
        return "finished"
    if is_locked(run_dir):
        return "running"
    if (run_dir / "failed.json").exists():
        return "failed"
    if (run_dir / "checkpoints" / "last.ckpt").exists():
        return "interrupted"
    return "pending"


def run_status(config: RunConfig, run_dir: Path) -> RunStatus:
    state = run_state(run_dir)
    done, seconds = 0, 0.0
    metrics = run_dir / "metrics.csv"
    if metrics.exists():
        _, rows = read_complete_rows(metrics)
        if rows:
            done = int(rows[-1]["step"])
            seconds = float(rows[-1].get("time/elapsed_s") or 0.0)
    return RunStatus(config, run_dir, state, done, seconds)


def sweep_status(sweep: SweepConfig, runs_root: Path | None = None) -> list[RunStatus]:
    root = sweep_root(sweep, runs_root)
    return [run_status(run, root / run.run_id()) for run in sweep.runs()]


def summary(statuses: list[RunStatus], workers: int) -> str:
    """'12 finished, 2 running, 0 failed, 21 to go; at most ~1.4 h left' (early stops make it an upper bound)."""
    counts = Counter(s.state for s in statuses)
    to_go = counts["interrupted"] + counts["pending"]
    line = f"{counts['finished']} finished, {counts['running']} running, {counts['failed']} failed, {to_go} to go"
    eta = estimate_seconds_left(statuses, workers)
    if counts["running"] + to_go:
        line += "; time left: estimating" if eta is None else f"; at most ~{_duration(eta)} left"
    return line


def estimate_seconds_left(statuses: list[RunStatus], workers: int) -> float | None:
    """Batches left × wall seconds per batch / workers. The rate is measured per model: over finished runs it
    includes their start-up and final evaluation; until one finishes, running runs' training time stands in."""
    per_model: dict[str, list[float]] = {}
    for s in statuses:
        if s.state == "finished":
            r = json.loads((s.run_dir / "results.json").read_text())
            rate = (r["train_seconds"] + r["eval_seconds"]) / max(1, r["batches"])
        elif s.batches_done and s.seconds:
            rate = s.seconds / s.batches_done
        else:
            continue
        per_model.setdefault(s.config.model.name, []).append(rate)
    if not per_model:
        return None
    overall = sum(sum(v) for v in per_model.values()) / sum(len(v) for v in per_model.values())
    total = 0.0
    for s in statuses:
        rates = per_model.get(s.config.model.name)
        total += s.batches_left * (sum(rates) / len(rates) if rates else overall)
    return total / max(1, workers)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ----------------------------------------------------------------------------------------------------------------
# Executing a sweep.


def prepare(sweep: SweepConfig, runs_root: Path | None, retry_failed: bool) -> list[Path]:
    """Fill the evaluation-set cache for the grid's tasks (once, here, rather than in every worker), write every
    run's config.yaml (checking a directory is not another config's) and list the runs to execute."""
    from pipeline.data.cache import generate_eval_sets
    from pipeline.training.run import claim_run_directory

    generate_eval_sets(sorted({run.task for run in sweep.runs()}))
    todo = []
    for status in sweep_status(sweep, runs_root):
        claim_run_directory(status.config, status.run_dir)
        if status.state in ("pending", "interrupted") or (status.state == "failed" and retry_failed):
            (status.run_dir / "failed.json").unlink(missing_ok=True)
            todo.append(status.run_dir)
    return todo


def run_local(sweep: SweepConfig, runs_root: Path | None = None, workers: int | None = None,
              retry_failed: bool = False, echo=print, poll_seconds: float = 1.0,
              report_every: float = 60.0) -> list[RunStatus]:
    """Execute the sweep on this machine, ``workers`` runs at a time. Returns the final status of every run."""
    workers = workers or sweep.workers or os.cpu_count() or 1
    todo = prepare(sweep, runs_root, retry_failed)
    echo(f"sweep {sweep.name}: {len(sweep.runs())} runs, {len(todo)} to execute with {workers} worker(s) "
         f"in {sweep_root(sweep, runs_root)}")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    children: dict[subprocess.Popen, Path] = {}
    logs = {}

    def stop_children(signum, frame):  # a polite stop of the sweep stops its runs; they resume next time
        for child in children:
            child.terminate()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop_children)
    last_report = 0.0
    try:
        queue = list(todo)
        while queue or children:
            while queue and len(children) < workers:
                run_dir = queue.pop(0)
                logs[run_dir] = open(run_dir / "train.log", "a")
                child = subprocess.Popen([sys.executable, "-m", "pipeline.sweep", str(run_dir)], env=env,
                                         stdout=logs[run_dir], stderr=subprocess.STDOUT)
                children[child] = run_dir
            time.sleep(poll_seconds)
            changed = False
            for child in [c for c in children if c.poll() is not None]:
                run_dir = children.pop(child)
                logs.pop(run_dir).close()
                state = run_state(run_dir)
                echo(f"  {state}: {run_dir.name}" + (f" (see {run_dir / 'failed.json'})" if state == "failed" else ""))
                changed = True
            if changed or time.monotonic() - last_report > report_every:
                echo("  " + summary(sweep_status(sweep, runs_root), workers))
                last_report = time.monotonic()
    finally:
        signal.signal(signal.SIGTERM, previous)
        for child in children:
            child.terminate()
    statuses = sweep_status(sweep, runs_root)
    echo(f"sweep {sweep.name}: " + summary(statuses, workers))
    return statuses


class SubmititRun:
    """The SLURM array task: one run. Checkpointable, so that a task hitting its time limit (or preempted) is
    requeued by submitit and continues from the run's last checkpoint."""

    def __call__(self, run_dir: str) -> str:
        return run_one(run_dir)

    def checkpoint(self, run_dir: str):
        import submitit

        return submitit.helpers.DelayedSubmission(SubmititRun(), run_dir)


def submit_slurm(sweep: SweepConfig, runs_root: Path | None = None, retry_failed: bool = False,
                 partition: str | None = None, time_min: int | None = None, array_parallelism: int | None = None,
                 cluster: str = "slurm", wait: bool = False, echo=print) -> list:
    """Submit every unfinished run as one SLURM job array (``cluster='local'`` runs the same jobs through
    submitit's local executor, which is how the route is tested without a cluster). Returns the jobs."""
    import submitit

    todo = prepare(sweep, runs_root, retry_failed)
    root = sweep_root(sweep, runs_root)
    if not todo:
        echo(f"sweep {sweep.name}: nothing to submit; " + summary(sweep_status(sweep, runs_root), 1))
        return []
    slurm = sweep.slurm
    executor = submitit.AutoExecutor(folder=root / ".submitit" / "%j", cluster=cluster)
    executor.update_parameters(timeout_min=time_min or slurm.time_min, cpus_per_task=slurm.cpus_per_task,
                               mem_gb=slurm.mem_gb, name=f"transduce-{sweep.name}")
    if cluster == "slurm":
        executor.update_parameters(slurm_array_parallelism=array_parallelism or slurm.array_parallelism,
                                   slurm_additional_parameters={"partition": partition or slurm.partition}
                                   if (partition or slurm.partition) else {})
    jobs = executor.map_array(SubmititRun(), [str(d) for d in todo])
    echo(f"sweep {sweep.name}: submitted {len(jobs)} run(s) as job array {jobs[0].job_id.split('_')[0]}; "
         f"logs in {root / '.submitit'}. Rerun the same command at any time: finished runs are skipped.")
    if wait:
        for job in jobs:
            job.result()
        echo(f"sweep {sweep.name}: " + summary(sweep_status(sweep, runs_root), 1))
    return jobs


if __name__ == "__main__":  # the local pool's worker: python -m pipeline.sweep RUN_DIR
    from pipeline.runtime import configure_cpu_process

    configure_cpu_process()
    state = run_one(sys.argv[1])
    print(f"{state}: {sys.argv[1]}", flush=True)
    sys.exit(0 if state == "finished" else 1)
