"""Faults a sweep or a run must survive honestly: a sweep killed with SIGKILL takes its workers with it and its rerun
says what is unfinished; a run that lost its checkpoint refuses to start over silently; files honour the umask;
any budget ends evaluated; a finished run can be extended; same seed, same metrics file."""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml
from tiny import tiny, tiny_profile
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ConfigError, RunConfig, SweepConfig, load_yaml, to_dict
from pipeline.files import atomic_write_text, save_figure
from pipeline.runlock import claim_owner, run_lock
from pipeline.sweep import load_sweep, summary, sweep_status
from pipeline.sweep.status import RunStatus, estimate_seconds_left, rate_key
from pipeline.training.run import train
from pipeline.training.tracking import wandb_run_id


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_sigkilled_sweep_takes_its_workers_with_it_and_the_rerun_reports_unfinished_runs(tmp_path, monkeypatch):
    path = tiny_profile(tmp_path, "killed", workers=2, max_batches=100_000, eval_every=10_000)
    sweep = load_sweep(path)
    runs = tmp_path / "runs"
    sweep_process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "sweep", str(path), "--runs-dir",
                                      str(runs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    owners: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(owners) < 2:  # both workers training
        time.sleep(0.3)
        owners = [int(f.read_text().split()[0]) for f in runs.glob("*/.lock") if f.read_text().strip()]
        owners = [pid for pid in owners if alive(pid)]
    assert len(owners) == 2, "the workers never started"
    while any(s.batches_done < 10 for s in sweep_status(sweep, runs)) and time.monotonic() < deadline:
        time.sleep(0.3)  # a checkpoint to resume from

    sweep_process.send_signal(signal.SIGKILL)  # the sweep alone, not its process group
    sweep_process.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in owners) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in owners), "a worker outlived its sweep"
    assert {s.state for s in sweep_status(sweep, runs)} == {"interrupted"}

    # The reruns are the pool's plan only: their jobs run in this process (tests/in_process.py). A rerun while
    # another process holds one run trains the other, then exits 1 naming the held run.
    from in_process import pool_in_process

    pool_in_process(monkeypatch)
    held = runs / sweep.runs()[0].run_id()
    with run_lock(held) as lock:
        claim_owner(lock)
        tiny_profile(tmp_path, "killed", workers=2, max_batches=20, eval_every=10_000)  # a lower budget: the free
        # run finishes quickly
        result = CliRunner().invoke(app, ["sweep", str(path), "--runs-dir", str(runs)])
    assert result.exit_code == 1, result.output
    assert "1 run(s) of the grid are not finished:" in result.stderr
    assert f"{held.name}: still running in another process (pid {os.getpid()}" in result.stderr
    result = CliRunner().invoke(app, ["sweep", str(path), "--runs-dir", str(runs)])
    assert result.exit_code == 0, result.output
    assert {s.state for s in sweep_status(load_sweep(path), runs)} == {"finished"}


def test_a_run_that_lost_its_checkpoint_is_refused_unless_restarted(tmp_path, finished_tiny):
    config = tiny(max_batches=20)  # finished_tiny's
    (tmp_path / "run" / "results.json").unlink()
    (tmp_path / "run" / "checkpoints" / "last.ckpt").unlink()
    with pytest.raises(ConfigError, match=r"has logged 20 batches .* checkpoints/last.ckpt is missing.*--restart"):
        train(config, tmp_path / "run", progress=False)
    results = train(config, tmp_path / "run", progress=False, restart=True)
    assert results["batches"] == 20


def test_a_run_stopped_before_its_first_checkpoint_starts_again_from_batch_0(tmp_path):
    """Stopped (SIGTERM) before its first checkpoint was due, a run has a log and no checkpoint: it is interrupted,
    not lost, and trains from batch 0 to the log an uninterrupted run writes."""
    config = tiny(max_batches=20, checkpoint_every=50)
    train(config, tmp_path / "run", progress=False)
    twin = (tmp_path / "run" / "metrics.csv").read_text()
    (tmp_path / "run" / "results.json").unlink()
    shutil.rmtree(tmp_path / "run" / "checkpoints")
    assert "20" in twin
    results = train(config, tmp_path / "run", progress=False)
    assert results["batches"] == 20
    assert (tmp_path / "run" / "metrics.csv").read_text() == twin


def test_a_finished_run_is_extended_by_raising_its_budget(tmp_path, finished_tiny):
    first = json.loads((finished_tiny / "results.json").read_text())  # a finished 20-batch run
    assert train(tiny(max_batches=10), tmp_path / "run", progress=False) == first  # covered: nothing trains
    longer = train(tiny(max_batches=30), tmp_path / "run", progress=False)
    assert longer["batches"] == 30 and (tmp_path / "run" / "results.20.json").is_file()
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["training"]["max_batches"] == 30
    # the extended run's log is the uninterrupted 30-batch run's
    twin = train(tiny(max_batches=30), tmp_path / "twin", progress=False)
    assert (tmp_path / "run" / "metrics.csv").read_text() == (tmp_path / "twin" / "metrics.csv").read_text()
    assert longer["train_perplexity"] == twin["train_perplexity"]


def test_a_run_is_admitted_with_one_read_of_its_checkpoint(finished_tiny, monkeypatch):
    """Extending a finished run, and resuming an interrupted one, each read ``last.ckpt`` once before training (the
    check that it is this run's is made on that one read)."""
    from pipeline.training import runlife

    run_dir = finished_tiny
    reads, real = [], runlife.read_checkpoint
    monkeypatch.setattr(runlife, "read_checkpoint", lambda path, *args, **kw: reads.append(path) or real(path, *args,
                                                                                                         **kw))
    assert runlife.admit(tiny(max_batches=30), run_dir)  # extended: results.20.json kept
    assert reads == [run_dir / "checkpoints" / "last.ckpt"]
    reads.clear()
    assert runlife.admit(tiny(max_batches=30), run_dir)  # now an interrupted run of 30 batches
    assert reads == [run_dir / "checkpoints" / "last.ckpt"]


def test_same_seed_same_metrics_file_and_timings_apart(tmp_path):
    train(tiny(max_batches=20), tmp_path / "a", progress=False)
    train(tiny(max_batches=20), tmp_path / "b", progress=False)
    assert (tmp_path / "a" / "metrics.csv").read_text() == (tmp_path / "b" / "metrics.csv").read_text()
    assert "elapsed" not in (tmp_path / "a" / "metrics.csv").read_text()
    assert (tmp_path / "a" / "timings.csv").read_text().splitlines()[0] == "step,elapsed_s"


def test_a_run_records_its_cpu_seconds_which_leave_out_the_waits_for_a_shared_core(tmp_path):
    import time

    from pipeline.training.monitor import TrainingMonitor

    results = train(tiny(max_batches=20), tmp_path / "run", progress=False)
    assert results["train_cpu_seconds"] > 0 and results["eval_cpu_seconds"] >= 0
    # The clocks themselves: a wait counts in wall time, not in CPU time (a process waiting for a shared core)
    monitor = TrainingMonitor(tmp_path / "m", [])
    monitor.start(0)
    time.sleep(0.3)
    state = monitor.state_dict()
    assert state["elapsed"] >= 0.3 and state["cpu_elapsed"] < 0.1
    # Resumed from a checkpoint made before CPU time was kept: the run's CPU time is unknown, and stays so
    old = {k: v for k, v in state.items() if k != "cpu_elapsed"}
    resumed = TrainingMonitor(tmp_path / "m", [])
    resumed.load_state_dict(old)
    resumed.start(0)
    assert resumed.state_dict()["cpu_elapsed"] is None and resumed.state_dict()["elapsed"] >= 0.3
    # ... and a checkpoint that kept it carries it on
    carried = TrainingMonitor(tmp_path / "m", [])
    carried.load_state_dict(state)
    assert carried.state_dict()["cpu_elapsed"] == pytest.approx(state["cpu_elapsed"], abs=0.05)


def test_a_budget_below_the_evaluation_interval_still_ends_evaluated(tmp_path):
    results = train(tiny(max_batches=7, eval_every=1000, perplexity_every=100), tmp_path / "run", progress=False)
    assert results["batches"] == 7 and results["train_perplexity"] == results["train_perplexity"]  # not NaN
    assert results["selected_step"] == 7 and (tmp_path / "run" / "checkpoints" / "best.ckpt").is_file()
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "run"), "--size", "20"])
    assert result.exit_code == 0 and '"test"' in result.output and '"n": 20' in result.output
    for bad in ("0", "1001"):  # the cached sets hold 1,000
        result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "run"), "--size", bad])
        assert result.exit_code == 2 and f"got {bad}" in result.output, result.output


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "results.json", "{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "results.json").stat().st_mode & 0o777 == mode


def test_a_figure_cut_off_while_written_leaves_the_old_one_and_a_png_does_not_name_matplotlib(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    path = save_figure(fig, tmp_path / "curve.png")
    drawn = path.read_bytes()
    assert drawn.startswith(b"\x89PNG") and b"Matplotlib" not in drawn and b"matplotlib" not in drawn
    assert not plt.fignum_exists(fig.number)  # closed: a report drawing dozens of figures does not keep them

    fig, _ = plt.subplots()

    def cut_off(target, **options):  # a disk that fills, or a kill, halfway through the file
        with open(target, "wb") as f:
            f.write(drawn[:100])
        raise OSError(28, "No space left on device")

    fig.savefig = cut_off
    with pytest.raises(OSError, match="curve.png"):  # the error names the figure, not a temporary file
        save_figure(fig, path)
    assert path.read_bytes() == drawn and [p.name for p in tmp_path.iterdir()] == ["curve.png"]  # no partial left
    assert not plt.fignum_exists(fig.number)


def test_yaml_off_is_the_tracking_setting_off(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("tracking: {wandb: off}\n")
    assert load_yaml(RunConfig, path).tracking.wandb == "off"
    path.write_text("tracking: {wandb: true}\n")
    with pytest.raises(ConfigError, match="tracking.wandb must be one of 'offline', 'online', 'off'; got True"):
        load_yaml(RunConfig, path)


def test_an_empty_profile_and_a_foreign_run_directory_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="empty; give at least one key"):
        load_yaml(SweepConfig, empty)
    result = CliRunner().invoke(app, ["sweep", str(empty)])
    assert result.exit_code == 2 and "empty; give at least one key" in result.output
    assert "Traceback" not in result.output
    empty.write_text("description: no name\n")
    with pytest.raises(ConfigError, match="missing key 'name'"):
        load_yaml(SweepConfig, empty)

    train(tiny(max_batches=10), tmp_path / "run", progress=False)
    result = CliRunner().invoke(app, ["train", "--run-dir", str(tmp_path / "run"), "--lr", "0.01", "--no-progress"])
    assert result.exit_code == 2 and "holds a run of a different config" in result.output
    assert "Traceback" not in result.output


def test_wandb_ids_follow_the_run_directory_not_the_budget(tmp_path):
    a = wandb_run_id(tiny(max_batches=10), tmp_path / "a")
    assert a == wandb_run_id(tiny(max_batches=99), tmp_path / "a")  # an extended run continues its W&B run
    assert a != wandb_run_id(tiny(max_batches=10), tmp_path / "b")  # same config elsewhere: another run
    assert "." not in a


def test_the_time_left_weighs_each_measured_process_by_its_batches_and_waits_for_enough_of_them(tmp_path):
    """The cpu profile's sweep said "at most ~132 h left" for about 45: the first Stack process it measured had resumed
    a run for its last 500 batches, so its wall time was mostly its start and final evaluation (2 s a batch against
    0.3). Processes weigh by the batches they trained, and price a model only once they have trained 2,000; until
    then, its finished runs' own rates do."""
    config = tiny(max_batches=10_000)
    done = tmp_path / "done"
    done.mkdir()
    (done / "results.json").write_text(json.dumps({"batches": 10_000, "train_perplexity": 5.0, "train_coarse": 0.0,
                                                   "test_coarse": 0.0, "train_seconds": 2800.0, "eval_seconds": 200.0}))
    statuses = [RunStatus(config, done, "finished", 10_000, 2800.0),
                RunStatus(config, tmp_path / "a", "pending", 0, 0.0)]
    key = rate_key(config)
    short = (1000.0, 500)  # 2 s a batch: start-up and final evaluation over 500 batches
    assert estimate_seconds_left(statuses, 1, {key: [short]}) == pytest.approx(10_000 * 0.3)  # the run's rate
    long = (4000.0, 10_000)  # 0.4 s a batch: this machine, now, slower than the finished run's 0.3
    assert estimate_seconds_left(statuses, 1, {key: [long]}) == pytest.approx(10_000 * 0.4)
    assert estimate_seconds_left(statuses, 1, {key: [short, long]}) == pytest.approx(10_000 * 5000 / 10_500)


def test_progress_counts_this_sweeps_own_workers_and_estimates_from_measured_runs(tmp_path):
    config = tiny(max_batches=100)
    statuses = [RunStatus(config, tmp_path / "a", "running", 0, 0.0),
                RunStatus(config, tmp_path / "b", "pending", 0, 0.0)]
    measured = {rate_key(config): [(1000.0, 2000)]}  # a process's wall seconds and batches: 0.5 s a batch
    assert summary(statuses, 2, measured).startswith("0 finished, 1 running, 0 failed, 1 to go")
    assert estimate_seconds_left(statuses, 2, measured) == pytest.approx(200 * 0.5 / 2)
    # a rate is the model's at its size: another size of the same model is priced apart
    wider = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden=config.model.hidden * 2))
    statuses.append(RunStatus(wider, tmp_path / "c", "pending", 0, 0.0))
    assert estimate_seconds_left(statuses, 2, {**measured, rate_key(wider): [(4000.0, 2000)]}) == pytest.approx(
        (200 * 0.5 + 100 * 2.0) / 2)
    data = {"name": "x", "defaults": {"model": {"memory_width": 4, "embedding": 4}},
            "grid": [{"tasks": ["reversal"], "models": ["stack"], "hidden": [8]}]}
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    run_dir = tmp_path / "runs" / sweep.runs()[0].run_id()
    assert [s.state for s in sweep_status(sweep, tmp_path / "runs", active={run_dir})] == ["running"]


def test_run_directories_of_an_older_id_scheme_are_adopted(tmp_path):
    from pipeline.sweep.grid import adopt_renamed_runs

    data = {"name": "x", "defaults": {"model": {"memory_width": 4, "embedding": 4}},
            "grid": [{"tasks": ["reversal"], "models": ["stack"], "hidden": [8]}]}
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    run = sweep.runs()[0]
    old = tmp_path / "runs" / "reversal-stack-h8-lr0.001-s0-0ldhash0"
    old.mkdir(parents=True)
    (old / "config.yaml").write_text(yaml.safe_dump(to_dict(run)))
    (tmp_path / "runs" / "unrelated").mkdir()
    assert adopt_renamed_runs(sweep, tmp_path / "runs") == [(old.name, run.run_id())]
    assert (tmp_path / "runs" / run.run_id() / "config.yaml").is_file() and (tmp_path / "runs" / "unrelated").is_dir()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_asking_for_cuda_without_one_is_a_one_line_error(tmp_path):
    train(tiny(max_batches=10), tmp_path / "run", progress=False)
    for command in (["evaluate", str(tmp_path / "run"), "--accelerator", "cuda"],
                    ["inspect", str(tmp_path / "run"), "--accelerator", "cuda"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2 and "torch sees no CUDA device" in result.output, result.output


@pytest.mark.slow  # the default suite: a SIGKILLed sweep above, a SIGTERMed single run (test_probe.py)
def test_a_sigterm_stops_a_sweep_with_143_and_lists_its_unfinished_runs(tmp_path):
    """Issue 35, fault 6: SIGTERM on a sweep exited 130 (SIGINT's status) without a word on its runs. One worker:
    the run it trains is interrupted and waited for, the other still pending (test_a_sigkilled_sweep_... above has
    two workers)."""
    path = tiny_profile(tmp_path, "stopped", workers=1, max_batches=100_000, eval_every=10_000)
    sweep = load_sweep(path)
    runs = tmp_path / "runs"
    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "sweep", str(path), "--runs-dir", str(runs)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(s.batches_done >= 10 for s in sweep_status(sweep, runs)):
        time.sleep(0.3)  # the run has a checkpoint to resume from
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    assert "Stopped by SIGTERM: the same command resumes the sweep where it stopped." in stderr
    assert "2 run(s) of the grid are not finished:" in stderr and "Traceback" not in stderr
    # the worker was waited for: when the sweep exits its run reads interrupted, not running
    assert sorted(s.state for s in sweep_status(sweep, runs)) == ["interrupted", "pending"]
