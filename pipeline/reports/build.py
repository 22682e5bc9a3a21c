"""The report of a profile, written from finished runs alone (no training): ``transduce report configs/X.yaml``.

``reports/<profile>/`` receives

* ``table3.md`` / ``table3.csv``: per task and architecture, the selected run's training and test coarse/fine
  accuracy beside the paper's Table 3 and the difference;
* ``table2.md``: parameter counts beside the paper's Table 2;
* ``convergence_<task>.png``: accuracy against batches, one line per architecture (Figure 2b);
* ``length_<task>.png``: accuracy against source length (training lengths, test lengths and beyond);
* ``README.md``: what the profile ran, how runs were selected, what is missing, and what made the report.

Model selection follows §5: for each task and architecture, among its finished runs (learning rates, hidden
sizes, seeds), the one with the best (lowest) average training perplexity, taken over the 100 batches before the
checkpoint that the run reports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from pipeline.config import MODEL_NAMES, SweepConfig, config_hash, to_dict
from pipeline.models import DISPLAY_NAMES
from pipeline.provenance import provenance
from pipeline.reports.published import table3 as published_table3
from pipeline.reports.tables import parameter_table, table2_markdown
from pipeline.sweep import STATES, sweep_root, sweep_status
from pipeline.tasks import SPLITS, TASK_NAMES
from pipeline.files import atomic_write_text, read_complete_rows

METRICS = ("train_coarse", "train_fine", "test_coarse", "test_fine")
# One look per architecture throughout a report: colour, dash and marker together, so that models whose curves
# coincide (several at 0, or at 1) stay distinguishable where one line lies on another.
STYLES = {
    "lstm1": dict(color="#9ecae1", ls=(0, (1, 1)), marker="v"),
    "lstm2": dict(color="#6baed6", ls=(0, (3, 1, 1, 1)), marker="^"),
    "lstm4": dict(color="#3182bd", ls=(0, (5, 2)), marker="<"),
    "lstm8": dict(color="#08519c", ls=(0, (8, 2, 1, 2)), marker=">"),
    "stack": dict(color="#d62728", ls="-", marker="o"),
    "queue": dict(color="#2ca02c", ls=(0, (6, 3)), marker="s"),
    "deque": dict(color="#ff7f0e", ls=(0, (2, 2)), marker="D"),
}
OFFSET_STEP = 0.01  # vertical shift between consecutive models' curves (stated on the figure)
_FALLBACK_COLORS = ("#7f7f7f", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")


def model_style(model: str) -> dict:
    """The plotting style of ``model``; a model without one (a newly registered architecture) gets a grey-ish
    colour of its own rather than an error."""
    if model in STYLES:
        return STYLES[model]
    index = sum(map(ord, model)) % len(_FALLBACK_COLORS)
    return dict(color=_FALLBACK_COLORS[index], ls="-", marker="x")
TASK_TITLES = {"copy": "Sequence copying", "reversal": "Sequence reversal", "bigram_flip": "Bigram flipping",
               "svo_sov": "SVO to SOV", "gender": "Gender conjugation"}
TABLE3_COLUMNS = (
    ["task", "model", "hidden", "lr", "seed", "batches", "train_perplexity", *METRICS]
    + [f"paper_{m}" for m in METRICS] + [f"diff_{m}" for m in METRICS] + ["run_id", "commit"]
)


def finished_runs(sweep: SweepConfig, runs_root: Path | None = None) -> pd.DataFrame:
    """One row per finished run of the profile's grid: its results.json."""
    rows = []
    for status in sweep_status(sweep, runs_root):
        if status.state == "finished":
            rows.append(json.loads((status.run_dir / "results.json").read_text()))
    return pd.DataFrame(rows)


def select_models(runs: pd.DataFrame) -> pd.DataFrame:
    """§5: per (task, model), the run with the lowest average training perplexity."""
    if runs.empty:
        return runs
    ranked = runs.dropna(subset=["train_perplexity"]).sort_values(["train_perplexity", "run_id"])
    return ranked.groupby(["task", "model"], as_index=False, sort=False).first()


def table3(selected: pd.DataFrame, sweep: SweepConfig) -> pd.DataFrame:
    """Our selected runs beside the paper's Table 3, one row per (task, model) of the grid, in the paper's order."""
    paper = published_table3().set_index(["task", "model"])
    cells = {(run.task, run.model.name) for run in sweep.runs()}
    ours = selected.set_index(["task", "model"]) if not selected.empty else None
    rows = []
    for task in TASK_NAMES:
        for model in MODEL_NAMES:
            if (task, model) not in cells:
                continue
            row: dict = {"task": task, "model": model}
            if ours is not None and (task, model) in ours.index:
                r = ours.loc[(task, model)]
                row.update({k: r[k] for k in ("hidden", "lr", "seed", "batches", "train_perplexity", *METRICS,
                                               "run_id", "commit")})
            for m in METRICS:
                row[f"paper_{m}"] = paper.loc[(task, model), m]
                row[f"diff_{m}"] = row[m] - row[f"paper_{m}"] if m in row else None
            rows.append(row)
    return pd.DataFrame(rows, columns=list(TABLE3_COLUMNS))


def table3_markdown(table: pd.DataFrame, header: str, eval_sizes: str) -> str:
    lines = [
        "# Table 3: training and test accuracy of the selected models",
        "",
        header,
        "",
        f"Each cell: **ours** · paper · difference (ours − paper). Training = {eval_sizes} training-length",
        "sequences (source 8–64), test = as many test-length sequences (source 65–128), from the fixed cached sets.",
        "Selected run per task and architecture: lowest average training perplexity (§5).",
    ]
    for task in TASK_NAMES:
        part = table[table.task == task]
        if part.empty:
            continue
        lines += ["", f"## {TASK_TITLES[task]}", "",
                  "| model | train coarse | train fine | test coarse | test fine | selected run |",
                  "|---|---|---|---|---|---|"]
        for r in part.itertuples():
            cells = []
            for m in METRICS:
                ours, paper, diff = getattr(r, m), getattr(r, f"paper_{m}"), getattr(r, f"diff_{m}")
                cells.append(f"— · {paper:.2f} · —" if pd.isna(ours) else f"**{ours:.2f}** · {paper:.2f} · {diff:+.2f}")
            chosen = ("no finished run" if pd.isna(r.run_id) else
                      f"h{int(r.hidden)}, lr {r.lr:g}, seed {int(r.seed)}, {int(r.batches)} batches")
            lines.append(f"| {DISPLAY_NAMES[r.model]} | " + " | ".join(cells) + f" | {chosen} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------------------------
# Figures.


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _metrics(run_dir: Path) -> pd.DataFrame:
    _, rows = read_complete_rows(run_dir / "metrics.csv")
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _in_model_order(selected: pd.DataFrame, task: str) -> pd.DataFrame:
    if selected.empty:
        return selected
    part = selected[selected.task == task]
    return part.sort_values("model", key=lambda col: col.map(MODEL_NAMES.index))


def convergence_figure(task: str, selected: pd.DataFrame, root: Path, out: Path) -> bool:
    """Coarse accuracy against batches on training-length and test-length sequences (Figure 2b)."""

    def curves(r):
        frame = _metrics(root / r.run_id)
        evals = frame.dropna(subset=["train/coarse"]) if "train/coarse" in frame else frame.iloc[0:0]
        return [(evals["step"], evals[column]) for column in ("train/coarse", "test/coarse")]

    titles = [f"{TASK_TITLES[task]}: coarse accuracy, {lengths}"
              for lengths in ("training lengths (8–64)", "test lengths (65–128)")]
    return _two_panels(_in_model_order(selected, task), out, curves, titles, "batches", "coarse accuracy",
                       markersize=4)


def length_figure(task: str, selected: pd.DataFrame, root: Path, out: Path) -> bool:
    """Coarse and fine accuracy against source length, over the train, test and long sets."""

    def curves(r):
        frame = pd.read_csv(root / r.run_id / "accuracy_by_length.csv").sort_values("source_length")
        return [(frame["source_length"], frame[column].rolling(5, center=True, min_periods=1).mean())
                for column in ("coarse", "fine")]

    def mark_windows(ax):
        ax.axvspan(*SPLITS["train"], color="grey", alpha=0.12, lw=0)
        ax.axvline(SPLITS["test"][1], color="grey", lw=0.8, ls=":")

    titles = [f"{TASK_TITLES[task]}: {metric} accuracy by source length" for metric in ("coarse", "fine")]
    return _two_panels(_in_model_order(selected, task), out, curves, titles,
                       "source length (shaded: training lengths; dotted: end of test lengths)",
                       "accuracy (5-length moving average)", decorate=mark_windows)


def _two_panels(part: pd.DataFrame, out: Path, curves, titles, xlabel: str, ylabel: str, decorate=None,
                **style) -> bool:
    """Two side-by-side accuracy panels, one line per selected run (``curves(run)`` gives its (x, y) per panel),
    one colour per architecture throughout the report. False (and no file) when there is nothing to draw."""
    if part.empty:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    count = len(part)
    for k, r in enumerate(part.itertuples()):
        look = model_style(r.model)
        offset = (k - (count - 1) / 2) * OFFSET_STEP
        for ax, (x, y) in zip(axes, curves(r)):
            n = max(1, len(x))
            ax.plot(x, y + offset, label=DISPLAY_NAMES.get(r.model, r.model), color=look["color"], ls=look["ls"],
                    marker=look["marker"], markevery=max(1, n // 12), markersize=style.get("markersize", 5), lw=1.5,
                    alpha=0.9)
    for ax, title in zip(axes, titles):
        if decorate is not None:
            decorate(ax)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].set_ylim(-0.06, 1.06)
    if count > 1:
        fig.text(0.5, 0.005, f"Curves are shifted vertically by up to ±{(count - 1) / 2 * OFFSET_STEP:.3f} so that "
                 "equal values stay visible.", ha="center", fontsize=8, color="#555555")
    axes[1].legend(loc="best", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------------------------
# The whole report.


def _display_path(path: Path) -> str:
    from pipeline.paths import REPO_ROOT

    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _commits_line(selected: pd.DataFrame) -> str:
    if selected.empty:
        return "No finished runs."
    chains = [str(c).split() for c in selected["commit"]]  # a run resumed under a later commit lists both
    commits = sorted({c for chain in chains for c in chain})
    resumed = sum(len(chain) > 1 for chain in chains)
    line = "Commit(s) the selected runs were trained at: " + ", ".join(f"`{c}`" for c in commits) + "."
    if resumed:
        line += (f" {resumed} of them {'was' if resumed == 1 else 'were'} interrupted and resumed under a later "
                 "commit; each run's commits, oldest first, are in `table3.csv` and in its `commits.txt`.")
    return line


def _compute_line(finished: pd.DataFrame, sweep: SweepConfig) -> str:
    """What the finished runs cost: training and evaluation seconds (summed over restarts), one thread each."""
    if finished.empty:
        return ""
    seconds = float((finished["train_seconds"] + finished["eval_seconds"]).sum())
    workers = sweep.workers or os.cpu_count() or 1
    return (f"Compute: {seconds / 3600:.1f} CPU-hours over the {len(finished)} finished runs (one thread each, "
            f"training and evaluation), about {seconds / 3600 / workers:.1f} h of wall time with "
            f"{workers} worker(s).")


def write_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                 out_dir: Path | None = None, command: str | None = None) -> Path:
    """Write ``reports/<profile>/`` from the profile's finished runs. Returns the README's path."""
    from pipeline.paths import REPORTS_DIR

    root = sweep_root(sweep, runs_root)
    out_dir = Path(out_dir) if out_dir is not None else REPORTS_DIR / sweep.name
    out_dir.mkdir(parents=True, exist_ok=True)
    header = provenance(command) + (f" Profile `{config_file}` (config hash `{config_hash(to_dict(sweep))}`)."
                                    " Run commits are listed per run in `table3.csv`.")

    statuses = sweep_status(sweep, runs_root)
    finished = finished_runs(sweep, runs_root)
    selected = select_models(finished)
    table = table3(selected, sweep)
    atomic_write_text(out_dir / "table3.csv", table.to_csv(index=False))
    sizes = sorted({int(n) for n in selected["eval_sizes"].map(lambda d: d["test"])}) if not selected.empty else []
    atomic_write_text(out_dir / "table3.md", table3_markdown(table, header, " or ".join(map(str, sizes)) or "1000"))
    atomic_write_text(out_dir / "table2.md", table2_markdown(parameter_table(), header))

    figures = []
    for task in TASK_NAMES:
        for kind, draw in (("convergence", convergence_figure), ("length", length_figure)):
            path = out_dir / f"{kind}_{task}.png"
            if draw(task, selected, root, path):
                figures.append((task, kind, path.name))

    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    failed = [s for s in statuses if s.state == "failed"]
    missing = [f"{r.task} / {DISPLAY_NAMES[r.model]}" for r in table.itertuples() if pd.isna(r.run_id)]
    lines = [f"# Report: profile `{sweep.name}`", "", header, "", sweep.description.strip(), "",
             "## Runs", "",
             f"{len(statuses)} runs in the grid: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
             f"Run directories: `{_display_path(root)}`. " + _commits_line(selected), "",
             _compute_line(finished, sweep)]
    if failed:
        lines += ["", "Failed runs (see `failed.json` in each):", ""]
        lines += [f"- `{s.run_dir.name}`: {json.loads((s.run_dir / 'failed.json').read_text())['error']}"
                  for s in failed]
    if missing:
        lines += ["", "Cells of the grid without a finished run (marked — in Table 3): " + "; ".join(missing) + "."]
    lines += ["", "## Tables", "", "- [Table 3: accuracies beside the paper's](table3.md) ([CSV](table3.csv))",
              "- [Table 2: parameter counts](table2.md)", "", "## Figures", ""]
    for task, kind, name in figures:
        title = "coarse accuracy against batches" if kind == "convergence" else "accuracy against source length"
        lines += [f"### {TASK_TITLES[task]}: {title}", "", f"![{task} {kind}]({name})", ""]
    lines += ["## How runs were selected", "",
              "For each task and architecture, among its finished runs, the one with the lowest average training",
              "perplexity over the 100 batches before the checkpoint it reports (§5). Within a run, the reported",
              "checkpoint is the one with the best coarse (then fine) accuracy on fresh training-length sequences,",
              "evaluated every `eval_every` batches; test-length sequences never influence any choice.", ""]
    readme = out_dir / "README.md"
    atomic_write_text(readme, "\n".join(lines))
    return readme
