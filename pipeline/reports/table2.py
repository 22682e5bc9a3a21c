"""Table 2 from our own models: trainable parameters per architecture and hidden size beside the paper's; the
modern baselines, which the paper has no row for, beside the Stack-LSTM's in a section of their own."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from pipeline.config import ModelConfig
from pipeline.data.encoding import JointVocabulary
from pipeline.models import DISPLAY_NAMES, MODELS, PAPER_MODEL_NAMES, build_model, count_parameters
from pipeline.reports.published import table2 as published_table2
from pipeline.tasks import get_task

PARAMETER_TASK = "copy"  # 128 source and 128 target symbols, as every synthetic task
BESIDE = "stack"  # the architecture a baseline without a paper row is counted beside


def parameter_table(task: str = PARAMETER_TASK, models: Sequence[str] = PAPER_MODEL_NAMES) -> pd.DataFrame:
    """Our trainable parameters per (model, hidden) beside Table 2: columns model, hidden, params, paper, ratio
    (paper and ratio NaN for a model the paper has no row for)."""
    vocab = JointVocabulary.for_task(get_task(task))
    paper = published_table2().set_index(["model", "hidden"])["params"]
    rows = []
    for name in models:
        for hidden in (256, 512):
            ours = _parameters(name, hidden, vocab.input_size, vocab.output_size)
            published = float(paper.get((name, hidden), math.nan))
            rows.append(dict(model=name, hidden=hidden, params=ours, paper=published, ratio=ours / published))
    return pd.DataFrame(rows)


# (name, registry entry, hidden, vocabulary sizes) -> (the entry, its trainable parameters): a model is built once
# per process to count them (half a second for the lot at hidden 256 and 512), not once per report. Keyed by the entry
# itself (its id, the entry kept alive beside its count so that the id is never reused), so that a model registered
# again under the same name is counted again.
_COUNTED: dict[tuple, tuple[object, int]] = {}


def _parameters(name: str, hidden: int, input_size: int, output_size: int) -> int:
    entry = MODELS.get(name)
    key = (name, id(entry), hidden, input_size, output_size)
    if key not in _COUNTED:
        model = build_model(ModelConfig(name=name, hidden=hidden), input_size, output_size)
        _COUNTED[key] = entry, count_parameters(model)
    return _COUNTED[key][1]


def table2_markdown(table: pd.DataFrame, provenance: str) -> str:
    """The paper's rows as Table 2; rows the paper has none for (the modern baselines) after them, beside the
    Stack-LSTM's count at the same hidden size."""
    lines = [
        "# Table 2: trainable parameters",
        "",
        provenance,
        "",
        "Counted on the synthetic tasks' vocabularies (128 source and 128 target symbols: 259 input ids, 129",
        "output ids), embeddings and output layer included. Memory width 256, embeddings 64.",
        "",
        "| model | hidden | ours | paper | ours / paper |",
        "|---|---|---|---|---|",
    ]
    published = table[table.paper.notna()]
    for r in published.itertuples():
        lines.append(f"| {DISPLAY_NAMES[r.model]} | {r.hidden} | {r.params:,} | {r.paper:.2g} | {r.ratio:.3f} |")
    beside = table[table.paper.isna()]
    if not beside.empty:
        reference = table[table.model == BESIDE].set_index("hidden")["params"]
        lines += ["", "## Beside the paper: modern baselines", "",
                  "Not in the paper's Table 2 (nor its Table 3): counted alike, at their default settings",
                  f"(docs/models.md), beside the {DISPLAY_NAMES[BESIDE]}'s count at the same hidden size.", "",
                  f"| model | hidden | ours | {DISPLAY_NAMES[BESIDE]} | ours / {DISPLAY_NAMES[BESIDE]} |",
                  "|---|---|---|---|---|"]
        for r in beside.itertuples():
            stack = reference.get(r.hidden)
            shown = ("—", "—") if stack is None else (f"{stack:,}", f"{r.params / stack:.3f}")
            lines.append(f"| {DISPLAY_NAMES[r.model]} | {r.hidden} | {r.params:,} | {shown[0]} | {shown[1]} |")
    return "\n".join(lines) + "\n"
