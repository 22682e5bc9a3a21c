"""Successive halving over a grid block's learning rates and memory starts (:class:`pipeline.config.Halving`),
planned from the runs' own files.

A *bracket* is the runs of one block that differ only in their *setting*: the learning rate and the start
(``GridBlock.starts``); with ``seeds_together``, the seed too, so that a setting's seeds go on or stop together.
Every run of a bracket trains to the first rung; once all of them have got there (or stopped before it, or failed),
the ``keep`` settings with the lowest training perplexity (the mean over a setting's seeds) go on to the next rung,
the others stop where they are; after the last rung the survivors train to the block's ``max_batches``. The plan
is read again from the runs' folders whenever it is asked for, so a sweep killed anywhere resumes the same plan. A
rung once decided stays decided: each run's standing there is written into its folder (``rungs.json``) the first
time the plan sees the rung decided, and read from there ever after, so a run trained again from batch 0 (its
checkpoint lost; on another CPU its floats, hence its log, differ) never re-opens a rung its first log decided.

The sweep asks :func:`halving_plan` for each run's budget now and whether halving stopped it
(:mod:`pipeline.sweep.status` turns that into the run's state: a run cut at a rung is *pruned*).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Halving, RunConfig, SweepConfig
from pipeline.rundir import DamagedRun, RunDir, stop_reason
from pipeline.training.results import TRAIN_PERPLEXITY

# The training perplexity a rung compares: the mean over this many windows up to the rung (with the usual 100-batch
# windows, its last 1,000 batches), so that one noisy window does not decide a learning rate.
RANK_WINDOWS = 10


@dataclass(frozen=True)
class Budget:
    batches: int  # what the run is to train now
    halved: bool  # stopped by halving at a rung (its bracket went on without it)
    # Its share of the most batches its bracket's later rungs may still train beyond the rung it trains to now (each
    # later rung's kept settings x their seeds x the span to the next rung or the cap, spread evenly over the runs that
    # train to this rung): what an estimate of the time left adds, an upper bound (early stops, runs already past).
    later: float = 0.0


def brackets(sweep: SweepConfig) -> list[tuple[object, list[RunConfig]]]:
    """(the block's Halving, its runs that differ only in their setting) for every bracket of the profile, in grid
    order."""
    groups: dict[tuple, list[RunConfig]] = {}
    halvings = {}
    for index, _, run in sweep.runs_by_block():
        halving = sweep.grid[index].halving
        if halving is None:
            continue
        key = (index, run.task, run.model.name, run.model.hidden)
        if not halving.seeds_together:
            key += (run.training.seed,)
        groups.setdefault(key, []).append(run)
        halvings[key] = halving
    return [(halvings[key], runs) for key, runs in groups.items()]


def settings(runs: list[RunConfig]) -> list[list[RunConfig]]:
    """A bracket's runs grouped by setting (everything but the seed), in grid order: the units a rung ranks."""
    groups: dict[str, list[RunConfig]] = {}
    for run in runs:
        identity = run.identity()
        identity["training"] = {k: v for k, v in identity["training"].items() if k != "seed"}
        groups.setdefault(json.dumps(identity, sort_keys=True, default=str), []).append(run)
    return list(groups.values())


def standing_at(run_dir: Path, rung: int) -> float | None:
    """A run's training perplexity for the rung at ``rung`` batches (the mean of its last :data:`RANK_WINDOWS`
    windows up to it), or None while it has not got there. A run that stopped before the rung (plateau, converged,
    pruned) stands where it stopped; one that failed stands last (infinity). One whose files are damaged holds the
    rung undecided (None): ranked last, a damaged winner's results would hand its place to a rate the rung had cut,
    which would then train to the full budget; the sweep names the damage, and the rung is decided once it is
    repaired."""
    from pipeline.training.results import logged_values

    folder = RunDir(run_dir)
    try:
        recorded = folder.read_rungs().get(rung)
        if recorded is not None:
            return recorded
        folder.check()
        logged = logged_values(folder.read_metrics(), TRAIN_PERPLEXITY)
        results = folder.read_results()
    except DamagedRun:
        return None
    if folder.failed_file.exists():
        return math.inf
    upto = [p for step, p in logged if step <= rung]
    reached = any(step == rung for step, _ in logged)
    stopped = results is not None and stop_reason(results) != "budget" and results["batches"] < rung
    if not (reached or stopped):
        return None
    window = [p for p in upto[-RANK_WINDOWS:] if not math.isnan(p)]
    return sum(window) / len(window) if window else math.inf


def setting_rank(group: list[RunConfig], standings: dict[str, float]) -> tuple[float, str]:
    """Where a setting stands at a rung: the mean of its runs' standings (a failed run's, infinite, puts it last),
    ties to the setting with the lower run id."""
    values = [standings[run.run_id()] for run in group]
    return sum(values) / len(values), min(run.run_id() for run in group)


def walk_rungs(halving: Halving, runs: list[RunConfig], root: Path):
    """A bracket's rungs in order, as the rule decides them. For each decided rung yields (its index into
    ``halving.at``, the rung, how many settings it keeps, the settings that trained to it ranked by
    :func:`setting_rank` (the first ``keep`` go on), the runs' standings there); at the first rung not decided yet
    yields the settings training to it unranked with standings None, and stops. Each later rung follows the rule's
    decisions, as the sweep did. The one copy of the walk: the sweep's plan and the rungs report
    (:mod:`pipeline.reports.rungs`) both read it."""
    alive = settings(runs)
    for index, (rung, keep) in enumerate(zip(halving.at, halving.keep)):
        standings = {run.run_id(): standing_at(root / run.run_id(), rung) for group in alive for run in group}
        if any(value is None for value in standings.values()):
            yield index, rung, keep, alive, None
            return
        ranked = sorted(alive, key=lambda group, at=standings: setting_rank(group, at))
        yield index, rung, keep, ranked, standings
        alive = ranked[:keep]


def halving_plan(sweep: SweepConfig, root: Path) -> dict[str, Budget]:
    """Run id -> its :class:`Budget` now, for every run of a block with halving (runs of other blocks are absent:
    their budget is their config's)."""
    plan: dict[str, Budget] = {}
    for halving, runs in brackets(sweep):
        for index, rung, keep, ranked, standings in walk_rungs(halving, runs, root):
            if standings is None:  # the rung is not decided yet: all train to it
                share = later_batches(halving, index, len(ranked[0]), runs[0].training.max_batches)
                share /= sum(len(group) for group in ranked)
                plan.update({run.run_id(): Budget(rung, False, share) for group in ranked for run in group})
                break
            for run_id, standing in standings.items():  # decided: recorded where each run's folder is, and read
                if (root / run_id).is_dir():             # from there from now on
                    RunDir(root / run_id).record_rung(rung, standing)
            plan.update({run.run_id(): Budget(rung, True) for group in ranked[keep:] for run in group})
        else:  # every rung decided (a Halving has at least one): the last one's kept settings train to the cap
            plan.update({run.run_id(): Budget(run.training.max_batches, False)
                         for group in ranked[:keep] for run in group})
    return plan


def later_batches(halving: Halving, undecided: int, seeds: int, cap: int) -> int:
    """The most batches a bracket trains after its rung ``undecided`` (an index into ``halving.at``) is decided: from
    each rung on, its kept settings (``seeds`` runs each) to the next rung, the last rung's to ``cap``."""
    ends = [*halving.at[undecided + 1:], cap]
    return sum(keep * seeds * (end - start)
               for start, end, keep in zip(halving.at[undecided:], ends, halving.keep[undecided:]))
