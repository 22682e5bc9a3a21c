"""The sweep's second look at runs that older stopping rules stopped: where version 1 of the plateau rule stopped a
finished run, where the rule in force (:data:`~pipeline.training.stopping.PLATEAU_RULE`) would, and whether a run that
version 1 of either rule stopped or pruned trains on when its sweep runs again (:func:`rejudged_stop`,
:func:`rejudged_prune`, asked by :func:`pipeline.sweep.grid.prepare`). Version 1 of each rule lives here and nowhere
else: nothing trains by it; it is replayed on archived runs (and on docs/training.md's table of stops,
:mod:`pipeline.reports.stops`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.rundir import RunDir, stop_reason
from pipeline.training.results import TRAIN_PERPLEXITY, logged_values
from pipeline.training.stopping import (
    PLATEAU_RULE,
    PRUNE_RULE,
    counted_from,
    improves,
    left_start,
    plateau_stop,
    plateau_window,
    prune_threshold,
    should_prune,
)

# -- version 1 of the rules: replayed, never trained by ---------------------------------------------------------


def pruned_by_first_rule(step: int, prune_at: Sequence[int], ratio: float, first_perplexity: float,
                         perplexity: float) -> bool:
    """Version 1 of the pruning rule, kept only to tell which archived runs it pruned that :func:`should_prune` would
    have kept: the window at ``step`` above ``ratio`` times the first window's, by any margin."""
    if step not in prune_at or math.isnan(first_perplexity) or math.isnan(perplexity):
        return False
    return perplexity > prune_threshold(ratio, first_perplexity)


def legacy_plateau_stop(windows: Sequence[tuple[int, float]], training, left_start_at: int | None) -> int | None:
    """Where version 1 of the plateau rule (before 2026-11-28) stopped a run with this log: ``plateau_patience``
    evaluations in a row without beating the lowest perplexity so far by the tolerance, where every new low, however
    small, became the reference. Kept only to replay the archived runs' stops (docs/training.md); nothing trains by
    it."""
    if not training.plateau_patience:
        return None
    best, stall = math.nan, 0
    for batch, perplexity in windows:
        start = counted_from(training, left_start_at)
        if batch % training.eval_every or start is None or batch < start:
            continue
        if math.isnan(perplexity):
            stall += 1
        elif math.isnan(best) or improves(perplexity, best, training.plateau_tolerance):
            best, stall = perplexity, 0
        else:
            best, stall = min(best, perplexity), stall + 1
        if stall >= training.plateau_patience:
            return batch
    return None



# -- the replay ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Replay:
    run_id: str
    batches: int  # where the run ended
    stop_reason: str
    legacy_stop: int | None  # where version 1 of the rule stops it (None: never within its log)
    stop: int | None  # where the rule in force stops it (None: not within its log)
    window: int  # the rule's window at the run's end
    fall: float  # the relative fall of mean perplexity over that last window against the window before


def last_window_fall(windows: list[tuple[int, float]], width: int) -> float:
    """The relative fall of the mean training perplexity over the last ``width`` batches against the ``width``
    before (0.05: 5% lower); NaN when the log is shorter than two windows."""
    end = windows[-1][0] if windows else 0
    recent = [p for b, p in windows if end - width < b <= end]
    before = [p for b, p in windows if end - 2 * width < b <= end - width]
    if not recent or not before or end - 2 * width < 0:
        return float("nan")
    return 1 - (sum(recent) / len(recent)) / (sum(before) / len(before))


def replay(run_dir: Path) -> Replay | None:
    """The plateau rule's two versions replayed on one finished run (None: not finished)."""
    folder = RunDir(run_dir)
    results = folder.read_results()
    if results is None:
        return None
    training = folder.read_config().training
    # the log up to where the run stopped (a reopened run's log goes on past it; its results say where it ended)
    windows = [(b, p) for b, p in logged_values(folder.read_metrics(), TRAIN_PERPLEXITY)
               if b <= results["batches"] and b % training.perplexity_every == 0]
    first = windows[0][1] if windows else float("nan")
    left_at = next((b for b, p in windows if left_start(first, p)), None)
    width = plateau_window(training, results["batches"])
    return Replay(run_id=run_dir.name, batches=results["batches"], stop_reason=stop_reason(results),
                  legacy_stop=legacy_plateau_stop(windows, training, left_at),
                  stop=plateau_stop(windows, training, left_at), window=width,
                  fall=last_window_fall(windows, width))


def rejudged_stop(run_dir: Path) -> bool:
    """Whether a finished run that version 1 of the plateau rule stopped is to train on: the rule in force would not
    have stopped it by then. A run the rule in force stops there or sooner stands (it trained past its plateau, which
    changes no verdict); one judged by the rule in force already (its results record ``plateau_rule``), or stopped
    for another reason, is left as it is."""
    results = RunDir(run_dir).read_results()
    if results is None or stop_reason(results) != "plateau" or results["plateau_rule"] >= PLATEAU_RULE:
        return False
    return replay(run_dir).stop is None


def rejudged_prune(run_dir: Path) -> bool:
    """Whether a run that version 1 of the pruning rule pruned is to train on: the rule in force
    (:func:`~pipeline.training.stopping.should_prune`, version :data:`PRUNE_RULE`) would not have pruned it at the
    checkpoint where it stopped. A run it prunes there too stands; one judged by the rule in force already (its
    results record ``prune_rule``), or stopped for another reason, is left as it is. A pruned read ablation always
    trains on: pruning no longer applies to it (:func:`~pipeline.training.stopping.pruning_applies`)."""
    folder = RunDir(run_dir)
    results = folder.read_results()
    if results is None or stop_reason(results) != "pruned":
        return False
    config = folder.read_config()
    # a read ablation, pruned before ablations were exempt (stopping.pruning_applies): it trains to its cap. Asked of
    # the ablation flag itself, so that no other pruned run (none is pruned without pruning checkpoints) is reopened
    if config.model.probes.read_zeroed:
        return True
    if results.get("prune_rule", 1) >= PRUNE_RULE:
        return False
    training = config.training
    windows = [(b, p) for b, p in logged_values(folder.read_metrics(), TRAIN_PERPLEXITY)
               if b <= results["batches"] and b % training.perplexity_every == 0]
    return not should_prune(results["batches"], training, windows)
