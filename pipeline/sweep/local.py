"""The local pool: one worker process per run (``python -m pipeline.sweep RUN_DIR``), ``workers`` at a time, one
torch thread each, output in ``<run dir>/train.log``. Workers die with the pool (:mod:`pipeline.sweep.lifetime`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import SweepConfig
from pipeline.provenance import WORKERS_ENV
from pipeline.rundir import RunDir
from pipeline.sweep.grid import default_workers, prepare
from pipeline.sweep.lifetime import PARENT_ENV, die_with_parent
from pipeline.sweep.status import RunStatus, planned_runs, run_status, summary, sweep_root, sweep_status


def run_local(sweep: SweepConfig, runs_root: Path | None = None, workers: int | None = None,
              retry_failed: bool = False, echo=print, poll_seconds: float = 1.0,
              report_every: float = 60.0, retry_pruned: bool = False, only=()) -> list[RunStatus]:
    """Execute the sweep on this machine, ``workers`` runs at a time (``only``: the runs whose ids match one of these
    shell-style patterns). Returns the final status of every run."""
    workers = workers or default_workers(sweep)
    todo = prepare(sweep, runs_root, retry_failed, retry_pruned, only)
    root = sweep_root(sweep, runs_root)
    configs = {root / run.run_id(): run for run, _ in planned_runs(sweep, runs_root)}  # at their budgets now
    attempted = {(run_dir, configs[run_dir].training.max_batches) for run_dir in todo}
    echo(f"sweep {sweep.name}: {len(sweep.runs())} runs, {len(todo)} to execute with {workers} worker(s) "
         f"in {sweep_root(sweep, runs_root)}")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               **{PARENT_ENV: str(os.getpid()), WORKERS_ENV: str(workers)})
    children: dict[subprocess.Popen, tuple[Path, float, int]] = {}  # child -> (run dir, start time, batches then)
    measured: dict[str, list[float]] = {}  # model -> wall seconds per batch of whole worker processes
    logs = {}
    dies_with_sweep = die_with_parent()  # run in each child between fork and exec

    def stop_children(signum, frame):  # a polite stop of the sweep stops its runs; they resume next time
        for child in children:
            child.terminate()
        raise SweepStopped("SIGTERM", 128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop_children)
    last_report = 0.0
    try:
        queue = list(todo)
        while queue or children:
            while queue and len(children) < workers:
                run_dir = queue.pop(0)
                before = run_status(configs[run_dir], run_dir).batches_done
                logs[run_dir] = open(RunDir(run_dir).log_file, "a")
                child = subprocess.Popen([sys.executable, "-m", "pipeline.sweep", str(run_dir)], env=env,
                                         stdout=logs[run_dir], stderr=subprocess.STDOUT,
                                         preexec_fn=dies_with_sweep)
                children[child] = (run_dir, time.monotonic(), before)
            time.sleep(poll_seconds)
            changed = False
            for child in [c for c in children if c.poll() is not None]:
                run_dir, started, before = children.pop(child)
                logs.pop(run_dir).close()
                status = run_status(configs[run_dir], run_dir)
                if status.batches_done > before:
                    measured.setdefault(status.config.model.name, []).append(
                        (time.monotonic() - started) / (status.batches_done - before))
                echo(f"  {status.state}: {run_dir.name}"
                     + (f" (see {RunDir(run_dir).failed_file})" if status.state == "failed" else ""))
                changed = True
            if changed or time.monotonic() - last_report > report_every:
                active = {run_dir for run_dir, _, _ in children.values()}
                echo("  " + summary(sweep_status(sweep, runs_root, active), workers, measured))
                last_report = time.monotonic()
            if not queue and not children:  # all done: successive halving may have promoted runs to a next rung
                queue = replan(sweep, runs_root, only, configs, attempted)
    except KeyboardInterrupt:  # Ctrl-C reaches the workers too (one process group); said like SIGTERM
        raise SweepStopped("an interrupt (Ctrl-C)", 128 + signal.SIGINT) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        for child in children:
            child.terminate()
        for child in children:  # their runs save nothing more, but their locks go only with them: wait, briefly
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
    statuses = sweep_status(sweep, runs_root)
    echo(f"sweep {sweep.name}: " + summary(statuses, workers, measured))
    return statuses


class SweepStopped(Exception):
    """The sweep was stopped from outside (``why``: SIGTERM, Ctrl-C) with runs unfinished; ``exit_code`` is the
    shell's for that signal (143, 130). Its workers were stopped and waited for: rerunning the sweep resumes them."""

    def __init__(self, why: str, exit_code: int):
        super().__init__(why)
        self.why, self.exit_code = why, exit_code


def replan(sweep: SweepConfig, runs_root: Path | None, only, configs: dict, attempted: set) -> list[Path]:
    """The runs to train next once a round is done: those whose budget successive halving raised since (a rung was
    decided), each at most once per budget in a sweep, so a run that keeps ending unfinished cannot loop. Updates
    ``configs`` (run dir -> config at its budget now) and ``attempted`` in place. Failed and pruned runs are left as
    they are (the sweep's --retry flags act once, at its start)."""
    todo = prepare(sweep, runs_root, retry_failed=False, retry_pruned=False, only=only)
    root = sweep_root(sweep, runs_root)
    configs.update({root / run.run_id(): run for run, _ in planned_runs(sweep, runs_root)})
    fresh = [run_dir for run_dir in todo if (run_dir, configs[run_dir].training.max_batches) not in attempted]
    attempted.update((run_dir, configs[run_dir].training.max_batches) for run_dir in fresh)
    return fresh
