"""Successive halving over a block's learning rates (pipeline/sweep/halving.py): planned from the runs' own logs, run
by the local pool to the end, resumed to the same plan, validated before anything runs."""

import csv
import json
import math
import shutil
import sys

import pytest
import yaml
from tiny import TRAINING

from pipeline.config import ConfigError
from pipeline.rundir import RunDir
from pipeline.sweep import load_sweep, run_local, sweep_status
from pipeline.sweep.halving import Budget, halving_plan, standing_at
from pipeline.training.results import logged_values


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def halving_profile(tmp_path, halving, lrs=(3e-2, 1e-3, 1e-9), seeds=(0,), max_batches=40):
    data = {"name": "halving", "workers": 2,
            "defaults": {"model": {"embedding": 4}, "training": {**TRAINING, "max_batches": max_batches},
                         "tracking": {"wandb": "off"}},
            "grid": [{"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8], "lr": list(lrs),
                      "seeds": list(seeds), "halving": halving}]}
    path = tmp_path / "halving.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def standing(run_dir, rung):
    values = [p for step, p in logged_values_of(run_dir) if step <= rung]
    return sum(values[-10:]) / len(values[-10:])


def logged_values_of(run_dir):
    return logged_values(RunDir(run_dir).read_metrics(), "train/perplexity")


def test_the_reports_stopping_table_names_a_blocks_halving(tmp_path):
    """Most of a halving block's runs stop at a rung, not at the cap its row shows: the table says so per row."""
    from pipeline.reports.build import stopping_table

    table = stopping_table(load_sweep(halving_profile(tmp_path, {"at": [10, 20], "keep": [2, 1]},
                                                      lrs=(3e-2, 1e-2, 1e-3))))
    assert table[0].startswith("| cap (batches) |") and "| successive halving |" in table[0]
    assert table[2].endswith("| at 10, 20, keeping 2, 1 | 3 |"), table


def test_the_time_left_counts_the_later_rungs_a_bracket_may_still_train(tmp_path):
    """Before a bracket's first rung is decided its runs train to the rung; the estimate of the time left adds what
    its later rungs may still ask (2 rates of 4 from 10 to 20 batches, then 1 to the cap of 40, each with its 2 seeds:
    (2 x 10 + 1 x 20) x 2 = 80 batches), spread over the runs training to the rung; without them it said 'at most'
    of a quarter of the bracket's work (issue 78's brackets: 9 of ~60 hours)."""
    from pipeline.sweep.status import estimate_seconds_left, rate_key

    path = halving_profile(tmp_path, {"at": [10, 20], "keep": [2, 1], "seeds_together": True},
                           lrs=(3e-2, 1e-2, 1e-3, 1e-4), seeds=(0, 1))
    statuses = sweep_status(load_sweep(path), tmp_path / "runs")
    assert [s.batches_left for s in statuses] == [10] * 8
    assert sum(s.batches_later for s in statuses) == pytest.approx(80)
    rates = {rate_key(statuses[0].config): [(1000.0, 2000)]}  # 0.5 s a batch
    assert estimate_seconds_left(statuses, 2, rates) == pytest.approx((8 * 10 + 80) * 0.5 / 2)


@pytest.fixture(scope="module")
def bracket(tmp_path_factory, cache_dir):
    """A bracket of three rates (40 batches, a rung at 20 keeping 1) run by the pool to its end, once per module and
    worker (its workers' jobs in this process: the property is the plan, tests/in_process.py): (the folder of its
    profile and runs, the pool's final (run, state, batches done) of each run)."""
    from in_process import pool_in_process

    folder = tmp_path_factory.mktemp("bracket")
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
        pool_in_process(mp)
        sweep = load_sweep(halving_profile(folder, {"at": [20], "keep": [1]}))
        # before anything ran, every rate is to train to the rung
        assert {b.batches for b in halving_plan(sweep, folder / "runs").values()} == {20}
        statuses = run_local(sweep, folder / "runs", echo=lambda _: None)
    finally:
        mp.undo()
    return folder, [(s.run_dir.name, s.state, s.batches_done) for s in statuses]


def decided_bracket(tmp_path, bracket):
    """A copy of the bracket run to its end (:func:`bracket`): (sweep, runs folder, statuses, the winner's status, the
    cut rates' statuses)."""
    shutil.copytree(bracket[0] / "runs", tmp_path / "runs")
    sweep = load_sweep(halving_profile(tmp_path, {"at": [20], "keep": [1]}))
    runs = tmp_path / "runs"
    statuses = sweep_status(sweep, runs)
    assert [(s.run_dir.name, s.state, s.batches_done) for s in statuses] == bracket[1]
    (winner,) = [s for s in statuses if s.state == "finished"]
    return sweep, runs, statuses, winner, [s for s in statuses if s.state == "pruned"]


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_bracket_trains_every_rate_to_the_rung_then_only_the_best(tmp_path, bracket):
    sweep, runs, statuses, _, _ = decided_bracket(tmp_path, bracket)  # what the pool's run returned, as on disk
    by_lr = {s.config.training.lr: s for s in statuses}
    stand = {lr: standing(s.run_dir, 20) for lr, s in by_lr.items()}
    best = min(stand, key=stand.get)
    assert by_lr[best].state == "finished" and by_lr[best].batches_done == 40  # went on to max_batches
    for lr, s in by_lr.items():
        if lr != best:
            assert s.state == "pruned" and s.batches_done == 20  # cut at the rung, listed as pruned
        assert standing_at(s.run_dir, 20) == pytest.approx(stand[lr])
    assert (by_lr[best].run_dir / "results.20.json").is_file()  # the winner was extended, its rung results kept
    # the plan is read again from the logs: a rerun trains nothing and lists the same states
    again = run_local(sweep, runs, echo=lambda _: None)
    assert [(s.run_dir.name, s.state, s.batches_done) for s in again] == bracket[1]


def bracket_beside_a_copy_run(tmp_path, workers, bracket_first):
    """A profile of two blocks: a reversal bracket of two rates (one rung at 20, the winner on to 40) and one copy run,
    in that order or the other."""
    bracket = {"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8], "lr": [3e-2, 1e-3],
               "halving": {"at": [20], "keep": [1]}}
    copy = {"tasks": ["copy"], "models": ["lstm1"], "hidden": [8], "lr": [1e-3]}
    data = {"name": "halving", "workers": workers,
            "defaults": {"model": {"embedding": 4}, "training": {**TRAINING, "max_batches": 40},
                         "tracking": {"wandb": "off"}},
            "grid": [bracket, copy] if bracket_first else [copy, bracket]}
    path = tmp_path / "halving.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def assert_the_winner_ends_before_the_copy_run(statuses, said):
    """Both done, and the bracket's winner ended its last rung (the pool's 'finished' lines, ``said``) before the copy
    run ended."""
    copy = next(s for s in statuses if s.config.task == "copy")
    winner = next(s for s in statuses if s.config.task == "reversal" and s.state == "finished")
    assert copy.state == "finished" and winner.batches_done == 40
    ended = [line.split(": ", 1)[1] for line in said if line.startswith("  finished: ")]
    last = len(ended) - 1 - ended[::-1].index(winner.run_dir.name)  # it also ends its rung as 'finished'
    assert last < ended.index(copy.run_dir.name), said


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_promoted_winner_trains_before_the_later_blocks_still_queued(tmp_path):
    """One worker, a bracket first in the grid and another block after it: once the rung is decided its winner goes
    on at its place in grid order, before the later block's run. The pool once queued promoted runs only when its
    queue was empty, so a winner waited for the whole rest of the grid (the cpu profile: a bracket's survivors behind
    dozens of hidden-512 runs)."""
    said = []
    statuses = run_local(load_sweep(bracket_beside_a_copy_run(tmp_path, workers=1, bracket_first=True)),
                         tmp_path / "runs", echo=said.append)
    assert_the_winner_ends_before_the_copy_run(statuses, said)


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_two_rungs_and_a_failed_rate_that_stands_last(tmp_path):
    path = halving_profile(tmp_path, {"at": [10, 20], "keep": [2, 1]}, lrs=(3e-2, 1e-2, 1e-3, 1e-9))
    sweep = load_sweep(path)
    runs = tmp_path / "runs"
    # one rate fails at once: it stands last at every rung and never holds its bracket up
    config, failing = next((s.config, s.run_dir) for s in sweep_status(sweep, runs) if s.config.training.lr == 3e-2)
    failing.mkdir(parents=True)
    RunDir(failing).write_config(config)
    (failing / "failed.json").write_text('{"error": "NaN loss"}')
    assert standing_at(failing, 10) == math.inf
    statuses = {s.config.training.lr: s for s in run_local(sweep, runs, echo=lambda _: None)}
    assert statuses[3e-2].state == "failed"
    assert sorted(s.batches_done for lr, s in statuses.items() if lr != 3e-2) == [10, 20, 40]
    assert sorted(s.state for s in statuses.values()) == ["failed", "finished", "pruned", "pruned"]


@pytest.mark.parametrize("halving, message", [
    ({"at": [20, 10], "keep": [2, 1]}, "halving.at must be positive and increasing"),
    ({"at": [20], "keep": [3]}, "halving.keep must decrease from below the block's 3 setting"),
    ({"at": [20], "keep": [1, 1]}, "must list one value per rung"),
    ({"at": [25], "keep": [1]}, r"halving.at \[25\] must be multiples of perplexity_every \(10\) below max_batches"),
    ({"at": [40], "keep": [1]}, "below max_batches"),
])
def test_a_bad_halving_is_refused_with_its_path(tmp_path, halving, message):
    with pytest.raises(ConfigError, match=message):
        load_sweep(halving_profile(tmp_path, halving))


def test_a_decided_rung_promotes_its_winner_while_other_runs_still_train(tmp_path, monkeypatch):
    # A run of another block holds one worker until the bracket's winner has finished its last rung (its worker
    # process waits for that, up to a minute, then trains): a sweep that waited for the whole round before it asked
    # halving again (as it once did) would run the winner only after that run, a minute later. Only the held run
    # needs a process of its own; the bracket's jobs run in this process (tests/in_process.py) while it waits.
    import subprocess
    import types

    from in_process import InProcessWorker

    from pipeline.sweep import local

    path = bracket_beside_a_copy_run(tmp_path, workers=2, bracket_first=False)
    runs = tmp_path / "runs"
    worker = tmp_path / "python"
    worker.write_text(f"""#!/bin/sh
case "$*" in *copy-lstm1*)
  i=0
  until grep -qs '"batches": 40' {runs}/reversal-*/results.json || [ $i -ge 300 ]; do sleep 0.2; i=$((i+1)); done;;
esac
exec {sys.executable} "$@"
""")
    worker.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(worker))

    def popen(args, *rest, **kwargs):  # the held run in a real worker, the bracket's in this process
        held = any("copy-lstm1" in str(arg) for arg in args)
        return subprocess.Popen(args, *rest, **kwargs) if held else InProcessWorker(args, *rest, **kwargs)

    real_wait = local.wait_for_a_child
    monkeypatch.setattr(local, "subprocess", types.SimpleNamespace(Popen=popen, STDOUT=subprocess.STDOUT,
                                                                   TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(local, "wait_for_a_child", lambda children, timeout: None if any(
        isinstance(c, InProcessWorker) for c in children) else real_wait(children, timeout))
    said = []
    statuses = run_local(load_sweep(path), runs, echo=said.append)
    assert_the_winner_ends_before_the_copy_run(statuses, said)  # the copy run is the held one


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_damaged_winner_holds_its_rung_undecided_instead_of_promoting_a_cut_rate(tmp_path, bracket):
    """The third probe's item 9: a halving winner whose results.json was damaged made the next sweep promote a rate
    the rung had cut and train it to the full budget."""
    sweep, runs, statuses, winner, cut = decided_bracket(tmp_path, bracket)
    (winner.run_dir / "results.json").write_text("{ cut short")
    plan = halving_plan(sweep, runs)  # its win at the rung is recorded: the rung stays decided, no cut rate promoted
    assert plan[winner.run_dir.name].batches == 40 and not any(plan[s.run_dir.name].batches == 40 for s in cut)
    for s in statuses:  # ... and where it was not recorded, the damage holds the rung undecided
        RunDir(s.run_dir).rungs_file.unlink()
    plan = halving_plan(sweep, runs)
    assert plan[winner.run_dir.name].batches == 20 and not any(plan[s.run_dir.name].batches == 40 for s in cut)
    again = run_local(sweep, runs, echo=lambda _: None)
    assert all(s.batches_done == 20 for s in again if s.run_dir != winner.run_dir)  # no cut rate trained on
    assert {s.state for s in again if s.run_dir == winner.run_dir} == {"damaged"}


def test_a_rungs_winner_training_on_stands_at_its_rung_results_in_the_report(tmp_path, bracket):
    """A bracket's winner, reopened past its rung to train on, was no cell's run until it finished (the gender Stack
    read "no finished run" for the ~20 hours its seeds train to 300,000): while it trains on it stands at the results
    it reported at the rung, which the report reads (training_on). Must not: a run the rung cut, a winner that failed
    or is damaged, a winner trained again from batch 0 (no results kept)."""
    from pipeline.reports.table3 import all_runs, select_models

    sweep, runs, statuses, winner, cut = decided_bracket(tmp_path, bracket)
    folder = RunDir(winner.run_dir)
    folder.results_file.unlink()  # training on past its rung: results.20.json is what it reported
    rows = all_runs(sweep, runs).set_index("run_id")
    row = rows.loc[winner.run_dir.name]
    rung = json.loads((winner.run_dir / "results.20.json").read_text())
    assert (row.state, bool(row.training_on), row.batches, row.batches_now) == ("interrupted", True, 20, 40)
    assert row.train_perplexity == pytest.approx(rung["train_perplexity"])
    assert row.test_coarse == pytest.approx(rung["test_coarse"])
    # where it stands now: its whole log's last ten windows, past the rung's results (not the rung's perplexity)
    with open(folder.metrics_file) as f:
        log = list(csv.DictReader(f))
    logged = [float(r["train/perplexity"]) for r in log if r.get("train/perplexity")]
    assert max(int(r["step"]) for r in log) == 40
    assert row.perplexity_now == pytest.approx(sum(logged[-10:]) / len(logged[-10:]))
    assert not any(bool(rows.loc[s.run_dir.name].training_on) for s in cut)  # cut at the rung: pruned, halved
    assert select_models(all_runs(sweep, runs)).run_id.tolist() == [winner.run_dir.name]

    failed = tmp_path / "failed"
    shutil.copytree(runs, failed)
    RunDir(failed / winner.run_dir.name).failed_file.write_text(json.dumps({"error": "boom"}))
    assert not all_runs(sweep, failed).set_index("run_id").loc[winner.run_dir.name].training_on
    assert select_models(all_runs(sweep, failed)).empty  # the cut rates are never selected
    damaged = tmp_path / "damaged"
    shutil.copytree(runs, damaged)
    (damaged / winner.run_dir.name / "results.20.json").write_text("{ cut short")
    assert [s.state for s in sweep_status(sweep, damaged) if s.run_dir.name == winner.run_dir.name] == ["damaged"]
    assert not all_runs(sweep, damaged).set_index("run_id").loc[winner.run_dir.name].training_on
    (winner.run_dir / "results.20.json").unlink()  # trained again from batch 0: nothing reported to stand at
    assert not all_runs(sweep, runs).set_index("run_id").loc[winner.run_dir.name].training_on


def test_a_decided_rung_stays_decided_when_its_winner_is_trained_again_along_another_path(tmp_path, bracket):
    """A winner whose checkpoint was lost is trained again from batch 0; on another CPU its floats, hence its log,
    differ. Its new log must not re-open the rung its first one decided (the 1-layer LSTM on gender conjugation: the
    retrained winner stood at 4.18 at the rung where its first log stood at 3.80, behind the rate it had cut)."""
    import csv

    sweep, runs, statuses, winner, cut = decided_bracket(tmp_path, bracket)
    recorded = RunDir(winner.run_dir).read_rungs()
    assert list(recorded) == [20] and recorded[20] == pytest.approx(standing(winner.run_dir, 20))

    with open(RunDir(winner.run_dir).metrics_file) as f:  # its log along another path: the worst at the rung
        rows = list(csv.DictReader(f))
    for row in rows:
        if row.get("train/perplexity"):
            row["train/perplexity"] = str(float(row["train/perplexity"]) * 1e6)
    with open(RunDir(winner.run_dir).metrics_file, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plan = halving_plan(sweep, runs)
    assert plan[winner.run_dir.name] == Budget(40, False)
    assert all(plan[s.run_dir.name].halved and plan[s.run_dir.name].batches == 20 for s in cut)

    for s in statuses:  # without the records the rung is decided again, from the new log: the other way
        RunDir(s.run_dir).rungs_file.unlink()
    assert halving_plan(sweep, runs)[winner.run_dir.name].halved


def test_a_promoted_run_whose_last_worker_is_still_closing_is_offered_when_that_worker_ends(tmp_path, monkeypatch):
    """A run that wrote its results at a rung is promoted as soon as the rung is decided, possibly while its worker is
    still exiting: replanned then, its next job met the old one's lock (and the pool's log bookkeeping failed with a
    KeyError, seen in a full test run on a loaded machine). A run still held by a worker is left out and not counted
    as offered; the next round offers it, and only once per budget."""
    from pipeline.sweep import local

    sweep = load_sweep(halving_profile(tmp_path, {"at": [10], "keep": [1]}, lrs=(1e-2, 1e-3)))
    runs = tmp_path / "runs"
    dirs = [s.run_dir for s in sweep_status(sweep, runs)]
    monkeypatch.setattr(local, "prepare", lambda *args, **kwargs: list(dirs))  # both due at their budget now
    configs, attempted = {}, set()
    assert local.replan(sweep, runs, (), configs, attempted, busy={dirs[0]}) == dirs[1:]
    assert local.replan(sweep, runs, (), configs, attempted) == dirs[:1]
    assert local.replan(sweep, runs, (), configs, attempted) == []


def test_a_blocks_starts_are_an_axis_of_its_runs_and_of_its_brackets(tmp_path, monkeypatch):
    """Issue 78's equal search: the runs of a block differ in lr x start, and with seeds_together a setting's seeds go
    on or stop together, ranked by the mean of their standings."""
    import pipeline.sweep.halving as halving

    path = halving_profile(tmp_path, {"at": [10], "keep": [1], "seeds_together": True}, lrs=(1e-2, 1e-3),
                           seeds=(0, 1))
    data = yaml.safe_load(path.read_text())
    data["grid"][0]["models"] = ["stack"]
    data["grid"][0]["starts"] = [{"push_bias": None}, {"push_bias": 1.0}]
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    runs = sweep.runs()
    assert len(runs) == 8 and len({run.run_id() for run in runs}) == 8
    assert {(run.training.lr, run.model.push_bias) for run in runs} == {
        (1e-3, None), (1e-3, 1.0), (1e-2, None), (1e-2, 1.0)}
    # one bracket of four settings, each of two seeds
    [(_, bracket)] = halving.brackets(sweep)
    groups = halving.settings(bracket)
    assert len(groups) == 4 and all(sorted(run.training.seed for run in group) == [0, 1] for group in groups)
    # seed 0 of (1e-2, null) is the best single run, but its seed 1 is the worst: the setting whose two seeds are
    # better on average goes on, both its seeds with it
    standing = {(1e-2, None, 0): 10.0, (1e-2, None, 1): 90.0, (1e-3, 1.0, 0): 20.0, (1e-3, 1.0, 1): 30.0,
                (1e-2, 1.0, 0): 50.0, (1e-2, 1.0, 1): 50.0, (1e-3, None, 0): 60.0, (1e-3, None, 1): 60.0}
    by_id = {run.run_id(): standing[(run.training.lr, run.model.push_bias, run.training.seed)] for run in runs}
    monkeypatch.setattr(halving, "standing_at", lambda run_dir, rung: by_id[run_dir.name])
    plan = halving.halving_plan(sweep, tmp_path / "runs")
    went_on = {(r.training.lr, r.model.push_bias, r.training.seed) for r in runs if not plan[r.run_id()].halved}
    assert went_on == {(1e-3, 1.0, 0), (1e-3, 1.0, 1)}
    assert all(plan[r.run_id()].batches == (40 if not plan[r.run_id()].halved else 10) for r in runs)
    # a rung undecided for one seed holds the whole bracket at the rung
    by_id[runs[0].run_id()] = None
    assert {b.batches for b in halving.halving_plan(sweep, tmp_path / "runs").values()} == {10}


def test_a_block_without_seeds_together_keeps_a_bracket_per_seed(tmp_path):
    from pipeline.sweep.halving import brackets

    sweep = load_sweep(halving_profile(tmp_path, {"at": [10], "keep": [1]}, lrs=(1e-2, 1e-3), seeds=(0, 1)))
    assert sorted(len(runs) for _, runs in brackets(sweep)) == [2, 2]


@pytest.mark.parametrize("starts, message", [
    ([{"push_bias": 1.0}, {"push_bias": 1.0}], "starts lists a start twice"),
    ([{"forget_bias": 1.0}], r"starts\[0\] must map some of pop_bias, push_bias, bottom_push_bias, bottom_pop_bias"),
    ([{}], r"starts\[0\] must map some of"),
])
def test_a_bad_start_is_refused_with_its_path(tmp_path, starts, message):
    path = halving_profile(tmp_path, {"at": [10], "keep": [1]})
    data = yaml.safe_load(path.read_text())
    data["grid"][0]["starts"] = starts
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"grid\[0\]\." + message):
        load_sweep(path)


def test_keep_counts_settings_of_lr_times_start(tmp_path):
    path = halving_profile(tmp_path, {"at": [10], "keep": [3]}, lrs=(1e-2, 1e-3))
    with pytest.raises(ConfigError, match="below the block's 2 setting"):
        load_sweep(path)
    data = yaml.safe_load(path.read_text())
    data["grid"][0]["starts"] = [{"pop_bias": -1.0}, {"pop_bias": -2.0}]
    path.write_text(yaml.safe_dump(data))
    assert len(load_sweep(path).runs()) == 4  # 2 rates x 2 starts: keep 3 of 4 is allowed


@pytest.mark.parametrize("profile", ["baselines", "gpu-lstm"])
def test_a_profile_without_the_later_keys_keeps_the_hash_its_report_names(profile):
    """starts and seeds_together came after these reports were written: profile_hash leaves them out at their
    earlier value, so the committed reports still name their profile's hash."""
    from pipeline.config import profile_hash
    from pipeline.paths import CONFIG_DIR

    sweep = load_sweep(CONFIG_DIR / f"{profile}.yaml")
    assert f"hash `{profile_hash(sweep)}`" in (sweep.reports_dir() / "README.md").read_text()


def test_the_rungs_report_names_where_ranking_by_the_best_seed_would_have_kept_another_setting(tmp_path):
    """`python -m pipeline.reports.rungs` reads each decided rung back from the logs: the rule ranks a setting by the
    mean over its seeds, so a setting with one seed far ahead and one on its plateau (the bigram-flipping Stack's lr
    5e-4 push +1 at 30,000: 12.3 and 113.7) loses to one whose seeds are both middling; ranked by its best seed it
    would have been kept. A rung with a run short of it is not decided and is not listed."""
    from pipeline.reports.rungs import decided_rungs, rungs_text

    path = halving_profile(tmp_path, {"at": [10], "keep": [1], "seeds_together": True}, lrs=(3e-2, 1e-3, 1e-4),
                           seeds=(0, 1))
    sweep = load_sweep(path)
    root = tmp_path / "runs"
    at_rung = {(3e-2, 0): 40.0, (3e-2, 1): 41.0, (1e-3, 0): 12.0, (1e-3, 1): 114.0, (1e-4, 0): 90.0, (1e-4, 1): 95.0}
    for run in sweep.runs():
        folder = root / run.run_id()
        folder.mkdir(parents=True)
        level = at_rung[(run.training.lr, run.training.seed)]
        (folder / "metrics.csv").write_text("step,train/perplexity\n" + "".join(
            f"{step},{level}\n" for step in range(1, 11)))
    (rung,) = decided_rungs(sweep, root)
    assert rung.kept == ("lr 0.03",) and rung.kept_by_best == ("lr 0.001",) and rung.differs
    assert rung.ranked[1] == ("lr 0.001", (12.0, 114.0))  # the mean, 63, second; its best seed, 12, first
    text = rungs_text([rung])
    assert "rung 10: kept lr 0.03 (40 / 41); by best seed: lr 0.001" in text
    assert text.endswith("1 decided rungs; ranked by each setting's best seed, 1 would have kept other settings")

    even = {**at_rung, (1e-3, 1): 30.0}  # now its mean, 21, leads too: both rankings keep it
    for run in sweep.runs():
        level = even[(run.training.lr, run.training.seed)]
        (root / run.run_id() / "metrics.csv").write_text("step,train/perplexity\n" + "".join(
            f"{step},{level}\n" for step in range(1, 11)))
    (rung,) = decided_rungs(sweep, root)
    assert rung.kept == rung.kept_by_best == ("lr 0.001",) and not rung.differs

    short = next(iter(sweep.runs())).run_id()  # one run short of the rung: nothing decided
    (root / short / "metrics.csv").write_text("step,train/perplexity\n1,50.0\n")
    assert decided_rungs(sweep, root) == []
