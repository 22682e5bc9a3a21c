"""The paper's published numbers, kept as data (``published/*.csv``, transcribed from appendix D and E):
Table 2 (trainable parameters per model and hidden size) and Table 3 (training and test coarse/fine accuracy of
the selected model per task and architecture)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PUBLISHED = Path(__file__).with_name("published")


def table2() -> pd.DataFrame:
    """Columns: model, hidden, params."""
    return pd.read_csv(PUBLISHED / "table2.csv")


def table3() -> pd.DataFrame:
    """Columns: task, model, train_coarse, train_fine, test_coarse, test_fine."""
    return pd.read_csv(PUBLISHED / "table3.csv")
