"""A screen's report: one change at a time against a baseline, every run compared at the same batch on training
numbers (``configs/lstm-screen.yaml``: the baselines given every chance). ``reports/<screen>/README.md`` and
``runs.csv``; the title line marks the kind (:mod:`pipeline.reports.kinds`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pipeline.config import SweepConfig, profile_hash
from pipeline.files import atomic_write_text
from pipeline.models import DISPLAY_NAMES
from pipeline.provenance import command_line, provenance
from pipeline.reports.kinds import check_runs_report
from pipeline.reports.recipe import labelled_runs
from pipeline.rundir import RunDir
from pipeline.sweep import DONE, sweep_root, sweep_status
from pipeline.training.results import TRAIN_PERPLEXITY, logged_rows, logged_values
from pipeline.training.stopping import still_falling

BASELINE = "baseline"  # the label every block compared with starts with this
END_WINDOWS = 10  # the training perplexity at the end: the mean of the last 10 windows (1,000 batches)
# "Clearly helps": training perplexity at the end at most this times the baseline's, and training fine accuracy above
# it (the profile's header states the rule before the runs).
HELPS_RATIO = 0.8


def screen_runs(sweep: SweepConfig, runs_root: Path | None = None) -> pd.DataFrame:
    """One row per run: its block's label, task, state, batches, training perplexity at the end, whether it was still
    falling, and training coarse/fine (the final evaluation's, on the cached training-length set) and test-length."""
    root = sweep_root(sweep, runs_root)
    states = {s.run_dir.name: s for s in sweep_status(sweep, runs_root)}
    rows, logs = [], {}
    for label, run in labelled_runs(sweep):
        folder = root / run.run_id()
        status = states[run.run_id()]
        logged = logged_values(logged_rows(folder), TRAIN_PERPLEXITY) if folder.is_dir() else []
        logs[run.run_id()] = logged
        end = [p for _, p in logged[-END_WINDOWS:]]
        row = dict(label=label, task=run.task, model=run.model.name, lr=run.training.lr, seed=run.training.seed,
                   state=status.state, batches=status.batches_done,
                   train_perplexity=sum(end) / len(end) if end else math.nan,
                   still_falling=bool(logged) and still_falling(logged, run.training, logged[-1][0]),
                   train_coarse=math.nan, train_fine=math.nan, test_coarse=math.nan, test_fine=math.nan,
                   run_id=run.run_id(), commit="")
        if status.state in DONE:
            results = RunDir(folder).read_results()
            row.update({k: results[k] for k in ("train_coarse", "train_fine", "test_coarse", "test_fine")},
                       commit=results.get("commit", ""))
        rows.append(row)
    runs = pd.DataFrame(rows)
    baseline = runs[runs.label.str.startswith(BASELINE)].set_index("task")
    # against the baseline at the same batch (the mean of its windows ending where this run's log ends), so that a
    # run still training is compared with where the baseline was then, not at its end
    runs["ratio"] = [r.train_perplexity / _mean_until(logs.get(baseline.run_id.get(r.task), []), r.batches)
                     if r.task in baseline.index else math.nan for r in runs.itertuples()]
    runs["helps"] = [bool(r.ratio <= HELPS_RATIO and r.train_fine > baseline.train_fine.get(r.task, math.inf))
                     for r in runs.itertuples()]
    return runs


def _mean_until(logged: list[tuple[int, float]], batch: int) -> float:
    """The mean of the last :data:`END_WINDOWS` windows of ``logged`` up to ``batch`` (NaN if it has none there)."""
    upto = [p for step, p in logged if step <= batch][-END_WINDOWS:]
    return sum(upto) / len(upto) if upto and batch > 0 else math.nan


def write_screen_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                        out_dir: Path | None = None, command: str | None = None, force: bool = False) -> Path:
    """Write ``reports/<screen>/`` (runs.csv and README.md). Returns the README."""
    out_dir = Path(out_dir) if out_dir is not None else sweep.reports_dir()
    check_runs_report(sweep, config_file, runs_root, out_dir, "screen", force)
    runs = screen_runs(sweep, runs_root)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "runs.csv", runs.to_csv(index=False))
    done = runs[runs.state.isin(DONE)]
    helping = done[done.helps]
    if len(done) < len(runs):
        verdict = f"{len(done)} of {len(runs)} runs done: no conclusion yet."
    elif helping.empty:
        verdict = (f"No change clearly helps (training perplexity at the end at most {HELPS_RATIO:g}× the baseline's "
                   "with a higher training fine accuracy): the baseline recipe stands.")
    else:
        verdict = "Clearly helps: " + "; ".join(f"{r.label} on {r.task} ({r.ratio:.2f}× the baseline's perplexity)"
                                                for r in helping.itertuples()) + "."
    lines = [f"# Screen: `{sweep.name}`", "", f"**{verdict}**", "",
             provenance(command or command_line("transduce", "screen", config_file), inputs=(config_file,))
             + f" Config `{config_file}` (hash `{profile_hash(sweep)}`); per-run numbers and commits in "
             "[runs.csv](runs.csv).", "", sweep.description.strip(), "",
             f"Training perplexity: the mean of the last {END_WINDOWS} 100-batch windows; × baseline: against the "
             "same task's baseline at the same batch. Accuracies: the final evaluation of the best checkpoint (by "
             "training accuracy) on "
             "the cached 1000 training-length and test-length sequences. *Still falling*: the plateau rule's "
             "trend check at the run's end. Nothing here read a test-length number to decide.", "",
             "| task | model | change | lr | batches | training perplexity | × baseline | still falling | "
             "train coarse / fine | test coarse / fine |", "|---|---|---|---|---|---|---|---|---|---|"]
    value = lambda x, f="{:.2f}": "—" if pd.isna(x) else f.format(x)  # noqa: E731
    for r in runs.sort_values(["task", "label"], key=lambda c: c.map(
            lambda x: "" if str(x).startswith(BASELINE) else str(x)), kind="stable").itertuples():
        lines.append(f"| {r.task} | {DISPLAY_NAMES[r.model]} | {r.label} | {r.lr:g} | {r.batches:,} | "
                     f"{value(r.train_perplexity, '{:.3f}')} | {value(r.ratio)} | {'yes' if r.still_falling else 'no'}"
                     f" | {value(r.train_coarse)} / {value(r.train_fine)} | {value(r.test_coarse)} / "
                     f"{value(r.test_fine)} |")
    readme = out_dir / "README.md"
    atomic_write_text(readme, "\n".join(lines) + "\n")
    return readme
