"""Table 2 from our own models: trainable parameters per architecture and hidden size beside the paper's."""

from __future__ import annotations

import pandas as pd

from pipeline.config import MODEL_NAMES, ModelConfig
from pipeline.data.encoding import JointVocabulary
from pipeline.models import DISPLAY_NAMES, build_model, count_parameters
from pipeline.reports.published import table2 as published_table2
from pipeline.tasks import get_task

PARAMETER_TASK = "copy"  # 128 source and 128 target symbols, as every synthetic task


def parameter_table(task: str = PARAMETER_TASK) -> pd.DataFrame:
    """Our trainable parameters per (model, hidden) beside Table 2: columns model, hidden, params, paper, ratio."""
    vocab = JointVocabulary.for_task(get_task(task))
    paper = published_table2().set_index(["model", "hidden"])["params"]
    rows = []
    for name in MODEL_NAMES:
        for hidden in (256, 512):
            model = build_model(ModelConfig(name=name, hidden=hidden), vocab.input_size, vocab.output_size)
            ours = count_parameters(model)
            rows.append(dict(model=name, hidden=hidden, params=ours, paper=float(paper[(name, hidden)]),
                             ratio=ours / paper[(name, hidden)]))
    return pd.DataFrame(rows)


def table2_markdown(table: pd.DataFrame, provenance: str) -> str:
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
    for r in table.itertuples():
        lines.append(f"| {DISPLAY_NAMES[r.model]} | {r.hidden} | {r.params:,} | {r.paper:.2g} | {r.ratio:.3f} |")
    return "\n".join(lines) + "\n"
