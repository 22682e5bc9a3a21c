"""How long the ITG grammars' sentences are: the quantity the paper tuned by hand (§4.2), under both readings.

``transduce data-report`` draws unconditioned derivations from each grammar and writes, under
``reports/data/``, a histogram per grammar (``<grammar>_lengths.png``) and ``lengths.md`` with the acceptance
rate of each length window, the histogram as a table, and what each reading of ``length_distribution`` makes of
each split's window: the grammar's own distribution there (exact, from the inside probabilities) against uniform.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pipeline.files import save_figure
from pipeline.tasks import LENGTH_DISTRIBUTIONS, SPLITS, TASK_NAMES, get_task, has_length_choice
from pipeline.tasks.itg import GrammarTask

GRAMMAR_TASKS = tuple(name for name in TASK_NAMES if has_length_choice(name))  # the registry's grammar tasks
# The grammar tasks are the paper's, so their windows are SPLITS: the tables set them side by side under one header.
MAX_LENGTH = max(high for _, high in SPLITS.values())  # derivations are cut off (and counted) beyond this
BIN_WIDTH = 8


def sample_lengths(task_name: str, n: int, seed: int) -> np.ndarray:
    """Source lengths of ``n`` derivations of the task's grammar; ``MAX_LENGTH + 1`` stands for anything longer."""
    task = get_task(task_name)
    if not isinstance(task, GrammarTask):
        raise ValueError(f"task {task_name!r} has no grammar; choose from: {', '.join(GRAMMAR_TASKS)}")
    return task.grammar.sample_lengths(np.random.default_rng(seed), n, MAX_LENGTH)


def window_distribution(task_name: str, split: str, reading: str) -> np.ndarray:
    """``p[n]`` for n = 0 .. MAX_LENGTH: the probability of source length n in ``split`` under ``reading``
    (exact: the grammar's inside probabilities, restricted to the window; uniform over its derivable lengths)."""
    task = get_task(task_name)
    low, high = task.window(split)
    sampler = task.grammar.length_sampler(MAX_LENGTH)
    p = np.zeros(MAX_LENGTH + 1)
    if reading == "grammar":
        p[low : high + 1] = sampler.length_probabilities()[low : high + 1]
    else:
        p[sampler.possible_lengths(low, high)] = 1.0
    return p / p.sum()


def window_rates(lengths: np.ndarray) -> dict[str, float]:
    """Fraction of derivations below every window, inside each split's window, and beyond the longest."""
    rates = {"below": float(np.mean(lengths < min(low for low, _ in SPLITS.values())))}
    for split, (low, high) in SPLITS.items():
        rates[split] = float(np.mean((lengths >= low) & (lengths <= high)))
    rates["beyond"] = float(np.mean(lengths > MAX_LENGTH))
    return rates


def write_length_report(out_dir: str | Path = "reports/data", n: int = 100_000, seed: int = 0) -> Path:
    """Write one PNG per grammar and ``lengths.md``; returns the markdown file's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = {name: sample_lengths(name, n, seed) for name in GRAMMAR_TASKS}
    for name, values in lengths.items():
        _plot(name, values, out_dir / f"{name}_lengths.png")
    path = out_dir / "lengths.md"
    path.write_text(_markdown(lengths, n, seed))
    return path


def _plot(name: str, lengths: np.ndarray, path: Path) -> None:
    """Left: the windows on a linear scale. Right: log-log, against the n^-3/2 decay of a critical branching
    process, the flattest a recursive grammar can be (docs/tasks.md)."""
    figure = Figure(figsize=(10, 3.8), layout="constrained")
    linear, loglog = figure.subplots(1, 2)
    fraction = np.bincount(lengths, minlength=MAX_LENGTH + 2)[: MAX_LENGTH + 1] / len(lengths)
    low = min(low for low, _ in SPLITS.values())
    shown = np.arange(low, MAX_LENGTH + 1)
    linear.bar(shown, fraction[shown], width=1.0, color="tab:blue")
    for (split, (start, end)), colour in zip(SPLITS.items(), ("tab:green", "tab:orange", "tab:red")):
        linear.axvspan(start - 0.5, end + 0.5, color=colour, alpha=0.12, label=f"{split} {start}-{end}")
    linear.set(xlabel="source length (words)", ylabel="fraction of derivations",
               title=f"{np.mean(lengths < low):.1%} below {low} and {np.mean(lengths > MAX_LENGTH):.1%} "
                     f"above {MAX_LENGTH} not shown", xlim=(0, MAX_LENGTH + 1))
    linear.title.set_fontsize(9)
    linear.legend(fontsize=8)
    every = np.arange(1, MAX_LENGTH + 1)
    loglog.loglog(every[fraction[1:] > 0], fraction[1:][fraction[1:] > 0], ".", markersize=3, label="derivations")
    reference = fraction[56:73].mean() * (every / 64.0) ** -1.5
    loglog.loglog(every, reference, "--", color="grey", label="n^-3/2 (critical branching)")
    loglog.set(xlabel="source length (words)", ylabel="fraction of derivations")
    loglog.legend(fontsize=8)
    figure.suptitle(f"{name}: source lengths of {len(lengths):,} derivations before rejection")
    save_figure(figure, path)


def _markdown(lengths: dict[str, np.ndarray], n: int, seed: int) -> str:
    names = list(lengths)
    rates = {name: window_rates(values) for name, values in lengths.items()}
    low = min(low for low, _ in SPLITS.values())
    lines = [
        "# ITG sentence lengths before rejection",
        "",
        f"Written by `transduce data-report --samples {n} --seed {seed}` (`pipeline/reports/lengths.py`) from the "
        "grammars in `configs/grammars/`. Each grammar derives "
        f"{n:,} sentences from its start symbol with no length condition; a derivation is stopped once it must "
        f"exceed {MAX_LENGTH} words and counted as longer than {MAX_LENGTH}. Under `length_distribution: grammar` the "
        "evaluation sets and the training stream keep the derivations whose source length falls in a split's window "
        "(rejection sampling), so the acceptance rate is the fraction of derivations a pair of that split costs; "
        "under `uniform` (the default) a length is drawn first and a derivation of that length drawn directly (last "
        "section). Source and target lengths are equal in both grammars.",
        "",
        "## Acceptance rate per window",
        "",
        "| grammar | below " + str(low) + " | " + " | ".join(f"{s} {a}–{b}" for s, (a, b) in SPLITS.items())
        + f" | above {MAX_LENGTH} |",
        "|---" * (len(SPLITS) + 3) + "|",
    ]
    for name in names:
        r = rates[name]
        lines.append(f"| {name} | {r['below']:.1%} | " + " | ".join(f"{r[s]:.1%}" for s in SPLITS)
                     + f" | {r['beyond']:.1%} |")
    lines += ["", "## Histograms", ""]
    lines += [f"![{name}]({name}_lengths.png)" for name in names]
    lines += ["", f"Fraction of derivations per source-length bin of {BIN_WIDTH}:", "",
              "| source length | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for start in range(1, MAX_LENGTH + 1, BIN_WIDTH):
        end = start + BIN_WIDTH - 1
        cells = [f"{np.mean((v >= start) & (v <= end)):.2%}" for v in lengths.values()]
        lines.append(f"| {start}–{end} | " + " | ".join(cells) + " |")
    lines.append(f"| > {MAX_LENGTH} | " + " | ".join(f"{rates[x]['beyond']:.2%}" for x in names) + " |")
    lines += _readings(names)
    return "\n".join(lines) + "\n"


def _readings(names: list[str]) -> list[str]:
    """Each split's window under each reading of ``length_distribution`` (docs/tasks.md): the mean source length,
    and the share of each 8-length bin."""
    lines = ["", "## The two readings of §4.2 within each window", "",
             "`length_distribution: uniform` (the default) gives every length of a split's window the grammar can "
             "derive the same probability, and draws a pair of that length from the grammar's distribution given the "
             "length; `grammar` keeps the grammar's own lengths inside the window. Exact values, from the grammar's "
             "inside probabilities (`pipeline/tasks/length_conditioned.py`), not samples.", "",
             "| grammar | split | mean source length, grammar | mean source length, uniform | lengths the grammar "
             "cannot derive |", "|---|---|---|---|---|"]
    lengths = np.arange(MAX_LENGTH + 1)
    for name in names:
        for split, (low, high) in SPLITS.items():
            p = {r: window_distribution(name, split, r) for r in LENGTH_DISTRIBUTIONS}
            missing = (high - low + 1) - int((p["uniform"] > 0).sum())
            lines.append(f"| {name} | {split} {low}–{high} | {lengths @ p['grammar']:.1f} | "
                         f"{lengths @ p['uniform']:.1f} | {missing} |")
    for split in ("train", "test"):
        low, high = SPLITS[split]
        lines += ["", f"Share of the {split} window ({low}–{high}) per bin of {BIN_WIDTH} lengths:", "",
                  "| source length | " + " | ".join(f"{n}, grammar | {n}, uniform" for n in names) + " |",
                  "|---" * (2 * len(names) + 1) + "|"]
        p = {(n, r): window_distribution(n, split, r) for n in names for r in LENGTH_DISTRIBUTIONS}
        for start in range(low, high + 1, BIN_WIDTH):
            end = min(start + BIN_WIDTH - 1, high)
            cells = [f"{p[n, r][start : end + 1].sum():.1%}" for n in names for r in ("grammar", "uniform")]
            lines.append(f"| {start}–{end} | " + " | ".join(cells) + " |")
    return lines
