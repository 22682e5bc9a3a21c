"""The one training loop (pipeline/training/engine.py) moves no single run's numbers: each case of
tests/engine_cases.py, trained now, writes the metrics.csv the code wrote before its two engines became one, byte for
byte on a kind of machine it was recorded on (within float32 noise on another), and so does one trained halfway, then
extended to its budget."""

import pytest
from engine_cases import GOLDEN_CASES, GOLDEN_ROOT, assert_golden, golden_config

from pipeline.training.run import train


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


# Slow (issue 80): the default suite's tests/test_loop_guard.py guards the same loop byte for byte against a later
# recording (three single runs: value and norm clipping, a memory and a deep LSTM, a synthetic and an ITG task, one
# extended from its checkpoint; and population members, which write their single runs' logs). These older recordings
# are checked by `make test-slow`.
@pytest.mark.slow
@pytest.mark.parametrize("case", list(GOLDEN_CASES))
def test_a_single_runs_metrics_are_the_ones_written_before_the_engines_became_one(tmp_path, case):
    train(golden_config(case), tmp_path / "run", progress=False)
    assert_golden((tmp_path / "run" / "metrics.csv").read_text(), case)


@pytest.mark.slow  # as above: tests/test_loop_guard.py's extended single run holds it in the default suite
@pytest.mark.parametrize("case", ["stack-reversal-norm", "lstm2-gender-norm"])
def test_a_run_extended_from_its_checkpoint_writes_the_same_bytes_as_one_trained_straight(tmp_path, case):
    train(golden_config(case, max_batches=40), tmp_path / "run", progress=False)
    train(golden_config(case), tmp_path / "run", progress=False)
    assert_golden((tmp_path / "run" / "metrics.csv").read_text(), case)


def test_a_run_checkpointed_by_the_engine_before_it_goes_on_to_the_same_bytes(tmp_path):
    """tests/data/single_run_before_one_engine.tar.gz: the first case trained to 40 of its 60 batches by the code
    before the change (commit c1144b9; its last.ckpt holds Lightning's loop state, which the one loop does not
    read). Extended now, it writes the 60-batch log that code wrote extending it on this kind of machine."""
    import tarfile

    with tarfile.open(GOLDEN_ROOT.parent / "single_run_before_one_engine.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    results = train(golden_config("stack-reversal-norm"), tmp_path / "run", progress=False)
    assert results["batches"] == 60 and (tmp_path / "run" / "results.40.json").is_file()
    assert_golden((tmp_path / "run" / "metrics.csv").read_text(), "stack-reversal-norm-extended-from-archive")


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


def test_a_machine_without_a_golden_set_compares_within_float32_noise_and_still_catches_a_moved_number(monkeypatch):
    """The two recorded kinds differ in the last bits only: one kind's log passes the other's noise check, and the same
    log with one number moved by 1e-4 (relative) fails it; on a recorded kind, one bit fails."""
    import engine_cases

    intel = (GOLDEN_ROOT / "intel-xeon-avx512" / "queue-copy-value.csv").read_text()
    assert intel != (GOLDEN_ROOT / engine_cases.FIRST_KIND / "queue-copy-value.csv").read_text()
    monkeypatch.setattr(engine_cases, "machine_kind", lambda: "Some CPU / AVX2")
    assert_golden(intel, "queue-copy-value")
    header, first, *rest = intel.splitlines(keepends=True)
    cells = first.rstrip("\n").split(",")
    index = next(i for i, cell in enumerate(cells) if "." in cell and float(cell) > 1)
    moved = ",".join(cells[:index] + [repr(float(cells[index]) * (1 + 1e-4))] + cells[index + 1:]) + "\n"
    with pytest.raises(AssertionError, match="has no golden set of its own"):
        assert_golden(header + moved + "".join(rest), "queue-copy-value")
    monkeypatch.setattr(engine_cases, "machine_kind", lambda: "Intel(R) Xeon(R) Processor / AVX512")
    with pytest.raises(AssertionError, match="not the bytes recorded for intel-xeon-avx512"):
        assert_golden(header + moved + "".join(rest), "queue-copy-value")
