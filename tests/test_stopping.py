"""The stopping rules (pruning, plateau, budget-limited) as pure functions and on the real loop: a pruned run is
recorded as pruned, not failed, ends its sweep successfully and can be continued."""

import json
import math
import random
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError, RunConfig, from_dict, resolve_run_config, to_dict
from pipeline.sweep import load_sweep, run_local, sweep_status
from pipeline.sweep.rejudge import legacy_plateau_stop, pruned_by_first_rule, rejudged_prune, rejudged_stop
from pipeline.training.run import train
from pipeline.training.stopping import (
    better_checkpoint,
    coarse_streak,
    converged,
    counted_from,
    describe,
    improves,
    left_start,
    plateau_stop,
    plateau_window,
    plateaued,
    should_prune,
    still_falling,
    still_improving,
    trend,
    trend_at,
)

NAN = math.nan


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def prune_rule(**training):
    """The cpu profile's pruning settings: at 2,000 and 4,000 batches, 0.9 x the first window's, tolerance 2%."""
    settings = dict(prune_at=[2000, 4000], prune_ratio=0.9, plateau_tolerance=0.02)
    settings.update(training)
    return from_dict(RunConfig, {"training": settings}).training


def windows(values, start=100, every=100):
    """A perplexity log: one (batch, perplexity) per 100-batch window, the first at ``start``."""
    return [(start + i * every, v) for i, v in enumerate(values)]


def noisy(level, spread, n, seed=0):
    rng = random.Random(seed)
    return [level + rng.gauss(0, spread) for _ in range(n)]


# The cpu profile's bigram-flipping Stack, lr 5e-4 (reports/cpu/finished_runs/bigram_flip-stack-h256-lr0.0005-s0-*):
# falling about a point a window, pruned by version 1 at 116.3 against its threshold 115.46.
BIGRAM_STACK = [128.289, 127.639, 126.917, 126.774, 126.230, 125.820, 125.383, 125.357, 124.761, 124.604,
                125.423, 124.042, 123.522, 123.180, 122.269, 121.674, 120.286, 119.534, 117.963, 116.335]


@pytest.mark.parametrize("log, pruned", [
    # must prune: flat on the plateau, far above the threshold (115.5), any noise
    (windows([128.0] + noisy(125.0, 0.5, 19)), True),
    # must prune: far above the threshold by more than its spread, though falling a little (128 -> 124)
    (windows([128.0 - 0.2 * i for i in range(20)]), True),
    # must prune: flat just above the threshold, its last window pushed below it by noise (version 1 kept it)
    (windows([128.0] + [116.2, 115.9, 116.4, 116.1, 116.3, 115.8, 116.2, 116.0, 116.3]
             + [116.0, 116.2, 116.1, 115.9, 116.3, 116.0, 116.2, 115.9, 116.1, 115.0]), True),
    # must not prune: the bigram-flipping Stack, above its threshold by less than its spread and falling
    (windows(BIGRAM_STACK), False),
    # must not prune: left the plateau
    (windows([128.0 - 4 * i for i in range(20)]), False),
    # must not prune: just above the threshold by less than its spread, still falling (noise cannot flip it)
    (windows([128.0 - 0.65 * i + (0.8 if i % 2 else -0.8) for i in range(20)]), False),
])
def test_pruning_prunes_only_beyond_the_spread_or_when_not_falling(log, pruned):
    assert should_prune(2000, prune_rule(), log) is pruned


def test_version_1_of_the_pruning_rule_failed_these_curves():
    # what the two curves that decide issue 78's item 3 did under the rule before: the bigram Stack was pruned, the
    # flat run with a lucky last window was not
    first, threshold = 128.0, 0.9 * 128.0
    lucky = [116.0, 116.2, 116.1, 115.9, 116.3, 116.0, 116.2, 115.9, 116.1, 115.0]
    assert pruned_by_first_rule(2000, (2000, 4000), 0.9, BIGRAM_STACK[0], BIGRAM_STACK[-1])
    assert not pruned_by_first_rule(2000, (2000, 4000), 0.9, first, lucky[-1]) and lucky[-1] < threshold
    assert not should_prune(2000, prune_rule(), windows(BIGRAM_STACK))
    assert should_prune(2000, prune_rule(), windows([first] + [116.2] * 9 + lucky))


@pytest.mark.parametrize("step, log", [
    (1900, windows([128.0] + [125.0] * 18)),            # not a pruning checkpoint
    (2000, windows([math.nan] + [125.0] * 19)),         # no first window
    (2000, windows([128.0] + [125.0] * 18 + [math.nan])),  # a NaN loss fails a run; pruning never decides on it
    (2000, windows([128.0] + [125.0] * 17)),            # the log does not reach the checkpoint
])
def test_pruning_never_decides_without_its_windows(step, log):
    assert not should_prune(step, prune_rule(), log)


def rule(**training):
    """The cpu profile's plateau settings (evaluation every 500 batches, 4 of them, 2%) unless told otherwise."""
    settings = dict(eval_every=500, plateau_patience=4, plateau_tolerance=0.02, max_batches=1_000_000)
    settings.update(training)
    return from_dict(RunConfig, {"training": settings}).training


def log(values_per_evaluation, every=500, windows_per_evaluation=5):
    """A perplexity log with ``windows_per_evaluation`` 100-batch windows between evaluations, each evaluation's
    value reached geometrically from the one before."""
    out, step, previous = [], 0, values_per_evaluation[0]
    for value in values_per_evaluation:
        for k in range(1, windows_per_evaluation + 1):
            step += every // windows_per_evaluation
            out.append((step, previous * (value / previous) ** (k / windows_per_evaluation)))
        previous = value
    return out


def test_a_steady_fall_under_the_tolerance_per_evaluation_is_never_a_plateau():
    # 1.9% lower at every evaluation, for ever (here 400 evaluations, 200,000 batches): the run is still learning
    falling = log([128.0 * 0.981 ** i for i in range(400)])
    assert plateau_stop(falling, rule(), None) is None
    # the rule before version 2 moved its reference to every new low and stopped it 4 evaluations after the first
    assert legacy_plateau_stop(falling, rule(), None) == 2500
    # ... and so with the 1-layer LSTM block's settings (evaluation every 1,000, 10 of them)
    slow = log([128.0 * 0.99 ** i for i in range(200)], every=1000, windows_per_evaluation=10)
    lstm = rule(eval_every=1000, plateau_patience=10, plateau_tolerance=0.02)
    assert plateau_stop(slow, lstm, None) is None and legacy_plateau_stop(slow, lstm, None) == 11_000


def test_a_flat_noisy_run_is_a_plateau():
    rng = random.Random(0)
    flat = [(100 * (i + 1), 20.0 * rng.uniform(0.97, 1.03)) for i in range(200)]
    stop = plateau_stop(flat, rule(), None)
    assert stop is not None and stop <= 6000
    # a run that fell and then went flat stops on the flat part, judged on it alone
    fell = [(100 * (i + 1), 128.0 * 0.9 ** i) for i in range(40)] + [
        (100 * (i + 41), 2.0 * rng.uniform(0.98, 1.02)) for i in range(200)]
    stop = plateau_stop(fell, rule(), None)
    assert stop is not None and 4000 + 2 * 2000 <= stop <= 12_000


def test_near_perplexity_one_noise_does_not_move_the_reference_and_halving_errors_are_not_flat():
    rng = random.Random(2)
    # flat at ~1.00002: each window's cross-entropy a few errors, scattered by tens of percent
    noisy = [(100 * (i + 1), math.exp(2e-5 * rng.uniform(0.3, 1.7))) for i in range(120)]
    stop = plateau_stop(noisy, rule(), None)
    assert stop is not None and stop <= 5000
    # errors halving every 2,000 batches from perplexity ~1.05: still learning, never a plateau...
    halving = [(100 * (i + 1), math.exp(0.05 * 0.5 ** ((i + 1) / 20) * rng.uniform(0.9, 1.1))) for i in range(100)]
    assert plateau_stop(halving, rule(), None) is None
    # ... but under 0.001 nats a symbol what falls is confidence on symbols already right: flat (the Queue on gender)
    confident = [(100 * (i + 1), math.exp(3e-8 * 0.99 ** i)) for i in range(100)]
    assert not still_improving([p for _, p in confident]) and plateau_stop(confident, rule(), None) == 4000


def test_the_window_grows_with_the_run():
    training = rule()
    assert plateau_window(training, 2000) == 2000 and plateau_window(training, 20_000) == 2000
    assert plateau_window(training, 30_000) == 3000 and plateau_window(training, 100_000) == 10_000
    assert plateau_window(training, 24_500) == 2500  # rounded up to whole 100-batch windows
    assert plateau_window(rule(plateau_window_fraction=0.0), 100_000) == 2000
    # a run falling 3% per 2,000 batches at 100,000 is still falling over its last 10,000 (14%): not a plateau, where a
    # fixed 2,000-batch window would have judged it on a 3% fall... and one flat over 10,000 batches is
    steady = [(100 * (i + 1), 50.0 * 0.97 ** ((i + 1) / 20)) for i in range(1000)]
    assert not plateaued(steady, 100_000, training, None)
    flat_end = steady[:800] + [(100 * (i + 1), steady[799][1]) for i in range(800, 1000)]
    assert plateaued(flat_end, 100_000, training, None)


def test_the_reference_moves_only_when_beaten_by_the_tolerance():
    # flat at 10 apart from one evaluation 1% lower: that evaluation does not become the reference (the old rule's
    # running minimum), so the reference stands from the first evaluation; the window's mean is flat
    values = [(100 * (i + 1), 9.9 if (i + 1) == 3000 // 100 else 10.0) for i in range(60)]
    assert plateaued(values, 4000, rule(), None)
    # a fall of 2.5% at batch 3,000 beats it: the reference moves there and must stand for a window again
    values = [(b, 10.0 if b < 3000 else 9.75) for b, _ in values]
    assert not plateaued(values, 4500, rule(), None) and plateaued(values, 6000, rule(), None)


def test_the_plateau_rule_counts_from_the_last_pruning_checkpoint_or_leaving_the_start():
    assert counted_from(rule(prune_at=(2000, 4000)), None) == 4000
    assert counted_from(rule(), None) == 0
    patient = rule(plateau_after_leaving_start=True)
    assert counted_from(patient, None) is None and counted_from(patient, 3000) == 3000
    assert counted_from(rule(prune_at=(2000,), plateau_after_leaving_start=True), 1000) == 2000
    flat = [(100 * (i + 1), 100.0) for i in range(200)]
    # two windows of counted batches first: from 4,000 on, the first stop is at 8,000
    assert plateau_stop(flat, rule(prune_at=(2000, 4000)), None) == 8000
    assert plateau_stop(flat, patient, None) is None  # never left its start: never judged
    assert plateau_stop(flat, rule(plateau_patience=0), None) is None  # off


def test_above_perplexity_e_the_new_rule_never_stops_before_the_old_one():
    # there version 2 asks all version 1 asked and more, so no run it stops was left running by version 1 (near 1,
    # where version 1's reference moved with the cross-entropy's noise, version 2 may stop a flat run sooner)
    rng = random.Random(3)
    for _ in range(200):
        level, values = rng.uniform(3, 128), []
        for i in range(rng.randint(20, 300)):
            level = max(3.0, level * rng.choice([1.0, 1.0, 0.99, 0.97, 0.9, 1.02]))
            values.append((100 * (i + 1), level))
        training = rule(plateau_patience=rng.choice([2, 4]), prune_at=rng.choice([(), (2000,)]))
        new, old = plateau_stop(values, training, None), legacy_plateau_stop(values, training, None)
        assert new is None or (old is not None and new >= old)


def test_near_perplexity_one_the_cross_entropy_decides():
    # 1.005 -> 1.002: perplexity 0.3% lower, but the cross-entropy (the errors left) fell by 60%: still learning
    assert improves(1.002, 1.005, 0.02)
    assert not improves(1.0049, 1.005, 0.02)  # 2% of the cross-entropy is the bar there: not met
    assert not improves(1.0, 1.0, 0.02)       # nothing left to learn
    # a run whose errors keep halving is still improving at its cap, however close to 1 its perplexity is (down to
    # CROSS_ENTROPY_FLOOR, 0.001 nats a symbol)
    assert still_improving([1 + 0.1 * 0.9 ** i for i in range(40)])
    assert not still_improving([1.0] * 20)
    # ... but a flat run whose windows scatter by tens of percent in cross-entropy (a few errors each) is not
    rng = random.Random(1)
    before = [0.003 * rng.uniform(0.4, 1.6) for _ in range(10)]
    lucky = [x * 0.95 for x in before]  # 5% lower: past the 1% tolerance, well within the windows' scatter
    assert not still_improving([math.exp(x) for x in before + lucky])
    halved = [math.exp(0.003 * rng.uniform(0.8, 1.2)) for _ in range(10)] + [
        math.exp(0.0015 * rng.uniform(0.8, 1.2)) for _ in range(10)]
    assert still_improving(halved)


def test_the_trend_names_the_test_that_decided_and_its_numbers():
    """The report quotes the figure that decided "still falling": near perplexity 1 the cross-entropy's fall, not the
    perplexity's fraction of a percent (the copy Stack at 1.015: perplexity 0.5% lower, its errors 10% fewer)."""
    rng = random.Random(3)
    # errors halving: 0.003 -> 0.0015 nats a symbol, perplexity ~0.15% lower
    halved = [math.exp(0.003 * rng.uniform(0.9, 1.1)) for _ in range(10)] + [
        math.exp(0.0015 * rng.uniform(0.9, 1.1)) for _ in range(10)]
    judged = trend(halved, window=10, tolerance=0.02)
    assert judged.improving and judged.decided_by_cross_entropy and not judged.by_perplexity
    assert judged.perplexity_fall < 0.002 and 0.4 < judged.cross_entropy_fall / judged.cross_entropy_before < 0.6
    assert 0 < judged.cross_entropy_bar < judged.cross_entropy_fall
    # far from 1 a fall beyond the tolerance is the perplexity's: the cross-entropy does not decide it
    fast = trend([50.0] * 10 + [45.0] * 10, window=10, tolerance=0.02)
    assert fast.improving and fast.by_perplexity and not fast.decided_by_cross_entropy
    assert fast.perplexity_fall == pytest.approx(0.1)
    # flat near 1, errors scattered by tens of percent: neither test says falling
    flat = trend([math.exp(0.003 * rng.uniform(0.4, 1.6)) for _ in range(20)], window=10, tolerance=0.02)
    assert not flat.improving and not flat.decided_by_cross_entropy
    assert trend([], window=10) is None and not still_improving([])
    # still_falling is trend_at's verdict, over the rule's window
    log = windows(halved)
    assert still_falling(log, rule(), 2000) == trend_at(log, rule(), 2000).improving is True


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


def test_left_start():
    assert left_start(128.0, 64.0) and not left_start(128.0, 110.9)  # the bigram 1-layer LSTM's plateau stop
    assert not left_start(NAN, 10.0) and not left_start(128.0, NAN)


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
    with pytest.raises(ConfigError, match=r"training.prune_at\[0\] must be a positive multiple of perplexity_every "
                                          r"\(100\)"):
        from_dict(RunConfig, {"training": {"prune_at": [150]}})
    # past the budget: refused where a user's config is read (a command's, a profile's) ...
    assert resolve_run_config(None, max_batches=1000).training.prune_at == ()
    with pytest.raises(ConfigError, match=r"training.prune_at\[0\] must lie below max_batches \(1000\)"):
        resolve_run_config(RunConfig(training=from_dict(RunConfig, {"training": {"prune_at": [2000]}}).training),
                           max_batches=1000)
    # ... and read back from a run folder, where a halving rung's budget may stop short of the block's checkpoints
    assert from_dict(RunConfig, {"training": {"prune_at": [2000], "max_batches": 1000}}).training.max_batches == 1000
    with pytest.raises(ConfigError, match=r"training.prune_ratio must lie in \(0, 1\), got 1.5"):
        from_dict(RunConfig, {"training": {"prune_ratio": 1.5}})
    text = describe(from_dict(RunConfig, {"training": {"prune_at": [2000], "plateau_patience": 3}}).training)
    assert ("pruned at batch 2,000 if training perplexity is above 0.5 × its first window's by more than its spread"
            in text)
    assert ("plateau once training perplexity has not beaten its reference by 1% for a window of 3 evaluations (3,000 "
            "batches) or 10% of the batches trained, the larger, and its mean over that window is within 1% of the "
            "window before's (and its cross-entropy's, beyond the windows' noise) (counted from batch 2,000)" in text)
    with pytest.raises(ConfigError, match=r"training.plateau_window_fraction must lie in \[0, 0.5\).*got 0.5"):
        from_dict(RunConfig, {"training": {"plateau_window_fraction": 0.5}})


def tiny_profile(tmp_path, lr=1e-3, ablation=False, **training):
    settings = dict(max_batches=40, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    settings.update(training)
    block = {"tasks": ["reversal"], "models": ["stack"], "hidden": [8], "lr": [lr]}
    if ablation:  # the same run with its memory's reads zeroed (probes.read_zeroed)
        block["overrides"] = {"model": {"probes": {"read_zeroed": True}}}
    data = {"name": "pruning", "workers": 1,
            "defaults": {"model": {"memory_width": 4, "embedding": 4}, "training": settings,
                         "tracking": {"wandb": "off"}},
            "grid": [block]}
    path = tmp_path / "pruning.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_sweep(path)


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
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


@pytest.mark.usefixtures("in_process_pool")
def test_a_read_ablation_is_never_pruned_and_one_pruned_before_trains_on(tmp_path):
    """An ablation is compared with the run it ablates at the same batch: the pruning that stops that run on its
    plateau (a ratio of 0.1 prunes any tiny run at 20) leaves the ablation to its cap; and an ablation pruned before
    the exemption (its results say pruned) is reopened by the sweep (rejudged_prune), where its heard run is not."""
    (tmp_path / "heard").mkdir()
    (tmp_path / "ablation").mkdir()
    heard = tiny_profile(tmp_path / "heard", prune_at=[20], prune_ratio=0.1)
    (pruned,) = run_local(heard, tmp_path / "heard" / "runs", echo=lambda _: None)
    assert pruned.state == "pruned" and pruned.batches_done == 20
    ablation = tiny_profile(tmp_path / "ablation", ablation=True, prune_at=[20], prune_ratio=0.1)
    (kept,) = run_local(ablation, tmp_path / "ablation" / "runs", echo=lambda _: None)
    assert kept.state == "finished" and kept.batches_done == 40
    # an ablation pruned by the code before: the heard run's pruned folder, its config made an ablation's
    assert not rejudged_prune(pruned.run_dir)
    before = tmp_path / "before" / pruned.run_dir.name
    shutil.copytree(pruned.run_dir, before)
    config = yaml.safe_load((before / "config.yaml").read_text())
    config["model"]["probes"]["read_zeroed"] = True
    (before / "config.yaml").write_text(yaml.safe_dump(config))
    assert rejudged_prune(before)


def test_a_run_that_stops_improving_ends_as_plateau(tmp_path):
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": "lstm1", "hidden": 8, "embedding": 4},
                                   "training": dict(max_batches=200, perplexity_every=10, eval_every=10, eval_size=10,
                                                    test_eval_size=10, final_eval_size=10, lr=1e-9,
                                                    early_stop_patience=0, plateau_patience=2,
                                                    plateau_tolerance=0.5),
                                   "tracking": {"wandb": "off"}})
    results = train(config, tmp_path / "run", progress=False)
    # reference at 10, not beaten by 50% at 20 or 30; two windows of 20 batches logged by 40, their means flat
    assert results["stop_reason"] == "plateau" and results["batches"] == 40 and results["plateau_rule"] == 2
    # the same run with the rule counted only after leaving its start never leaves it (lr 1e-9): it trains its budget
    patient = from_dict(RunConfig, {**to_dict(config), "training": {**to_dict(config.training),
                                                                     "plateau_after_leaving_start": True}})
    results = train(patient, tmp_path / "patient", progress=False)
    assert results["stop_reason"] == "budget" and results["batches"] == 200
    assert [s.state for s in sweep_status(tiny_profile(tmp_path), tmp_path / "none")] == ["pending"]


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_run_stopped_by_the_old_plateau_rule_is_judged_again_and_trains_on(tmp_path):
    # A tiny run stopped by version 2 of the rule at 40 batches (a window of 20, lr 1e-9: flat), then made to look as
    # version 1 left it: stopped at 30 (reference at 10, no 50% gain at 20 or 30), no plateau_rule in its results.
    sweep = tiny_profile(tmp_path, max_batches=60, lr=1e-9, plateau_patience=2, plateau_tolerance=0.5)
    (status,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    results = json.loads((status.run_dir / "results.json").read_text())
    assert results["stop_reason"] == "plateau" and results["batches"] == 40 and results["plateau_rule"] == 2
    # judged by the rule in force: left alone by the next sweep
    (again,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    assert json.loads((again.run_dir / "results.json").read_text()) == results
    # version 1's stop at 30, where version 2 does not stop, archived without checkpoints (as reports/ keeps runs):
    # the sweep reopens it, trains it again from batch 0 (one seed, one stream: the same log) and on to v2's stop
    log = (status.run_dir / "metrics.csv").read_text()
    old = {k: v for k, v in results.items() if k not in ("plateau_rule", "schema")} | {"batches": 30}
    (status.run_dir / "results.json").write_text(json.dumps(old))
    shutil.rmtree(status.run_dir / "checkpoints")
    assert rejudged_stop(status.run_dir)
    (after,) = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    rejudged = json.loads((after.run_dir / "results.json").read_text())
    assert rejudged["plateau_rule"] == 2 and rejudged["stop_reason"] == "plateau" and rejudged["batches"] == 40
    assert (after.run_dir / "metrics.csv").read_text() == log
    assert not rejudged_stop(after.run_dir)
    # a version-1 stop that version 2 makes at the same batch stands
    (after.run_dir / "results.json").write_text(json.dumps({k: v for k, v in rejudged.items()
                                                            if k not in ("plateau_rule", "schema")}))
    assert not rejudged_stop(after.run_dir)


def first_convergence(coarse, **training):
    """The evaluation (1-based) at which the early stop fires on this curve of training coarse accuracies, or None."""
    t = from_dict(RunConfig, {"training": training}).training
    streak = 0
    for k, value in enumerate(coarse, 1):
        streak = coarse_streak(streak, value, t)
        if converged(streak, t):
            return k
    return None


@pytest.mark.parametrize("coarse, training, stops_at", [
    ([0.2, 1.0, 1.0, 1.0, 1.0], {"early_stop_patience": 3}, 4),          # three in a row: stops at the third
    ([1.0, 1.0, 0.999, 1.0, 1.0], {"early_stop_patience": 3}, None),     # 0.999 breaks the streak: never three
    ([1.0, 1.0, 0.999, 1.0, 1.0, 1.0], {"early_stop_patience": 3}, 6),   # ... and it starts again after
    ([0.99, 0.995, 0.991], {"early_stop_patience": 3, "early_stop_coarse": 0.99}, 3),  # a study's lower bar
    ([0.99, 0.989, 0.991], {"early_stop_patience": 3, "early_stop_coarse": 0.99}, None),
    ([1.0] * 10, {"early_stop_patience": 0}, None),                      # 0: off, however perfect
])
def test_the_early_stop_needs_its_streak_of_evaluations_at_the_bar(coarse, training, stops_at):
    assert first_convergence(coarse, **training) == stops_at


def test_the_reported_checkpoint_is_the_best_training_coarse_then_fine_the_later_of_equals():
    """What `selected_step` is: a run that converged and then collapsed reports its converged checkpoint; equal
    accuracies go to the later evaluation (it has trained longer); fine breaks a tie in coarse."""
    def selected(curve):
        best = None
        for step, coarse, fine in curve:
            if better_checkpoint(coarse, fine, best):
                best = dict(step=step, train_coarse=coarse, train_fine=fine)
        return best["step"]

    assert selected([(1000, 0.2, 0.5), (2000, 1.0, 1.0), (3000, 0.0, 0.1)]) == 2000   # the collapse is not reported
    assert selected([(1000, 0.5, 0.7), (2000, 0.5, 0.7)]) == 2000                      # equal: the later
    assert selected([(1000, 0.5, 0.8), (2000, 0.5, 0.7)]) == 1000                      # fine decides a coarse tie
    assert selected([(1000, 0.4, 0.99), (2000, 0.5, 0.1)]) == 2000                     # coarse before fine


def test_still_falling_without_a_plateau_rule_reads_20_windows_or_a_tenth_of_the_run():
    """A run without a plateau rule (plateau_patience 0) is judged over the larger of 20 perplexity windows and 10%
    of its batches, the last against the one before: a fall of 1% a window is still falling, a flat log (noise and
    all) is not, and a fall that ended before the last 4,000 batches of a 20,000-batch run is not either."""
    t = from_dict(RunConfig, {"training": {"plateau_patience": 0, "plateau_tolerance": 0.02}}).training
    rng = random.Random(0)
    falling = [(100 * k, 50 * 0.99 ** k) for k in range(1, 41)]
    flat = [(100 * k, 20 * (1 + 0.01 * rng.uniform(-1, 1))) for k in range(1, 41)]
    assert still_falling(falling, t, 4000) and not still_falling(flat, t, 4000)
    earlier = [(100 * k, 50 * 0.9 ** min(k, 150)) for k in range(1, 201)]  # flat from batch 15,000
    assert still_falling(earlier, t, 15000) and not still_falling(earlier, t, 20000)


def test_a_run_version_1_pruned_and_version_2_keeps_is_rejudged(tmp_path):
    """The cpu profile's bigram-flipping Stack (pruned at 116.3 against 115.46, falling) trains on when its sweep
    runs; the same run flat on the plateau, or one the rule in force judged already, stands. Its files as archived
    then are kept in tests/data (the archive holds its retrained draw since: a fixture of its own, not the archive)."""
    import csv

    from pipeline.sweep.rejudge import rejudged_prune

    archived = Path(__file__).parent / "data" / "v1_pruned_bigram_flip_stack"
    run = tmp_path / "bigram_flip-stack-h256-lr0.0005-s0-ed1ca0f0"
    shutil.copytree(archived, run)
    assert rejudged_prune(run)
    # flat on the plateau instead: version 2 prunes it too, so it stands
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    for row in rows:
        if row["train/perplexity"]:
            row["train/perplexity"] = "128.0" if row["step"] == "100" else "125.0"
    with (run / "metrics.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert not rejudged_prune(run)
    # judged by the rule in force already
    shutil.rmtree(run)
    shutil.copytree(archived, run)
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "prune_rule": 2}))
    assert not rejudged_prune(run)


def test_the_cost_of_confirming_plateau_stops_counts_the_stops_the_rule_in_force_made(tmp_path):
    """docs/training.md weighs a plateau rule that waits for a second flat evaluation by what it would reopen: the
    stops the rule in force made where they stand (never one an older version made later, nor another reason's),
    each trained again from batch 0 (their training and evaluation seconds)."""
    from pipeline.reports.stops import confirmation_cost
    from pipeline.sweep.rejudge import Replay

    archive = tmp_path / "finished_runs"
    for run_id, seconds in (("made", 3600.0), ("later", 7200.0), ("capped", 9000.0)):
        (archive / run_id).mkdir(parents=True)
        (archive / run_id / "results.json").write_text(json.dumps(
            {"run_id": run_id, "batches": 100, "train_seconds": seconds, "eval_seconds": 0.0,
             "train_cpu_seconds": seconds * 0.5, "eval_cpu_seconds": 0.0, "stop_reason": "plateau",
             "train_coarse": 0.0, "train_fine": 0.0, "test_coarse": 0.0, "test_fine": 0.0,
             "train_perplexity": 2.0}))
    replays = [(str(archive), Replay("made", 100, "plateau", 100, 100, 20, 0.0)),
               (str(archive), Replay("later", 100, "plateau", 100, 60, 20, 0.0)),  # made by version 1, later
               (str(archive), Replay("capped", 100, "budget", None, None, 20, 0.05))]
    line = confirmation_cost(replays)
    assert "made 1 of the archived plateau stops" in line and "reopen all 1" in line
    assert "0.5 CPU-hours" in line  # the run's own CPU seconds, not its wall seconds
    assert "made 0 of" in confirmation_cost(replays[1:]) and "0.0 CPU-hours" in confirmation_cost([])
