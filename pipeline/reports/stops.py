"""docs/training.md's table of the plateau rule's stops: the replay of every archived run
(:func:`pipeline.sweep.rejudge.replay`), where version 1 stopped it and where the rule in force would."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.rundir import RunDir
from pipeline.sweep.rejudge import Replay, replay

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


def confirmation_cost(replays: list[tuple[str, Replay]]) -> str:
    """What a plateau rule that stopped only at a second flat evaluation in a row would cost on the archive, in one
    line. The rule in force stops at the first evaluation it judges flat (:func:`~pipeline.training.stopping.
    plateau_stop`), so every stop it made is unconfirmed by construction and such a rule would reopen each; the archive
    keeps no checkpoints, so each would train again from batch 0 to its stop before it could go further (its
    training and evaluation seconds, :func:`~pipeline.reports.build.run_seconds`)."""
    from pipeline.reports.build import run_seconds

    made = [(a, r) for a, r in replays if r.stop_reason == "plateau" and r.stop == r.batches]
    results = [RunDir(Path(a) / r.run_id).read_results() for a, r in made]
    hours = float(run_seconds(pd.DataFrame(results)).sum()) / 3600 if results else 0.0
    return (f"The rule in force made {len(made)} of the archived plateau stops where they stand, each at its first "
            f"flat judgment; a rule that waited for a second would reopen all {len(made)}, from batch 0 (no "
            f"checkpoints are archived): {hours:.1f} CPU-hours to return to their stops.\n")


if __name__ == "__main__":  # python -m pipeline.reports.stops: the table in docs/training.md
    replays = replay_archives()
    print(stops_table(replays))
    print(confirmation_cost(replays))
