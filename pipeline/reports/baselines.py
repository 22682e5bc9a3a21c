"""The report of a profile that trains models or tasks beside the paper's (``configs/baselines.yaml``: the
Transformer under four positional encodings and the Joulin-Mikolov stack beside the Stack-, Queue- and DeQue-LSTMs and
the 1-layer LSTM, on the paper's five tasks and Delétang et al. 2023's two). ``transduce report`` writes it in place
of the Table 3 report (:func:`pipeline.reports.profile.write_profile_report` chooses): Table 3's cells and verdicts
judge the paper's models, searched and budgeted as the paper's, against its numbers, where a baselines profile trains
every model of its grid at one budget of its own. So this report sets the models beside one another, and on Delétang et
al.'s tasks beside their published scores, and gives no verdict.

``reports/<profile>/`` receives

* ``README.md``: what made it, what the profile ran and cost, then per (task, model) the seeds done, the share that
  learned, the selected run's accuracies, how far past the test lengths it stays exact and what the cell cost; on
  Delétang et al.'s tasks their score beside theirs; for the paper's memories, how the selected run used its memory
  (mean push and pop on the source and target halves); the figure. With no run done yet it says so and lists the
  grid;
* ``all_runs.csv``: every run, selected or not, with its row (``variant``), the batch it learned at and its cost;
* ``cells.csv``: the table by task and model;
* ``token_accuracy.csv``: Delétang et al.'s score of the runs that have it, and where it came from;
* ``length_512.png``: coarse accuracy against source length out to 512, a panel per task, a line per model.

A row is a run's model, the Transformer's split by its positional encoding (:data:`VARIANT_KEYS`). Per row the
selected run is the paper's (§5): the done run with the lowest training perplexity
(:func:`pipeline.reports.table3.select_models`). A run has learned as the recipe study counts it
(:func:`pipeline.reports.recipe.learned_at`): an evaluation at training coarse >= 0.99. Only training numbers choose.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pipeline.config import SweepConfig
from pipeline.files import atomic_write_text, save_figure
from pipeline.generalisation import FAR_BANDS, longest_exact_band, read_far_lengths
from pipeline.models import DISPLAY_NAMES, memory_of
from pipeline.reports.build import (
    LENGTH_BIN,
    binned_accuracy,
    check_reportable,
    compute_line,
    display_path,
    model_style,
    profile_header,
    pyplot,
    run_seconds,
    stopping_table,
)
from pipeline.reports.published import DELETANG_2023, DELETANG_ARCHITECTURES, deletang_table2
from pipeline.reports.recipe import MEMORY_COLUMNS, done_seeds, learned_at, memory_signals, push_pop_text
from pipeline.reports.table3 import METRICS, all_runs, select_models
from pipeline.rundir import RunDir
from pipeline.sweep import DONE, STATES, sweep_root, sweep_status
from pipeline.tasks import TASK_NAMES, TASKS, get_task
from pipeline.training.monitor import MEMORY_PROBE_SIZE
from pipeline.training.results import LEARNED_COARSE, logged_rows

# Model settings that split one architecture into rows of their own: the Transformer's positional encodings, which
# are what the baselines profile compares (Ruoss et al. 2023).
VARIANT_KEYS = {"transformer": "positional_encoding"}
# The rows' look in the figure: the four Transformers apart (the registry gives one look per architecture)
VARIANT_STYLES = {
    "transformer/sinusoidal": dict(color="#9467bd", ls=(0, (4, 1, 1, 1)), marker="P"),
    "transformer/learned": dict(color="#e377c2", ls=(0, (5, 2)), marker="*"),
    "transformer/none": dict(color="#7f7f7f", ls=(0, (2, 1)), marker="d"),
    "transformer/randomised": dict(color="#bcbd22", ls="-", marker="p"),
}
# Our architecture nearest each of Delétang et al.'s (their Stack-RNN is Joulin and Mikolov's stack on an RNN);
# the Stack-LSTM (Grefenstette et al.'s stack) has no counterpart among theirs.
THEIR_ARCHITECTURE = {"transformer": "Transformer", "lstm1": "LSTM", "jm_stack": "Stack-RNN"}
FIGURE = "length_512.png"
TOKEN_FILE = "token_accuracy.csv"
TOKEN_COLUMNS = ["task", "variant", "seed", "run_id", "batches", "token_accuracy", "source"]
CELL_COLUMNS = ["task", "variant", "lr", "seeds", "done", "learned", "share", "cap_falling", "cap", "seed", "batches",
                "stop_reason", "train_perplexity", *METRICS, "exact_up_to", "far_measured", "cpu_hours",
                "selected_step", *MEMORY_COLUMNS, "run_id"]


def variant(model) -> str:
    """The row a run with this model config is reported in: its model's name, with the setting of
    :data:`VARIANT_KEYS` where it has one ("transformer/learned")."""
    key = VARIANT_KEYS.get(model.name)
    return model.name if key is None else f"{model.name}/{getattr(model, key)}"


def variant_name(row: str) -> str:
    """A row as the report titles it: "Stack-LSTM", "Transformer (learned)"."""
    name, _, value = row.partition("/")
    return f"{DISPLAY_NAMES.get(name, name)} ({value})" if value else DISPLAY_NAMES.get(name, name)


def variant_style(row: str) -> dict:
    return VARIANT_STYLES.get(row) or model_style(row.partition("/")[0])


def baseline_runs(sweep: SweepConfig, runs_root: Path | None = None) -> pd.DataFrame:
    """Every run of the grid (:func:`pipeline.reports.table3.all_runs`'s columns) with its row (``variant``), the
    first evaluated batch at which it learned (``learned_at``, none if it has not) and, done, what it cost
    (``cpu_seconds``: training and evaluation, :func:`pipeline.reports.build.run_seconds`)."""
    root = sweep_root(sweep, runs_root)
    runs = all_runs(sweep, runs_root)
    rows = {run.run_id(): variant(run.model) for run in sweep.runs()}
    learned, seconds = [], []
    for r in runs.itertuples():
        learned.append(learned_at(logged_rows(root / r.run_id)))
        results = RunDir(root / r.run_id).read_results() if r.state in DONE else None
        seconds.append(float(run_seconds(pd.DataFrame([results])).iloc[0]) if results else math.nan)
    return runs.assign(variant=runs.run_id.map(rows), learned_at=pd.array(learned, dtype="Int64"),
                       cpu_seconds=seconds)


def in_order(sweep: SweepConfig) -> tuple[list[str], list[str]]:
    """The grid's tasks in the registry's order and its rows in the order the profile first lists them."""
    runs = sweep.runs()
    tasks = {run.task for run in runs}
    return [t for t in TASK_NAMES if t in tasks], list(dict.fromkeys(variant(run.model) for run in runs))


def cell_table(runs: pd.DataFrame, selected: pd.DataFrame, root: Path, tasks: list[str],
               rows: list[str]) -> pd.DataFrame:
    """One row per (task, variant) of the grid (see :data:`CELL_COLUMNS`): seeds in the grid, done and learned (as the
    recipe study counts), how many of the done runs that did not learn hit the cap with their training perplexity
    still falling (``cap_falling``: the plateau rule's own trend check, ``all_runs.csv``'s ``still_improving``; their
    "not learned" is this budget's, more batches would have moved them), the cap, the selected run's numbers, the top
    of the longest far band up to which it is exact (0: not even the first; NaN: not measured), the cell's CPU-hours
    (its done runs) and, for one of the paper's memories, the selected run's mean push and pop at the checkpoint it
    reports (:func:`memory_signals`)."""
    chosen = selected.set_index(["task", "variant"]) if not selected.empty else None
    out = []
    for task in tasks:
        for row in rows:
            part = runs[(runs.task == task) & (runs.variant == row)]
            if part.empty:
                continue
            done, learned = done_seeds(part), part.learned_at.notna()
            falling = done & ~learned & (part.stop_reason == "budget") & part.still_improving.eq(True)
            cell = dict(task=task, variant=row, lr=" ".join(f"{lr:g}" for lr in sorted(set(part.lr))),
                        seeds=len(part), done=int(done.sum()), learned=int(learned.sum()),
                        share=learned.sum() / done.sum() if done.sum() else math.nan, cap_falling=int(falling.sum()),
                        cap=int(part.max_batches.max()),
                        cpu_hours=part.cpu_seconds.sum() / 3600, far_measured=False, exact_up_to=math.nan)
            if chosen is not None and (task, row) in chosen.index:
                r = chosen.loc[(task, row)]
                far = read_far_lengths(root / r.run_id)
                exact = longest_exact_band(far)
                step = (RunDir(root / r.run_id).read_results() or {}).get("selected_step")
                cell.update(memory_signals(r.model, logged_rows(root / r.run_id), step),
                            selected_step=math.nan if step is None else int(step))
                cell.update(seed=int(r.seed), batches=int(r.batches), stop_reason=r.stop_reason,
                            train_perplexity=r.train_perplexity, run_id=r.run_id, far_measured=bool(far),
                            exact_up_to=(exact[1] if exact else 0) if far else math.nan,
                            **{m: r[m] for m in METRICS})
            out.append(cell)
    return pd.DataFrame(out, columns=CELL_COLUMNS)


# -- Delétang et al.'s score on their tasks ----------------------------------------------------------------------


def measure_token_accuracy(run_dir: Path) -> float:
    """Delétang et al.'s score (:func:`pipeline.evaluation.token_accuracy`) of a run's best checkpoint (the one its
    results report) on the first ``final_eval_size`` pairs of each set of :data:`TOKEN_ACCURACY_SPLITS`, the sets its
    final evaluation scored. Slow: greedy decoding, one pair at a time."""
    from pipeline.data.cache import load_eval_set
    from pipeline.evaluation import TOKEN_ACCURACY_SPLITS, token_accuracy
    from pipeline.runtime import configure_cpu_process
    from pipeline.training.run import load_run

    configure_cpu_process()
    module = load_run(run_dir)
    config = module.config
    n = config.training.final_eval_size
    pairs = [pair for split in TOKEN_ACCURACY_SPLITS
             for pair in load_eval_set(config.task, split, None, config.length_distribution).pairs[:n]]
    return token_accuracy(module.model, pairs, module.vocab)


def _earlier_scores(path: Path) -> dict[tuple[str, int], tuple[float, str]]:
    if not path.is_file():
        return {}
    frame = pd.read_csv(path)
    return {(r.run_id, int(r.batches)): (float(r.token_accuracy), r.source) for r in frame.itertuples()}


def token_accuracies(runs: pd.DataFrame, selected: pd.DataFrame, root: Path, out_dir: Path) -> pd.DataFrame:
    """Delétang et al.'s score of the done runs of their tasks that have one (see :data:`TOKEN_COLUMNS`): the
    ``token_accuracy`` a run's results record (every run of these tasks records it at its end,
    ``TaskEntry.token_scored``), else the one this report measured before for the same run at the same batch
    (``token_accuracy.csv``), else, for a selected run whose folder still holds its best checkpoint, measured now
    (:func:`measure_token_accuracy`): runs that finished before runs recorded it. Others have none."""
    earlier = _earlier_scores(out_dir / TOKEN_FILE)
    theirs, chosen = set(deletang_table2().task), set(selected.run_id) if not selected.empty else set()
    out = []
    for r in runs[runs.task.isin(theirs) & runs.state.isin(DONE)].itertuples():
        folder = RunDir(root / r.run_id)
        results = folder.read_results() or {}
        batches = int(results.get("batches", r.batches))
        if results.get("token_accuracy") is not None:
            score, source = float(results["token_accuracy"]), "recorded by the run"
        elif (r.run_id, batches) in earlier:
            score, source = earlier[(r.run_id, batches)]
        elif r.run_id in chosen and folder.best_checkpoint.is_file():
            score, source = measure_token_accuracy(folder.path), "measured by the report on its best checkpoint"
        else:
            continue
        out.append(dict(task=r.task, variant=r.variant, seed=int(r.seed), run_id=r.run_id, batches=batches,
                        token_accuracy=score, source=source))
    return pd.DataFrame(out, columns=TOKEN_COLUMNS)


def deletang_lines(cells: pd.DataFrame, scores: pd.DataFrame, tasks: list[str], rows: list[str]) -> list[str]:
    """The section on Delétang et al.'s tasks: per row our selected run's score and the best measured among the
    cell's runs, beside their nearest architecture's; then their Table 2's rows for these tasks in full."""
    published = deletang_table2()
    theirs = published.set_index(["task", "architecture"])["score"]
    tasks = [t for t in tasks if t in set(published.task)]
    if not tasks:
        return []
    lines = ["## Beside Delétang et al. 2023, on their tasks", "",
             f"Their score: the share of target tokens right at each source length, averaged over the lengths "
             f"{get_task(tasks[0]).window('test')[0]}–{get_task(tasks[0]).window('long')[1]} (our test and long sets "
             "together, each length once), on greedy outputs that go on past an error (`pipeline.evaluation."
             "token_accuracy`, docs/tasks.md). Theirs are from "
             f"{DELETANG_2023}: the best of the runs they trained, chosen on this score; ours the run selected on "
             "training perplexity, and beside it the best of the cell's runs that have a score. Their architectures "
             "are not ours: their Stack-RNN is Joulin and Mikolov's stack on a plain RNN (nearest: our JM "
             "Stack-LSTM), their Transformer an encoder reading the input and as many blanks as it answers with, "
             "trained with Adam, its row the best of the positional encodings they tried; the Stack-LSTM has no "
             "counterpart there. [CSV](token_accuracy.csv) (per run, and "
             "where each score came from).",
             "", "| task | model | ours: selected run | ours: best run scored | theirs (their architecture) |",
             "|---|---|---|---|---|"]
    chosen = cells.set_index(["task", "variant"])
    for task in tasks:
        for row in rows:
            if (task, row) not in chosen.index:
                continue
            run_id = chosen.loc[(task, row), "run_id"]
            part = scores[(scores.task == task) & (scores.variant == row)]
            mine = part[part.run_id == run_id].token_accuracy
            selected = f"{100 * mine.iloc[0]:.1f}" if len(mine) else ("not scored" if isinstance(run_id, str)
                                                                      else "—")
            best = (f"{100 * part.token_accuracy.max():.1f} ({len(part)} of {int(chosen.loc[(task, row), 'done'])} "
                    "runs scored)" if len(part) else "—")
            architecture = THEIR_ARCHITECTURE.get(row.partition("/")[0])
            their = "—" if not architecture else f"{_score(theirs[(task, architecture)])} ({architecture})"
            lines.append(f"| {TASKS[task].title} | {variant_name(row)} | {selected} | {best} | {their} |")
    lines += ["", f"{DELETANG_2023}, these tasks' rows (score in percent; {NOT_TRANSCRIBED}: not transcribed, "
              "a value is entered in `pipeline/reports/published/deletang2023_table2.csv` only once checked against "
              "their table or an account that quotes it; its `source` column says which):", "",
              "| task | " + " | ".join(DELETANG_ARCHITECTURES) + " |", "|---|" + "---|" * len(DELETANG_ARCHITECTURES)]
    for task in tasks:
        lines.append(f"| {TASKS[task].title} | "
                     + " | ".join(_score(theirs[(task, a)]) for a in DELETANG_ARCHITECTURES) + " |")
    return lines + [""]


NOT_TRANSCRIBED = "not transcribed"


def _score(value: float) -> str:
    return NOT_TRANSCRIBED if pd.isna(value) else f"{value:.1f}"


# -- the figure --------------------------------------------------------------------------------------------------


def length_figure(selected: pd.DataFrame, root: Path, tasks: list[str], rows: list[str], out: Path) -> bool:
    """Coarse accuracy against source length to 512, a panel per task, a line per row's selected run: the cached sets
    in bins of :data:`LENGTH_BIN` lengths, then the far bands past them (:mod:`pipeline.generalisation`); every far
    band is also drawn as a bar over its 64 lengths. False (and no file) when no selected run has been evaluated."""
    drawn = [t for t in tasks if not selected.empty and any(
        RunDir(root / r.run_id).accuracy_file.is_file() for r in selected[selected.task == t].itertuples())]
    if not drawn:
        return False
    plt = pyplot()
    columns = 4
    rows_of_panels = math.ceil((len(drawn) + 1) / columns)  # one slot more, for the legend
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(4.3 * columns, 3.5 * rows_of_panels), sharey=True,
                             squeeze=False)
    flat, handles = axes.flatten(), {}
    for ax, task in zip(flat, drawn):
        part = selected[selected.task == task].set_index("variant")
        for row in [r for r in rows if r in part.index]:
            run_dir, look = root / part.loc[row, "run_id"], variant_style(row)
            path = RunDir(run_dir).accuracy_file
            if not path.is_file():
                continue
            binned = binned_accuracy(pd.read_csv(path))
            far = read_far_lengths(run_dir)
            beyond = [band for band in far if band["low"] > binned["last"].max()]
            x = [*binned["middle"], *((band["low"] + band["high"]) / 2 for band in beyond)]
            y = [*binned["coarse"], *(band["coarse"] for band in beyond)]
            (line,) = ax.plot(x, y, color=look["color"], ls=look["ls"], marker=look["marker"],
                              markevery=max(1, len(x) // 10), markersize=4, lw=1.3, alpha=0.9)
            handles.setdefault(variant_name(row), line)
            for band in far:
                ax.hlines(band["coarse"], band["low"], band["high"], color=look["color"], lw=3, alpha=0.3)
        ax.axvspan(*get_task(task).window("train"), color="grey", alpha=0.12, lw=0)
        ax.axvline(get_task(task).window("test")[1], color="grey", lw=0.8, ls=":")
        ax.set_xlim(0, FAR_BANDS[-1][1] + 8)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(TASKS[task].title, fontsize=10)
        ax.set_xlabel("source length", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("coarse accuracy")
    legend = flat[len(drawn)]
    legend.legend(handles.values(), handles.keys(), loc="center", fontsize=9, frameon=False)
    for ax in flat[len(drawn):]:
        ax.axis("off")
    fig.suptitle("Coarse accuracy against source length, to 512: the selected run of each model", fontsize=12)
    fig.text(0.5, 0.01, f"Lines: the cached training, test and long sets in bins of {LENGTH_BIN} lengths, then the "
             "far bands past them; bars: every far band over its 64 lengths. Shaded: training lengths; dotted: end "
             "of the test lengths.", ha="center", fontsize=8.5, color="#444444")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    save_figure(fig, out)
    return True


# -- the report --------------------------------------------------------------------------------------------------


def _pair(a, b) -> str:
    return "—" if pd.isna(a) else f"{a:.2f} / {b:.2f}"


def cell_lines(cells: pd.DataFrame) -> list[str]:
    """The table by task and model."""
    lines = ["| task | model | lr | seeds done / in grid | learned | not learned: still falling at the cap | "
             "selected run | training coarse / fine | test coarse / fine | exact up to | CPU-hours |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells.itertuples():
        learned = f"{c.learned} of {c.done} ({c.share:.0%})" if c.done else "—"
        falling = f"{c.cap_falling} of {c.done - c.learned}" if c.done > c.learned else "—"
        run = "—" if pd.isna(c.run_id) else f"s{int(c.seed)}, {int(c.batches):,} batches ({c.stop_reason})"
        first = f"not even {FAR_BANDS[0][0]}–{FAR_BANDS[0][1]}"
        exact = ("—" if pd.isna(c.run_id) else "not measured" if not c.far_measured
                 else first if c.exact_up_to == 0 else f"{int(c.exact_up_to)}")
        hours = f"{c.cpu_hours:.2f}" if c.done else "—"
        lines.append(f"| {TASKS[c.task].title} | {variant_name(c.variant)} | {c.lr} | {c.done} / {c.seeds} | "
                     f"{learned} | {falling} | {run} | {_pair(c.train_coarse, c.train_fine)} | "
                     f"{_pair(c.test_coarse, c.test_fine)} | {exact} | {hours} |")
    return lines


def cap_line(cells: pd.DataFrame) -> list[str]:
    """One sentence under the table: of the cells where no done seed learned, how many had every done run hit the cap
    still falling (none when every cell with a done run learned somewhere)."""
    empty = cells[(cells.done > 0) & (cells.learned == 0)]
    if empty.empty:
        return []
    cut = int((empty.cap_falling == empty.done).sum())
    return [f"{len(empty)} of the {int((cells.done > 0).sum())} cells with a run done learned on none of their done "
            f"seeds; in {cut} of them every one of those runs hit the cap with its training perplexity still falling: "
            "not learned within the cap (what more batches would give, only a longer run can say).", ""]


def grid_lines(cells: pd.DataFrame) -> list[str]:
    """The grid as planned, for a report with nothing trained yet."""
    lines = ["| task | model | lr | seeds | cap (batches) |", "|---|---|---|---|---|"]
    return lines + [f"| {TASKS[c.task].title} | {variant_name(c.variant)} | {c.lr} | {c.seeds} | {c.cap:,} |"
                    for c in cells.itertuples()]


def memory_lines(cells: pd.DataFrame) -> list[str]:
    """How the selected run of each cell of one of the paper's memories used it: mean push and pop over the source
    and target halves at the checkpoint it reports; the DeQue's two ends each. No rows: nothing (no such cell done)."""
    body = []
    for c in cells.itertuples():
        kind = memory_of(c.variant)
        if kind is None or pd.isna(c.run_id) or pd.isna(c.selected_step):
            continue
        run = f"s{int(c.seed)} at batch {int(c.selected_step):,}"
        push, pop = push_pop_text(c._asdict(), kind.ends)
        body.append(f"| {TASKS[c.task].title} | {variant_name(c.variant)} | {run} | {push} | {pop} |")
    if not body:
        return []
    return ["## How the memories were used", "",
            "Per task and memory model, the selected run at the checkpoint it reports: the mean push and pop over the "
            f"source half and the target half of {MEMORY_PROBE_SIZE} of the evaluation's fresh training-length "
            "sequences (`metrics.csv`, `memory/*`; the DeQue's two ends each). On reversal a Stack, and on copy a "
            "Queue, used as its structure pushes on the source and pops on the target: push near 1.00 / 0.00, pop "
            "near 0.00 / 1.00 (other tasks need other patterns: duplicating pushes again while it pops). One that "
            "pushes on both halves and pops little reads back mostly what it has just written; one that stops "
            "pushing on the source is one more recurrent layer (docs/training.md, \"Seeds, basins and RMSProp\"). "
            "The JM stack logs no push and pop while it trains (its three actions are drawn by `transduce inspect`). "
            "[CSV](cells.csv).", "",
            "| task | model | selected run | push: source / target | pop: source / target |", "|---|---|---|---|---|",
            *body, ""]


def write_baselines_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                           out_dir: Path | None = None, command: str | None = None, force: bool = False) -> Path:
    """Write ``reports/<profile>/`` (see the module's docstring) from the profile's run folders. Returns the README's
    path. Refused as the Table 3 report is (:func:`pipeline.reports.build.check_reportable`), except that a profile
    with no run done yet gets a report that says so."""
    root = sweep_root(sweep, runs_root)
    out_dir = Path(out_dir) if out_dir is not None else sweep.reports_dir()
    statuses = sweep_status(sweep, runs_root)
    check_reportable(statuses, out_dir, root, config_file, force, kind="baselines", empty_allowed=True,
                     sweep=sweep)
    out_dir.mkdir(parents=True, exist_ok=True)
    header = profile_header(sweep, config_file, command)

    tasks, rows = in_order(sweep)
    runs = baseline_runs(sweep, runs_root)
    atomic_write_text(out_dir / "all_runs.csv", runs.to_csv(index=False))
    selected = select_models(runs, cell=("task", "variant"))
    cells = cell_table(runs, selected, root, tasks, rows)
    atomic_write_text(out_dir / "cells.csv", cells.to_csv(index=False))
    scores = token_accuracies(runs, selected, root, out_dir)
    atomic_write_text(out_dir / TOKEN_FILE, scores.to_csv(index=False))
    drawn = length_figure(selected, root, tasks, rows, out_dir / FIGURE)
    if not drawn:
        (out_dir / FIGURE).unlink(missing_ok=True)

    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    finished = pd.DataFrame([RunDir(s.run_dir).read_results() for s in statuses if s.state in DONE])
    lines = [f"# Baselines: profile `{sweep.name}`", "", header, "", sweep.description.strip(), "", "## Runs", "",
             f"{len(statuses)} runs in the grid: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
             f"Run directories: `{display_path(root)}`.", ""]
    if finished.empty:
        lines += [f"**Not trained yet.** None of the {len(statuses)} runs has finished, so nothing below is measured: "
                  f"`transduce sweep {config_file}` trains them (resumable: run it again after an interruption), and "
                  f"`transduce report {config_file}` then writes this report from their folders. The grid:", "",
                  *grid_lines(cells), ""]
    else:
        lines += [compute_line(finished, sweep), ""]
    lines += ["Stopping rules of the grid's runs (docs/training.md says what each checks):", "", *stopping_table(sweep),
              "", "Every run, selected or not, with its settings, state, stop reason and numbers: "
              "[all_runs.csv](all_runs.csv).", ""]
    if not finished.empty:
        lines += ["## By task and model", "",
                  f"Per task and model: the seeds done and in the grid; how many learned (an evaluation at training "
                  f"coarse ≥ {LEARNED_COARSE}, as the recipe study counts, of the done seeds); of those that did "
                  "not, how many hit the cap with their training perplexity still falling (the plateau rule's trend "
                  "check, docs/training.md: its last window's mean below the window before's by more than the "
                  "tolerance, in perplexity or in cross-entropy beyond its noise): theirs is \"not learned within "
                  "the cap\", not a limit the model reached; the selected run (the lowest training perplexity, §5) "
                  "with its coarse / fine accuracy on the cached training-length and test-length sets; the top of "
                  "the longest band of source lengths up to which it is exact, every "
                  f"band from {FAR_BANDS[0][0]} on at coarse 1.00 (bands of 64 to {FAR_BANDS[-1][1]}, "
                  "`pipeline/generalisation.py`); the CPU-hours of the cell's done runs (training and evaluation; each "
                  "run's process CPU time where it recorded it, else its wall time, as the compute line above says). "
                  "[CSV](cells.csv).", "", *cell_lines(cells), "", *cap_line(cells)]
    lines += memory_lines(cells)
    lines += deletang_lines(cells, scores, tasks, rows)
    if drawn:
        lines += ["## Accuracy to 512", "", f"![coarse accuracy against source length, to 512]({FIGURE})", ""]
    lines += ["## How runs were selected", "",
              "For each task and model (each positional encoding its own row), among its done runs (finished or "
              "pruned), the one with the lowest average training perplexity over the 100 batches before the "
              "checkpoint it reports (§5); runs without a finite perplexity are never selected. Within a run, the "
              "reported checkpoint is the one with the best coarse (then fine) accuracy on fresh training-length "
              "sequences. Test-length numbers never choose a run, a checkpoint or a stop.", ""]
    readme = out_dir / "README.md"
    atomic_write_text(readme, "\n".join(lines))
    return readme
