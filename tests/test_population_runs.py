"""Population training's runs (pipeline/training/engine.py, train_population): every member writes the run folder
its single run writes (the same metrics within float32 rounding, results, checkpoints a single run resumes from), a
member that stops leaves the others training, and a population killed with kill -9 and run again equals its
uninterrupted twin."""

import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pipeline.config import ConfigError, ProbeConfig, RunConfig, from_dict
from pipeline.rundir import RunDir
from pipeline.training.run import population_key, train, train_population

REPO = Path(__file__).resolve().parents[1]
NUMBERS = ("train/perplexity", "train/coarse", "train/fine", "test/coarse", "test/fine")


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def member(task, seed, lr, model="lstm1", max_batches=200, **training):
    settings = dict(seed=seed, lr=lr, max_batches=max_batches, perplexity_every=20, eval_every=50, eval_size=10,
                    test_eval_size=10, final_eval_size=20, checkpoint_every=25, early_stop_patience=0)
    settings.update(training)
    return from_dict(RunConfig, {"task": task, "model": {"name": model, "hidden": 16, "embedding": 8,
                                                         "memory_width": 8},
                                 "training": settings, "tracking": {"wandb": "off"}})


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """``alone(config)``: the folder and results of ``config``'s single run, trained once per module and process (the
    tests that set several populations beside the same single runs share them; a test reads them, never writes)."""
    trained, root = {}, tmp_path_factory.mktemp("alone")

    def single_run(config):
        key = repr(config)
        if key not in trained:
            run_dir = root / str(len(trained)) / config.run_id()
            trained[key] = run_dir, train(config, run_dir, progress=False)
        return trained[key]

    return single_run


def metrics(run_dir):
    with open(Path(run_dir) / "metrics.csv") as f:
        return list(csv.DictReader(f))


def assert_same_numbers(rows, expected, rel):
    assert [r["step"] for r in rows] == [r["step"] for r in expected]
    for row, want in zip(rows, expected):
        for key in want:
            if key == "step" or want[key] == "":
                assert row[key] == want[key], (row["step"], key)
            else:
                assert float(row[key]) == pytest.approx(float(want[key]), rel=rel, abs=1e-12), (row["step"], key)


# static shapes (a GPU's captured step, eager here) is `slow`: test_a_captured_population_refills_a_stopped_
# members_slot_in_place holds its slot refill in the default suite
@pytest.mark.parametrize("static_shapes", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_runs_of_the_synthetic_and_the_itg_tasks_share_one_population_and_write_their_runs(tmp_path, static_shapes,
                                                                                          alone):
    """One architecture's copy, gender and SVO->SOV runs are one population (their vocabularies padded to the
    largest), two at a time: the copy run leaves at 40 and the SVO->SOV run takes its slot, rebuilt around the others
    (eager) or placed into the slot of the stepped-at-static-shapes model (a GPU's captured step, eager here). Each
    writes its single run's rows, within float32 rounding."""
    configs = [member("copy", 3, 1e-3, max_batches=40), member("gender", 7, 2e-3, max_batches=60),
               member("svo_sov", 11, 1e-3, max_batches=60)]
    assert len({population_key(c) for c in configs}) == 1
    together = [tmp_path / "population" / c.run_id() for c in configs]
    results = train_population(configs, together, width=2, batched=True, static_shapes=static_shapes)
    for config, run_dir, result in zip(configs, together, results):
        single, expected = alone(config)
        assert_same_numbers(metrics(run_dir), metrics(single), rel=1e-4)
        assert result["batches"] == expected["batches"] == config.training.max_batches


# Only the LSTM's members as runs are in the default suite: the batched Stack's (~20 s) and the baselines' are `slow`.
# What they add is each architecture's batched step, which test_population.py checks in float64, quickly; the run
# folders members write, with one leaving and another taking its slot, are the LSTM's case here.
@pytest.mark.parametrize("model", ["lstm1", *(pytest.param(m, marks=pytest.mark.slow)
                                             for m in ("stack", "transformer", "jm_stack"))])
def test_every_member_writes_the_run_its_single_run_writes(tmp_path, model, alone):
    """50 batches in float32, three members that differ in task, seed, learning rate and budget, two at a time (the
    second leaves at 30 and the third takes its place): each member's metrics.csv rows equal its single run's
    within 1e-4 relative, its results say the same, and its folder holds the same files."""
    configs = [member("copy", 3, 1e-3, model, max_batches=50, eval_every=25),
               member("reversal", 7, 5e-4, model, max_batches=30, eval_every=25),
               member("bigram_flip", 11, 2e-3, model, max_batches=50, eval_every=25)]
    together = [tmp_path / "population" / c.run_id() for c in configs]
    results = train_population(configs, together, width=2, batched=True)
    for config, run_dir, result in zip(configs, together, results):
        single, expected = alone(config)
        assert_same_numbers(metrics(run_dir), metrics(single), rel=1e-4)
        assert result["batches"] == expected["batches"] == config.training.max_batches
        assert result["population"] == [c.run_id() for c in configs]
        for key in ("train_coarse", "test_coarse", "train_fine", "test_fine", "train_perplexity", "selected_step"):
            assert result[key] == pytest.approx(expected[key], rel=1e-3, abs=1e-3), key
        assert RunDir(run_dir).state(config) == "finished" and not RunDir(run_dir).damage()
        names = {p.relative_to(single).as_posix() for p in single.rglob("*") if p.is_file()}
        assert {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()} == names


@pytest.mark.slow  # held in the default suite by test_a_population_equals_its_runs_alone_in_every_clip_mode_...[False]
def test_on_a_cpu_members_take_their_single_runs_steps_and_write_their_logs_byte_for_byte(tmp_path, alone):
    """Not batched (a CPU's default: batching members buys an arithmetic-bound CPU nothing), each member takes its
    single run's own step in turn: its metrics.csv is its single run's, byte for byte."""
    configs = [member("copy", 3, 1e-3, "stack", max_batches=40, eval_every=20),
               member("reversal", 7, 5e-4, "stack", max_batches=20, eval_every=20)]
    together = [tmp_path / "population" / c.run_id() for c in configs]
    train_population(configs, together, width=2)
    for config, run_dir in zip(configs, together):
        single, _ = alone(config)
        assert (run_dir / "metrics.csv").read_text() == (single / "metrics.csv").read_text()


def test_a_single_run_resumes_a_members_checkpoint(tmp_path):
    """A member's checkpoints are a single run's: `train` extends a member trained to 60 batches on to 120 as it
    extends its own run (the same numbers within float32 rounding), its earlier results kept."""
    short, long = member("reversal", 5, 5e-3, max_batches=60), member("reversal", 5, 5e-3, max_batches=120)
    train_population([short, member("copy", 1, 1e-3, max_batches=60)],
                     [tmp_path / "p" / short.run_id(), tmp_path / "p" / "other"], batched=True)
    extended = train(long, tmp_path / "p" / short.run_id(), progress=False)
    train(short, tmp_path / "alone", progress=False)
    straight = train(long, tmp_path / "alone", progress=False)  # its own run, extended the same way
    assert (tmp_path / "p" / short.run_id() / "results.60.json").is_file()
    assert_same_numbers(metrics(tmp_path / "p" / short.run_id()), metrics(tmp_path / "alone"), rel=1e-4)
    assert extended["train_perplexity"] == pytest.approx(straight["train_perplexity"], rel=1e-4)


def test_a_member_that_stops_early_leaves_while_the_others_go_on(tmp_path):
    """Each member stops by its own rule: one that the pruning rule stops at batch 40 (still on its starting
    plateau) ends there with its reason; the other trains to its budget."""
    quick = member("copy", 2, 1e-3, max_batches=200, prune_at=[40])
    slow = member("copy", 4, 1e-3, max_batches=100)
    done = train_population([quick, slow], [tmp_path / "quick", tmp_path / "slow"])
    assert (done[0]["batches"], done[0]["stop_reason"]) == (40, "pruned")
    assert (done[1]["batches"], done[1]["stop_reason"]) == (100, "budget")
    assert train_population([quick, slow], [tmp_path / "quick", tmp_path / "slow"]) == done  # nothing left to do


def test_runs_that_cannot_share_a_model_are_refused_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot train in one population .*share the model"):
        train_population([member("copy", 0, 1e-3), member("copy", 0, 1e-3, "lstm2")], [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ConfigError, match="a directory each"):
        train_population([member("copy", 0, 1e-3), member("copy", 1, 1e-3)], [tmp_path / "a", tmp_path / "a"])
    assert not (tmp_path / "a").exists()
    # the DeQue's bottom read held unheard follows each run's own batch count, which members stacked as one model do
    # not keep apart: refused batched, in one line, before any work (one member after another, each keeps its own)
    late = member("copy", 0, 1e-3, "deque")
    probed = dataclasses.replace(late.model, probes=ProbeConfig(bottom_read_heard_from=100))
    late = dataclasses.replace(late, model=probed)
    with pytest.raises(ConfigError, match=r"model.probes.bottom_read_heard_from \(100\) is not supported by a batched"):
        train_population([late, late], [tmp_path / "c", tmp_path / "d"], batched=True)
    assert not (tmp_path / "c").exists()
    # likewise the ablation's reads masked for good (probes.read_zeroed)
    zeroed = dataclasses.replace(late, model=dataclasses.replace(late.model, probes=ProbeConfig(read_zeroed=True)))
    with pytest.raises(ConfigError, match=r"model.probes.read_zeroed is not supported by a batched"):
        train_population([zeroed, zeroed], [tmp_path / "c", tmp_path / "d"], batched=True)
    assert not (tmp_path / "c").exists()
    # the start biases are initial values, not shapes: runs that differ only there share a population
    stack = member("copy", 0, 1e-3, "stack")
    paper_start = dataclasses.replace(stack, model=dataclasses.replace(stack.model, push_bias=None))
    assert population_key(stack) == population_key(paper_start)


POPULATION_SCRIPT = """
import sys
from pathlib import Path
from pipeline.config import RunConfig, from_dict
from pipeline.training.run import train_population
import json
spec = json.loads(sys.argv[1])
configs = [from_dict(RunConfig, c) for c in spec["configs"]]
train_population(configs, [Path(d) for d in spec["dirs"]], batched=True, static_shapes=True)
"""


# `slow` (~13 CPU-s for the LSTM, ~1 min for the Stack); the default suite holds its parts: a single run killed and
# resumed (test_training.py), a member's checkpoint resumed (test_a_single_run_resumes_a_members_checkpoint)
@pytest.mark.slow
@pytest.mark.parametrize("model", ["lstm1", "stack"])
def test_a_population_killed_and_run_again_equals_its_uninterrupted_twin(tmp_path, model):
    """kill -9 mid-run (after the members' evaluation at batch 30, at their checkpoints at batch 40 or later), run
    again: every member resumes from its own last.ckpt and ends with the metrics.csv and results of the twin that was
    never stopped, byte for byte. Static shapes make a member's arithmetic its own, wherever the kill fell between two
    members' checkpoints."""
    from pipeline.config import to_dict

    configs = [member("copy", 3, 1e-2, model, max_batches=100, checkpoint_every=10, eval_every=30),
               member("reversal", 7, 5e-3, model, max_batches=100, checkpoint_every=10, eval_every=30)]

    def spec(root):
        return json.dumps({"configs": [to_dict(c) for c in configs], "dirs": [str(root / c.run_id()) for c in configs]})

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # the twin that is never stopped trains here, in the test's process: the same step, one thread, no process to kill
    train_population(configs, [tmp_path / "twin" / c.run_id() for c in configs], batched=True, static_shapes=True)
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "-c", POPULATION_SCRIPT, spec(killed)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    last = [killed / c.run_id() / "checkpoints" / "last.ckpt" for c in configs]
    def logged(run_dir):
        return len(metrics(run_dir)) if (run_dir / "metrics.csv").exists() else 0

    while time.monotonic() < deadline and not all(p.exists() and logged(p.parents[1]) >= 3 for p in last):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not any((killed / c.run_id() / "results.json").exists() for c in configs), "killed too late to test"
    # run again here, in process: what resumes each member is its folder as the kill left it, not the process
    train_population(configs, [killed / c.run_id() for c in configs], batched=True, static_shapes=True)
    for c in configs:
        assert (killed / c.run_id() / "metrics.csv").read_text() == (tmp_path / "twin" / c.run_id() /
                                                                     "metrics.csv").read_text()
        mine, theirs = (json.loads((root / c.run_id() / "results.json").read_text())
                        for root in (killed, tmp_path / "twin"))
        for key in ("batches", "train_perplexity", "train_coarse", "train_fine", "test_coarse", "test_fine"):
            assert mine[key] == theirs[key], key


def sweep_profile(tmp_path, population, seeds=(0, 1)):
    import yaml

    data = {"name": "packed", "workers": 2, "population": population,
            "defaults": {"model": {"embedding": 8, "memory_width": 8},
                         "training": {"max_batches": 20, "perplexity_every": 10, "eval_every": 10, "eval_size": 10,
                                      "test_eval_size": 10, "final_eval_size": 20, "checkpoint_every": 10,
                                      "early_stop_patience": 0}, "tracking": {"wandb": "off"}},
            "grid": [{"tasks": ["copy", "reversal"], "models": ["lstm1", "stack"], "hidden": [16], "lr": [1e-3],
                      "seeds": list(seeds)}]}
    path = tmp_path / "packed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_sweep_packs_the_runs_that_share_a_model_into_populations(tmp_path):
    """`population: 3` over 4 LSTM and 4 Stack runs: a job per model (never a mixed one) of its 4 runs, to be trained
    3 at a time (trained below, `slow`). The SLURM route packs with the same function (test_sweep.py's
    test_slurm_route_... trains a population through submitit, in the default suite)."""
    from pipeline.sweep import load_sweep
    from pipeline.sweep.grid import pack
    from pipeline.sweep.status import planned_runs

    sweep = load_sweep(sweep_profile(tmp_path, population=3))
    configs = {tmp_path / "runs" / r.run_id(): r for r, _ in planned_runs(sweep, tmp_path / "runs")}
    jobs = pack(list(configs), configs, 3)
    assert sorted(len(job) for job in jobs) == [4, 4]
    assert all(len({configs[d].model.name for d in job}) == 1 for job in jobs)
    assert pack(list(configs), configs, None) == [(d,) for d in configs]


@pytest.mark.slow  # ~10 CPU-s; the SLURM route's test trains a packed population through a sweep by default
@pytest.mark.usefixtures("in_process_pool")
def test_a_sweeps_packed_populations_train_every_run_each_naming_its_population(tmp_path):
    """The packing above, trained by the pool's route: every run finished, each naming the population it trained in."""
    from pipeline.sweep import load_sweep, run_local

    sweep = load_sweep(sweep_profile(tmp_path, population=3))
    statuses = run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    assert [s.state for s in statuses] == ["finished"] * 8
    named = {tuple(json.loads((s.run_dir / "results.json").read_text()).get("population", [s.run_dir.name]))
             for s in statuses}
    assert sorted(len(p) for p in named) == [4, 4]


def test_a_population_size_out_of_range_is_refused_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.sweep import load_sweep

    with pytest.raises(ConfigError, match=r"population must be a whole number of runs in \[1, 1024\], got 0"):
        load_sweep(sweep_profile(tmp_path, population=0))
    result = CliRunner().invoke(app, ["sweep", str(sweep_profile(tmp_path, population=2)), "--population", "5000",
                                      "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "5000" in result.output and not (tmp_path / "runs").exists()


def test_every_member_is_its_own_wandb_run(tmp_path):
    """W&B offline: each member writes one run of its own under its folder (a new run neither finishes the others,
    wandb's default in a script, nor takes over the process's global run, which Lightning's logger would reuse),
    with its own metrics and final summary."""
    from pipeline.training.tracking import wandb_run_id

    def offline(config):
        return dataclasses.replace(config, tracking=dataclasses.replace(config.tracking, wandb="offline"))

    configs = [offline(member(task, seed, 1e-3, max_batches=40, eval_every=20))
               for task, seed in (("copy", 1), ("reversal", 2))]
    dirs = [tmp_path / c.run_id() for c in configs]
    train_population(configs, dirs)
    # A finished run's log is closed by wandb's service after ``finish()`` returns (the finish is a message, not a
    # wait), so read it only once the service has shut down: what a process exit does for the sweep's workers.
    import wandb

    wandb.teardown()
    for config, run_dir in zip(configs, dirs):
        (log,) = run_dir.glob("wandb/offline-run-*/*.wandb")
        assert log.name == f"run-{wandb_run_id(config, run_dir)}.wandb"
        data = log.read_bytes()
        assert config.run_id().encode() in data and b"final/batches" in data and data.count(b"train/perplexity") >= 4
        other = next(c for c in configs if c is not config)
        assert other.run_id().encode() not in data


def test_a_member_that_cannot_train_refuses_the_population_before_any_member_trains(tmp_path):
    """A member whose folder holds another config's run (or a lost checkpoint) is named in one line before any
    member has trained a batch: the first member's folder gets no log."""
    first, second = member("copy", 0, 1e-3, max_batches=20), member("reversal", 1, 1e-3, max_batches=20)
    other = member("reversal", 2, 1e-3, max_batches=20)
    train(other, tmp_path / "taken", progress=False)
    with pytest.raises(ConfigError, match="holds a run of a different config"):
        train_population([first, second], [tmp_path / "first", tmp_path / "taken"], width=1)
    assert not (tmp_path / "first" / "metrics.csv").exists()


def test_a_captured_population_refills_a_stopped_members_slot_in_place(tmp_path, monkeypatch, alone):
    """At static shapes (the captured step, eager off a GPU) a member that stops hands its slot to the next waiting
    run without a new population (no new capture): three runs two at a time build it twice (at the start, and when
    the last two leave with no one waiting), not three times; every member still writes its single run's numbers."""
    from pipeline.training import engine

    built = []
    original = engine.BatchedPopulation.of.__func__

    def counting(cls, members, device, length=None, vocab=None):
        built.append([m.config.task for m in members])
        return original(cls, members, device, length, vocab)

    monkeypatch.setattr(engine.BatchedPopulation, "of", classmethod(counting))
    configs = [member("copy", 3, 1e-3, max_batches=50, eval_every=25),
               member("reversal", 7, 5e-4, max_batches=30, eval_every=25),
               member("bigram_flip", 11, 2e-3, max_batches=50, eval_every=25)]  # test_every_member_...'s single runs
    together = [tmp_path / "population" / c.run_id() for c in configs]
    train_population(configs, together, width=2, batched=True, static_shapes=True)
    assert built == [["copy", "reversal"], ["bigram_flip"]]  # bigram_flip took reversal's slot at 30
    for config, run_dir in zip(configs, together):
        assert_same_numbers(metrics(run_dir), metrics(alone(config)[0]), rel=1e-4)


def test_one_members_failure_in_its_monitor_is_its_own(tmp_path, monkeypatch):
    """The third probe's item 8: a diverging member whose perplexity overflowed failed every member of its population
    with its error, the healthy ones included. Now its window's overflow is an infinite perplexity, and any error in
    one member's window or evaluation fails that member alone."""
    import math

    from pipeline.training.monitor import TrainingMonitor

    close = TrainingMonitor._close_window

    def overflow_for_the_first(self, module, step):
        if self.run_dir.name == "diverging" and step >= 40:
            raise OverflowError("math range error")
        return close(self, module, step)

    monkeypatch.setattr(TrainingMonitor, "_close_window", overflow_for_the_first)
    configs = [member("copy", 1, 1e-3, max_batches=60), member("copy", 2, 1e-3, max_batches=60)]
    dirs = [tmp_path / "diverging", tmp_path / "healthy"]
    results = train_population(configs, dirs, batched=False)
    assert results[0] is None and results[1]["batches"] == 60
    assert "OverflowError: math range error (at batch 40)" in RunDir(dirs[0]).read_failure()
    assert not RunDir(dirs[1]).failed_file.exists()
    # and the overflow itself is no error: a window's mean loss past exp's range is an infinite perplexity
    monitor = TrainingMonitor(tmp_path / "x", [])
    monitor.window_nll, monitor.window_tokens = 1e6, 10

    assert monitor._close_window(None, 10)["train/perplexity"] == math.inf


# batched is `slow`: test_population.py checks the batched step in float64, each architecture, quickly
@pytest.mark.parametrize("batched", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_population_equals_its_runs_alone_in_every_clip_mode_with_an_itg_member_and_one_that_turns_nan(
        tmp_path, monkeypatch, batched, alone):
    """Three runs of one architecture trained as one population: clipping by value and by norm (members differ in
    clip mode only across populations: it is shared), on an ITG task (one grammar's vocabulary), and a member whose
    rate makes its loss NaN. The NaN member fails alone, with the
    batch in its failed.json; the others write their single runs' metrics (byte for byte one after another, within
    float32 rounding batched), untouched by it."""
    import math

    from pipeline.training import engine

    open_member = engine.open_member

    def poisoned(config, run_dir, *args):  # one embedding column NaN: its loss is NaN from its first batch on
        opened = open_member(config, run_dir, *args)
        if run_dir.name == "diverging":
            with torch.no_grad():
                opened.module.model.embed.weight[:, 0] = math.nan
        return opened

    monkeypatch.setattr(engine, "open_member", poisoned)
    for clip_mode in ("value", "norm"):
        healthy = [member("gender", 3, 1e-3, "lstm2", max_batches=40, eval_every=20, clip_mode=clip_mode),
                   member("gender", 7, 2e-3, "lstm2", max_batches=40, eval_every=20, clip_mode=clip_mode)]
        diverging = member("gender", 5, 1e-3, "lstm2", max_batches=40, eval_every=20, clip_mode=clip_mode)
        configs = [healthy[0], diverging, healthy[1]]
        dirs = [tmp_path / clip_mode / "population" / c.run_id() for c in configs]
        dirs[1] = dirs[1].parent / "diverging"
        results = train_population(configs, dirs, batched=batched)
        assert results[1] is None and "FloatingPointError: training loss is nan at batch 1" in \
            RunDir(dirs[1]).read_failure()
        for config, run_dir, result in zip(configs[::2], dirs[::2], results[::2]):
            single, expected = alone(config)
            if batched:
                assert_same_numbers(metrics(run_dir), metrics(single), rel=1e-4)
            else:
                assert (run_dir / "metrics.csv").read_text() == (single / "metrics.csv").read_text()
            assert result["batches"] == expected["batches"] == 40 and result["stop_reason"] == "budget"


def test_a_member_that_failed_before_and_trains_again_ends_with_its_results(tmp_path):
    """A run whose failed.json is an earlier attempt's (a sweep's --retry-failed trains it again) is judged by what
    happens now: it trains to its budget and writes its results, in a population as alone."""
    configs = [member("copy", 1, 1e-3, max_batches=40), member("copy", 2, 1e-3, max_batches=40)]
    dirs = [tmp_path / "failed-before", tmp_path / "other"]
    RunDir(dirs[0]).path.mkdir(parents=True)
    RunDir(dirs[0]).write_failure({"error": "FloatingPointError: an earlier attempt", "traceback": ""})
    results = train_population(configs, dirs)
    assert [r["batches"] for r in results] == [40, 40]
    assert RunDir(dirs[0]).results_file.is_file()
