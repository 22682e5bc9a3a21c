"""What a trained model does with its memory on one sequence: ``transduce inspect RUN_DIR``.

The paper's Figure 1 draws a stack's values and strengths by hand; this draws them from a trained model. One
sequence is decoded greedily (the model reads ``<s> source <|>`` and then its own predictions), and at every step
the memory's state is recorded as the model's own reference path computes it (:mod:`pipeline.memory`):

* the token read, and from the separator on the predicted symbol, the expected one and whether it is right;
* push ``d_t`` and pop ``u_t`` per signal triple (the DeQue has two), labelled with the end each acts on (a
  Queue pushes at the top and pops at the bottom);
* the strengths ``s_t[i]`` of every row (row i: the value pushed at step i; for the DeQue, rows in deque order,
  bottom pushes below top pushes);
* the read weights ``w_t[i]`` of eq. 3 / 5 / 10 / 11: how much of row i the read at step t takes, labelled with the
  end the read starts from (the memory's :class:`~pipeline.memory.kinds.MemoryKind` says which).

A model that learned to use its memory as a stack pushes on the source and pops on the target, and its reads walk
back down the rows it pushed; one in the "recurrent layer" basin pushes little and reads its latest row.

The Joulin-Mikolov stack (``pipeline.models.jm_stack``) has no strengths: every step mixes three whole stacks. Its
trace is the probabilities of its three actions (push, pop, no-op) and the size of each row of its stack, top first
(the root mean square of the row's values, which lie in [-1, 1]): a push moves every row down by one, a pop up by one.
Rows no later read can reach are not kept (its docstring), so the stack drawn shortens towards the end. A deep LSTM
and the Transformer have no memory: their trace is the tokens, predictions and errors only.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from pipeline.evaluation import greedy_decode
from pipeline.files import save_figure
from pipeline.models.jm_stack import ACTIONS as JM_ACTIONS
from pipeline.tasks import Pair


@dataclass
class Trace:
    """One greedily decoded sequence, step by step (every list has one entry per step)."""

    run: str
    task: str
    model: str
    push_ends: list[str]  # the end each push goes to ("top", "bottom"), one per signal triple; [] for a deep LSTM
    pop_ends: list[str]  # the end each pop starts from
    read_ends: list[str]  # the end each read starts from
    tokens: list[str]  # the input read at each step
    expected: list[str | None]  # from the separator on: what the output after reading tokens[t] should be
    predicted: list[str | None]  # ... and what the model predicted there (None before the separator)
    push: list[list[float]] = field(default_factory=list)  # d_t per end
    pop: list[list[float]] = field(default_factory=list)  # u_t per end
    strengths: list[list[float]] = field(default_factory=list)  # s_t over the rows present at step t
    reads: list[dict[str, list[float]]] = field(default_factory=list)  # read weights per end, over the same rows
    source_length: int = 0
    rows_grow_at_both_ends: bool = False  # the DeQue: rows are drawn bottom pushes, then top pushes
    actions: list[list[float]] = field(default_factory=list)  # the JM stack: P(push), P(pop), P(no-op) per step
    stack_rows: list[list[float]] = field(default_factory=list)  # the JM stack: each row's RMS value, top first
    # the batch of the checkpoint traced (its global step), which tells a kept trace of a run's reported checkpoint
    # from one of an earlier checkpoint; None where the source was given, or in a trace kept before traces said it
    step: int | None = None

    @property
    def correct(self) -> list[bool | None]:
        return [None if e is None else e == p for e, p in zip(self.expected, self.predicted)]

    @property
    def fully_correct(self) -> bool:
        return all(c is not False for c in self.correct) and len(self.correct) > 0 and self.correct[-1] is True


def reference_target(task, source: tuple[int, ...]) -> tuple[int, ...] | None:
    """The task's target for ``source`` where the task can compute it from the source alone (the synthetic tasks)."""
    transform = getattr(task, "transform", None)
    if transform is None:
        return None
    import numpy as np

    return tuple(int(x) for x in transform(np.asarray(source)))


@torch.no_grad()
def trace_sequence(module, pair: Pair | None, source: tuple[int, ...] | None = None, run: str = "") -> Trace:
    """Greedy decoding of one sequence by ``module`` (a TransductionModule), recording the memory at every step.
    Give ``pair`` (source and reference target) or ``source`` alone (the reference then comes from the task, where
    it can)."""
    model, vocab = module.model, module.vocab
    if pair is None:
        target = reference_target(module.task, source)
        pair = Pair(tuple(source), target) if target is not None else None
    src = pair.source if pair is not None else tuple(source)
    reference = (list(pair.target) + [vocab.eos]) if pair is not None else None
    memory = getattr(model, "memory", None)  # a MemoryKind, or None for a deep LSTM
    trace = Trace(run=run, task=module.config.task, model=module.config.model.name, tokens=[], expected=[],
                  predicted=[], source_length=len(src), **_memory_layout(memory))

    def record(token: int, state) -> None:
        trace.tokens.append(vocab.input_words[token])
        if memory is not None:
            record_memory(trace, state, memory)
        elif getattr(state, "actions", None) is not None:  # the JM stack
            trace.actions.append([float(x) for x in state.actions[0]])
            trace.stack_rows.append([float(x) for x in state.stack[0].pow(2).mean(-1).sqrt()])

    # the whole output, not only its correct prefix: the trace shows what the model does after its first error
    budget = len(reference) if reference is not None else 2 * len(src) + 2
    outputs = greedy_decode(model, src, vocab, budget, on_read=record)
    trace.expected = [None] * (len(src) + 1) + [vocab.output_words[reference[j]] if reference is not None else None
                                               for j in range(len(outputs))]
    trace.predicted = [None] * (len(src) + 1) + [vocab.output_words[o] for o in outputs]
    return trace


def _memory_layout(memory) -> dict:
    """The Trace fields that describe a memory's layout (``memory``: a MemoryKind, or None)."""
    if memory is None:
        return dict(push_ends=[], pop_ends=[], read_ends=[])
    return dict(push_ends=list(memory.push_ends), pop_ends=list(memory.pop_ends), read_ends=list(memory.read_ends),
                rows_grow_at_both_ends=memory.rows_grow_at_both_ends)


def record_memory(trace: Trace, state, memory) -> None:
    """Append the memory's state after a step: signals, strengths and read weights (eq. 3 / 5 / 10 / 11)."""
    trace.push.append([float(x) for x in state.push[0]])
    trace.pop.append([float(x) for x in state.pop[0]])
    s = state.memory.strengths
    trace.strengths.append([float(x) for x in s[0]])
    trace.reads.append({end: [float(x) for x in w[0]] for end, w in memory.read_weights(s).items()})


def trace_json(trace: Trace) -> str:
    """The trace as JSON, one record per step (what a notebook wants)."""
    steps = []
    for t, token in enumerate(trace.tokens):
        step = {"t": t, "token": token}
        if t < len(trace.predicted) and trace.predicted[t] is not None:
            step.update(predicted=trace.predicted[t], expected=trace.expected[t],
                        correct=None if trace.expected[t] is None else trace.expected[t] == trace.predicted[t])
        if trace.push_ends:
            step.update(push=dict(zip(trace.push_ends, trace.push[t])), pop=dict(zip(trace.pop_ends, trace.pop[t])),
                        strengths=trace.strengths[t], read_weights=trace.reads[t])
        if trace.actions:
            step.update(actions=dict(zip(JM_ACTIONS, trace.actions[t])), stack_rows=trace.stack_rows[t])
        steps.append(step)
    meta = {k: v for k, v in asdict(trace).items()
            if k in ("run", "task", "model", "push_ends", "pop_ends", "read_ends", "source_length")}
    return json.dumps({**meta, "fully_correct": trace.fully_correct, "steps": steps}, indent=1) + "\n"


def aligned_rows(trace: Trace, key: str, end: str | None = None):
    """A (rows × steps) array of strengths or read weights with a fixed row per pushed value: for a Stack or Queue
    row i is the value pushed at step i; for the DeQue the bottom pushes (latest lowest) then the top pushes."""
    import numpy as np

    steps = len(trace.tokens)
    two = trace.rows_grow_at_both_ends
    grid = np.full((2 * steps if two else steps, steps), np.nan)
    for t in range(steps):
        values = trace.strengths[t] if key == "strengths" else trace.reads[t][end]
        offset = steps - (t + 1) if two else 0  # the deque's rows grow at both ends
        grid[offset : offset + len(values), t] = values
    return grid


def draw_trace(trace: Trace, out: Path, title: str = "") -> Path:
    """One figure: tokens and errors along the time axis; push/pop; strengths; read weights (per end)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import PowerNorm

    steps = len(trace.tokens)
    memory_panels = (["signals", "strengths"] + [f"reads:{end}" for end in trace.read_ends]) if trace.push_ends else (
        ["actions", "stack"] if trace.actions else [])
    rows = 2 * steps if trace.rows_grow_at_both_ends else (
        max(map(len, trace.stack_rows)) if trace.actions else steps)
    # heatmaps get about one pixel per memory row (at the dpi below), so that a single row stays visible
    heights = [1.2] + [1.4 if p in ("signals", "actions") else min(6.0, max(2.6, rows / 110)) for p in memory_panels]
    fig, axes = plt.subplots(len(heights), 1, figsize=(14, sum(heights) + 1.2), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    axes = axes[:, 0]
    x = np.arange(steps)
    separator = trace.source_length + 1
    correct = trace.correct[:steps]
    errors = [t for t, c in enumerate(correct) if c is False]

    ax = axes[0]  # tokens: the phase as a band, each prediction's correctness as a mark
    ax.axvspan(-0.5, separator - 0.5, color="#dddddd", lw=0)
    ax.axvspan(separator - 0.5, steps - 0.5, color="#e8f4e8", lw=0)
    right = [t for t, c in enumerate(correct) if c is True]
    ax.scatter(right, [0.5] * len(right), marker="|", color="#2ca02c", s=60, label="predicted right")
    ax.scatter(errors, [0.5] * len(errors), marker="x", color="#d62728", s=30, label="predicted wrong")
    ax.set_yticks([])
    ax.set_ylim(0, 1)
    ax.text(separator / 2, 0.82, "reading the source", ha="center", fontsize=8, color="#555555")
    ax.text((separator + steps) / 2, 0.82, "writing the target (its own predictions fed back)", ha="center",
            fontsize=8, color="#555555")
    ax.legend(loc="lower right", fontsize=7, ncol=2, frameon=False)
    every = max(1, math.ceil(steps / 48))
    ticks = list(range(0, steps, every))
    axes[-1].set_xticks(ticks)
    axes[-1].set_xticklabels([f"{trace.tokens[t]}" for t in ticks], rotation=90, fontsize=6)
    axes[-1].set_xlabel("step: the token read" + (" (every token labelled)" if every == 1 else
                                                  f" (one token in {every} labelled)"))

    def curves(ax, lines, ylabel: str, columns: int) -> None:
        """A panel of probabilities over the steps: ``lines`` of (values, colour, dashed, label)."""
        for values, color, dashed, label in lines:
            ax.plot(x, values, color=color, lw=1, ls="--" if dashed else "-", label=label)
        # headroom above 1 keeps the legend off the curves (a push that learned sits near 1)
        ax.set_ylim(-0.05, 1.35)
        ax.set_yticks([0, 0.5, 1])
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper left", fontsize=7, ncol=columns, frameon=False)

    def heatmap(ax, grid, cmap: str, top_down: bool, label: str) -> None:
        """A panel of one value per row and step in [0, 1]; ``top_down``: row 0 drawn at the top."""
        # square-root colour scale: a strength of 0.05 (a memory barely used) still shows as a light grey
        extent = (-0.5, steps - 0.5) + ((grid.shape[0] - 0.5, -0.5) if top_down else (-0.5, grid.shape[0] - 0.5))
        image = ax.imshow(grid, aspect="auto", origin="upper" if top_down else "lower", cmap=cmap,
                          norm=PowerNorm(0.5, vmin=0, vmax=1), interpolation="nearest", extent=extent)
        # the colour bar sits outside the panel, so every panel keeps the same time axis
        fig.colorbar(image, cax=ax.inset_axes((1.005, 0.0, 0.008, 1.0))).set_label(label + ", √ scale", fontsize=7)

    for panel, ax in zip(memory_panels, axes[1:]):
        if panel == "signals":
            colors = (("#1f77b4", "#d62728"), ("#17becf", "#ff7f0e"))  # per signal triple: push, pop
            curves(ax, [line for e, (push_end, pop_end) in enumerate(zip(trace.push_ends, trace.pop_ends))
                        for line in ((([p[e] for p in trace.push]), colors[e][0], False, f"push d ({push_end})"),
                                     ([p[e] for p in trace.pop], colors[e][1], True, f"pop u ({pop_end})"))],
                   "signal", 4)
            continue
        if panel == "actions":
            curves(ax, [([p[a] for p in trace.actions], color, name == "pop", f"P({name})")
                        for a, (name, color) in enumerate(zip(JM_ACTIONS, ("#1f77b4", "#d62728", "#7f7f7f")))],
                   "action", 3)
            continue
        if panel == "stack":
            grid = np.full((rows, steps), np.nan)
            for t, sizes in enumerate(trace.stack_rows):
                grid[: len(sizes), t] = sizes
            heatmap(ax, grid, "Greys", True, "row size (RMS of its values)")
            ax.set_ylabel("stack row (0: the top)", fontsize=7)
            continue
        kind, _, end = panel.partition(":")
        grid = aligned_rows(trace, "strengths" if kind == "strengths" else "reads", end or None)
        heatmap(ax, grid, "Greys" if kind == "strengths" else ("Blues" if end == "top" else "Oranges"), False,
                "strength s_t[i]" if kind == "strengths" else f"read weight w_t[i] ({end} read)")
        if trace.rows_grow_at_both_ends:
            ax.axhline(steps - 0.5, color="#888888", lw=0.5)
            ax.set_ylabel("row (bottom pushes | top pushes)", fontsize=7)
        else:
            ax.set_ylabel("row i (pushed at step i)", fontsize=7)
    for ax in axes:
        ax.axvline(separator - 0.5, color="#555555", lw=0.8, ls=":")
        for t in errors[:1]:  # the first error ends the coarse-correct prefix
            ax.axvline(t, color="#d62728", lw=0.8, alpha=0.6)
    axes[0].set_xlim(-0.5, steps - 0.5)
    status = "whole target right" if trace.fully_correct else (
        f"first error at target symbol {errors[0] - separator + 1}" if errors else "no reference target")
    fig.suptitle(title or f"{trace.run}: {trace.model} on {trace.task}, source length {trace.source_length}; "
                 f"{status}", fontsize=10)
    if not memory_panels:
        axes[0].set_title("no memory to draw (a deep LSTM or the Transformer): tokens, predictions and errors only",
                          fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def inspect_run(run_dir: Path, checkpoint: str = "best", split: str = "test", index: int = 0,
                source: list[str] | None = None, cache_dir: Path | None = None, accelerator: str = "cpu") -> Trace:
    """Trace one sequence of a run: ``source`` tokens if given, else pair ``index`` of the cached ``split`` set."""
    from pipeline.config import ConfigError
    from pipeline.data.cache import load_eval_set
    from pipeline.training.run import load_run_at

    module, step = load_run_at(run_dir, checkpoint, accelerator)
    if source is not None:
        words = {w: i for i, w in enumerate(module.task.source_vocab)}
        unknown = [w for w in source if w not in words]
        if unknown or not source:
            raise ConfigError(f"source token {unknown[0]!r} is not in {module.config.task}'s source vocabulary "
                              f"({', '.join(module.task.source_vocab[:5])}, ...)" if unknown else "source is empty")
        return trace_sequence(module, None, tuple(words[w] for w in source), run=Path(run_dir).name)
    pairs = load_eval_set(module.config.task, split, cache_dir, module.config.length_distribution).pairs
    if not 0 <= index < len(pairs):
        raise ConfigError(f"index must lie in [0, {len(pairs) - 1}] for the cached {split} set, got {index}")
    trace = trace_sequence(module, pairs[index], run=Path(run_dir).name)
    trace.step = step
    return trace


def save_trace(trace: Trace, path: Path) -> Path:
    """The whole trace, gzip-compressed JSON (a test-length trace is ~25 KB so), written atomically."""
    import gzip

    from pipeline.files import atomic_write_bytes

    atomic_write_bytes(path, gzip.compress(json.dumps(asdict(trace)).encode(), mtime=0))
    return Path(path)


def load_trace(path: Path) -> Trace:
    import gzip

    data = json.loads(gzip.decompress(Path(path).read_bytes()))
    if "ends" in data:  # a trace kept before it said where each signal and read acts: the model's memory says
        from pipeline.models import MODELS

        del data["ends"]
        entry = MODELS.get(data["model"])
        data.update(_memory_layout(entry.memory if entry is not None else None))
        # its reads were keyed by end names that could be wrong (a queue's read said "top"): re-key them in order
        data["reads"] = [dict(zip(data["read_ends"], step.values())) for step in data.get("reads", [])]
    return Trace(**data)


def trace_file(run_dir: Path, split: str = "test", index: int = 0) -> Path:
    """Where a run keeps the trace of one cached sequence, drawn from its selected (best) checkpoint."""
    from pipeline.rundir import RunDir

    return RunDir(run_dir).trace_file(split, index)


def run_trace(run_dir: Path, split: str = "test", index: int = 0, step: int | None = None) -> Trace | None:
    """The trace of cached sequence ``index`` of ``split`` by the run's checkpoint of batch ``step`` (the one its
    results report, ``selected_step``), kept beside the run once drawn: a finished run's files without its checkpoints
    (an archive, ``transduce archive``) still trace. None where neither a kept trace nor the run's best checkpoint is
    of that batch: a run reopened past its results (a rung it won, a raised cap) keeps a moving best checkpoint, and a
    trace kept before traces named their batch is trusted only in a run never reopened nor trained again. Without
    ``step``, the step of the run's results (None without results: no checkpoint was reported)."""
    from pipeline.rundir import RunDir
    from pipeline.training.runlife import read_checkpoint

    folder = RunDir(run_dir)
    if step is None:
        results = folder.read_results()
        if results is None:
            return None
        step = int(results["selected_step"])
    path = trace_file(run_dir, split, index)
    if path.is_file():
        kept = load_trace(path)
        if kept.step == step or (kept.step is None and not folder.was_reopened()):
            return kept
    best = folder.checkpoint("best")
    if not best.is_file() or int(read_checkpoint(best, folder.path)["global_step"]) != step:
        return None
    trace = inspect_run(run_dir, "best", split, index)
    save_trace(trace, path)
    return trace


__all__ = ["Trace", "draw_trace", "inspect_run", "load_trace", "run_trace", "save_trace", "trace_file", "trace_json",
           "trace_sequence"]
