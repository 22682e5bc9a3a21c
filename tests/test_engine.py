"""The one training loop (pipeline/training/engine.py) moves no single run's numbers: each case of
tests/engine_cases.py, trained now, writes the metrics.csv the code wrote before its two engines became one, byte for
byte, and so does one trained halfway, then extended to its budget."""

import pytest
from engine_cases import GOLDEN_CASES, GOLDEN_DIR, golden_config

from pipeline.training.run import train


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.mark.parametrize("case", list(GOLDEN_CASES))
def test_a_single_runs_metrics_are_the_ones_written_before_the_engines_became_one(tmp_path, case):
    train(golden_config(case), tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "metrics.csv").read_text() == (GOLDEN_DIR / f"{case}.csv").read_text()


@pytest.mark.parametrize("case", ["stack-reversal-norm", "lstm2-gender-norm"])
def test_a_run_extended_from_its_checkpoint_writes_the_same_bytes_as_one_trained_straight(tmp_path, case):
    train(golden_config(case, max_batches=40), tmp_path / "run", progress=False)
    train(golden_config(case), tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "metrics.csv").read_text() == (GOLDEN_DIR / f"{case}.csv").read_text()


def test_a_run_checkpointed_by_the_engine_before_it_goes_on_to_the_same_bytes(tmp_path):
    """tests/data/single_run_before_one_engine.tar.gz: the first case trained to 40 of its 60 batches by the code
    before the change (commit c1144b9; its last.ckpt holds Lightning's loop state, which the one loop does not
    read). Extended now, it writes the 60-batch log that code wrote."""
    import tarfile

    with tarfile.open(GOLDEN_DIR.parent / "single_run_before_one_engine.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    results = train(golden_config("stack-reversal-norm"), tmp_path / "run", progress=False)
    assert results["batches"] == 60 and (tmp_path / "run" / "results.40.json").is_file()
    assert (tmp_path / "run" / "metrics.csv").read_text() == (GOLDEN_DIR / "stack-reversal-norm.csv").read_text()
