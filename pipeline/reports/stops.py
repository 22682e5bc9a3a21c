"""The plateau rule replayed on finished runs: where version 1 stopped them, where the rule now in force
(:data:`~pipeline.training.stopping.PLATEAU_RULE`) would, and how much each was still falling at its end. What
docs/training.md's table of stops is made from, and what a sweep asks before it trains on a run stopped by version 1
(:func:`rejudged_stop`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.rundir import RunDir, stop_reason
from pipeline.training.results import logged_values
from pipeline.training.stopping import (
    PLATEAU_RULE,
    left_start,
    legacy_plateau_stop,
    plateau_stop,
    plateau_window,
)


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
    windows = [(b, p) for b, p in logged_values(folder.read_metrics(), "train/perplexity")
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
    have stopped it where it stopped. A run judged by the rule in force already (its results record
    ``plateau_rule``), or stopped for another reason, is left as it is."""
    results = RunDir(run_dir).read_results()
    if results is None or stop_reason(results) != "plateau" or results.get("plateau_rule", 1) >= PLATEAU_RULE:
        return False
    judged = replay(run_dir)
    return judged.stop != judged.batches
