"""The recipe study's report: per cell and per candidate choice, how many seeds learn and how fast.

``transduce study configs/recipe.yaml`` runs the study's grid through the resumable sweep and then writes
``reports/recipe/``:

* ``runs.csv``: one row per run of the grid: its choice (the grid block's ``label``), seed, state, batches trained,
  the batch at which it learned (or nothing), its last training perplexity and its mean push/pop at the last
  evaluation;
* ``README.md``: the table, one row per (cell, choice): seeds finished, seeds that learned, the share, the median
  batches to learn and each seed's batches.

A run has *learned* at the first evaluation where its coarse accuracy on fresh training-length sequences is at
least :data:`LEARNED_COARSE`. Nothing here reads test-length numbers: the study chooses training defaults, and
choosing them on test lengths would be tuning on the test set.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pipeline.config import SweepConfig, profile_hash
from pipeline.files import atomic_write_text
from pipeline.models import DISPLAY_NAMES, memory_of
from pipeline.provenance import command_line, provenance
from pipeline.reports.kinds import check_runs_report
from pipeline.rundir import RunDir
from pipeline.sweep import DONE, sweep_root, sweep_status
from pipeline.training.results import (
    LEARNED_COARSE,
    TRAIN_COARSE,
    TRAIN_PERPLEXITY,
    last_logged,
    logged_rows,
    logged_values,
)

MEMORY_COLUMNS = [f"{signal}_{half}{end}" for end in ("", "_bottom") for half in ("source", "target")
                  for signal in ("push", "pop")]
RUN_COLUMNS = ["task", "model", "choice", "lr", "seed", "state", "batches", "max_batches", "learned_at",
               "train_perplexity", *MEMORY_COLUMNS, "run_id", "commits"]


def labelled_runs(sweep: SweepConfig) -> list[tuple[str, object]]:
    """(choice, run config) for every run of the grid: a block's ``label``, else ``grid[i]``."""
    return [(sweep.grid[index].label or f"grid[{index}]", run) for index, _, run in sweep.runs_by_block()]


def memory_signals(model: str, rows: list[dict], step: int | None = None) -> dict[str, float]:
    """The memory's mean push and pop over the source and target halves of the evaluation sequences
    (:data:`MEMORY_COLUMNS`), as the monitor logged them at the evaluation of batch ``step`` (None: each signal's
    last value); NaN where nothing was logged: a model without one of the paper's memories, a one-ended memory's
    ``_bottom`` columns, a step without an evaluation."""
    # a two-ended memory (the DeQue) logs memory/push_source_top and _bottom; one-ended memories memory/push_source
    kind = memory_of(model)
    top = "_top" if kind is not None and "top" in kind.signal_labels() else ""
    out = {}
    for name in MEMORY_COLUMNS:
        column = "memory/" + (name if name.endswith("_bottom") else name + top)
        out[name] = last_logged(rows, column) if step is None else dict(logged_values(rows, column)).get(step, math.nan)
    return out


def push_pop_text(signals, ends: int) -> tuple[str, str]:
    """The push and pop columns of a report's "How the memories were used" table, from :func:`memory_signals`'
    names (a mapping): each "source / target" ("—" where either was not logged); a two-ended memory's as
    "top ..., bottom ..."."""
    def pair(kind: str, end: str) -> str:
        source, target = signals[f"{kind}_source{end}"], signals[f"{kind}_target{end}"]
        return "—" if pd.isna(source) or pd.isna(target) else f"{source:.2f} / {target:.2f}"

    if ends == 1:
        return pair("push", ""), pair("pop", "")
    push, pop = (f"top {pair(kind, '')}, bottom {pair(kind, '_bottom')}" for kind in ("push", "pop"))
    return push, pop


def learned_at(rows: list[dict], threshold: float = LEARNED_COARSE) -> int | None:
    """The first evaluation step whose training coarse accuracy reaches ``threshold``; None if none does."""
    return next((step for step, coarse in logged_values(rows, TRAIN_COARSE) if coarse >= threshold), None)


def _commits(run_dir: Path) -> str:
    """The commits a run was trained at, oldest first (``commits.txt``)."""
    return " ".join(RunDir(run_dir).read_commits())


def study_runs(sweep: SweepConfig, runs_root: Path | None = None) -> pd.DataFrame:
    """One row per run of the study's grid (see :data:`RUN_COLUMNS`), read off its directory."""
    choices = {run.run_id(): choice for choice, run in labelled_runs(sweep)}
    rows = []
    for status in sweep_status(sweep, runs_root):
        run = status.config
        log = logged_rows(status.run_dir)
        memory = memory_signals(run.model.name, log)
        rows.append(dict(task=run.task, model=run.model.name, choice=choices[run.run_id()], lr=run.training.lr,
                         seed=run.training.seed, state=status.state, batches=status.batches_done,
                         max_batches=run.training.max_batches, learned_at=learned_at(log),
                         train_perplexity=last_logged(log, TRAIN_PERPLEXITY), **memory, run_id=run.run_id(),
                         commits=_commits(status.run_dir)))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for a share of ``k`` successes in ``n``: the p whose binomial
    tails at k each hold (1 - level) / 2, found by bisection on the binomial CDF (no scipy needed). (nan, nan) for
    n = 0."""
    if n == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2

    def solve(f) -> float:  # f increases in p from <= 0 to >= 0 on [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: (1 - binomial_cdf(k - 1, n, p)) - tail)
    high = 1.0 if k == n else solve(lambda p: tail - binomial_cdf(k, n, p))
    return low, high


def done_seeds(runs: pd.DataFrame) -> pd.Series:
    """Which runs (rows with ``state`` and ``learned_at``) are done as the study counts them: finished, pruned as not
    learning, or stopped having learned."""
    return runs.state.isin(DONE) | runs.learned_at.notna()


def study_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, choice, lr), in grid order: seeds in the grid, seeds done (finished, pruned as not
    learning, or stopped having learned), seeds that learned, the share of done seeds that learned, the median
    batches to learn."""
    out = []
    for (task, model, choice, lr), part in runs.groupby(["task", "model", "choice", "lr"], sort=False):
        learned = part.learned_at.notna()
        done = done_seeds(part)  # a pruned seed is done: it did not learn
        batches = part.loc[learned, "learned_at"]
        low, high = clopper_pearson(int(learned.sum()), int(done.sum()))
        out.append(dict(task=task, model=model, choice=choice, lr=lr, seeds=len(part), done=int(done.sum()),
                        learned=int(learned.sum()),
                        share=learned.sum() / done.sum() if done.sum() else math.nan, share_low=low, share_high=high,
                        median_batches=float(batches.median()) if len(batches) else math.nan,
                        cap=int(part.max_batches.max()),
                        per_seed=", ".join(
                            f"s{int(r.seed)}: " + (f"{int(r.learned_at)}" if pd.notna(r.learned_at) else
                                                   ("—" if r.state == "finished" else
                                                    "— (pruned)" if r.state == "pruned" else f"({r.state})"))
                            for r in part.sort_values("seed").itertuples())))
    return pd.DataFrame(out)


def by_cell(table: pd.DataFrame) -> pd.DataFrame:
    """The study's rows sorted by cell (task, then model, in the registries' order), within a cell by the lower end
    of the share's interval (a choice that learned on 16 of 16 seeds ranks above one that learned on 2 of 2)."""
    from pipeline.config import MODEL_NAMES
    from pipeline.tasks import TASK_NAMES

    order = table.assign(_task=table.task.map(TASK_NAMES.index), _model=table.model.map(MODEL_NAMES.index),
                         _low=table.share_low.fillna(-1.0), _share=table.share.fillna(-1.0))
    return order.sort_values(["_task", "_model", "_low", "_share"], ascending=[True, True, False, False],
                             kind="stable").drop(columns=["_task", "_model", "_low", "_share"])


def study_conclusions(table: pd.DataFrame) -> list[str]:
    """Per cell, the choice that learned most surely (the highest lower end of its interval), and the runner-up."""
    lines = []
    for (task, model), part in by_cell(table).groupby(["task", "model"], sort=False):
        done = part[part.done > 0]
        if done.empty:
            continue

        def said(r) -> str:
            median = "" if math.isnan(r.median_batches) else f", median {r.median_batches:,.0f} batches"
            rate = "" if "lr " in r.choice else f", lr {r.lr:g}"  # a label that names its rate says it once
            return (f"{r.choice}{rate}: {r.learned} of {r.done} seeds learned ({r.share:.0%}, "
                    f"{r.share_low:.0%}–{r.share_high:.0%}{median})")

        best = done.iloc[0]
        line = f"- **{DISPLAY_NAMES[model]} / {task}**: {said(best)}"
        if len(done) > 1:
            line += f"; next, {said(done.iloc[1])}"
        lines.append(line + (f" ({len(done)} choices tried)" if len(done) > 2 else "") + ".")
    return lines


def study_markdown(table: pd.DataFrame) -> list[str]:
    table = by_cell(table)
    lines = ["| cell | choice | lr | learned / done (of seeds) | share (95% interval) | median batches to learn | "
             "cap | per seed: batch learned (— never) |", "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        share = "—" if math.isnan(r.share) else f"{r.share:.0%} ({r.share_low:.0%}–{r.share_high:.0%})"
        median = "—" if math.isnan(r.median_batches) else f"{r.median_batches:,.0f}"
        lines.append(f"| {DISPLAY_NAMES[r.model]} / {r.task} | {r.choice} | {r.lr:g} | {r.learned} / {r.done} "
                     f"(of {r.seeds}) | {share} | {median} | {r.cap:,} | {r.per_seed} |")
    return lines


def write_study_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                       out_dir: Path | None = None, command: str | None = None, force: bool = False) -> Path:
    """Write ``reports/<study>/`` (runs.csv and README.md) from the study's run directories. Returns the README."""
    out_dir = Path(out_dir) if out_dir is not None else sweep.reports_dir()
    check_runs_report(sweep, config_file, runs_root, out_dir, "study", force)
    runs = study_runs(sweep, runs_root)
    table = study_table(runs)
    atomic_write_text(out_dir / "runs.csv", runs.to_csv(index=False))
    counts = runs.state.value_counts()
    lines = [f"# Study: `{sweep.name}`", "",
             provenance(command or command_line("transduce", "study", config_file), inputs=(config_file,))
             + f" Config `{config_file}` (hash `{profile_hash(sweep)}`); run directories "
             f"in `{sweep_root(sweep, runs_root).name}/` under the runs folder. The commit(s) each run was trained at "
             "are in `runs.csv` (a run resumed under newer code lists both).", "", sweep.description.strip(), "",
             f"{len(runs)} runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".", "",
             "## What it shows", "",
             "Per cell, the choice that learned on its seeds most surely (the highest lower end of the 95% "
             "interval), then the next:", "", *study_conclusions(table), "", "## Every choice", "",
             f"A run has learned at the first evaluation where its coarse accuracy on fresh training-length "
             f"sequences reaches {LEARNED_COARSE}; it then stops. *done* counts seeds that finished, were pruned (not "
             "learning) or learned. The interval is the exact (Clopper–Pearson) 95% interval of the share over the "
             "done seeds. Test-length numbers play no part.", "", *study_markdown(table), "",
             "Per-run numbers (batch learned, last training perplexity, mean push/pop over the source and target "
             "halves at the last evaluation, for the DeQue its top end and its bottom end): [runs.csv](runs.csv).", ""]
    readme = out_dir / "README.md"
    atomic_write_text(readme, "\n".join(lines))
    return readme
