"""``make demo`` (``transduce demo``): a Stack-LSTM learns reversal in a few minutes of one core, with a one-page
report of what it learned, in ``demo/`` (git-ignored, rewritten by every demo).

The run is the cpu profile's reversal Stack at its learned setting (hidden 256, lr 1e-3, the Stack's own start:
push bias +1), evaluated more often and on fewer sequences so that it stops soon after it learns: training coarse
1.0 at two evaluations in a row (250 batches apart) is the converged stop. It is trained by
:func:`pipeline.training.run.train` into ``demo/run/`` (a run folder like any other: ``transduce evaluate``,
``inspect`` and ``dashboard`` take it), trained afresh each time, so the same machine prints the same numbers. Then:

* the selected checkpoint scored in bands of source length out to 512 (:mod:`pipeline.generalisation`);
* its memory traced on one test-length sequence (:mod:`pipeline.inspection`);
* ``demo/README.md``, with the convergence curve (``convergence.png``), the memory trace (``trace.png``) and
  accuracy by source length (``lengths.png``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import RunConfig, from_dict
from pipeline.paths import REPO_ROOT

DEMO_DIR = REPO_ROOT / "demo"
DEMO_SEED = 0
DEMO_HIDDEN = 256
DEMO_MAX_BATCHES = 3000  # a seed that has not learned by then is reported as such (the recipe study's: by 1,250)
DEMO_PER_BAND = 50  # sequences per band of source length out to 512


def demo_config(hidden: int = DEMO_HIDDEN, max_batches: int = DEMO_MAX_BATCHES, seed: int = DEMO_SEED,
                eval_every: int = 250, eval_size: int = 100, final_eval_size: int = 200,
                memory_width: int | None = None, embedding: int = 64) -> RunConfig:
    """The demo's run: a Stack-LSTM on reversal at the paper's rate and the Stack's own start, evaluated every
    ``eval_every`` batches on ``eval_size`` sequences, converged at training coarse 1.0 twice in a row."""
    training = dict(lr=1e-3, max_batches=max_batches, seed=seed, eval_every=eval_every, eval_size=eval_size,
                    perplexity_every=min(100, eval_every),
                    test_eval_size=eval_size, final_eval_size=final_eval_size, checkpoint_every=eval_every,
                    early_stop_patience=2, early_stop_coarse=1.0)
    model = dict(name="stack", hidden=hidden, memory_width=memory_width or hidden, embedding=embedding)
    return from_dict(RunConfig, {"task": "reversal", "model": model, "training": training,
                                 "tracking": {"wandb": "off"}})


@dataclass
class Demo:
    """What the demo measured, and where it wrote it."""

    out: Path
    run_dir: Path
    results: dict
    exact_to: int  # the longest source length up to which every sequence scored is exact (0: not the shortest)
    bands: list[dict]  # the far bands' rows (pipeline.generalisation.far_rows)
    seconds: float  # wall-clock seconds, training to report
    cpu_seconds: float  # the same in this process's CPU time (what an idle core would take; waits left out)
    files: list[Path] = field(default_factory=list)

    @property
    def learned(self) -> bool:
        return self.results["train_coarse"] >= 0.99

    def lines(self) -> list[str]:
        """The few lines ``transduce demo`` prints."""
        r = self.results
        stop = "converged" if r["stop_reason"] == "converged" else f"stopped: {r['stop_reason']}"
        return [f"Stack-LSTM on reversal, hidden {r['hidden']}, lr {r['lr']:g}, seed {r['seed']}: "
                f"{r['batches']:,} batches ({stop}), {self.seconds:.0f} s ({self.cpu_seconds:.0f} s of CPU)",
                f"training lengths (8-64):   coarse {r['train_coarse']:.2f}",
                f"test lengths (65-128):     coarse {r['test_coarse']:.2f}",
                f"longer (129-256):          coarse {r['long_coarse']:.2f}",
                "exact to source length " + (f"{self.exact_to}" if self.exact_to else "none") +
                " (every sequence scored, lengths 8-512)" + ("" if self.learned else "; it did not learn"),
                f"report: {self.out / 'README.md'}"]


def exact_to(by_length: list[tuple[int, int, float]], bands: list[dict]) -> int:
    """The longest source length L such that every sequence scored of every length up to L is exact: per length
    (``by_length``: (length, n, coarse) of the cached sets) below the first band, then band by band."""
    first_band = min((int(b["low"]) for b in bands), default=10**9)
    steps = [(length, coarse) for length, _, coarse in sorted(by_length) if length < first_band]
    steps += [(int(b["high"]), float(b["coarse"])) for b in sorted(bands, key=lambda b: b["low"])]
    reached = 0
    for length, coarse in steps:
        if coarse < 1.0:
            break
        reached = length
    return reached


def run_demo(out: Path = DEMO_DIR, config: RunConfig | None = None, *, per_band: int = DEMO_PER_BAND,
             cache_dir: Path | None = None, progress: bool = True, trace_split: str = "test",
             echo: Callable[[str], None] | None = None) -> Demo:
    """Train the demo's run afresh into ``out/run/``, measure it and write ``out/README.md`` with its figures (the
    memory trace of the first sequence of the cached ``trace_split`` set)."""
    from pipeline.data.cache import generate_eval_sets
    from pipeline.generalisation import far_rows, write_far_lengths
    from pipeline.inspection import draw_trace, inspect_run
    from pipeline.rundir import RunDir
    from pipeline.training.run import load_run, train

    config = config or demo_config()
    out = Path(out)
    run_dir = out / "run"
    started, cpu_started = time.monotonic(), time.process_time()
    shutil.rmtree(run_dir, ignore_errors=True)  # afresh: the same seed, the same numbers
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.png"):
        stale.unlink()
    generate_eval_sets([config.task], cache_dir=cache_dir)
    if echo:
        echo(f"training {config.run_id()} into {run_dir} (at most {config.training.max_batches:,} batches)")
    results = train(config, run_dir, cache_dir=cache_dir, progress=progress, accelerator="cpu")
    module = load_run(run_dir, "best")
    bands = far_rows(module, per_band, int(results["batches"]))
    write_far_lengths(run_dir, bands)
    folder = RunDir(run_dir)
    by_length = {split: folder.read_accuracy_by_length(split) for split in ("train", "test", "long")}
    reached = exact_to(by_length["train"] + by_length["test"], bands)
    trace = inspect_run(run_dir, "best", trace_split, 0, cache_dir=cache_dir)
    status = "whole target right" if trace.fully_correct else "not every target symbol right"
    title = (f"Stack-LSTM on reversal (the demo, seed {config.training.seed}, {results['batches']:,} batches): one "
             f"{trace_split}-length sequence, source length {trace.source_length}, decoded greedily; {status}")
    files = [draw_trace(trace, out / "trace.png", title),
             draw_convergence(folder.read_metrics(), results, out / "convergence.png"),
             draw_lengths(by_length, bands, out / "lengths.png")]
    demo = Demo(out, run_dir, results, reached, bands, time.monotonic() - started, time.process_time() - cpu_started,
                files)
    write_report(demo, trace.fully_correct, f"One {trace_split}-length sequence (source length {trace.source_length})")
    return demo


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    points = [(int(r["step"]), float(r[key])) for r in rows if r.get(key) not in (None, "")]
    return [p[0] for p in points], [p[1] for p in points]


def draw_convergence(rows: list[dict], results: dict, out: Path) -> Path:
    """Training perplexity (left, log scale) and coarse accuracy at the evaluations (right) against batches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pipeline.files import save_figure

    fig, left = plt.subplots(figsize=(8, 4))
    steps, perplexity = _series(rows, "train/perplexity")
    left.plot(steps, perplexity, color="#7f7f7f", lw=1.5, label="training perplexity (left)")
    left.set_yscale("log")
    left.set_ylabel("training perplexity (log)")
    left.set_xlabel("batches of 10")
    right = left.twinx()
    for key, color, label in (("train/coarse", "#1f77b4", "training coarse (8-64)"),
                              ("test/coarse", "#d62728", "test coarse (65-128)")):
        x, y = _series(rows, key)
        right.plot(x, y, color=color, marker="o", ms=4, lw=1.5, label=label + " (right)")
    right.set_ylim(-0.03, 1.03)
    right.set_ylabel("coarse accuracy (whole target right)")
    selected = results.get("selected_step")
    if selected:
        left.axvline(selected, color="#2ca02c", ls=":", lw=1)
        left.text(selected, left.get_ylim()[1], " selected", color="#2ca02c", fontsize=8, va="top")
    lines = left.get_lines()[:1] + right.get_lines()
    left.legend(lines, [line.get_label() for line in lines], loc="center right", fontsize=8, frameon=False)
    left.set_title(f"Stack-LSTM learning reversal: {results['batches']:,} batches, stop: {results['stop_reason']}",
                   fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def draw_lengths(by_length: dict[str, list[tuple[int, int, float]]], bands: list[dict], out: Path) -> Path:
    """Coarse accuracy against source length: every length of the cached training-, test- and longer-length sets,
    then the bands out to 512."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pipeline.files import save_figure

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for split, color, label in (("train", "#1f77b4", "training lengths"), ("test", "#d62728", "test lengths"),
                                ("long", "#9467bd", "longer")):
        rows = by_length.get(split, [])
        ax.plot([r[0] for r in rows], [r[2] for r in rows], ".", color=color, ms=4, zorder=3,
                label=f"{label} (each length)")
    for k, band in enumerate(sorted(bands, key=lambda b: b["low"])):
        ax.hlines(band["coarse"], band["low"], band["high"], color="#555555", lw=2, zorder=2,
                  label=f"bands to 512 ({int(band['n'])} sequences each)" if k == 0 else None)
    ax.axvspan(8, 64, color="#1f77b4", alpha=0.06, lw=0)
    ax.text(36, 0.5, "trained\non 8-64", ha="center", va="center", fontsize=8, color="#1f77b4")
    ax.set_xscale("log", base=2)
    ax.set_xticks([8, 16, 32, 64, 128, 256, 512], ["8", "16", "32", "64", "128", "256", "512"])
    ax.set_xlim(7, 560)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("source length (log scale)")
    ax.set_ylabel("coarse accuracy")
    ax.set_title("Accuracy by source length: trained on 8-64, tested out to 512", fontsize=10)
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def write_report(demo: Demo, trace_correct: bool, traced: str) -> Path:
    """``README.md`` of the demo folder: the numbers, the figures, and how to go on."""
    from pipeline.files import atomic_write_text

    r = demo.results
    bands = ", ".join(f"{int(b['low'])}-{int(b['high'])}: {b['coarse']:.2f}" for b in demo.bands)
    lines = ["# Demo: a Stack-LSTM learns to reverse", "",
             "Written by `make demo` (`transduce demo`); rewritten by every demo, not committed.", "",
             "```", *demo.lines(), "```", "",
             f"The run, in `{demo.run_dir}` (its settings in `config.yaml` there): the cpu profile's reversal "
             "Stack-LSTM, "
             f"hidden {r['hidden']}, learning rate {r['lr']:g}, seed {r['seed']}, the Stack's own start (push bias "
             "+1), "
             "batches of 10 sources of length 8-64 over 128 symbols. Coarse accuracy is the share of sequences whose "
             "whole target is right; it is scored on "
             f"{r['eval_sizes']['train']} cached sequences per split and {int(demo.bands[0]['n'])} per band past "
             "the test lengths.", "",
             "## Convergence", "", "![training perplexity and coarse accuracy against batches](convergence.png)", "",
             "## The memory", "",
             f"{traced} decoded greedily, its own predictions fed back "
             f"({'every target symbol right' if trace_correct else 'not every target symbol right'}): push and pop "
             "per step, the strength of every row of the stack, and how much of each row the read takes. A Stack "
             "that learned reversal pushes on the source, pops on the target, and its reads walk back down the rows.",
             "", "![memory trace](trace.png)", "",
             "## Accuracy by length", "",
             f"Bands past the test lengths ({bands}); exact to source length {demo.exact_to or 'none'}.", "",
             "![coarse accuracy by source length](lengths.png)", "",
             "## Going further", "",
             f"`transduce inspect {demo.run_dir} --index 3` traces another test sequence; "
             "`transduce train --task reversal --model stack` trains the same model at the paper's settings "
             "(README, \"One run\"); `make reproduce` the whole Table 3.", ""]
    atomic_write_text(demo.out / "README.md", "\n".join(lines))
    return demo.out / "README.md"
