"""Where a sweep stands: the state of every run (:data:`pipeline.rundir.STATES`, read off its folder by
:class:`pipeline.rundir.RunDir`), and how long the rest should take. A sweep retries failed runs with
``retry_failed`` and continues pruned ones with ``retry_pruned``; it never trains over a damaged run."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import RunConfig, SweepConfig
from pipeline.paths import RUNS_DIR
from pipeline.rundir import DONE, STATES, TO_GO, DamagedRun, RunDir
from pipeline.runlock import lock_owner

__all__ = ["DONE", "STATES", "RunStatus", "planned_runs", "rate_key", "run_state", "run_status", "selected",
           "summary", "sweep_root", "sweep_status", "unfinished"]


def sweep_root(sweep: SweepConfig, runs_root: Path | None = None) -> Path:
    return Path(runs_root) if runs_root is not None else RUNS_DIR / sweep.name


@dataclass(frozen=True)
class RunStatus:
    config: RunConfig
    run_dir: Path
    state: str
    batches_done: int
    seconds: float  # wall seconds of training so far
    batches_later: float = 0.0  # successive halving's later rungs, its share (halving.Budget.later)

    @property
    def batches_left(self) -> int:
        return 0 if self.state in (*DONE, "failed", "damaged") else self.config.training.max_batches - self.batches_done


def run_state(run_dir: Path, config: RunConfig | None = None) -> str:
    """One of :data:`STATES`, read off the run directory (``config``: the budget the sweep asks of it now)."""
    return RunDir(run_dir).state(config)


def run_status(config: RunConfig, run_dir: Path, active: bool = False) -> RunStatus:
    """``active``: a worker of this very sweep was just started on it (it may not hold the lock yet)."""
    state = run_state(run_dir, config)
    if active and state in TO_GO:
        state = "running"
    done, seconds = 0, 0.0
    try:
        rows = RunDir(run_dir).read_metrics()
    except DamagedRun:
        rows = []
    if rows:
        done = int(rows[-1]["step"])
        seconds = float(rows[-1].get("time/elapsed_s") or 0.0)  # where runs before timings.csv kept it
    seconds = RunDir(run_dir).seconds_trained() or seconds
    return RunStatus(config, run_dir, state, done, seconds)


def planned_runs(sweep: SweepConfig, runs_root: Path | None = None, plan: dict | None = None
                 ) -> list[tuple[RunConfig, bool]]:
    """Every run of the grid with the budget it is to train now, and whether successive halving stopped it there
    (:mod:`pipeline.sweep.halving`, or its ``plan`` already made; a run outside a halving block keeps its config's
    budget)."""
    from pipeline.sweep.halving import halving_plan

    plan = halving_plan(sweep, sweep_root(sweep, runs_root)) if plan is None else plan
    out = []
    for run in sweep.runs():
        budget = plan.get(run.run_id())
        if budget is None:
            out.append((run, False))
        else:
            training = dataclasses.replace(run.training, max_batches=budget.batches)
            out.append((dataclasses.replace(run, training=training), budget.halved))
    return out


def halved_state(state: str, halved: bool) -> str:
    """A run that successive halving stopped at its rung, and that got there, reads as *pruned*."""
    return "pruned" if halved and state == "finished" else state


def selected(run_id: str, only: Sequence[str]) -> bool:
    """Whether ``--only`` (none: every run) selects a run: one of the patterns matches its id."""
    return not only or any(fnmatch.fnmatchcase(run_id, pattern) for pattern in only)


def sweep_status(sweep: SweepConfig, runs_root: Path | None = None, active: set[Path] = frozenset(),
                 only: Sequence[str] = ()) -> list[RunStatus]:
    """The status of every run of the grid (``only``: of the runs ``--only`` selects, :func:`selected`) at the budget
    it is to train now; a run that successive halving stopped at a rung, and that got there, is *pruned*. The
    halving plan is the whole grid's either way: a bracket is decided on all its runs."""
    from pipeline.sweep.halving import halving_plan

    root = sweep_root(sweep, runs_root)
    plan = halving_plan(sweep, root)
    out = []
    for run, halved in planned_runs(sweep, runs_root, plan):
        run_id = run.run_id()  # a hash of the whole config: computed once a run
        if not selected(run_id, only):
            continue
        status = run_status(run, root / run_id, active=root / run_id in active)
        later = plan[run_id].later if run_id in plan else 0.0
        out.append(dataclasses.replace(status, state=halved_state(status.state, halved), batches_later=later))
    return out


def summary(statuses: list[RunStatus], workers: int, measured: dict[str, list[tuple[float, int]]] | None = None
            ) -> str:
    """'12 finished, 2 running, 0 failed, 21 to go; at most ~1.4 h left' (early stops make it an upper bound);
    pruned and damaged runs are counted when there are any."""
    counts = Counter(s.state for s in statuses)
    to_go = sum(counts[s] for s in TO_GO)
    parts = [f"{counts['finished']} finished"] + ([f"{counts['pruned']} pruned"] if counts["pruned"] else [])
    parts += [f"{counts['damaged']} damaged"] if counts["damaged"] else []
    line = ", ".join(parts + [f"{counts['running']} running", f"{counts['failed']} failed", f"{to_go} to go"])
    eta = estimate_seconds_left(statuses, workers, measured)
    if counts["running"] + to_go:
        line += "; time left: estimating" if eta is None else f"; at most ~{_duration(eta)} left"
    return line


def rate_key(config: RunConfig) -> str:
    """What a measured rate of seconds per batch is kept under: the model and its size (a hidden-512 Stack's batch
    costs several of a hidden-256 one's)."""
    return f"{config.model.name} h{config.model.hidden}"


# The batches this sweep's worker processes must have trained, for a model and size, before their rate prices it: a
# process's start and final evaluation (2,000 cached sequences and the far bands) cost what a few hundred to a few
# thousand batches do, so a short one (a run resumed for its last 500 batches) measures mostly them. The cpu profile's
# sweep once said "at most ~132 h left" for ~45 from one such process.
MIN_MEASURED_BATCHES = 2_000


def measured_rate(processes: list[tuple[float, int]]) -> float | None:
    """Wall seconds per batch over this sweep's worker processes (wall seconds, batches trained) of one model and size:
    their total time over their total batches, so that each weighs by what it trained; None below
    :data:`MIN_MEASURED_BATCHES`."""
    batches = sum(b for _, b in processes)
    return sum(s for s, _ in processes) / batches if batches >= MIN_MEASURED_BATCHES else None


def estimate_seconds_left(statuses: list[RunStatus], workers: int,
                          measured: dict[str, list[tuple[float, int]]] | None = None) -> float | None:
    """Batches left (with successive halving's later rungs: ``RunStatus.batches_later``) × wall seconds per batch /
    workers, per model. The rate is, in order of preference: measured by this sweep over whole worker processes
    (start-up, training, evaluation, final evaluation: ``measured``, each process's wall seconds and batches trained;
    :func:`measured_rate`, once they have trained enough); else over finished runs' training and evaluation; else
    running runs' training so far. Rates are kept per model and size (:func:`rate_key`); one with none is priced at
    the mean of all."""
    per_model: dict[str, list[float]] = {}
    for key, processes in (measured or {}).items():
        rate = measured_rate(processes)
        if rate is not None:
            per_model[key] = [rate]
    from_this_sweep = set(per_model)
    for s in statuses:
        if rate_key(s.config) in from_this_sweep:
            continue
        if s.state in DONE:
            r = RunDir(s.run_dir).read_results()
            rate = (r["train_seconds"] + r["eval_seconds"]) / max(1, r["batches"])
        elif s.batches_done and s.seconds:
            rate = s.seconds / s.batches_done
        else:
            continue
        per_model.setdefault(rate_key(s.config), []).append(rate)
    if not per_model:
        return None
    overall = sum(sum(v) for v in per_model.values()) / sum(len(v) for v in per_model.values())
    total = 0.0
    for s in statuses:
        rates = per_model.get(rate_key(s.config))
        total += (s.batches_left + s.batches_later) * (sum(rates) / len(rates) if rates else overall)
    return total / max(1, workers)


def unfinished(statuses: list[RunStatus]) -> list[str]:
    """One line per run that is not done (finished or pruned), saying why: what a sweep prints before exiting
    non-zero."""
    lines = []
    for s in statuses:
        if s.state in DONE:
            continue
        if s.state == "failed":
            try:
                why = "failed: " + RunDir(s.run_dir).read_failure() + " (--retry-failed runs it again)"
            except DamagedRun as error:
                why = f"failed, and {error}"
        elif s.state == "damaged":
            why = f"damaged: {RunDir(s.run_dir).damage()} (repair or remove the file; `transduce train --restart "
            why += "--run-dir` trains it again)"
        elif s.state == "running":
            owner = lock_owner(s.run_dir)
            why = f"still running in another process ({owner})" if owner else "still running in another process"
        elif s.state == "interrupted":
            why = f"interrupted at batch {s.batches_done} of {s.config.training.max_batches}; rerun to resume"
        else:
            why = "not started"
        lines.append(f"{s.run_dir.name}: {why}")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
