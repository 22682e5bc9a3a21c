"""The report of a profile, written from finished runs alone (no training): ``transduce report configs/X.yaml``.

``reports/<profile>/`` receives

* ``table3.md`` / ``table3.csv``: all 35 cells of the paper's Table 3: the selected run's accuracies beside the
  paper's, the seeds behind it, and a verdict with its evidence (:mod:`pipeline.reports.table3`);
* ``all_runs.csv``: every run of the profile, selected or not;
* ``table2.md``: parameter counts beside the paper's Table 2;
* ``convergence_<task>.png``: accuracy against batches, the selected run per architecture strong and the
  others faint (Figure 2b);
* ``length_<task>.png``: accuracy against source length (training lengths, test lengths and beyond);
* ``traces/<task>_<model>.png``: what each selected memory model does with its memory on one test-length
  sequence (:mod:`pipeline.inspection`);
* ``README.md``: the verdict count first, then what the profile ran, each cell's verdict and evidence (with a
  link to any documented experiment kept in ``reports/experiments/`` that continues one of the cell's runs), the
  figures, and what made the report.

A profile that trains a model or a task beside the paper's (``configs/baselines.yaml``) gets the report of
:mod:`pipeline.reports.baselines` instead (:func:`pipeline.reports.profile.write_profile_report` chooses).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pipeline.config import MODEL_NAMES, SweepConfig, profile_hash
from pipeline.files import atomic_write_text, save_figure
from pipeline.models import DISPLAY_NAMES, MODELS, memory_of
from pipeline.provenance import command_line, machine_label, provenance
from pipeline.registry import Field
from pipeline.reports.kinds import ReportRefused, check_kind, check_report_folder
from pipeline.reports.table2 import parameter_table, table2_markdown
from pipeline.reports.table3 import (
    ABLATION_WINDOWS,
    VERDICT_MARKS,
    ablation_standing,
    all_runs,
    attempts,
    continuation,
    evidence_markdown,
    is_ablation,
    legend,
    select_models,
    summary_line,
    table3,
    table3_figure,
    table3_markdown,
    training_on,
    within_tolerance,
)
from pipeline.rundir import RunDir, stop_reason, upgraded_results
from pipeline.sweep import DONE, STATES, default_workers, sweep_root, sweep_status
from pipeline.tasks import PAPER_TASK_NAMES as TASK_NAMES  # the paper's five: its reports and figures
from pipeline.tasks import TASKS, get_task
from pipeline.tasks.itg import ReferencePerplexities
from pipeline.training.results import (
    LEARNED_COARSE,
    TEST_COARSE,
    TRAIN_COARSE,
    TRAIN_PERPLEXITY,
    logged_rows,
    logged_values,
)

_FALLBACK_COLORS = ("#7f7f7f", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")


def model_style(model: str) -> dict:
    """The plotting style of ``model`` from its registry entry: colour, dash and marker together, so that models
    whose curves coincide stay distinguishable. An entry without one gets a colour of its own, not an error."""
    entry = MODELS.get(model)
    if entry is not None and entry.style:
        return {"color": "#7f7f7f", "ls": "-", "marker": "x", **entry.style}
    index = sum(map(ord, model)) % len(_FALLBACK_COLORS)
    return dict(color=_FALLBACK_COLORS[index], ls="-", marker="x")
TASK_TITLES = Field(TASKS, "title")

# ----------------------------------------------------------------------------------------------------------------
# Figures.


def pyplot():
    """matplotlib's pyplot, drawing to files only (imported when a figure is drawn: reports without one skip it)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _metrics(run_dir: Path) -> pd.DataFrame:
    rows = RunDir(run_dir).read_metrics()
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _in_model_order(selected: pd.DataFrame, task: str) -> pd.DataFrame:
    if selected.empty:
        return selected
    part = selected[selected.task == task]
    return part.sort_values("model", key=lambda col: col.map(MODEL_NAMES.index))


def _eval_sizes(part: pd.DataFrame, root: Path) -> str:
    """"200 fresh training-length and 100 cached test-length sequences": what the logged evaluations used."""
    sizes = set()
    for r in part.itertuples():
        folder = RunDir(root / r.run_id)
        if folder.config_file.is_file():
            t = folder.read_config().training
            sizes.add((t.eval_size, t.test_eval_size))
    return "; ".join(f"{a} fresh training-length and {b} cached test-length sequences" for a, b in sorted(sizes))


def convergence_figure(task: str, selected: pd.DataFrame, root: Path, out: Path,
                       runs: pd.DataFrame | None = None, references: ReferencePerplexities | None = None) -> bool:
    """Figure 2b and the loss behind it: coarse accuracy against batches on training-length and test-length
    sequences, and the training perplexity, the selected run of each architecture strong, every other run of the
    profile in that cell faint, so the seeds' spread shows. Batches on a log axis, as the paper's Fig. 2b compares
    models whose convergence differs by orders of magnitude. ``references`` (the ITG tasks): the two content-blind
    perplexities (:func:`reference_perplexities`) drawn across the perplexity panel."""

    def curves(r):
        path = RunDir(root / r.run_id).metrics_file
        frame = _metrics(root / r.run_id) if path.exists() else pd.DataFrame()
        out = []
        for column in (TRAIN_COARSE, TEST_COARSE, TRAIN_PERPLEXITY):
            logged = frame.dropna(subset=[column]) if column in frame else pd.DataFrame(columns=["step", column])
            out.append((logged["step"], logged[column], None))
        return out

    others = ablations = None
    if runs is not None and not runs.empty:
        others = runs[(runs.task == task) & ~runs.run_id.isin(set(selected.run_id) if not selected.empty else set())]
        ablated = is_ablation(others)
        others, ablations = others[~ablated], others[ablated]
    part = _in_model_order(selected, task)
    panels = [("coarse accuracy, training lengths (8–64)", "coarse accuracy", (-0.03, 1.03)),
              ("coarse accuracy, test lengths (65–128)", None, (-0.03, 1.03)),
              ("training perplexity (100-batch windows)", "perplexity (log scale)", "log")]
    sizes = _eval_sizes(part, root)

    # a selected run training on is drawn to where it stands now; Table 3 reads it at the results it reported: a
    # vertical line marks that batch
    reopened = [(DISPLAY_NAMES[r.model], int(r.batches)) for _, r in part.iterrows() if training_on(r)]

    def decorate(ax):
        _log_batches(ax)
        perplexity_panel = ax.get_title().startswith("training perplexity")
        if references is not None and perplexity_panel:
            for value, label, style in ((references.source_unread, "no source word read", ":"),
                                        (references.skeleton, "source skeleton, no content word", "--")):
                ax.axhline(value, color="#555555", ls=style, lw=1.1, zorder=0, label=f"{label} ({value:.1f})")
        for name, batches in reopened:
            ax.axvline(batches, color="#999999", ls="-.", lw=0.9, zorder=0,
                       label=f"{name} read at {batches:,} (training on)" if perplexity_panel else None)

    return _panels(part, out, curves, panels, "batches (log scale)", f"{TASK_TITLES[task]}: convergence",
                   caption=f"Accuracy evaluated on {sizes} every evaluation." if sizes else "",
                   decorate=decorate, faint=others, ablations=ablations, markersize=4)


# Pairs the reference perplexities are estimated on: about 4 s a task, under 1% standard error.
REFERENCE_SAMPLES = 500


def reference_perplexities(task: str, selected: pd.DataFrame, root: Path) -> ReferencePerplexities | None:
    """The content-blind reference perplexities of ``task`` on the selected runs' training distribution, for the
    tasks that have them (the ITG grammars: :meth:`~pipeline.tasks.itg.GrammarTask.reference_perplexities`, 500
    pairs drawn with seed 0, under 1% standard error); None for the others or without a selected run."""
    part = selected[selected.task == task] if not selected.empty else selected
    if part.empty:
        return None
    distributions = {RunDir(root / run_id).read_config().length_distribution for run_id in part.run_id}
    if len(distributions) != 1:  # runs on two length distributions share no one reference
        return None
    measured = get_task(task, distributions.pop())
    if not hasattr(measured, "reference_perplexities"):
        return None
    return measured.reference_perplexities(samples=REFERENCE_SAMPLES)


def _log_batches(ax) -> None:
    """A log axis of batches labelled at 1, 2 and 5 of each decade in short form (500, 2k, 10k), no minor labels:
    matplotlib's own labels every minor tick of a run spanning about one decade, and 3x10^3 runs into 4x10^3."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


# Fig. 2b's claim as numbers: the training coarse accuracies whose first batch the convergence table gives.
CONVERGENCE_LEVELS = (0.5, LEARNED_COARSE)


def batches_to_accuracy(selected: pd.DataFrame, root: Path) -> pd.DataFrame:
    """Per selected run (task, model): the first evaluated batch at which its training coarse accuracy reached each
    of :data:`CONVERGENCE_LEVELS` (NaN where it never did), and the batches it trained (what "not reached by N"
    says)."""
    rows = []
    for r in selected.itertuples():
        evals = logged_values(logged_rows(root / r.run_id), TRAIN_COARSE)
        row = dict(task=r.task, model=r.model, batches=int(r.batches), run_id=r.run_id)
        for level in CONVERGENCE_LEVELS:
            row[f"reached_{level:g}"] = next((step for step, coarse in evals if coarse >= level), math.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=["task", "model", "batches",
                                       *(f"reached_{level:g}" for level in CONVERGENCE_LEVELS), "run_id"])


def convergence_markdown(table: pd.DataFrame) -> list[str]:
    """One row per task, one column per architecture: "first batch at 0.5 / at 0.99", "not by N" where never; then,
    per task, how much earlier the fastest memory model got to 0.99 than the fastest LSTM got anywhere."""
    if table.empty:
        return []
    models = [m for m in MODEL_NAMES if m in set(table.model)]
    level_names = " / ".join(f"{level:g}" for level in CONVERGENCE_LEVELS)
    lines = ["| task | " + " | ".join(DISPLAY_NAMES[m] for m in models) + " |",
             "|---|" + "---|" * len(models)]

    def reached(r, level) -> str:
        step = r[f"reached_{level:g}"]
        return f"not by {r.batches:,}" if pd.isna(step) else f"{int(step):,}"

    notes = []
    for task in TASK_NAMES:
        part = table[table.task == task].set_index("model")
        if part.empty:
            continue
        cells = []
        for m in models:
            if m not in part.index:
                cells.append("—")
            elif part.loc[m, [f"reached_{level:g}" for level in CONVERGENCE_LEVELS]].isna().all():
                cells.append(f"not by {part.loc[m, 'batches']:,}")  # no level reached: said once
            else:
                cells.append(" / ".join(reached(part.loc[m], level) for level in CONVERGENCE_LEVELS))
        lines.append(f"| {TASK_TITLES[task]} | " + " | ".join(cells) + " |")
        top = f"reached_{CONVERGENCE_LEVELS[-1]:g}"
        memory = part[[memory_of(m) is not None for m in part.index]][top].dropna()
        lstm = part[[memory_of(m) is None and MODELS[m].paper for m in part.index]]  # the paper's deep LSTMs
        if memory.empty or lstm.empty:
            continue
        fastest = memory.min()
        if lstm[top].notna().any():
            ratio = lstm[top].min() / fastest
            notes.append(f"{TASK_TITLES[task]}: a memory model at {int(fastest):,} batches, the fastest LSTM at "
                         f"{int(lstm[top].min()):,} ({ratio:.0f}×).")
        else:  # each LSTM bounded by its own batches: a deep LSTM capped sooner bounds its ratio lower
            each = "; ".join(f"{DISPLAY_NAMES.get(m, m)} not by {int(b):,}"
                             + (f" (at least {math.floor(b / fastest)}× later, if ever)" if b >= fastest else "")
                             for m, b in ((m, lstm.batches[m]) for m in models if m in lstm.index))
            notes.append(f"{TASK_TITLES[task]}: a memory model at {int(fastest):,} batches; no LSTM reached it in "
                         f"the batches it trained: {each}.")
    return [f"First evaluated batch at which the selected run's training coarse accuracy reached {level_names} "
            "(\"not by N\": never, in the N batches it trained; the curves below, under Figures, on a log axis).", "",
            *lines, "",
            f"Training coarse {CONVERGENCE_LEVELS[-1]:g}, fastest memory model against fastest deep LSTM:", "",
            *(f"- {note}" for note in notes)]


LENGTH_BIN = 8  # source lengths pooled per point of the length figures (7-25 sequences a length, ~120 a bin)


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95%) of a proportion k/n: an interval that stays inside [0, 1] at 0 and 1."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def binned_accuracy(frame: pd.DataFrame, width: int = LENGTH_BIN) -> pd.DataFrame:
    """Per bin of ``width`` source lengths (per split): sequences ``n``, coarse and fine accuracy (weighted by
    sequences) and the coarse accuracy's 95% Wilson interval."""
    frame = frame.assign(bin=(frame["source_length"] - 1) // width * width + 1)
    rows = []
    for (split, first), group in frame.groupby(["split", "bin"], sort=True):
        n = float(group["n"].sum())
        coarse = float((group["coarse"] * group["n"]).sum() / n)
        low, high = wilson(coarse * n, n)
        rows.append(dict(split=split, first=int(first), last=int(group["source_length"].max()), n=int(n),
                         middle=float((group["source_length"] * group["n"]).sum() / n), coarse=coarse,
                         fine=float((group["fine"] * group["n"]).sum() / n), low=low, high=high))
    return pd.DataFrame(rows).sort_values("middle")


def length_figure(task: str, selected: pd.DataFrame, root: Path, out: Path, unselected: Sequence[str] = ()) -> bool:
    """Coarse (with its 95% interval) and fine accuracy against source length, over the train, test and long sets,
    in bins of :data:`LENGTH_BIN` lengths; the caption gives the sequences a bin holds and names the architectures
    of the profile drawn without a line (``unselected``: no run selected, none finished)."""
    counts = []
    missing = ", ".join(DISPLAY_NAMES.get(m, m) for m in unselected)

    def curves(r):
        binned = binned_accuracy(pd.read_csv(RunDir(root / r.run_id).accuracy_file))
        counts.extend(binned["n"])
        return [(binned["middle"], binned["coarse"], (binned["low"], binned["high"])),
                (binned["middle"], binned["fine"], None)]

    def mark_windows(ax):
        ax.axvspan(*get_task(task).window("train"), color="grey", alpha=0.12, lw=0)
        ax.axvline(get_task(task).window("test")[1], color="grey", lw=0.8, ls=":")

    part = _in_model_order(selected, task)
    panels = [("coarse accuracy (band: 95% interval)", "accuracy", (-0.03, 1.03)),
              ("fine accuracy", None, (-0.03, 1.03))]
    drawn = _panels(part, out, curves, panels, "source length (shaded: training lengths; dotted: end of test lengths)",
                    f"{TASK_TITLES[task]}: accuracy by source length", decorate=mark_windows,
                    caption=lambda: (f"Each point pools {LENGTH_BIN} source lengths: {min(counts)}–{max(counts)} "
                                     "sequences of the cached evaluation sets." if counts else "")
                    + (f" No line for the {missing}: no run selected (none finished)." if missing else ""))
    return drawn


def _panels(part: pd.DataFrame, out: Path, curves, panels, xlabel: str, title: str, caption="", decorate=None,
            faint: pd.DataFrame | None = None, ablations: pd.DataFrame | None = None, **style) -> bool:
    """Panels side by side, one line per selected run (``curves(run)`` gives its (x, y, band or None) per panel),
    one colour, dash and marker per architecture throughout the report; ``panels``: (title, y label, y limits or
    "log") each. Lines are drawn as they are (equal values overlap; the dashes and markers keep them apart);
    ``faint`` runs thin and unlabelled, ``ablations`` (read ablations) in sparse dots with hollow markers,
    labelled. False (and no file) when there is nothing to draw."""
    if part.empty:
        return False
    plt = pyplot()
    width = 5.2 * len(panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, PANEL_HEIGHT))
    # the other runs: thin, no marker, unlabelled, but for an architecture with no selected run here (none finished),
    # whose first faint line is named in the legend, so that every architecture drawn is named
    unnamed = set(faint.model) - set(part.model) if faint is not None and not faint.empty else set()
    for r in (faint.itertuples() if faint is not None else ()):
        named = r.model in unnamed
        unnamed.discard(r.model)
        for ax, (x, y, _) in zip(axes, curves(r)):
            ax.plot(x, y, color=model_style(r.model)["color"], lw=0.8, alpha=0.3, zorder=1,
                    label=f"{DISPLAY_NAMES.get(r.model, r.model)}: no run selected (faint)" if named else None)
    for r in (ablations.itertuples() if ablations is not None else ()):  # sparse dots, hollow markers
        look = model_style(r.model)
        for ax, (x, y, _) in zip(axes, curves(r)):
            ax.plot(x, y, color=look["color"], ls=(0, (1, 3)), lw=1.6, marker=look["marker"], markerfacecolor="white",
                    markevery=max(1, len(x) // 12), markersize=style.get("markersize", 5), alpha=0.9, zorder=2,
                    label=f"{DISPLAY_NAMES.get(r.model, r.model)}, read zeroed (s{int(r.seed)})")
    for r in part.itertuples():
        look = model_style(r.model)
        for ax, (x, y, band) in zip(axes, curves(r)):
            if band is not None:
                ax.fill_between(x, band[0], band[1], color=look["color"], alpha=0.15, lw=0)
            ax.plot(x, y, label=DISPLAY_NAMES.get(r.model, r.model), color=look["color"], ls=look["ls"],
                    marker=look["marker"], markevery=max(1, len(x) // 12), markersize=style.get("markersize", 5),
                    lw=1.5, alpha=0.9)
    for ax, (name, ylabel, ylim) in zip(axes, panels):
        if ylim == "log":
            ax.set_yscale("log")
        elif ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_title(name, fontsize=10)
        if decorate is not None:  # after the title: a decoration may be for one panel only
            decorate(ax)
        ax.set_xlabel(xlabel, fontsize=9)
        if ylabel:
            ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=12)
    text = caption() if callable(caption) else caption
    if faint is not None and not faint.empty:
        text += " Faint lines: the cell's other runs (seeds, rates, starts)."
    if ablations is not None and not ablations.empty:
        text += " Hollow markers on sparse dots: read ablations (every memory read zeroed)."
    # The legend goes below the panels, in rows above the caption, never over a curve: placed inside a panel
    # ("best"), it hid the perplexity panel's runs wherever a cell had many. The last panel holds every label (the
    # curves are labelled on each panel, the reference lines only where they are drawn). The figure grows by the
    # legend's rows, so the panels keep their size.
    handles, labels = axes[-1].get_legend_handles_labels()
    columns = max(1, min(len(labels), int(width // LEGEND_COLUMN_WIDTH)))
    rows = math.ceil(len(labels) / columns)
    height = PANEL_HEIGHT + CAPTION_HEIGHT + rows * LEGEND_ROW_HEIGHT
    fig.set_size_inches(width, height)
    if labels:
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, CAPTION_HEIGHT / height), ncol=columns,
                   fontsize=8, frameon=False)
    if text:
        fig.text(0.5, 0.01, text.strip(), ha="center", fontsize=8.5, color="#444444")
    fig.tight_layout(rect=(0, (CAPTION_HEIGHT + rows * LEGEND_ROW_HEIGHT) / height, 1, 1))
    save_figure(fig, out)
    return True


# The figures' layout, in inches: a row of panels, the legend's rows under them, the caption's line at the bottom; a
# legend column is as wide as its longest labels ("Stack-LSTM read at 30,000 (training on)") need at font size 8.
PANEL_HEIGHT = 4.3
CAPTION_HEIGHT = 0.3
LEGEND_ROW_HEIGHT = 0.2
LEGEND_COLUMN_WIDTH = 3.4


@dataclass(frozen=True)
class Twin:
    """A selected run's twin: the same run (its id) trained again by a study kept under the report's folder
    (``<out_dir>/<study>/finished_runs/<run id>``, e.g. configs/far-lengths.yaml's), which an archived run, keeping no
    checkpoint, needs for what it did not record. Another draw wherever its machine differs: it ``stands_for`` the
    selected run only when its test coarse is within the tolerance of the selected run's (a twin that did not learn
    what the selected run learned says nothing of it)."""
    path: Path
    where: str  # "twin in <study>/"
    machine: str
    test_coarse: float
    stands_for: bool


def find_twin(run_id: str, test_coarse: float, out_dir: Path | None,
              read: Callable[[Path], list]) -> tuple[Twin, list] | None:
    """The first twin of ``run_id`` (studies in name order) for which ``read(path)`` finds something, with what it
    found (read once), or None."""
    for path in ([] if out_dir is None else sorted(out_dir.glob(f"*/finished_runs/{run_id}"))):
        found = read(path)
        results = RunDir(path).read_results() if found else None  # a twin still training has no results
        if results is not None:
            return Twin(path, f"twin in {path.parent.parent.name}/", machine_label(results), results["test_coarse"],
                        within_tolerance(results["test_coarse"] - test_coarse)), found
    return None


def far_lengths_table(selected: pd.DataFrame, root: Path, out_dir: Path | None = None) -> pd.DataFrame:
    """The far-length rows (:mod:`pipeline.generalisation`) of every selected run, in task and model order: the run's
    own, measured on the checkpoint it reports, else its :class:`Twin`'s. ``measured_on`` names which, with the twin's
    machine and its test coarse; a twin's bands that do not stand for the selected run (``stands_for`` False) are
    kept in the CSV but say nothing of it, and the figure and the report's table leave them out."""
    from pipeline.generalisation import read_far_lengths

    columns = ["task", "model", "run_id", "measured_on", "machine", "test_coarse", "stands_for", "low", "high", "n",
               "coarse", "fine"]
    rows = []
    for task in TASK_NAMES:
        for r in _in_model_order(selected, task).itertuples():
            found, where, machine, test = read_far_lengths(root / r.run_id), "selected run", r.machine, r.test_coarse
            stands_for = True
            hit = None if found else find_twin(r.run_id, r.test_coarse, out_dir, read_far_lengths)
            if hit is not None:
                twin, found = hit
                where, machine, test, stands_for = twin.where, twin.machine, twin.test_coarse, twin.stands_for
            rows += [dict(task=task, model=r.model, run_id=r.run_id, measured_on=where, machine=machine,
                          test_coarse=test, stands_for=stands_for, low=int(row["low"]), high=int(row["high"]),
                          n=int(row["n"]), coarse=row["coarse"], fine=row["fine"]) for row in found]
    return pd.DataFrame(rows, columns=columns)


def far_lengths_figure(far: pd.DataFrame, out: Path) -> bool:
    """Coarse (top) and fine (bottom) accuracy against source length out to 512, one panel per task: the runs that
    stand for their cell's selected run (:func:`far_lengths_table`)."""
    far = far[far.stands_for]
    if far.empty:
        return False
    plt = pyplot()
    tasks = [t for t in TASK_NAMES if t in set(far.task)]
    # at least 8.5 inches wide: the title and the caption fit even with one task's panel; taller by the rows of the
    # legends under the panels (two entries a row)
    rows = max(math.ceil(far[far.task == task].model.nunique() / 2) for task in tasks)
    fig, axes = plt.subplots(2, len(tasks), figsize=(max(3.6 * len(tasks) + 0.6, 8.5), 6.4 + LEGEND_ROW_HEIGHT * rows),
                             sharey=True, squeeze=False)
    for column, task in enumerate(tasks):
        for model, part in far[far.task == task].groupby("model", sort=False):
            look = model_style(model)
            middle = (part["low"] + part["high"]) / 2
            twin = " (twin)" if (part["measured_on"] != "selected run").any() else ""
            for row, metric in enumerate(("coarse", "fine")):
                axes[row][column].plot(middle, part[metric], color=look["color"], ls=look["ls"], marker=look["marker"],
                                       markersize=4, lw=1.5, label=DISPLAY_NAMES.get(model, model) + twin)
        axes[0][column].set_title(TASK_TITLES[task], fontsize=10)
        for row in range(2):
            ax = axes[row][column]
            ax.axvline(get_task(task).window("test")[1], color="grey", lw=0.8, ls=":")
            ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
        axes[1][column].set_xlabel("source length (band middle)", fontsize=9)
        # under the column, not inside a panel, where it hid the runs near 0 and the ones falling to it
        axes[1][column].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    axes[0][0].set_ylabel("coarse accuracy")
    axes[1][0].set_ylabel("fine accuracy")
    n = sorted(set(far["n"]))
    fig.suptitle("Far past the test lengths: accuracy in bands of 64 source lengths to 512", fontsize=12)
    twins = "; (twin): measured on the run trained again (see the report)" if (
        far["measured_on"] != "selected run").any() else ""
    fig.text(0.5, 0.01, f"{'/'.join(map(str, n))} sequences a band, drawn with their own seeds; dotted: end of the "
             f"test lengths (128){twins}.", ha="center", fontsize=8.5, color="#444444")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    save_figure(fig, out)
    return True


def far_lengths_lines(far: pd.DataFrame, table: pd.DataFrame, drawn: bool) -> list[str]:
    """The report's section on generalisation far past 2x: per selected memory model that learned its task, the
    longest band up to which it is exact."""
    from pipeline.generalisation import FAR_BANDS, longest_exact_band

    lines = ["## Far past the test lengths (to 512)", ""]
    if far.empty:
        return lines + [f"Not measured for this profile's selected runs: `transduce evaluate RUN --far` scores a run "
                        f"that keeps its checkpoint (archives drop them) in bands {FAR_BANDS[0][0]}–{FAR_BANDS[-1][1]} "
                        "and the report draws it.", ""]
    lines += ["![accuracy far past the test lengths](far_lengths.png)", ""] if drawn else []
    lines += ["Per selected run measured: the longest band up to which every sequence of every band is right "
              "(coarse 1.00), and its coarse accuracy in the last band. A run archived before far lengths were "
              "measured is measured on its twin: the same run trained again by a study under this folder, on the "
              "machine named (another draw where the machine differs: its test coarse is beside the selected run's). "
              "[CSV](far_lengths.csv).", "",
              "| task | model | test coarse | measured on | its test coarse | exact up to | coarse at 449–512 |",
              "|---|---|---|---|---|---|---|"]
    cells = table.set_index(["task", "model"])
    others = []
    for (task, model), part in far.groupby(["task", "model"], sort=False):
        last = part.sort_values("high").iloc[-1]
        test = cells.loc[(task, model), "test_coarse"] if (task, model) in cells.index else math.nan
        if not last.stands_for:
            others.append(f"{TASK_TITLES[task]}, {DISPLAY_NAMES[model]}: its twin ({last.machine}) reached test "
                          f"coarse {last.test_coarse:.2f} against the selected run's {test:.2f}")
            continue
        exact = longest_exact_band(part.to_dict("records"))
        lines.append(f"| {TASK_TITLES[task]} | {DISPLAY_NAMES[model]} | {test:.2f} | {last.measured_on} "
                     f"({last.machine}) | {last.test_coarse:.2f} | "
                     + (f"{exact[1]}" if exact else f"not even {FAR_BANDS[0][0]}–{FAR_BANDS[0][1]}")
                     + f" | {last.coarse:.2f} |")
    if others:
        lines += ["", "Not measured, their twin another draw that did not learn what the selected run learned (its "
                  "bands are in the CSV, `stands_for` false): " + "; ".join(others) + "."]
    return lines + [""]


# ----------------------------------------------------------------------------------------------------------------
# The whole report.


def display_path(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it (reports name no one's home folder)."""
    from pipeline.paths import REPO_ROOT

    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _commits_line(selected: pd.DataFrame) -> str:
    if selected.empty:
        return "No finished runs."
    chains = [str(c).split() for c in selected["commit"]]  # a run resumed under a later commit lists both
    commits = {c for chain in chains for c in chain}
    dirty = sum(c.endswith("-dirty") for c in commits)
    resumed = sum(len(chain) > 1 for chain in chains)
    return (f"The selected runs were trained at {len(commits)} commits" + (f" ({dirty} of them on a modified "
            "checkout)" if dirty else "") + (f"; {resumed} were interrupted and resumed under a later one" if resumed
                                              else "") + ": each run's, oldest first, in [table3.csv](table3.csv) "
            "(and all runs' in [all_runs.csv](all_runs.csv)).")


def machine_lines(runs: pd.DataFrame, root: Path) -> list[str]:
    """The machine kinds the done runs trained on (a count each), then every run trained again from batch 0 beside
    the draws it replaced (``earlier_draws.json``): torch's kernels on two CPU kinds sum floats in another order, so a
    retrain there is another draw of the same seed, and where the two draws disagree the reader sees both."""
    done = runs[runs.state.isin(DONE)]
    if done.empty:
        return []
    counts = done.machine.value_counts()
    lines = ["Machines the done runs trained on: " + ", ".join(f"{name} ({n})" for name, n in counts.items())
             + " (torch's CPU kernels, AVX2 or AVX512, named where the run recorded them: runs made before that "
             "name the CPU alone). The same run trained on two kinds is two draws of one seed (their float sums differ "
             "from the first rounding on); [table3.md](table3.md) names each selected run's.", ""]
    retrained = done[done.earlier_draws > 0].sort_values("run_id")
    if retrained.empty:
        return lines
    lines += [f"{len(retrained)} runs were trained again from batch 0, their earlier draws kept beside them "
              "(`earlier_draws.json`; a run trained again before the pipeline kept draws has none, and only its "
              "study log tells); the last draw is the one reported:", "",
              "| run | draw | machine | batches | stop | training coarse | test coarse |",
              "|---|---|---|---|---|---|---|"]
    for r in retrained.itertuples():
        draws = RunDir(root / r.run_id).read_earlier_draws()
        for k, draw in enumerate(draws, 1):
            lines.append(f"| `{r.run_id}` | {k} | {machine_label(draw)} | {int(draw['batches']):,} | "
                         f"{stop_reason(draw)} | {draw['train_coarse']:.2f} | {draw['test_coarse']:.2f} |")
        lines.append(f"| `{r.run_id}` | {len(draws) + 1}, reported | {r.machine} | {int(r.batches):,} | "
                     f"{r.stop_reason} | {r.train_coarse:.2f} | {r.test_coarse:.2f} |")
    return lines + [""]


def stopping_table(sweep: SweepConfig) -> list[str]:
    """The grid's stopping rules as a small table: one row per distinct set of rules, with the runs under it."""
    rows: dict[tuple, int] = {}
    for index, _, run in sweep.runs_by_block():
        t = run.training
        halving = sweep.grid[index].halving  # a learning-rate search cuts most of its runs at a rung, not the cap
        rungs = (f"at {', '.join(f'{b:,}' for b in halving.at)}, keeping {', '.join(map(str, halving.keep))}"
                 if halving is not None else "off")
        converged = (f"coarse ≥ {t.early_stop_coarse:g} × {t.early_stop_patience}" if t.early_stop_patience
                     else "off")
        if t.plateau_patience:
            window = f"{t.plateau_patience * t.eval_every:,}"
            if t.plateau_window_fraction:
                window += f" or {t.plateau_window_fraction:.0%} of the run"
            plateau = f"{t.plateau_tolerance:.0%} over {window}"
            if t.plateau_after_leaving_start:
                plateau += ", once off the start"
        else:
            plateau = "off"
        pruned = (f"at {', '.join(f'{b:,}' for b in t.prune_at)} if > {t.prune_ratio:g} × start" if t.prune_at
                  else "off")
        key = (f"{t.max_batches:,}", converged, plateau, pruned, rungs)
        rows[key] = rows.get(key, 0) + 1
    return ["| cap (batches) | converged | plateau (tolerance over window) | pruned | successive halving | runs |",
            "|---|---|---|---|---|---|",
            *(f"| {' | '.join(key)} | {n} |" for key, n in sorted(rows.items(), key=lambda kv: -kv[1]))]


MEMORY_MODELS = ("stack", "queue", "deque")


def search_lines(runs: pd.DataFrame, sweep: SweepConfig) -> list[str]:
    """What each memory cell was searched over, read off the grid's runs (all_runs): per task, memory and hidden size,
    the learning rates, starts and seeds of the runs that trained at least one batch, how many did of how many the
    grid holds, and the successive halving that spends them (issue 78: every memory is searched alike where it has not
    learned). Empty when the grid has no memory model."""
    halving = {}
    for index, _, run in sweep.runs_by_block():
        block = sweep.grid[index].halving
        if block is not None:
            halving[run.run_id()] = (f"at {', '.join(f'{b:,}' for b in block.at)}, keeping "
                                     f"{', '.join(map(str, block.keep))}"
                                     + (", seeds together" if block.seeds_together else ""))
    memory = attempts(runs)
    memory = memory[memory.model.isin(MEMORY_MODELS)]
    if memory.empty:
        return []
    lines = ["## The search each memory cell got", "",
             "Per task, memory and size: the learning rates, starts (initial push and pop biases, as Table 3 names "
             "them) and seeds its runs tried, and the successive halving that spends them, if any. A start or rate "
             "listed was trained on at least one seed; a run the grid holds that has not trained a batch yet counts "
             "in the grid, not as tried.", "",
             "| task | model | size | learning rates | starts | seeds | runs trained / in grid | successive halving |",
             "|---|---|---|---|---|---|---|---|"]
    for task in TASK_NAMES:
        for model in MEMORY_MODELS:
            cell = memory[(memory.task == task) & (memory.model == model)]
            for hidden in sorted(cell.hidden.unique()):
                part = cell[cell.hidden == hidden]
                tried = part[part.batches.fillna(0) > 0]
                rates = ", ".join(f"{lr:g}" for lr in sorted(tried.lr.unique(), reverse=True)) or "—"
                starts = "; ".join(sorted(str(start) or "init" for start in tried.start.fillna("").unique())) or "—"
                seeds = ", ".join(str(int(seed)) for seed in sorted(tried.seed.unique())) or "—"
                rungs = sorted({halving[run_id] for run_id in part.run_id if run_id in halving})
                lines.append(f"| {TASK_TITLES[task]} | {DISPLAY_NAMES[model]} | h{int(hidden)} | {rates} | {starts} | "
                             f"{seeds} | {len(tried)} / {len(part)} | {'; '.join(rungs) or 'none'} |")
    return lines + [""]


def memory_use(cell, root: Path) -> tuple[int, str, str] | None:
    """A memory cell's selected run (a row of :func:`~pipeline.reports.table3.table3`) at the checkpoint it reports:
    that batch and its mean push and pop over the source and target halves, as text ("0.10 / 0.05"; the DeQue's two
    ends each). None when the run has no results to stand at."""
    from pipeline.models import memory_of
    from pipeline.reports.recipe import memory_signals, push_pop_text

    folder = RunDir(root / cell.run_id)
    results = folder.standing_results()  # a run training on: the results it stands at
    if results is None:
        return None
    step = int(results["selected_step"])
    push, pop = push_pop_text(memory_signals(cell.model, folder.read_metrics(), step), memory_of(cell.model).ends)
    return step, push, pop


def memory_use_lines(table: pd.DataFrame, root: Path) -> list[str]:
    """How the selected run of each memory cell used its memory (issue 78: a disagreement argued from its run): the
    mean push and pop over the source and target halves at the checkpoint it reports (the DeQue's two ends each), as
    its monitor logged them. Empty when no memory cell has a selected run."""
    from pipeline.training.monitor import MEMORY_PROBE_SIZE

    body = []
    for r in table[table.model.isin(MEMORY_MODELS) & table.run_id.notna()].itertuples():
        used = memory_use(r, root)
        if used is None:
            continue
        step, push, pop = used
        body.append(f"| {TASK_TITLES[r.task]} | {DISPLAY_NAMES[r.model]} | h{int(r.hidden)}, lr {r.lr:g}, seed "
                    f"{int(r.seed)}, batch {step:,} | {VERDICT_MARKS.get(r.verdict, '')} | {push} | {pop} |")
    if not body:
        return []
    return ["## How the memories were used", "",
            "Per memory cell, its selected run at the checkpoint it reports: the mean push and pop over the source "
            f"half and the target half of {MEMORY_PROBE_SIZE} fresh training-length sequences (`metrics.csv`, "
            "`memory/*`; the DeQue's two ends each). A stack used as one on reversal, or a queue on copy, pushes on "
            "the source and pops on the target (push near 1.00 / 0.00, pop near 0.00 / 1.00); one that keeps pushing "
            "on the target and pops little is used as one more recurrent layer (docs/training.md).", "",
            "| task | model | selected run | | push: source / target | pop: source / target |",
            "|---|---|---|---|---|---|", *body, ""]


def reference_standing(perplexity: float, ref: ReferencePerplexities) -> str:
    """Where a training perplexity stands against a task's two content-blind references (:func:`reference_lines`)."""
    if pd.isna(perplexity):
        return "—"
    if perplexity < ref.skeleton * (1 - 2 * ref.skeleton_error):
        return "below the skeleton line: carries content words"
    if perplexity < ref.source_unread * (1 - 2 * ref.source_unread_error):
        return "between the lines: no more than the source's structure gives"
    return "at or above the upper line: no more than the target alone gives"


def reference_lines(table: pd.DataFrame, references: dict[str, ReferencePerplexities | None]) -> list[str]:
    """Where each selected run of the ITG tasks stands against the two content-blind references drawn on the
    convergence figures (issue 78: a disagreement argued from evidence): below the skeleton line (by more than twice
    its standard error) a run carries content words from source to target; between the lines it shows no more than
    the source's structure gives; at or above the upper line, no more than the target alone gives. Empty without a
    reference."""
    shown = {task: ref for task, ref in references.items() if ref is not None}
    if not shown:
        return []

    lines = ["## What a model that carries no content word reaches", "",
             "Two reference perplexities per ITG task, per target token (`</s>` included) on the training "
             "lengths and length distribution, drawn across the perplexity panel of its convergence figure: "
             "*source skeleton, no content word*, a model that knows every literal word of the target and the "
             "class of every content word but not which word (each costs log of its class's size), a lower bound "
             "for any model that does not carry content words; *no source word read*, the best model that reads no "
             "source at all (the target's probability under the grammar, every derivation summed, and the length "
             "distribution). Estimated on pairs drawn with a fixed seed; docs/tasks.md says how.", "",
             "| task | source skeleton, no content word | no source word read | pairs (seed) |", "|---|---|---|---|"]
    for task, ref in shown.items():
        lines.append(f"| {TASK_TITLES[task]} | {ref.skeleton:.2f} (± {100 * ref.skeleton_error:.1f}%) | "
                     f"{ref.source_unread:.2f} (± {100 * ref.source_unread_error:.1f}%) | "
                     f"{ref.samples} ({ref.seed}) |")
    lines += ["", "The selected runs against them (training perplexity at the checkpoint each reports):", "",
              "| task | model | training perplexity | where it stands |", "|---|---|---|---|"]
    for r in table[table.task.isin(list(shown)) & table.run_id.notna()].itertuples():
        lines.append(f"| {TASK_TITLES[r.task]} | {DISPLAY_NAMES[r.model]} | {r.train_perplexity:.2f} | "
                     f"{reference_standing(r.train_perplexity, shown[r.task])} |")
    return [*lines, ""]


def ablation_lines(runs: pd.DataFrame, root: Path) -> list[str]:
    """The read ablations of the profile (issue 78: a memory used or unused, from evidence): each beside the run it
    ablates, the same model and seed with every read replaced by zeros, compared at the ablation's last batch (the
    run's, where it stopped for good first) by :func:`~pipeline.reports.table3.ablation_standing`. Empty when the
    profile has none."""
    ablations = runs[is_ablation(runs)]
    if ablations.empty:
        return []
    lines = ["## The read ablation", "",
             "Each read ablation beside the run it ablates: the same model, setting and seed, every read of the memory "
             "replaced by zeros (`probes.read_zeroed`: the controller hears nothing from its memory, and no gradient "
             "reaches the read weights), trained to the same batch. Each curve's level is the mean training perplexity "
             f"of its last {ABLATION_WINDOWS} windows up to the ablation's last batch, its noise their standard "
             "deviation; the curves match when the levels differ by no more than the two noises together (where the "
             "run stopped for good before the ablation's end, both are read at the run's end). Matching "
             "curves say the memory was unused: the cell needs what the LSTM rows need; an ablation below its run "
             "says the reads were heard and cost the controller: it learns faster without them. An ablation still "
             "training shows the levels at its last batch so far, judged only once it is done. The convergence "
             "figures draw each ablation in sparse dots with hollow markers.", "",
             "| task | model | run ablated | batch | perplexity: heard / zeroed | noise | the memory |",
             "|---|---|---|---|---|---|---|"]
    for r in ablations.itertuples():
        name = f"| {TASK_TITLES.get(r.task, r.task)} | {DISPLAY_NAMES.get(r.model, r.model)} |"
        lines.append(f"{name} `{r.ablation_of}` | {' | '.join(ablation_judgement(r, runs, root))} |")
    return [*lines, ""]


def ended_for_good(run) -> bool:
    """Whether a run (a row of all_runs) will train no further: stopped by a rule (converged, plateau, pruned) or at
    its cap. A run done at a halving rung's budget goes on if the rung keeps it, so it has not ended."""
    return run.state in DONE and (run.state == "pruned" or run.stop_reason in ("converged", "plateau")
                                  or run.batches >= run.cap)


def ablation_judgement(ablation, runs: pd.DataFrame, root: Path) -> tuple[str, str, str, str]:
    """One read ablation (a row of all_runs) against the run it ablates (in ``runs``, all_runs): the batch they are
    compared at, their levels ("heard / zeroed"), the noise, and what that says of the memory (:func:`ablation_lines`'
    columns). Judged once the ablation is done, at its end, or at the run's end where the run ended for good before
    it (:func:`ended_for_good`: the ablation, trained past it, holds the same batch in its log)."""
    # where it is compared: its end once done (a pruned one, by the code before ablations were exempt,
    # stopping.pruning_applies, is not: its sweep reopens it, rejudged_prune); while it trains, where its log stands
    done = ablation.state in DONE and ablation.state != "pruned"
    now = getattr(ablation, "batches_now", math.nan)
    step = int(ablation.batches) if done or pd.isna(now) else int(now)
    ablated = runs[runs.run_id == ablation.ablation_of]
    if ablated.empty:
        return f"{step:,}", "—", "—", "the run it ablates is not in the profile"
    heard = logged_values(logged_rows(root / ablation.ablation_of), TRAIN_PERPLEXITY)
    zeroed = logged_values(logged_rows(root / ablation.run_id), TRAIN_PERPLEXITY)
    # both curves at one batch: the ablation's, or the run's end where the run it ablates has not got there yet
    at = min(step, max((batch for batch, _ in heard), default=0))
    standing = ablation_standing(heard, zeroed, at)
    if standing is None:
        return f"{step:,}", "—", "—", f"not compared yet ({ablation.state})"
    match, level_heard, level_zeroed, noise = standing
    levels = f"{level_heard:.2f} / {level_zeroed:.2f}"
    run_ended = at < step and ended_for_good(ablated.iloc[0])  # its end is where both are judged
    if not done or (at < step and not run_ended):  # the levels so far, as the final comparison reads them
        why = ("pruned before ablations were exempt: it trains on to its cap when its sweep runs"
               if ablation.state == "pruned" else ablation.state if not done else
               f"the run it ablates is at {at:,} of the ablation's {step:,}")
        return f"{at:,} so far", levels, f"{noise:.2f}", f"not judged until both are at its end ({why})"
    ratio = level_zeroed / level_heard
    said = ("unused: the curves match" if match else
            f"used: without its reads the run stands {ratio:.2f}× as high" if ratio > 1 else
            f"heard, to its cost: without its reads the same model stands {ratio:.2f}× as high, lower")
    return f"{at:,}", levels, f"{noise:.2f}", said


def disagreement_lines(table: pd.DataFrame, runs: pd.DataFrame, root: Path,
                       references: dict[str, ReferencePerplexities | None]) -> list[str]:
    """evidence.md's case for each memory cell that disagrees at convergence (issue 78: every disagreement argued
    from evidence), in a few sentences read off the report's own tables: the values short of the paper's, how the
    selected run used its memory (:func:`memory_use`), where it stands against the content-blind references (ITG
    tasks, :func:`reference_standing`), and what its read ablation says (:func:`ablation_judgement`; "none yet" where
    the profile has none for that run). Empty when no memory cell disagrees."""
    from pipeline.reports.table3 import METRICS, judged_so_far, within_tolerance

    cells = table[table.model.isin(MEMORY_MODELS) & (table.verdict == "disagrees at convergence")]
    if cells.empty:
        return []
    names = {"train_coarse": "training coarse", "train_fine": "training fine", "test_coarse": "test coarse",
             "test_fine": "test fine"}
    ablations = runs[is_ablation(runs)]
    lines = ["## The memory cells that disagree", "",
             "Each memory cell that disagrees at convergence, argued from its selected run (README.md has the tables "
             "these sentences are read from: how the memories were used, the content-blind references, the read "
             "ablation; the convergence figure of its task draws the run, its ablation and the references).", ""]
    for r in cells.itertuples():
        # below the paper's as the verdict judges it: beyond the tolerance (table3.within_tolerance), not 0.95 on 1.00;
        # the differences are Table 3's own (a continuation's where the row is judged there)
        short = [f"{names[m]} {getattr(r, m):.2f} against {getattr(r, f'paper_{m}'):.2f}" for m in METRICS
                 if getattr(r, f"diff_{m}") < 0 and not within_tolerance(getattr(r, f"diff_{m}"))]
        said = [f"Short of the paper on {', '.join(short)}." if short else "Its values differ from the paper's."]
        if judged_so_far(r):  # a survivor of its cell still trains, and may be selected once done
            said.append("So far: runs of its cell still train, and one may turn the verdict.")
        continued = getattr(r, "continued_in", None)
        if isinstance(continued, str) and continued:  # judged where a continuation of the run ended (table3)
            said.append(f"Judged where its continuation outside the profile ended (`{continued}`, "
                        f"{int(r.continued_batches):,} batches; evidence above).")
        used = memory_use(r, root)
        if used is not None:
            step, push, pop = used
            said.append(f"At batch {step:,} its memory was pushed {push} and popped {pop} (source / target).")
        if references.get(r.task) is not None:
            said.append(f"Its training perplexity, {r.train_perplexity:.2f}, is "
                        f"{reference_standing(r.train_perplexity, references[r.task])}.")
        mine = ablations[ablations.ablation_of == r.run_id]
        if mine.empty:
            said.append("No read ablation of it yet.")
        for a in mine.itertuples():
            batch, levels, _, judged = ablation_judgement(a, runs, root)
            said.append(f"Its read ablation: {judged}." if levels == "—" else
                        f"Its read ablation at batch {batch} (perplexity heard / zeroed {levels}): {judged}.")
        lines.append(f"- **{TASK_TITLES.get(r.task, r.task)}, {DISPLAY_NAMES.get(r.model, r.model)}** "
                     f"(`{r.run_id}`): {' '.join(said)}")
    return [*lines, ""]


def population_members(finished: pd.DataFrame) -> pd.Series:
    """Per finished run (rows of results), the runs of the population it trained in (1 alone). A population's members
    train in one process, each its wall time: each counts its share, its seconds over its members."""
    return (finished["population"].map(lambda p: len(p) if isinstance(p, list) and p else 1)
            if "population" in finished else pd.Series(1, index=finished.index))


def cpu_timed(finished: pd.DataFrame) -> pd.Series:
    """Per finished run (rows of results), whether it recorded its process's CPU seconds for both training and
    evaluation (runs on a CPU since the monitor kept them, not resumed from a checkpoint made before)."""
    if "train_cpu_seconds" not in finished or "eval_cpu_seconds" not in finished:
        return pd.Series(False, index=finished.index)
    return finished["train_cpu_seconds"].notna() & finished["eval_cpu_seconds"].notna()


def measured_seconds(finished: pd.DataFrame, part: str) -> pd.Series:
    """Per finished run (rows of results), the seconds of ``part`` ("train" or "eval"), summed over restarts: the
    process's CPU seconds where the run recorded them (:func:`cpu_timed`), else its wall seconds, which count the
    waits too where processes outnumbered the cores."""
    wall = finished[f"{part}_seconds"]
    timed = cpu_timed(finished)
    return (wall.where(~timed, finished[f"{part}_cpu_seconds"]) if timed.any() else wall).astype(float)


def run_seconds(finished: pd.DataFrame) -> pd.Series:
    """What each finished run (rows of results) cost: its training and evaluation seconds (:func:`measured_seconds`),
    its share where it trained in a population (:func:`population_members`)."""
    return (measured_seconds(finished, "train") + measured_seconds(finished, "eval")) / population_members(finished)


def compute_line(finished: pd.DataFrame, sweep: SweepConfig) -> str:
    """What the finished runs cost: training and evaluation seconds (summed over restarts), one thread each, per
    machine they recorded (a grid split between machines, a GPU's rows say so)."""
    if finished.empty:
        return ""
    members = population_members(finished)
    timed = cpu_timed(finished)
    finished = finished.assign(
        seconds=run_seconds(finished),
        wall_seconds=(finished["train_seconds"] + finished["eval_seconds"]) / members,
        train_seconds=measured_seconds(finished, "train") / members,  # for the speeds below, measured as the cost
        # the workers and machine the runs recorded (runs made before they did: the profile's workers, no machine)
        workers=finished["workers"] if "workers" in finished else float("nan"),
        machine=finished["machine"].fillna("") if "machine" in finished else "")
    finished["workers"] = finished["workers"].fillna(default_workers(sweep)).astype(int)
    groups = []  # (hours, runs, workers, where), the largest share first
    for where, runs in finished.groupby("machine", sort=False):
        hours = float(runs["seconds"].sum()) / 3600
        low, high = int(runs["workers"].min()), int(runs["workers"].max())  # pools of other sizes on one machine
        groups.append((hours, len(runs), str(low) if low == high else f"{low}–{high}", where))
    groups.sort(key=lambda g: -g[0])
    place = lambda where: f" on {where}" if where else " (machine not recorded)"  # noqa: E731
    total = sum(g[0] for g in groups)
    # Each run's share of the wall time: its seconds over the size of the pool it ran in. Two pools side by side on
    # one machine (a study beside a sweep, or two slices of a grid) each count their own workers only, so this reads
    # high there.
    wall = float((finished["wall_seconds"] / finished["workers"]).sum()) / 3600
    single = bool((members == 1).all())  # no run trained in a population
    each = "one thread each" if single else (
        "one thread each; a run trained in a population counts its share of the population's time, its time over "
        "its members")
    # How the seconds were measured: the process's CPU time where a run kept it; else its wall time, which counts the
    # waits too where processes outnumbered the cores (a probe beside a sweep).
    n_timed = int(timed.sum())
    on_gpu = finished["machine"].str.contains("GPU", regex=False)
    waits = ", which counts any wait for a shared core" if (~timed & ~on_gpu).any() else ""  # a GPU's: its own time
    if n_timed == len(finished):
        how = ", the process's CPU time"
    elif n_timed:
        rest = len(finished) - n_timed
        how = (f": the process's CPU time for {n_timed} run{'' if n_timed == 1 else 's'}, the wall time for the "
               f"{rest} that did not record it{waits}")
    else:
        how = f", wall time{waits}"
    unit = "CPU-hours" if single else "hours"
    line = (f"Compute: {total:.1f} {unit} over the {len(finished)} done runs ({each}; training and "
            f"evaluation{how}), about " + (f"{wall:.1f} h" if wall >= 0.1 else f"{wall * 60:.0f} min")
            + " of wall time")
    if len(groups) == 1:
        line += f" with {groups[0][2]} worker(s){place(groups[0][3])}."
    else:
        line += ": " + "; ".join(f"{hours:.1f} {unit} over {n} run{'' if n == 1 else 's'} with {workers} worker(s)"
                          f"{place(where)}" for hours, n, workers, where in groups) + "."
    # The hours depend on the machine as much as on the profile: the training speed per architecture lets a reader
    # scale them to theirs (docs/performance.md has the speeds measured by `make bench`). Only the machine that did
    # most of the work: a GPU's speeds beside a CPU's would mislead.
    _, _, workers, where = groups[0]
    main = finished[finished["machine"] == where]
    per_batch = (1000 * main["train_seconds"] / main["batches"].clip(lower=1)).groupby(main["model"])
    medians = per_batch.median()
    speeds = ", ".join(f"{DISPLAY_NAMES[model]} {medians[model]:.0f}" for model in MODELS if model in medians)
    return line + (f" Training speed {'on this machine' if len(groups) == 1 else 'on ' + (where or 'the first')}, "
                   f"median ms a {'batch' if single else 'member-batch'} with {workers} "
                   f"{'run(s)' if single else 'population(s)'} side by side: {speeds}.")


def block_compute_line(finished: pd.DataFrame, sweep: SweepConfig, statuses: list) -> str:
    """What each labelled grid block has cost (issue 78: what a profile's new blocks took), the costliest first: its
    done runs as :func:`compute_line` counts them, and the runs still under way (interrupted, or past a halving rung
    they won) with the wall time their ``timings.csv`` holds so far. '' when the profile labels fewer than two
    blocks. A run the grid holds in two blocks counts in its last."""
    if len({block.label for block in sweep.grid if block.label}) < 2:
        return ""
    from pipeline.reports.recipe import labelled_runs

    labels = {run.run_id(): label for label, run in labelled_runs(sweep)}
    blocks: dict[str, list] = {}  # label -> [done hours, done runs, hours so far, runs under way]
    if not finished.empty and "run_id" in finished:
        for run_id, seconds in zip(finished["run_id"], run_seconds(finished)):
            entry = blocks.setdefault(labels.get(run_id, "outside the grid"), [0.0, 0, 0.0, 0])
            entry[0] += seconds / 3600
            entry[1] += 1
    for status in statuses:
        if status.state not in DONE and status.seconds > 0:
            entry = blocks.setdefault(labels.get(status.run_dir.name, "outside the grid"), [0.0, 0, 0.0, 0])
            entry[2] += status.seconds / 3600
            entry[3] += 1
    if not blocks:
        return ""
    unit = "CPU-hours" if finished.empty or bool((population_members(finished) == 1).all()) else "hours"

    def part(label: str, done: float, n: int, going: float, m: int) -> str:
        text = f"{label}: {done:.1f} over {n} done run{'' if n == 1 else 's'}"
        return text + (f", {going:.1f} h so far in {m} under way" if m else "")

    return (f"By grid block (its `label`), in {unit}: "
            + "; ".join(part(label, *entry) for label, entry in sorted(blocks.items(), key=lambda kv: -kv[1][0]
                                                                       - kv[1][2])) + ".")


def first_error_lines(table: pd.DataFrame, root: Path, out_dir: Path | None = None) -> list[str]:
    """Where the first error falls in the target, on the test-length set, for the selected run of every ITG cell
    (``first_errors.csv``): the share of sequences per fifth of the target, and right. What tells a failure at an ITG
    rule's reordering from a late drift, without the checkpoint. A run that finished before the file existed is read
    from its :class:`Twin` where one stands for it, and the row says so."""
    from pipeline.tasks import has_length_choice

    rows = table[table.run_id.notna() & table.task.map(has_length_choice)]
    if rows.empty:
        return []
    lines = ["## Where the first error falls (ITG cells)", "",
             "Per selected run, the test-length sequences (source 65–128) by where in the target their first wrong "
             "symbol is, in fifths of the target (`</s>` its last symbol), and those entirely right: from "
             "`first_errors.csv` in its run directory (tenths there). A run that finished before that file existed "
             "is read from its twin, where one learned what it learned (the run trained again, as for the far "
             "lengths below; another draw where the machine differs).", "",
             "| task | model | 0–20% | 20–40% | 40–60% | 60–80% | 80–100% | right | sequences |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        counts, model = dict(RunDir(root / r.run_id).read_first_errors("test")), DISPLAY_NAMES[r.model]
        hit = None if counts else find_twin(r.run_id, r.test_coarse, out_dir,
                                            lambda path: RunDir(path).read_first_errors("test"))
        twin, twin_counts = hit if hit else (None, [])
        if twin is not None and twin.stands_for:
            counts, model = dict(twin_counts), f"{model}, its twin ({twin.machine})"
        name = f"| {TASK_TITLES[r.task]} | {model} |"
        if not counts:
            why = ("the run finished before first_errors.csv existed" if twin is None else
                   f"the run finished before first_errors.csv existed; its twin ({twin.machine}) reached test coarse "
                   f"{twin.test_coarse:.2f}, not the run's {r.test_coarse:.2f}")
            lines.append(f"{name} not recorded ({why}) | | | | | | |")
            continue
        total = sum(counts.values())
        fifths = [sum(counts.get(str(t), 0) for t in (2 * f, 2 * f + 1)) for f in range(5)]
        cells = " | ".join(f"{n / total:.0%}" for n in [*fifths, counts.get("none", 0)])
        lines.append(f"{name} {cells} | {total:,} |")
    return lines + [""]


TRACE_INDEX = 0  # the test-length sequence every report traces: fixed in advance, never chosen by its results



def memory_traces(table: pd.DataFrame, root: Path, out_dir: Path) -> dict[tuple[str, str], str]:
    """For each cell whose selected run is a memory model: the trace of test-length sequence ``TRACE_INDEX`` by the
    checkpoint its numbers were read at (``selected_step``), drawn to ``traces/<task>_<model>.png``; none where no
    trace of that checkpoint is kept and the checkpoint is not at hand (:func:`pipeline.inspection.run_trace`).
    Returns {(task, model): relative path}."""
    from pipeline.inspection import draw_trace, run_trace

    out = {}
    for r in table.itertuples():
        if pd.isna(r.run_id) or memory_of(r.model) is None:  # a deep LSTM has no memory to draw
            continue
        path = Path("traces") / f"{r.task}_{r.model}.png"
        step = None if pd.isna(r.selected_step) else int(r.selected_step)
        trace = run_trace(root / r.run_id, "test", TRACE_INDEX, step)
        if trace is None:
            continue
        draw_trace(trace, out_dir / path)
        out[(r.task, r.model)] = str(path)
    return out


def experiments_beside(experiments_dir: Path) -> dict[tuple[str, str], list[tuple[Path, dict]]]:
    """Runs kept outside any profile (``reports/experiments/<name>/results.json``: a documented experiment, such as
    one cell trained far longer than its profile's cap), by (task, model): the report links those that continue a
    run of its profile from that run's cell (:func:`continuing_experiments`)."""
    found: dict[tuple[str, str], list[tuple[Path, dict]]] = {}
    for path in sorted(Path(experiments_dir).glob("*/results.json")):
        results = upgraded_results(json.loads(path.read_text()))
        found.setdefault((results["task"], results["model"]), []).append((path.parent, results))
    return found


def continues(folder: Path, run_dir: Path) -> bool:
    """Whether the experiment in ``folder`` continues the run in ``run_dir``: the same run id is not enough (the same
    config trained again under other code, or on other hardware, takes another path), so its log must hold the run's
    own, every training perplexity the run logged, at the same steps."""
    ours = dict(logged_values(logged_rows(run_dir), TRAIN_PERPLEXITY))
    theirs = dict(logged_values(logged_rows(folder), TRAIN_PERPLEXITY))
    return bool(ours) and all(step in theirs and abs(theirs[step] - value) <= 1e-9 * abs(value)
                              for step, value in ours.items())


def continuing_experiments(experiments: dict[tuple[str, str], list[tuple[Path, dict]]],
                           run_dirs: dict[str, Path]) -> dict[tuple[str, str], list[tuple[Path, dict]]]:
    """The experiments that continue one of the profile's runs (its run id, and its log: see :func:`continues`), by
    cell, so a cell never cites another configuration's experiment, or another training of its own config."""
    found: dict[tuple[str, str], list[tuple[Path, dict]]] = {}
    for cell, items in experiments.items():
        for folder, results in items:
            run_id = results.get("run_id")
            if run_id in run_dirs and continues(folder, run_dirs[run_id]):
                found.setdefault(cell, []).append((folder, results))
    return found


def continuations_of(continuing: dict[tuple[str, str], list[tuple[Path, dict]]]) -> dict:
    """Of the experiments that continue the profile's runs (:func:`continuing_experiments`), the one that went
    furthest for each run, by run id: what :func:`table3` judges a budget-limited cell by (and, given every
    experiment that holds a run of the profile, what it weighs for a cut run: :func:`elsewhere_of`)."""
    found: dict[str, dict] = {}
    for folder, _ in (item for items in continuing.values() for item in items):
        later = continuation(folder)
        if later["batches"] > found.get(later["run_id"], {}).get("batches", -1):
            found[later["run_id"]] = later
    return found


def elsewhere_of(experiments: dict[tuple[str, str], list[tuple[Path, dict]]], run_ids: set[str]) -> dict:
    """Of the experiments, those that hold one of the profile's runs (``run_ids``) trained outside it, its own log
    continued or the run trained again (another draw: :func:`continues` need not hold), the one that went furthest
    for each run, by run id (:func:`continuations_of`): what :func:`table3` weighs for the runs a search cut
    (``table3.cut_lower``)."""
    return continuations_of({cell: [(folder, results) for folder, results in items if results.get("run_id") in run_ids]
                             for cell, items in experiments.items()})


def _experiment_note(experiments: list[tuple[Path, dict]], out_dir: Path) -> str:
    notes = []
    for folder, r in experiments:
        link = os.path.relpath(folder, out_dir)
        notes.append(f"outside the profile, [{r['batches']:,} batches]({link}/) ({r['stop_reason']}): training "
                     f"{r['train_coarse']:.2f}, test {r['test_coarse']:.2f} coarse")
    return "; " + "; ".join(notes) if notes else ""


def check_reportable(statuses, out_dir: Path, root: Path, config_file: str | Path, force: bool,
                     kind: str = "profile", empty_allowed: bool = False, sweep: SweepConfig | None = None) -> None:
    """See :func:`write_report`: damaged runs refuse a report; so do zero done runs (unless ``empty_allowed``: a report
    that says so), or fewer than the existing report's ``all_runs.csv`` counted while some of the grid's runs are not
    done (a runs folder lost or mistyped), unless ``force``. A profile whose grid shrank, every run of it done, reports
    without ``force``. ``kind``: the report's, which never overwrites another kind's (:mod:`pipeline.reports.kinds`);
    ``sweep``: the profile, whose report goes only into a folder it owns (:func:`check_report_folder`)."""
    if sweep is None:
        check_kind(out_dir, kind)
    else:
        check_report_folder(out_dir, kind, sweep.name, config_file, sweep.reports_dir(), force)
    damaged = [RunDir(s.run_dir).damage() for s in statuses if s.state == "damaged"]
    if damaged:
        raise ReportRefused(f"{len(damaged)} run(s) have damaged files, so their cells would change silently: "
                            + "; ".join(damaged) + ". Repair or remove them (transduce train --restart --run-dir "
                            "trains one again), then report")
    done = sum(s.state in DONE for s in statuses)
    before = 0
    if (out_dir / "all_runs.csv").is_file():
        try:
            before = int(pd.read_csv(out_dir / "all_runs.csv").state.isin(DONE).sum())
        except (ValueError, AttributeError, pd.errors.ParserError):
            before = 0
    if not force and ((done == 0 and not empty_allowed) or (done < before and done < len(statuses))):
        raise ReportRefused(f"{done} done run(s) in {root}, where the report in {out_dir} counted {before}: "
                            "is the runs folder right? `"
                            + command_line("transduce", "archive", config_file, "--restore") + "` "
                            "brings back the committed runs (or `make report`); --force writes the report anyway")


def profile_header(sweep: SweepConfig, config_file: str | Path, command: str | None = None) -> str:
    """The line a profile's report opens with: what made it (:func:`pipeline.provenance.provenance`), the profile and
    its config hash. ``command``: the command that makes the report, not the one typed (--force or a path spelled
    another way changes nothing in it, and a regenerated report should be the committed one byte for byte)."""
    return provenance(command or command_line("transduce", "report", config_file), inputs=(config_file,)) + (
        f" Profile `{config_file}` (config hash `{profile_hash(sweep)}`). Run commits are listed per run in "
        "`all_runs.csv`.")


def beside_the_paper(sweep: SweepConfig) -> bool:
    """Whether the profile's grid has a model or a task that is not the paper's (``paper=False`` in its registry
    entry): its report is the baselines' (:mod:`pipeline.reports.baselines`), not Table 3."""
    return any(not MODELS[run.model.name].paper or not TASKS[run.task].paper for run in sweep.runs())


def write_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                 out_dir: Path | None = None, command: str | None = None,
                 experiments_dir: Path | None = None, force: bool = False) -> Path:
    """Write ``reports/<profile>/`` from the profile's runs. Returns the README's path. Experiments kept under
    ``experiments_dir`` (default ``reports/experiments/``) that continue one of the profile's runs are linked from
    that run's cell. A profile whose grid has a model or task beside the paper's (:func:`beside_the_paper`) is
    refused: its report is the baselines' (:mod:`pipeline.reports.baselines`; ``transduce report`` chooses).

    Refused before anything is written (:class:`ReportRefused`): when a run's files are damaged (its cell would
    change silently), and, unless ``force``, when no run is done or fewer are than the report already there counted
    while some of the grid's are not (a mistyped runs folder would otherwise overwrite a committed report; a grid
    that shrank, every run of it done, is not refused). Figures the new report does not draw are
    removed, so none is left behind from an older report."""
    from pipeline.paths import REPORTS_DIR

    if beside_the_paper(sweep):  # no Table 3: the report of what it trained beside the paper (its module says why)
        raise ReportRefused(f"{config_file}: its grid trains a model or task beside the paper's, so it has no Table 3; "
                            "its report is the baselines' (transduce report chooses it)")
    root = sweep_root(sweep, runs_root)
    out_dir = Path(out_dir) if out_dir is not None else sweep.reports_dir()
    statuses = sweep_status(sweep, runs_root)
    check_reportable(statuses, out_dir, root, config_file, force, sweep=sweep)
    out_dir.mkdir(parents=True, exist_ok=True)
    header = profile_header(sweep, config_file, command)

    runs = all_runs(sweep, runs_root)
    atomic_write_text(out_dir / "all_runs.csv", runs.to_csv(index=False))
    selected = select_models(runs)
    experiments = experiments_beside(experiments_dir if experiments_dir is not None else REPORTS_DIR / "experiments")
    continuing = continuing_experiments(experiments, {run_id: root / run_id for run_id in runs.run_id})
    table = table3(runs, sweep, continuations_of(continuing), elsewhere_of(experiments, set(runs.run_id)))
    atomic_write_text(out_dir / "table3.csv", table.to_csv(index=False))
    finished = [RunDir(s.run_dir).read_results() for s in statuses if s.state in DONE]
    sizes = sorted({int(r["eval_sizes"]["test"]) for r in finished})
    atomic_write_text(out_dir / "table3.md", table3_markdown(table, header, " or ".join(map(str, sizes)) or "1000",
                                                            TASK_TITLES))
    atomic_write_text(out_dir / "table2.md", table2_markdown(parameter_table(), header))

    figures, references = [], {}
    overview = table3_figure(table, out_dir / "table3.png", TASK_TITLES)
    for task in TASK_NAMES:
        path = out_dir / f"convergence_{task}.png"
        references[task] = reference_perplexities(task, selected, root)
        if convergence_figure(task, selected, root, path, runs[runs.state.isin(DONE)], references[task]):
            figures.append((task, "convergence", path.name))
        path = out_dir / f"length_{task}.png"
        in_profile = table[(table.task == task) & table.in_profile]
        if length_figure(task, selected, root, path, unselected=list(in_profile[in_profile.run_id.isna()].model)):
            figures.append((task, "length", path.name))

    disagreements = disagreement_lines(table, runs, root, references)
    atomic_write_text(out_dir / "evidence.md", evidence_markdown(table, header, TASK_TITLES)
                      + ("\n".join(disagreements) + "\n" if disagreements else ""))

    far = far_lengths_table(selected, root, out_dir)
    far_drawn = far_lengths_figure(far, out_dir / "far_lengths.png")
    if far.empty:
        (out_dir / "far_lengths.csv").unlink(missing_ok=True)
    else:
        atomic_write_text(out_dir / "far_lengths.csv", far.to_csv(index=False))

    convergence = batches_to_accuracy(selected, root)
    atomic_write_text(out_dir / "batches_to_accuracy.csv", convergence.to_csv(index=False))

    traces = memory_traces(table, root, out_dir)
    drawn = ({out_dir / name for _, _, name in figures} | {out_dir / path for path in traces.values()}
             | ({out_dir / "table3.png"} if overview else set())
             | ({out_dir / "far_lengths.png"} if far_drawn else set()))
    for stale in [*out_dir.glob("*.png"), *out_dir.glob("traces/*.png")]:
        if stale not in drawn:
            stale.unlink()

    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    failed = [s for s in statuses if s.state == "failed"]
    lines = [f"# Report: profile `{sweep.name}`", "", f"**{summary_line(table)}**", ""]
    if overview:
        lines += ["![Table 3 at a glance: ours against the paper's, coarse accuracy](table3.png)", ""]
    lines += [header, "", sweep.description.strip(), "", "## Runs", "",
              f"{len(statuses)} runs in the grid: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
              f"Run directories: `{display_path(root)}`. " + _commits_line(selected), "",
              compute_line(pd.DataFrame(finished), sweep), "",
              *([line, ""] if (line := block_compute_line(pd.DataFrame(finished), sweep, statuses)) else []),
              *machine_lines(runs, root),
              "Stopping rules of the grid's runs (docs/training.md says what each checks):", "",
              *stopping_table(sweep), "",
              "Every run, selected or not, with its settings, state, stop reason and numbers: "
              "[all_runs.csv](all_runs.csv)."]
    if failed:
        lines += ["", "Failed runs (see `failed.json` in each):", ""]
        lines += [f"- `{s.run_dir.name}`: {RunDir(s.run_dir).read_failure()}" for s in failed]
    lines += ["", "## Table 3, cell by cell", "",
              "Each cell's verdict and the notes it rests on; [table3.md](table3.md) ([CSV](table3.csv)) has all four "
              "values beside the paper's and the selected runs, [evidence.md](evidence.md) the evidence in full. "
              "Memory traces (`transduce inspect`): the selected memory model decoding test-length sequence "
              f"{TRACE_INDEX} of the cached set, by the checkpoint its numbers were read at. \"not kept\": that "
              "checkpoint is gone (an archive keeps none, a run training on has moved past it) and no trace was drawn "
              "from it while it was there; the trace comes with the run's next results.", "", *legend(), "",
              "| task | model | test coarse: ours (paper) | | seeds: test coarse | runs tried / learned / pruned | "
              "notes | trace |", "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        name = f"| {TASK_TITLES[r.task]} | {DISPLAY_NAMES[r.model]} |"
        if not r.in_profile:
            lines.append(f"{name} — ({r.paper_test_coarse:.2f}) | — | | | not in this profile | |")
        elif pd.isna(r.run_id):
            lines.append(f"{name} — ({r.paper_test_coarse:.2f}) | — | | {r.runs} / {r.learned} / {r.pruned} | "
                         "no finished run | |")
        else:
            sd = "—" if pd.isna(r.test_coarse_std) else f"{r.test_coarse_std:.2f}"
            trace = traces.get((r.task, r.model))
            if trace:
                trace = f"[trace]({trace})"
            elif memory_of(r.model) is not None:
                trace = "not kept" + (f" (batch {int(r.selected_step):,})" if pd.notna(r.selected_step) else "")
            lines.append(f"{name} {r.test_coarse:.2f} ({r.paper_test_coarse:.2f}) | {VERDICT_MARKS[r.verdict]} | "
                         f"{r.test_coarse_mean:.2f} ± {sd} (n={int(r.seeds_at_selected)}) | {r.runs} / {r.learned} / "
                         f"{r.pruned} | {r.notes}{_experiment_note(continuing.get((r.task, r.model), []), out_dir)} | "
                         + (trace or "") + " |")
    lines += ["", *memory_use_lines(table, root), *reference_lines(table, references), *ablation_lines(runs, root),
              *search_lines(runs, sweep)]
    lines += [*first_error_lines(table, root, out_dir)]
    lines += ["- [Table 2: parameter counts](table2.md)", "", "## Convergence (the paper's Fig. 2b)", "",
              "The paper: \"the convergence on the top accuracy happens orders of magnitude earlier for enhanced LSTMs "
              "than for benchmark LSTMs\" (§5). Here, per task and architecture:", "",
              *convergence_markdown(convergence), "", "[CSV](batches_to_accuracy.csv).", "",
              *far_lengths_lines(far, table, far_drawn), "## Figures", "",
              "Convergence: coarse accuracy and training perplexity against batches (log axis), the selected run of "
              "each architecture strong, the profile's other runs of the cell faint. Length: accuracy against source "
              f"length in bins of {LENGTH_BIN} lengths, coarse with its 95% interval.", ""]
    for task, kind, name in figures:
        title = "accuracy and perplexity against batches" if kind == "convergence" else "accuracy against source length"
        lines += [f"### {TASK_TITLES[task]}: {title}", "", f"![{task} {kind}]({name})", ""]
    lines += ["## How runs were selected", "",
              "For each task and architecture, among its done runs (finished or pruned; never one cut at a rung of a",
              "learning-rate search by successive halving), the one with the lowest",
              "average training perplexity over the 100 batches before the checkpoint it reports (§5); runs without a",
              "finite perplexity are never selected. Within a run, the reported checkpoint is the one with the best",
              "coarse (then fine) accuracy on fresh training-length sequences, evaluated every `eval_every` batches;",
              "test-length sequences never influence any choice, stop or pruning.", ""]
    readme = out_dir / "README.md"
    atomic_write_text(readme, "\n".join(lines))
    return readme
