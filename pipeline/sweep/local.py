"""The local pool: one worker process per job (``python -m pipeline.sweep RUN_DIR [RUN_DIR ...]``: one run, or a
population when the profile's ``population`` packs several), ``workers`` at a time, one torch thread each, output in
the (first) run's ``train.log``. Workers die with the pool (:mod:`pipeline.sweep.lifetime`)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import SweepConfig
from pipeline.files import full_disk
from pipeline.provenance import WORKERS_ENV, visible_gpus
from pipeline.rundir import DONE, RunDir
from pipeline.sweep.grid import default_workers, pack, prepare
from pipeline.sweep.lifetime import PARENT_ENV, die_with_parent
from pipeline.sweep.status import (
    RunStatus,
    planned_runs,
    rate_key,
    run_status,
    selected,
    summary,
    sweep_root,
    sweep_status,
)
from pipeline.sweep.worker import UNRECORDED_EXIT


def wait_for_a_child(children, timeout: float) -> None:
    """Return as soon as one of ``children`` (``subprocess.Popen``) has ended, or after ``timeout`` seconds: the next
    job starts when a worker ends, not up to ``timeout`` later (what a fixed sleep cost every tiny run of the test
    suite). Linux tells through a pidfd per child, readable once it exits; elsewhere this sleeps ``timeout``."""
    if not hasattr(os, "pidfd_open"):
        time.sleep(timeout)
        return
    fds = []
    try:
        for child in children:
            try:
                fds.append(os.pidfd_open(child.pid))
            except ProcessLookupError:  # already reaped: it has ended
                return
        select.select(fds, [], [], timeout)
    finally:
        for fd in fds:
            os.close(fd)


def run_local(sweep: SweepConfig, runs_root: Path | None = None, workers: int | None = None,
              retry_failed: bool = False, echo=print, poll_seconds: float = 1.0,
              report_every: float = 60.0, retry_pruned: bool = False, only=(),
              population: int | None = None) -> list[RunStatus]:
    """Execute the sweep on this machine, ``workers`` jobs at a time (``only``: the runs whose ids match one of these
    shell-style patterns; ``population``: a job per model, its runs trained that many at a time as one population,
    as :func:`~pipeline.sweep.grid.pack` says; default the profile's). Returns the final status of every run."""
    workers = workers or default_workers(sweep)
    population = population or sweep.population
    todo = prepare(sweep, runs_root, retry_failed, retry_pruned, only)
    root = sweep_root(sweep, runs_root)
    configs = {root / run.run_id(): run for run, _ in planned_runs(sweep, runs_root)}  # at their budgets now
    attempted = {(run_dir, configs[run_dir].training.max_batches) for run_dir in todo}
    chosen = sum(selected(run.run_id(), only) for run in sweep.runs())
    grid = len(sweep.runs())
    runs = f"{grid} runs" if chosen == grid else f"{chosen} of {grid} runs (--only)"
    echo(f"sweep {sweep.name}: {runs}, {len(todo)} to execute with {workers} worker(s) "
         + (f"as populations of up to {population} at a time " if population and population > 1 else "")
         + f"in {sweep_root(sweep, runs_root)}")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               **{PARENT_ENV: str(os.getpid()), WORKERS_ENV: str(workers)})
    children: dict[subprocess.Popen, tuple[tuple[Path, ...], float, int]] = {}  # child -> (job, start, batches then)
    gpus = visible_gpus()
    gpu_of: dict[subprocess.Popen, str | None] = {}  # each worker sees one GPU (as cuda:0), the least busy
    if gpus:
        echo(f"  workers spread over GPU(s) {', '.join(gpus)}: each sees one (CUDA_VISIBLE_DEVICES)")
    # model and size -> (wall seconds, (member-)batches trained) of each whole worker process: status.estimate_...
    measured: dict[str, list[tuple[float, int]]] = {}
    logs = {}
    dies_with_sweep = die_with_parent()  # run in each child between fork and exec

    def stop_children(signum, frame):  # a polite stop of the sweep stops its runs; they resume next time
        for child in children:
            child.terminate()
        raise SweepStopped("SIGTERM", 128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop_children)
    last_report = 0.0
    try:
        queue = pack(todo, configs, population)
        while queue or children:
            while queue and len(children) < workers:
                job = queue.pop(0)
                before = sum(run_status(configs[run_dir], run_dir).batches_done for run_dir in job)
                log = open(RunDir(job[0]).log_file, "a")
                for other in job[1:]:  # a population writes one log: its first run's
                    with open(RunDir(other).log_file, "a") as note:
                        note.write(f"trained in a population of {len(job)} runs, {population} at a time; its log: "
                                  f"{RunDir(job[0]).log_file}\n")
                width = ["--width", str(population)] if len(job) > 1 else []
                gpu = least_busy(gpus, list(gpu_of.values()))
                child = subprocess.Popen([sys.executable, "-m", "pipeline.sweep", *width, *map(str, job)],
                                         env=env if gpu is None else dict(env, CUDA_VISIBLE_DEVICES=gpu),
                                         stdout=log, stderr=subprocess.STDOUT, preexec_fn=dies_with_sweep)
                children[child] = (job, time.monotonic(), before)
                logs[child] = log
                gpu_of[child] = gpu
            wait_for_a_child(children, poll_seconds)
            changed = False
            for child in [c for c in children if c.poll() is not None]:
                job, started, before = children.pop(child)
                gpu_of.pop(child, None)
                logs.pop(child).close()
                statuses = [run_status(configs[run_dir], run_dir) for run_dir in job]
                done = sum(status.batches_done for status in statuses)
                if done > before:
                    measured.setdefault(rate_key(statuses[0].config), []).append(
                        (time.monotonic() - started, done - before))
                for status in statuses:
                    if child.returncode == UNRECORDED_EXIT:
                        why = full_disk(status.run_dir) or f"see {RunDir(status.run_dir).log_file}"
                        echo(f"  {status.state}: {status.run_dir.name} (its worker could not write into the run "
                             f"folder, not even why it stopped: {why})")
                    else:
                        echo(f"  {status.state}: {status.run_dir.name}"
                             + (f" (see {RunDir(status.run_dir).failed_file})" if status.state == "failed" else ""))
                changed = True
            if changed or time.monotonic() - last_report > report_every:
                active = {run_dir for job, _, _ in children.values() for run_dir in job}
                echo("  " + summary(sweep_status(sweep, runs_root, active, only), workers, measured))
                last_report = time.monotonic()
            if changed:  # a rung just decided may have promoted runs: they take their place in grid order, ahead
                # of the later blocks still queued (a bracket's winner does not wait for the rest of the grid); a run
                # still training is never queued twice (replan offers each run once per budget)
                busy = {run_dir for job, _, _ in children.values() for run_dir in job}
                fresh = replan(sweep, runs_root, only, configs, attempted, busy)
                if fresh:
                    queued = [run_dir for job in queue for run_dir in job]
                    queue = pack(in_grid_order(sweep, runs_root, [*queued, *(r for r in fresh if r not in queued)]),
                                 configs, population)
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
    mine = [status for status in statuses if selected(status.run_dir.name, only)]  # what this sweep was to train
    echo(f"sweep {sweep.name}: " + summary(mine, workers, measured))
    if any(status.state not in DONE for status in mine) and (disk := full_disk(root)):
        echo(f"  {disk}: free some space and rerun the sweep (it resumes)")
    return statuses


def least_busy(gpus: list[str], busy: list[str | None]) -> str | None:
    """The GPU of ``gpus`` with the fewest workers on it (``busy``: the GPU of each running worker), the first on a
    tie; None without GPUs (the workers then run where torch puts them: the CPU)."""
    if not gpus:
        return None
    return min(gpus, key=lambda gpu: (busy.count(gpu), gpus.index(gpu)))


class SweepStopped(Exception):
    """The sweep was stopped from outside (``why``: SIGTERM, Ctrl-C) with runs unfinished; ``exit_code`` is the
    shell's for that signal (143, 130). Its workers were stopped and waited for: rerunning the sweep resumes them."""

    def __init__(self, why: str, exit_code: int):
        super().__init__(why)
        self.why, self.exit_code = why, exit_code


def in_grid_order(sweep: SweepConfig, runs_root: Path | None, run_dirs: list[Path]) -> list[Path]:
    """``run_dirs`` in the order of the profile's grid (blocks, then their runs), the order a sweep starts them in."""
    root = sweep_root(sweep, runs_root)
    position = {root / run.run_id(): index for index, run in enumerate(sweep.runs())}
    return sorted(run_dirs, key=lambda run_dir: position.get(run_dir, len(position)))


def replan(sweep: SweepConfig, runs_root: Path | None, only, configs: dict, attempted: set,
           busy: set = frozenset()) -> list[Path]:
    """The runs to train next once a round is done: those whose budget successive halving raised since (a rung was
    decided), each at most once per budget in a sweep, so a run that keeps ending unfinished cannot loop. Updates
    ``configs`` (run dir -> config at its budget now) and ``attempted`` in place. Failed and pruned runs are left as
    they are (the sweep's --retry flags act once, at its start). A run in ``busy`` (its last job's worker has not
    exited yet: it wrote its results at a rung and is still closing) is offered once that worker has ended, not now,
    where its new job would meet the old one's lock."""
    todo = prepare(sweep, runs_root, retry_failed=False, retry_pruned=False, only=only)
    root = sweep_root(sweep, runs_root)
    configs.update({root / run.run_id(): run for run, _ in planned_runs(sweep, runs_root)})
    fresh = [run_dir for run_dir in todo
             if run_dir not in busy and (run_dir, configs[run_dir].training.max_batches) not in attempted]
    attempted.update((run_dir, configs[run_dir].training.max_batches) for run_dir in fresh)
    return fresh
