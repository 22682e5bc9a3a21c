"""Nothing a user has moves (issue 79, item 6): eight tiny CPU runs (single runs, one extended from its checkpoint,
members of a population stepped one after another and of a batched one) write the metrics.csv the loop wrote before
its refactor, byte for byte on a recorded kind of machine, and a checkpoint written by that loop still resumes to the
log it wrote resuming it (tests/loop_guard.py)."""

import pytest
from loop_guard import CASES, assert_guarded, resume_checkpoint, train_cases


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
        return train_cases(tmp_path_factory.mktemp("guard"))


@pytest.mark.parametrize("case", CASES)
def test_every_runs_metrics_are_the_bytes_the_loop_wrote_before_its_refactor(trained, case):
    assert_guarded((trained[case] / "metrics.csv").read_text(), case)


def test_a_checkpoint_written_before_the_refactor_resumes_to_the_same_bytes(tmp_path):
    folder = resume_checkpoint(tmp_path)
    assert (folder / "results.40.json").is_file()
    assert_guarded((folder / "metrics.csv").read_text(), "resumed-checkpoint")
