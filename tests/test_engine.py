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


def test_results_carry_their_schema_and_an_older_layout_is_read_through_one_upgrade(tmp_path):
    """A run's results.json names its schema; one from before (no "schema", the oldest without stop_reason and
    plateau_rule) is read as the current layout by RunDir.read_results, converged where it said stopped_early."""
    import json

    from pipeline.rundir import RESULTS_SCHEMA, RunDir, stop_reason, upgraded_results

    results = train(golden_config("stack-reversal-norm", max_batches=20), tmp_path / "run", progress=False)
    assert results["schema"] == RESULTS_SCHEMA == 2 and upgraded_results(results) is results
    old = {k: v for k, v in results.items() if k not in ("schema", "stop_reason", "plateau_rule", "commit")}
    (tmp_path / "run" / "results.json").write_text(json.dumps({**old, "stopped_early": True}))
    read = RunDir(tmp_path / "run").read_results()
    assert (read["schema"], read["stop_reason"], read["plateau_rule"], read["commit"]) == (2, "converged", 1, "")
    assert stop_reason({**old, "stopped_early": False}) == "budget"
