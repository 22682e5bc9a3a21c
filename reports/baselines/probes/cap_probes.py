"""The figure of reports/baselines/study-log.md ("Whether the cap explains the other 0 of 3s on Delétang et al.'s
tasks"): coarse accuracy against source length for each probe, the profile's run at its 4,000-batch cap beside the
same run continued. Reads committed files only (the profile's archived runs and the probes' own files), trains and
decodes nothing:

    python reports/baselines/probes/cap_probes.py reports/baselines/probes/cap_probes.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from pipeline.files import save_figure
from pipeline.reports.build import LENGTH_BIN, binned_accuracy, pyplot

HERE = Path(__file__).resolve().parent
ARCHIVE = HERE.parent / "finished_runs"
# (the probe's folder here, the profile's run it continued, the panel's title)
PROBES = [
    ("rs-transformer-learned-s1-to16k", "reverse_string-transformer-h256-lr0.001-s1-23211281",
     "reverse_string: Transformer (learned), s1"),
    ("rs-transformer-sinusoidal-s1-to16k", "reverse_string-transformer-h256-lr0.001-s1-3051127f",
     "reverse_string: Transformer (sinusoidal), s1"),
    ("rs-transformer-none-s1-to16k", "reverse_string-transformer-h256-lr0.001-s1-fce2eb06",
     "reverse_string: Transformer (none), s1"),
    ("rs-transformer-randomised-s0-to16k", "reverse_string-transformer-h256-lr0.001-s0-c60b1d0d",
     "reverse_string: Transformer (randomised), s0"),
    ("rs-lstm1-s2-to16k", "reverse_string-lstm1-h256-lr0.001-s2-f30e43cc", "reverse_string: 1-layer LSTM, s2"),
    ("ds-transformer-learned-s0-to16k", "duplicate_string-transformer-h256-lr0.001-s0-ef12d48a",
     "duplicate_string: Transformer (learned), s0"),
    ("ds-lstm1-s1-to16k", "duplicate_string-lstm1-h256-lr0.001-s1-870cddd4", "duplicate_string: 1-layer LSTM, s1"),
    ("ds-queue-s1-to16k", "duplicate_string-queue-h256-lr0.001-s1-7d148314", "duplicate_string: Queue-LSTM, s1"),
]
SHOWN = 128  # source lengths drawn; past them every bin and far band of every run here is 0.00 (checked below)
TRAIN, TEST = 40, 80  # the last source length of Delétang et al.'s training lengths and of our test set


def curve(folder: Path) -> pd.DataFrame:
    """Coarse accuracy in bins of LENGTH_BIN source lengths over the cached training, test and long sets."""
    return binned_accuracy(pd.read_csv(folder / "accuracy_by_length.csv")).sort_values("first")


def checkpoint(folder: Path) -> str:
    """Where the curve is from: the checkpoint the run reports (its best on fresh training-length sequences), of the
    batches it ran."""
    results = json.loads((folder / "results.json").read_text())
    return f"batch {results['selected_step']:,} of {results['batches']:,}"


def main(out: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(3, 3, figsize=(13, 10.5), sharey=True)
    flat = axes.flatten()
    for ax, (probe, source, title) in zip(flat, PROBES):
        for folder, look in ((ARCHIVE / source, dict(color="#888888", ls="--")), (HERE / probe, dict(color="#1f77b4"))):
            binned = curve(folder)
            beyond = binned[binned["first"] > SHOWN]
            far = pd.read_csv(folder / "far_lengths.csv")
            if (beyond["coarse"] > 0).any() or (far["coarse"] > 0).any():
                raise SystemExit(f"{folder.name}: a string past {SHOWN} symbols is exact; draw further")
            shown = binned[binned["first"] <= SHOWN]
            ax.plot(shown["middle"], shown["coarse"], marker="o", markersize=3, lw=1.4,
                    label=checkpoint(folder) + (" (the profile's run)" if folder.parent == ARCHIVE else " (continued)"),
                    **look)
        ax.axvspan(1, TRAIN, color="grey", alpha=0.12, lw=0)
        ax.axvline(TEST, color="grey", lw=0.8, ls=":")
        ax.set_xlim(0, SHOWN)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("source length", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right", frameon=False)
    for ax in axes[:, 0]:
        ax.set_ylabel("coarse accuracy")
    for ax in flat[len(PROBES):]:
        ax.axis("off")
    flat[-1].text(0.02, 0.5, "Shaded: the training lengths (1-40).\nDotted: the end of the test lengths (41-80).\n"
                  "Each curve: the checkpoint its run reports.\n"
                  f"Bins of {LENGTH_BIN} source lengths over the cached\ntraining, test and long sets; past {SHOWN} "
                  "every bin,\nand every far band to 512, is 0.00 for every run.",
                  fontsize=9.5, va="center", color="#333333")
    fig.suptitle("Delétang et al.'s tasks: the profile's runs at the 4,000-batch cap and continued (to at most 16,000)",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    save_figure(fig, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
