"""The JM stack on the paper's reversal (reports/baselines/study-log.md, "Why the JM stack learned the paper's
reversal on 1 seed of 3"): how each seed used its stack, and its training perplexity.

Two steps. ``summarise`` reads the traces ``transduce inspect --format json`` wrote (one greedily decoded training
sequence each, files named ``<label>-train-<index>.json``) and writes one row per traced sequence: the mean
probability of push, pop and no-op over the steps that read the source (``<s>`` and the source) and over those of
the target (from ``<|>`` on), and whether the decoded target was exact; the push-bias probe's rows (``pb<seed>``) read
their checkpoint's batch from their results in ``jm-reversal-push/``. ``figure`` draws the rows of the JM stack's own
start beside the runs' training perplexity, from committed files only (the table, the profile's archived runs, the
probes' own files):

    python reports/baselines/probes/jm_reversal.py summarise /tmp/jmtr reports/baselines/probes/jm_reversal_actions.csv
    python reports/baselines/probes/jm_reversal.py figure reports/baselines/probes/jm_reversal.png
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd

from pipeline.files import save_figure
from pipeline.reports.build import pyplot

HERE = Path(__file__).resolve().parent
ARCHIVE = HERE.parent / "finished_runs"
TABLE = HERE / "jm_reversal_actions.csv"
PROFILE = {0: "reversal-jm_stack-h256-lr0.001-s0-f5c2fa85", 1: "reversal-jm_stack-h256-lr0.001-s1-6a3e4b60",
           2: "reversal-jm_stack-h256-lr0.001-s2-482acd21"}
STACK_LSTM = ["reversal-stack-h256-lr0.001-s0-4102dc31", "reversal-stack-h256-lr0.001-s1-2e1028fb",
              "reversal-stack-h256-lr0.001-s2-9571b22c"]
CONTINUED = HERE / "rv-jm_stack-s0-to12k"  # the profile's s0, continued from its 4,000 to 12,000 batches
# trace label -> (seed, the batch of the checkpoint traced, what it is, model.push_bias)
LABELS = {
    **{f"e{s}-{n}": (s, n, "retrained, last checkpoint", None) for s in (0, 2) for n in (250, 500, 750, 1000)},
    "s0at4k": (0, 4000, "the profile's run, its selected checkpoint", None),
    "s1": (1, 4000, "the profile's run, its selected checkpoint", None),
    "s2": (2, 1500, "the profile's run, its selected checkpoint", None),
    "p0-12k": (0, 10000, "continued to 12,000, its selected checkpoint", None),
    # the push-bias probe (probes/jm-reversal-push): its runs' selected checkpoints (the batch: results.json's)
    **{f"pb{s}": (s, None, "push bias +1, its selected checkpoint", 1.0) for s in range(4)},
}
PUSH = HERE / "jm-reversal-push"
SEP = "<|>"
COLORS = {0: "#d62728", 1: "#ff7f0e", 2: "#1f77b4"}


def summarise(traces: Path, out: Path) -> None:
    rows = []
    for path in sorted(traces.glob("*-train-*.json")):
        label, index = re.fullmatch(r"(.+)-train-(\d+)\.json", path.name).groups()
        if label not in LABELS:
            continue
        seed, batch, what, push_bias = LABELS[label]
        if batch is None:
            batch = json.loads((PUSH / f"s{seed}" / "results.json").read_text())["selected_step"]
        trace = json.loads(path.read_text())
        steps = trace["steps"]
        sep = next(i for i, step in enumerate(steps) if step["token"] == SEP)
        row = dict(seed=seed, push_bias=push_bias, batch=batch, checkpoint=what, index=int(index),
                   source_length=trace["source_length"], exact=bool(trace["fully_correct"]))
        for half, part in (("source", steps[:sep]), ("target", steps[sep:])):
            for action in ("push", "pop", "no-op"):
                row[f"{half}_{action}"] = round(sum(s["actions"][action] for s in part) / len(part), 4)
        rows.append(row)
    pd.DataFrame(rows).sort_values(["push_bias", "seed", "batch", "index"], na_position="first").to_csv(out,
                                                                                                      index=False)


def perplexity(folder: Path) -> pd.Series:
    metrics = pd.read_csv(folder / "metrics.csv").groupby("step").first()
    return metrics["train/perplexity"].dropna()


def figure(out: Path) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.6))
    for k, run in enumerate(STACK_LSTM):
        curve = perplexity(ARCHIVE / run)
        left.plot(curve.index, curve.values, color="#999999", lw=1, label="Stack-LSTM, seeds 0-2" if k == 0 else None)
    for seed, run in PROFILE.items():
        curve = perplexity(ARCHIVE / run)
        left.plot(curve.index, curve.values, color=COLORS[seed], lw=1.6, label=f"JM stack, s{seed}")
    continued = perplexity(CONTINUED)
    continued = continued[continued.index > 4000]
    left.plot(continued.index, continued.values, color=COLORS[0], lw=1.6, ls="--", label="JM stack, s0 continued")
    left.axvline(4000, color="grey", lw=0.8, ls=":")
    left.set_yscale("log")
    left.set_xlabel("batch")
    left.set_ylabel("training perplexity (log)")
    left.set_title("The paper's reversal (128 symbols): training perplexity", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize=8, frameon=False)

    table = pd.read_csv(TABLE)
    table = table[table["push_bias"].isna()]  # the JM stack's own start (the push-bias probe: the study log's table)
    means = table.groupby(["seed", "batch"])[["source_push", "source_pop", "target_pop"]].mean().reset_index()
    for seed, part in means.groupby("seed"):
        c = COLORS[seed]
        right.plot(part["batch"], part["source_push"], color=c, marker="o", lw=1.4, label=f"s{seed}: push, source")
        right.plot(part["batch"], part["source_pop"], color=c, marker="x", lw=1.0, ls=":",
                   label=f"s{seed}: pop, source")
        right.plot(part["batch"], part["target_pop"], color=c, marker="s", lw=1.0, ls="--",
                   label=f"s{seed}: pop, target")
    right.set_xscale("log")
    right.set_xticks([250, 500, 1000, 4000, 10000])
    right.set_xticklabels(["250", "500", "1,000", "4,000", "10,000"])
    right.set_ylim(-0.03, 1.03)
    right.set_xlabel("batch of the checkpoint traced (log)")
    right.set_ylabel("mean action probability")
    right.set_title("How each seed uses its stack: 8 training sequences a checkpoint", fontsize=10)
    right.grid(alpha=0.3)
    right.legend(fontsize=8, frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    fig.tight_layout()
    save_figure(fig, out)


if __name__ == "__main__":
    if sys.argv[1] == "summarise":
        summarise(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "figure":
        figure(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown step {sys.argv[1]!r}: summarise or figure")
