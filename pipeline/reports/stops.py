"""The plateau rule replayed on finished runs: where version 1 stopped them, where the rule now in force
(:data:`~pipeline.training.stopping.PLATEAU_RULE`) would, and how much each was still falling at its end. What
docs/training.md's table of stops is made from, and what a sweep asks before it trains on a run stopped by version 1
(:func:`rejudged_stop`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.rundir import RunDir, stop_reason
from pipeline.training.results import TRAIN_PERPLEXITY, logged_values
from pipeline.training.stopping import (
    PLATEAU_RULE,
    PRUNE_RULE,
    left_start,
    legacy_plateau_stop,
    plateau_stop,
    plateau_window,
    should_prune,
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
    results record ``prune_rule``), or stopped for another reason, is left as it is."""
    folder = RunDir(run_dir)
    results = folder.read_results()
    if results is None or stop_reason(results) != "pruned" or results.get("prune_rule", 1) >= PRUNE_RULE:
        return False
    training = folder.read_config().training
    windows = [(b, p) for b, p in logged_values(folder.read_metrics(), TRAIN_PERPLEXITY)
               if b <= results["batches"] and b % training.perplexity_every == 0]
    return not should_prune(results["batches"], training, windows)


ARCHIVES = ("reports/cpu/finished_runs", "reports/gpu/lstm/finished_runs", "reports/recipe/finished_runs",
            "reports/recipe/itg/finished_runs", "reports/recipe/seeds/finished_runs")


def replay_archives(archives=ARCHIVES) -> list[tuple[str, Replay]]:
    """(archive, :class:`Replay`) of every finished run in ``archives`` whose config has a plateau rule."""
    out = []
    for archive in archives:
        for run_dir in sorted(Path(archive).iterdir()):
            folder = RunDir(run_dir)
            if not folder.results_file.is_file() or not folder.read_config().training.plateau_patience:
                continue
            judged = replay(run_dir)
            if judged is not None:
                out.append((archive, judged))
    return out


def stops_table(replays: list[tuple[str, Replay]]) -> str:
    """Markdown: the plateau stops of version 1 that the rule in force would not have made, with each run's fall over
    its last window; and a line counting what was replayed."""
    plateau = [(a, r) for a, r in replays if r.stop_reason == "plateau"]
    reproduced = sum(r.legacy_stop == r.batches for _, r in plateau)
    kept = sum(r.stop == r.batches for _, r in plateau)
    sooner = [(a, r) for a, r in plateau if r.stop is not None and r.stop < r.batches]
    moved = [(a, r) for a, r in plateau if r.stop is None]
    lines = [f"Replayed: {len(replays)} archived runs with a plateau rule, {len(plateau)} of them stopped on it; the "
             f"replay of version 1 stops {reproduced} of those where they stopped. Version 2 stops {kept} there, "
             f"{len(sooner)} sooner ({', '.join(f'{r.run_id} at {r.stop:,}' for _, r in sooner) or 'none'}: flat "
             f"already), and does not stop the other {len(moved)} by then; they train on:", "",
             "| archive | run | v1 stopped it at | v2's window there | mean perplexity over that window, against the "
             "window before |", "|---|---|---|---|---|"]
    for archive, r in moved:
        fall = "too short for two windows" if r.fall != r.fall else f"{-r.fall:+.1%}"
        lines.append(f"| {archive.removeprefix('reports/').removesuffix('/finished_runs')} | {r.run_id} | "
                     f"{r.batches:,} | {r.window:,} | {fall} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m pipeline.reports.stops: the table in docs/training.md
    print(stops_table(replay_archives()))
