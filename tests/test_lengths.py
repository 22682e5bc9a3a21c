import numpy as np
import pytest

from pipeline.reports.lengths import sample_lengths, window_rates


def test_window_rates_partition_all_derivations():
    lengths = np.array([3, 8, 64, 65, 128, 129, 256, 257])
    assert window_rates(lengths) == {"below": 1 / 8, "train": 2 / 8, "test": 2 / 8, "long": 2 / 8, "beyond": 1 / 8}
    rates = window_rates(sample_lengths("gender", 500, seed=0))
    assert sum(rates.values()) == pytest.approx(1.0)


def test_only_grammar_tasks_have_a_length_distribution():
    with pytest.raises(ValueError, match=r"task 'copy' has no grammar; choose from: svo_sov, gender"):
        sample_lengths("copy", 10, seed=0)
