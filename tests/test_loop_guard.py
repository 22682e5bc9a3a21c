"""Nothing a user has moves (issue 79, item 6): eight tiny CPU runs (single runs, one extended from its checkpoint,
members of a population stepped one after another and of a batched one) write the metrics.csv the loop wrote before
its refactor, byte for byte on a recorded kind of machine, and a checkpoint written by that loop still resumes to the
log it wrote resuming it (tests/loop_guard.py)."""

import pytest
from loop_guard import UNITS, assert_guarded, resume_checkpoint, train_unit


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


# a unit a test (a single run, or a population's members): the units spread over the suite's processes. The members
# stepped one after another (~11 CPU-s) are `slow`: in the default suite, test_population_runs.py's clip-mode test
# holds that such members write their single runs' logs byte for byte, and the single runs here hold those bytes
@pytest.mark.parametrize("unit", [pytest.param(u, marks=pytest.mark.slow) if u == "one-after-another" else u
                                  for u in UNITS])
def test_every_runs_metrics_are_the_bytes_the_loop_wrote_before_its_refactor(unit, tmp_path):
    for case, folder in train_unit(unit, tmp_path).items():
        assert_guarded((folder / "metrics.csv").read_text(), case)


def test_a_checkpoint_written_before_the_refactor_resumes_to_the_same_bytes(tmp_path):
    folder = resume_checkpoint(tmp_path)
    assert (folder / "results.40.json").is_file()
    assert_guarded((folder / "metrics.csv").read_text(), "resumed-checkpoint")
