"""Published numbers, kept as data (``published/*.csv``): the paper's Table 2 (trainable parameters per model and
hidden size) and Table 3 (training and test coarse/fine accuracy of the selected model per task and architecture),
transcribed from its appendix D and E; and, for the cross-check tasks beside it, the rows of Delétang et al. 2023's
Table 2 for those tasks."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PUBLISHED = Path(__file__).with_name("published")

# Delétang, Ruoss, Grau-Moya, Genewein, Wenliang, Catt, Cundy, Hutter, Legg, Veness and Ortega, "Neural Networks and
# the Chomsky Hierarchy", ICLR 2023 (arXiv:2207.02098), Table 2: per task and architecture, their score in percent,
# the length-averaged token accuracy over test lengths 41-500 of the best of the runs they trained (their caption:
# maximised over random seeds and learning rates), not a run selected on training numbers as ours are.
DELETANG_2023 = ("Delétang et al. 2023, \"Neural Networks and the Chomsky Hierarchy\" (ICLR), Table 2")
DELETANG_ARCHITECTURES = ("RNN", "Stack-RNN", "Tape-RNN", "Transformer", "LSTM")  # their Table 2's columns, in order


def table2() -> pd.DataFrame:
    """Columns: model, hidden, params."""
    return pd.read_csv(PUBLISHED / "table2.csv")


def table3() -> pd.DataFrame:
    """Columns: task, model, train_coarse, train_fine, test_coarse, test_fine."""
    return pd.read_csv(PUBLISHED / "table3.csv")


def deletang_table2() -> pd.DataFrame:
    """Columns: task (ours: reverse_string, duplicate_string), architecture (theirs), score (percent; NaN where not
    transcribed), source (where the score was checked). A score is entered only once checked against a copy of their
    Table 2 or an account that quotes it: none could be opened from the machine this was written on (no internet; the
    stored copies of the paper hold its opening pages only), and a value from memory is not a published number."""
    return pd.read_csv(PUBLISHED / "deletang2023_table2.csv")
