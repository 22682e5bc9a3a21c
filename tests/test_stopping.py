"""The stopping rules (pruning, plateau, budget-limited) as pure functions and on the real loop: a pruned run is
recorded as pruned, not failed, ends its sweep successfully and can be continued."""

import math
import random

import pytest
import yaml

from pipeline.config import ConfigError, RunConfig, from_dict, to_dict
from pipeline.sweep import load_sweep, run_local, sweep_status
from pipeline.training.run import train
from pipeline.training.stopping import (
    counts_toward_plateau,
    describe,
    improves,
    left_start,
    plateau_stall,
    should_prune,
    still_improving,
)

NAN = math.nan


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.mark.parametrize("step, first, now, pruned", [
    (2000, 128.0, 120.0, True),    # still on the uniform plateau
    (2000, 128.0, 64.0, False),    # exactly half: not above the ratio
    (2000, 128.0, 47.0, False),    # left the plateau (the DeQue seed of the training notes)
    (1900, 128.0, 120.0, False),   # not a pruning checkpoint
    (2000, NAN, 120.0, False),     # no first window yet
    (2000, 128.0, NAN, False),     # a NaN loss fails a run; pruning never decides on it
])
def test_should_prune(step, first, now, pruned):
    assert should_prune(step, (2000, 4000), 0.5, first, now) is pruned


def test_plateau_stall_counts_evaluations_without_a_real_improvement():
    best, stall = NAN, 0
    history = []
    for ppl in [100.0, 50.0, 49.9, 49.8, 40.0, 40.0, NAN]:
        best, stall = plateau_stall(best, stall, ppl, tolerance=0.01)
        history.append((best, stall))
    assert history == [(100.0, 0), (50.0, 0), (49.9, 1), (49.8, 2), (40.0, 0), (40.0, 1), (40.0, 2)]


def test_near_perplexity_one_the_cross_entropy_decides():
    # 1.005 -> 1.002: perplexity 0.3% lower, but the cross-entropy (the errors left) fell by 60%: still learning
    assert improves(1.002, 1.005, 0.02)
    best, stall = plateau_stall(1.005, 3, 1.002, tolerance=0.02)
    assert (best, stall) == (1.002, 0)
    assert not improves(1.0049, 1.005, 0.02)  # 2% of the cross-entropy is the bar there: not met
    assert not improves(1.0, 1.0, 0.02)       # nothing left to learn
    # a run whose errors keep halving is still improving at its cap, however close to 1 its perplexity is
    assert still_improving([1 + 0.01 * 0.9 ** i for i in range(40)])
    assert not still_improving([1.0] * 20)
    # ... but a flat run whose windows scatter by tens of percent in cross-entropy (a few errors each) is not
    rng = random.Random(1)
    before = [0.003 * rng.uniform(0.4, 1.6) for _ in range(10)]
    lucky = [x * 0.95 for x in before]  # 5% lower: past the 1% tolerance, well within the windows' scatter
    assert not still_improving([math.exp(x) for x in before + lucky])
    halved = [math.exp(0.003 * rng.uniform(0.8, 1.2)) for _ in range(10)] + [
        math.exp(0.0015 * rng.uniform(0.8, 1.2)) for _ in range(10)]
    assert still_improving(halved)


@pytest.mark.parametrize("tolerance", [0.01, 0.02, 0.05])
def test_above_perplexity_e_the_rule_is_the_perplexity_rule(tolerance):
    # the cross-entropy only ever adds improvements below ~e, so every decision on the uniform plateau or anywhere
    # above perplexity ~2.75 is what the perplexity-only rule gave (runs stopped there keep their verdicts)
    rng = random.Random(0)
    threshold = math.exp(-math.log(1 - tolerance) / tolerance)
    for _ in range(2000):
        on = rng.uniform(threshold, 200.0)
        ppl = on * rng.uniform(0.9, 1.1)
        assert improves(ppl, on, tolerance) == (ppl < on * (1 - tolerance))


def test_the_plateau_rule_waits_for_the_last_pruning_checkpoint():
    # a memory model on its initial plateau is the pruning rule's to judge; without pruning, every evaluation counts
    assert [counts_toward_plateau(step, (2000, 4000)) for step in (500, 2000, 3500, 4000, 4500)] == [
        False, False, False, True, True]
    assert counts_toward_plateau(500, ())


def test_with_after_leaving_start_the_plateau_rule_waits_for_the_run_to_leave_its_start():
    assert left_start(128.0, 64.0) and not left_start(128.0, 110.9)  # the bigram 1-layer LSTM's plateau stop
    assert not left_start(NAN, 10.0) and not left_start(128.0, NAN)
    assert not counts_toward_plateau(4000, (), after_leaving_start=True, has_left_start=False)
    assert counts_toward_plateau(4000, (), after_leaving_start=True, has_left_start=True)
    assert not counts_toward_plateau(1000, (2000,), after_leaving_start=True, has_left_start=True)


def test_still_improving_looks_at_the_last_windows():
    assert still_improving([30, 25, 20, 18, 16, 14, 12.0])
    assert not still_improving([30, 10] + [5.0] * 20 + [4.99])  # fell long ago, flat over its last 2,000 batches
    assert not still_improving([NAN])
    assert still_improving([10.0, NAN, 8.0])
    # one lucky last window does not make a flat run "still improving": means over spans, not single windows
    flat_noisy = [20.0, 21.0] * 10 + [19.0]
    assert not still_improving(flat_noisy)
    assert still_improving([20.0 * 0.99 ** i for i in range(40)])  # 1% per window: ~10% per 1,000 batches


def test_prune_checkpoints_are_validated():
    with pytest.raises(ConfigError, match=r"training.prune_at\[0\] must be a multiple of perplexity_every \(100\)"):
        from_dict(RunConfig, {"training": {"prune_at": [150]}})
    with pytest.raises(ConfigError, match=r"training.prune_at\[0\] .* between 0 and max_batches \(1000\)"):
        from_dict(RunConfig, {"training": {"prune_at": [2000], "max_batches": 1000}})
    with pytest.raises(ConfigError, match=r"training.prune_ratio must lie in \(0, 1\), got 1.5"):
        from_dict(RunConfig, {"training": {"prune_ratio": 1.5}})
    text = describe(from_dict(RunConfig, {"training": {"prune_at": [2000], "plateau_patience": 3}}).training)
    assert "pruned at batch 2,000 if training perplexity > 0.5 × its first window's" in text
    assert ("plateau once training perplexity has not improved by 1% (nor its log, the cross-entropy) for 3 "
            "evaluations (counted from batch 2,000)" in text)


def tiny_profile(tmp_path, **training):
    settings = dict(max_batches=40, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    settings.update(training)
    data = {"name": "pruning", "workers": 1,
            "defaults": {"model": {"memory_width": 4, "embedding": 4}, "training": settings,
                         "tracking": {"wandb": "off"}},
            "grid": [{"tasks": ["reversal"], "models": ["stack"], "hidden": [8]}]}
    path = tmp_path / "pruning.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_sweep(path)


def test_a_run_on_its_plateau_is_pruned_and_can_be_continued(tmp_path):
    # 20 batches of a tiny Stack-LSTM stay near the uniform perplexity: a ratio of 0.1 prunes it at batch 20
    sweep = tiny_profile(tmp_path, prune_at=[20], prune_ratio=0.1)
    (status,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    assert status.state == "pruned" and status.batches_done == 20
    results = (status.run_dir / "results.json").read_text()
    assert '"stop_reason": "pruned"' in results
    # a rerun leaves it alone (pruned is done, not failed)...
    (again,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    assert again.state == "pruned" and (again.run_dir / "results.json").read_text() == results
    # ...and --retry-pruned continues it from its checkpoint; it is pruned at no earlier checkpoint again
    (more,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None, retry_pruned=True)
    assert more.state == "finished" and more.batches_done == 40
    assert (more.run_dir / "results.20.json").is_file()


def test_a_run_that_stops_improving_ends_as_plateau(tmp_path):
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": "lstm1", "hidden": 8, "embedding": 4},
                                   "training": dict(max_batches=200, perplexity_every=10, eval_every=10, eval_size=10,
                                                    test_eval_size=10, final_eval_size=10, lr=1e-9,
                                                    early_stop_patience=0, plateau_patience=2,
                                                    plateau_tolerance=0.5),
                                   "tracking": {"wandb": "off"}})
    results = train(config, tmp_path / "run", progress=False)
    assert results["stop_reason"] == "plateau" and results["batches"] == 30  # best at 10, no 50% gain at 20, 30
    # the same run with the rule counted only after leaving its start never leaves it (lr 1e-9): it trains its budget
    patient = from_dict(RunConfig, {**to_dict(config), "training": {**to_dict(config.training),
                                                                     "plateau_after_leaving_start": True}})
    results = train(patient, tmp_path / "patient", progress=False)
    assert results["stop_reason"] == "budget" and results["batches"] == 200
    assert [s.state for s in sweep_status(tiny_profile(tmp_path), tmp_path / "none")] == ["pending"]
