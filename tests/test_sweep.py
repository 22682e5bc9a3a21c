"""Profiles, sweeps and reports: the smoke profile end to end, a killed sweep resumed, bad profiles refused,
failures recorded, and the SLURM route (through submitit's local executor)."""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError
from pipeline.models import DISPLAY_NAMES, PAPER_MODEL_NAMES
from pipeline.reports.build import write_report
from pipeline.reports.table3 import TABLE3_COLUMNS
from pipeline.rundir import RunDir
from pipeline.sweep import load_sweep, run_local, submit_slurm, sweep_status

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    """Workers are separate processes: they find the test's cache through the environment."""
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def profile(tmp_path, name="tiny", models=("lstm1", "stack"), tasks=("reversal",), max_batches=30, **training):
    settings = dict(max_batches=max_batches, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=20, checkpoint_every=5, early_stop_patience=0, length_pool=2)
    settings.update(training)
    data = {"name": name, "workers": 2,
            "defaults": {"model": {"memory_width": 8, "embedding": 8}, "training": settings,
                         "tracking": {"wandb": "off"}},
            "grid": [{"tasks": list(tasks), "models": list(models), "hidden": [16], "lr": [1e-2]}]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow  # 35 runs, ~3 minutes: `make test-slow`; test_a_small_grid_is_reported_... is the quick one
def test_smoke_profile_runs_end_to_end_and_reports_every_cell(tmp_path):
    sweep = load_sweep(REPO / "configs" / "smoke.yaml")
    runs = tmp_path / "runs"
    statuses = run_local(sweep, runs, echo=lambda _: None)
    assert [s.state for s in statuses] == ["finished"] * 35

    out = tmp_path / "report"
    readme = write_report(sweep, "configs/smoke.yaml", runs, out, command="pytest")
    with open(out / "table3.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(TABLE3_COLUMNS)
    assert len(rows) == 35 and {(r["task"], r["model"]) for r in rows} == {
        (t, m) for t in ("copy", "reversal", "bigram_flip", "svo_sov", "gender")
        for m in ("lstm1", "lstm2", "lstm4", "lstm8", "stack", "queue", "deque")}
    for r in rows:
        for metric in ("train_coarse", "train_fine", "test_coarse", "test_fine"):
            ours, paper, diff = float(r[metric]), float(r[f"paper_{metric}"]), float(r[f"diff_{metric}"])
            assert 0 <= ours <= 1 and abs(diff - (ours - paper)) < 1e-9
    assert rows[0]["paper_train_coarse"] == "0.62" and rows[0]["paper_test_fine"] == "0.38"  # copy, 1-layer LSTM
    text = readme.read_text()
    assert "35 finished" in text and "Made by `pytest` with the code at commit" in text
    assert re.search(r"Compute: [0-9.]+ CPU-hours over the 35 done runs", text)
    speeds = re.search(r"median ms a batch with \d+ run\(s\) side by side: (.*)\.", text).group(1)
    assert [name.rsplit(" ", 1)[0] for name in speeds.split(", ")] == [DISPLAY_NAMES[m] for m in PAPER_MODEL_NAMES]
    assert all(float(name.rsplit(" ", 1)[1]) > 0 for name in speeds.split(", "))
    for name in ("table3.md", "table2.md", "convergence_reversal.png", "length_gender.png"):
        assert (out / name).is_file() and f"]({name})" in text
    # Reports are regenerated from the finished runs alone: a second report, no training, same numbers.
    before = {d.name: (d / "results.json").stat().st_mtime for d in runs.iterdir() if d.is_dir()}
    write_report(sweep, "configs/smoke.yaml", runs, tmp_path / "again", command="pytest")
    assert (tmp_path / "again" / "table3.csv").read_text() == (out / "table3.csv").read_text()
    assert before == {d.name: (d / "results.json").stat().st_mtime for d in runs.iterdir() if d.is_dir()}


@pytest.mark.slow  # the quick SIGKILL test is tests/test_faults.py's
def test_killed_sweep_rerun_loses_nothing(tmp_path):
    path = profile(tmp_path, models=("lstm1", "stack", "queue"), max_batches=60)
    sweep = load_sweep(path)
    runs = tmp_path / "runs"
    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "sweep", str(path), "--runs-dir", str(runs),
                                "--workers", "2"], start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        states = [s.state for s in sweep_status(sweep, runs)]
        running = [s for s in sweep_status(sweep, runs) if s.state == "running"]
        if "finished" in states and any(s.batches_done >= 10 for s in running):
            break
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)  # the sweep and all its workers, mid-run
    process.wait()
    before = {s.run_dir.name: s for s in sweep_status(sweep, runs)}
    assert "finished" in {s.state for s in before.values()}
    assert {"interrupted", "pending"} & {s.state for s in before.values()}, "nothing was left to resume"
    finished_mtime = {n: (s.run_dir / "results.json").stat().st_mtime for n, s in before.items()
                      if s.state == "finished"}

    statuses = run_local(sweep, runs, echo=lambda _: None)
    assert all(s.state == "finished" for s in statuses)
    for name, mtime in finished_mtime.items():  # finished runs were not trained again
        assert (runs / name / "results.json").stat().st_mtime == mtime
    for s in statuses:
        with open(s.run_dir / "metrics.csv") as f:
            steps = [int(r["step"]) for r in csv.DictReader(f)]
        assert steps == sorted(set(steps)) and steps[-1] == 60 and 10 in steps


# the pool's plan, not its processes; the report's tables, not its pixels (rendered in test_report_layout.py)
@pytest.mark.usefixtures("in_process_pool", "figures_unrendered")
def test_a_small_grid_is_reported_with_every_table3_column(tmp_path):
    path = profile(tmp_path, models=("lstm1", "stack"), tasks=("copy", "reversal"), max_batches=10)
    sweep = load_sweep(path)
    assert [s.state for s in run_local(sweep, tmp_path / "runs", echo=lambda _: None)] == ["finished"] * 4
    # a documented experiment kept outside the profile that continues one of its runs (the same run id, its cap
    # raised, its log beginning with the run's) is linked from its cell's row; one on the same cell in another
    # configuration is not, nor the same config trained again along another path
    lstm1_copy = next(run.run_id() for run in sweep.runs() if run.task == "copy" and run.model.name == "lstm1")
    own_log = (tmp_path / "runs" / lstm1_copy / "metrics.csv").read_text()
    other_path = "step,train/perplexity\n10,1e9\n"  # its first window differs from the run's
    for name, run_id, log in (("lstm1-copy-long", lstm1_copy, own_log),
                              ("lstm1-copy-elsewhere", "copy-lstm1-h256-other", own_log),
                              ("lstm1-copy-retrained", lstm1_copy, other_path)):
        experiment = tmp_path / "experiments" / name
        experiment.mkdir(parents=True)
        (experiment / "results.json").write_text(json.dumps(dict(
            task="copy", model="lstm1", run_id=run_id, batches=60000, stop_reason="budget", train_perplexity=90.0,
            train_coarse=0.5, train_fine=0.5, test_coarse=0.0, test_fine=0.0)))
        (experiment / "metrics.csv").write_text(log)
    readme = write_report(sweep, path, tmp_path / "runs", tmp_path / "out", command="pytest",
                          experiments_dir=tmp_path / "experiments")
    with open(tmp_path / "out" / "table3.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(TABLE3_COLUMNS) and len(rows) == 35  # every cell of the paper's Table 3
    ours = [r for r in rows if r["in_profile"] == "True"]
    assert len(ours) == 4 and all(r["verdict"] for r in ours)
    assert all(r["verdict"] == "" and r["run_id"] == "" for r in rows if r["in_profile"] == "False")
    for r in ours:
        assert abs(float(r["diff_test_coarse"]) - (float(r["test_coarse"]) - float(r["paper_test_coarse"]))) < 1e-9
        assert r["runs"] == "1" and r["seeds_at_selected"] == "1"
    text = readme.read_text()
    assert text.splitlines()[2].startswith("**") and "31 not in this profile" in text.splitlines()[2]
    assert "4 finished" in text and (tmp_path / "out" / "convergence_copy.png").is_file()
    assert (tmp_path / "out" / "all_runs.csv").read_text().count("\n") == 5
    assert (tmp_path / "out" / "traces" / "copy_stack.png").is_file() and "](traces/copy_stack.png)" in text
    (copy_lstm1,) = [line for line in text.splitlines() if line.startswith("| Sequence copying | 1-layer LSTM |")]
    assert "outside the profile, [60,000 batches](../experiments/lstm1-copy-long/) (budget)" in copy_lstm1
    assert "outside the profile" not in text.replace(copy_lstm1, "") and "lstm1-copy-elsewhere" not in text
    assert "lstm1-copy-retrained" not in text
    assert "too short 10 batches" in copy_lstm1  # 10 batches: one perplexity window, no trend to read
    assert "too short to judge a trend" in (tmp_path / "out" / "evidence.md").read_text()


@pytest.mark.usefixtures("in_process_pool", "figures_unrendered")  # the pool's plan and the report's text
def test_archived_runs_regenerate_the_report_and_resume_the_sweep_without_checkpoints(tmp_path):
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.inspection import inspect_run, load_trace, trace_file

    path = profile(tmp_path, models=("lstm1", "stack"), tasks=("reversal",), max_batches=10)
    sweep = load_sweep(path)
    runs, archive, fresh = tmp_path / "runs", tmp_path / "archive", tmp_path / "fresh"
    assert [s.state for s in run_local(sweep, runs, echo=lambda _: None)] == ["finished"] * 2
    result = CliRunner().invoke(app, ["archive", str(path), "--runs-dir", str(runs), "--to", str(archive)])
    assert result.exit_code == 0 and "archived 2 finished or pruned run(s)" in result.output, result.output
    stack = next(r.run_id() for r in sweep.runs() if r.model.name == "stack")
    lstm = next(r.run_id() for r in sweep.runs() if r.model.name == "lstm1")
    assert not list(archive.rglob("*.ckpt")) and not list(archive.rglob("wandb"))
    assert trace_file(archive / stack).is_file() and not trace_file(archive / lstm).exists()  # only a memory draws
    kept, fresh_trace = load_trace(trace_file(archive / stack)), inspect_run(runs / stack, "best", "test", 0)
    assert kept == fresh_trace  # the archived trace is the checkpoint's own
    report_here = write_report(sweep, path, runs, tmp_path / "out", command="pytest")

    result = CliRunner().invoke(app, ["archive", str(path), "--runs-dir", str(fresh), "--to", str(archive),
                                      "--restore"])
    assert result.exit_code == 0 and "restored 2 run(s)" in result.output, result.output
    assert all(s.state == "finished" for s in sweep_status(sweep, fresh))  # a resumed sweep would train nothing
    (fresh / lstm / "results.json").write_text("{}")  # restoring again overwrites nothing
    result = CliRunner().invoke(app, ["archive", str(path), "--runs-dir", str(fresh), "--to", str(archive),
                                      "--restore"])
    assert "restored 0 run(s)" in result.output and (fresh / lstm / "results.json").read_text() == "{}"
    (fresh / lstm / "results.json").write_text((archive / lstm / "results.json").read_text())
    report_there = write_report(sweep, path, fresh, tmp_path / "out2", command="pytest")
    assert (tmp_path / "out2" / "table3.csv").read_text() == (tmp_path / "out" / "table3.csv").read_text()
    assert (tmp_path / "out2" / "traces" / "reversal_stack.png").is_file()
    assert report_there.read_text().count("traces/reversal_stack.png") == report_here.read_text().count(
        "traces/reversal_stack.png") == 1
    # an archive without the trace (drawn neither before the checkpoint went, nor since): the cell says so, with the
    # batch whose checkpoint is gone, where a deep LSTM's cell, with no memory to draw, stays empty
    trace_file(fresh / stack).unlink()
    text = write_report(sweep, path, fresh, tmp_path / "out3", command="pytest").read_text()
    step = json.loads((fresh / stack / "results.json").read_text())["selected_step"]
    cells = text.split("## Table 3, cell by cell")[1].split("\n## ")[0]
    (row,) = [line for line in cells.splitlines() if line.startswith("| Sequence reversal | Stack-LSTM | ")]
    assert row.endswith(f"| not kept (batch {step:,}) |") and "traces/" not in cells
    (row,) = [line for line in cells.splitlines() if line.startswith("| Sequence reversal | 1-layer LSTM | ")]
    assert row.endswith("|  |")


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_an_unfinished_run_archived_with_its_checkpoints_resumes_elsewhere_as_if_never_stopped(tmp_path,
                                                                                              monkeypatch):
    """A run longer than one machine's stint (issue 34's 200,000-batch LSTMs): archived while unfinished it keeps its
    checkpoints, in unfinished_runs/ beside finished_runs/; restored on a machine that never held it, the sweep
    resumes it, and it ends exactly as a twin trained without a break. Once finished, its unfinished copy (and the
    checkpoints) leave the archive."""
    from typer.testing import CliRunner

    import pipeline.runs
    from pipeline.cli import app

    short, long = profile(tmp_path, name="stint", models=("lstm1",), max_batches=10), tmp_path / "long" / "stint.yaml"
    long.parent.mkdir()
    data = yaml.safe_load(short.read_text())
    data["defaults"]["training"]["max_batches"] = 20  # the same run (the budget is not in its id), asked for more
    long.write_text(yaml.safe_dump(data))
    runs, fresh, twin = tmp_path / "runs", tmp_path / "fresh", tmp_path / "twin"
    archive = tmp_path / "archive" / "finished_runs"
    run_local(load_sweep(short), runs, echo=lambda _: None)  # the first stint: 10 of its 20 batches
    (run,) = load_sweep(long).runs()
    assert [s.state for s in sweep_status(load_sweep(long), runs)] == ["interrupted"]

    def archive_cli(*extra, runs_dir=runs):
        result = CliRunner().invoke(app, ["archive", str(long), "--runs-dir", str(runs_dir), "--to", str(archive),
                                          *extra])
        assert result.exit_code == 0, result.output
        return result.output

    # (its stint ended at its first budget's results, as a rung does: kept from so few batches on only by a threshold)
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 10)
    assert "kept 1 unfinished run(s)" in archive_cli() and "archived 0 finished" in archive_cli()
    kept = tmp_path / "archive" / "unfinished_runs" / run.run_id()
    assert sorted(p.name for p in kept.rglob("*.ckpt")) == ["best.ckpt", "last.ckpt"] and not archive.exists()
    assert "restored 1 unfinished run(s)" in archive_cli("--restore", runs_dir=fresh)
    assert [s.state for s in sweep_status(load_sweep(long), fresh)] == ["interrupted"]
    assert [s.state for s in run_local(load_sweep(long), fresh, echo=lambda _: None)] == ["finished"]
    assert [s.state for s in run_local(load_sweep(long), twin, echo=lambda _: None)] == ["finished"]
    resumed, straight = (json.loads((where / run.run_id() / "results.json").read_text()) for where in (fresh, twin))
    for key in ("batches", "train_perplexity", "train_coarse", "train_fine", "test_coarse", "test_fine"):
        assert resumed[key] == straight[key], key
    assert (fresh / run.run_id() / "metrics.csv").read_text() == (twin / run.run_id() / "metrics.csv").read_text()

    output = archive_cli(runs_dir=fresh)  # finished now: into finished_runs/, out of unfinished_runs/
    assert "archived 1 finished" in output and "dropped 1 finished since" in output, output
    assert not kept.exists() and not list(archive.rglob("*.ckpt"))


def rung_profiles(tmp_path, population=None):
    """One run's profile to 10 batches (its rung) and the same run's to 20 (the same id: the budget is not part of it),
    the longer one trained as a population of ``population`` when given."""
    short = profile(tmp_path, name="rung", models=("lstm1",), max_batches=10)
    long = tmp_path / "long" / "rung.yaml"
    long.parent.mkdir()
    data = yaml.safe_load(short.read_text())
    data["defaults"]["training"]["max_batches"] = 20
    if population:
        data["population"] = population
    long.write_text(yaml.safe_dump(data))
    return short, long


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_short_stints_unfinished_run_keeps_its_checkpoints_and_a_later_machine_continues_it(tmp_path,
                                                                                            monkeypatch):
    """However short the stint (here seconds), a run cut short before its results is archived with its checkpoints:
    restored on a fresh machine (the unfinished archive first, then the finished one, as the docs say), the sweep
    resumes it from batch 10 rather than training it again from batch 0, and it ends with its twin's log, byte for
    byte. A run that stands at its results (a rung it won and has not gone on from, its budget raised) is a waiting
    run's twin, and keeps them only from KEEP_WAITING_FROM batches on, as that one does."""
    import pipeline.runs
    from pipeline.runs import archive_runs, archive_unfinished_runs, restore_runs

    short, long = rung_profiles(tmp_path)
    runs, fresh, twin, finished = tmp_path / "runs", tmp_path / "fresh", tmp_path / "twin", tmp_path / "finished_runs"
    run_local(load_sweep(short), runs, echo=lambda _: None)
    (run,) = load_sweep(long).runs()
    assert archive_runs(short, finished, runs)  # finished at its rung of 10
    unfinished = tmp_path / "unfinished_runs"
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 11)  # promoted at a rung of 10: too short to keep
    assert archive_unfinished_runs(long, unfinished, runs) == ([], []) and not unfinished.exists()
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 10)
    assert archive_unfinished_runs(long, unfinished, runs) == ([run.run_id()], [])
    shutil.rmtree(unfinished)
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 11)
    RunDir(runs / run.run_id()).results_file.unlink()  # stopped after its last checkpoint, before its results
    assert archive_unfinished_runs(long, unfinished, runs) == ([run.run_id()], [])
    assert (tmp_path / "unfinished_runs" / run.run_id() / "checkpoints" / "last.ckpt").is_file()
    assert restore_runs(long, tmp_path / "unfinished_runs", fresh, unfinished=True) == [run.run_id()]
    restore_runs(long, finished, fresh)
    assert [s.state for s in run_local(load_sweep(long), fresh, echo=lambda _: None)] == ["finished"]
    run_local(load_sweep(long), twin, echo=lambda _: None)
    assert (fresh / run.run_id() / "metrics.csv").read_text() == (twin / run.run_id() / "metrics.csv").read_text()
    assert "again from batch 0" not in (fresh / run.run_id() / "train.log").read_text()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
@pytest.mark.parametrize("population", [None, 2])
def test_a_rung_winner_stopped_without_its_checkpoint_is_archived_and_trained_again_from_zero(tmp_path, population):
    """A run reopened past its rung results (results.10.json: a halving rung it won) and stopped where its checkpoint
    was not kept (a lent GPU's machine, or too short for the unfinished archive) is archived all the same, since its
    rung standing decides which runs of its bracket were pruned; restored, or found so in place, the sweep trains it
    again from batch 0, alone or in a population (which refused it before), to the same log as its twin."""
    from pipeline.runs import archive_runs, restore_runs

    short, long = rung_profiles(tmp_path, population)
    runs, fresh, twin, finished = tmp_path / "runs", tmp_path / "fresh", tmp_path / "twin", tmp_path / "finished_runs"
    run_local(load_sweep(short), runs, echo=lambda _: None)
    (run,) = load_sweep(long).runs()
    folder = RunDir(runs / run.run_id())
    folder.archive_results()  # reopened to train on: results.json becomes results.10.json ...
    shutil.rmtree(folder.checkpoints)  # ... and stopped where its checkpoints were not kept
    assert archive_runs(long, finished, runs) == [run.run_id()]
    assert (finished / run.run_id() / "results.10.json").is_file()
    assert restore_runs(long, finished, fresh) == [run.run_id()]
    run_local(load_sweep(long), twin, echo=lambda _: None)
    for where in (runs, fresh):
        assert [s.state for s in run_local(load_sweep(long), where, echo=lambda _: None)] == ["finished"]
        assert (where / run.run_id() / "metrics.csv").read_text() == (twin / run.run_id() / "metrics.csv").read_text()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_reopened_run_never_replaces_the_finished_copy_it_was_reopened_after(tmp_path):
    """Archived finished, then reopened to train on (a stop an older plateau rule made, a rung it won) and stopped
    without its checkpoint: the archive keeps the finished copy, whose results the report reads (copying the
    reopened run over it would delete them, as it did to three issue-52 runs), ``force`` or not; restored from that
    copy the sweep trains the run on from batch 0 to its twin's log. A copy of an older draw than the one the run
    was reopened after is replaced as before."""
    from pipeline.runs import archive_runs, restore_runs

    short, long = rung_profiles(tmp_path)
    runs, fresh, twin, finished = tmp_path / "runs", tmp_path / "fresh", tmp_path / "twin", tmp_path / "finished_runs"
    run_local(load_sweep(short), runs, echo=lambda _: None)
    (run,) = load_sweep(long).runs()
    copy, folder = finished / run.run_id(), RunDir(runs / run.run_id())
    assert archive_runs(short, finished, runs) == [run.run_id()]
    kept = (copy / "results.json").read_bytes()
    folder.archive_results()  # reopened: results.json becomes results.10.json ...
    shutil.rmtree(folder.checkpoints)  # ... and stopped where its checkpoint was not kept
    for force in (False, True):
        assert archive_runs(long, finished, runs, force=force) == []
        assert (copy / "results.json").read_bytes() == kept and not (copy / "results.10.json").exists()
    assert restore_runs(long, finished, fresh) == [run.run_id()]
    run_local(load_sweep(long), twin, echo=lambda _: None)
    assert [s.state for s in run_local(load_sweep(long), fresh, echo=lambda _: None)] == ["finished"]
    assert (fresh / run.run_id() / "metrics.csv").read_text() == (twin / run.run_id() / "metrics.csv").read_text()

    # the run finished at 20 and reopened after that: the copy (its draw at 10) is not what it was reopened after
    run_local(load_sweep(long), runs, echo=lambda _: None)
    folder.archive_results()
    assert archive_runs(long, finished, runs) == [run.run_id()]
    assert (copy / "results.20.json").is_file() and not (copy / "results.json").exists()


def test_restoring_a_profile_never_archived_uses_its_runs_folder_as_it_is(tmp_path):
    """Fault 7 of issue 35: `make report PROFILE=smoke` (restore, then report) failed with "nothing to restore" though
    the runs were there. With no archive at the profile's own place there is nothing to add; an archive named with
    --to that is not there is still an error."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    path = profile(tmp_path, name="never-archived-profile")
    assert not load_sweep(path).reports_dir().exists()
    result = CliRunner().invoke(app, ["archive", str(path), "--runs-dir", str(tmp_path / "runs"), "--restore"])
    assert result.exit_code == 0 and "nothing to restore; the runs folder is used as it is" in result.output
    result = CliRunner().invoke(app, ["archive", str(path), "--runs-dir", str(tmp_path / "runs"), "--restore",
                                      "--to", str(tmp_path / "typo")])
    assert result.exit_code == 2 and "nothing to restore" in result.output


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["grid"][0].update(modelz=["stack"]), "unknown key 'grid[0].modelz'"),
    (lambda d: d["grid"][0].update(tasks=["copy", "sorting"]), "grid[0].tasks[1] must be one of copy"),
    (lambda d: d["defaults"]["training"].update(max_batches="many"),
     "defaults.training.max_batches must be an integer"),
    (lambda d: d["grid"][0].update(lr=[1e-3, -1]), "grid[0].lr[1] must be positive"),
    (lambda d: d["grid"][0].update(overrides={"training": {"lr": 1e-4}}),
     "grid[0].overrides.training.lr is a grid axis"),
    (lambda d: d.update(workers=0), "workers must be positive"),
    (lambda d: d["grid"].append(dict(d["grid"][0])), "repeats run reversal-lstm1-h16"),
    (lambda d: d.update(reports="../elsewhere"), "reports must be a folder under reports/"),
])
def test_bad_profiles_are_refused_with_the_key_path_before_any_compute(tmp_path, edit, message):
    path = profile(tmp_path)
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    assert message in str(error.value)
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "sweep", str(path), "--runs-dir",
                             str(tmp_path / "runs")], capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_profile_reports_to_its_name_or_to_the_folder_its_reports_key_names(tmp_path):
    from pipeline.paths import REPORTS_DIR

    path = profile(tmp_path)
    assert load_sweep(path).reports_dir() == REPORTS_DIR / "tiny"
    data = yaml.safe_load(path.read_text())
    data["reports"] = "recipe/itg"  # a part of a study beside the study's own report
    path.write_text(yaml.safe_dump(data))
    assert load_sweep(path).reports_dir() == REPORTS_DIR / "recipe" / "itg"


@pytest.mark.parametrize("argv,said", [
    (["--help"], "'--help' is not a run folder (it holds no config.yaml)"),
    ([], "no run folder given"),
    (["--width", "x", "run"], "--width takes a whole number of runs at a time, at least 1; got 'x'"),
    (["--width", "0", "run"], "got '0'"),
])
def test_a_worker_started_with_what_is_not_a_run_folder_refuses_in_one_line_and_makes_nothing(
        tmp_path, monkeypatch, capsys, argv, said):
    """`python -m pipeline.sweep --help` took `--help` for a run folder: it made `./--help/.lock` and went on to
    fail on the missing config. The worker now refuses, exit 2, before it locks anything."""
    import runpy

    (tmp_path / "run").mkdir()  # a folder, but not a run's
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pipeline.sweep", *argv])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("pipeline.sweep", run_name="__main__")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and said in err and err.count("\n") == 1 and "usage: python -m pipeline.sweep" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and not any((tmp_path / "run").iterdir())


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    path = profile(tmp_path, models=("lstm1", "stack"), max_batches=10)
    data = yaml.safe_load(path.read_text())
    data["grid"].append({"tasks": ["reversal"], "models": ["lstm2"], "hidden": [16], "lr": [1e30]})  # diverges
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    statuses = {s.config.model.name: s for s in run_local(sweep, tmp_path / "runs", echo=lambda _: None)}
    assert statuses["lstm1"].state == statuses["stack"].state == "finished"
    assert statuses["lstm2"].state == "failed"
    failure = json.loads((statuses["lstm2"].run_dir / "failed.json").read_text())
    assert "FloatingPointError: training loss is" in failure["error"] and "Traceback" in failure["traceback"]
    # Rerunning leaves the failure alone unless asked to retry it.
    again = {s.config.model.name: s.state for s in run_local(sweep, tmp_path / "runs", echo=lambda _: None)}
    assert again["lstm2"] == "failed"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here: the pool sleeps its poll interval")
def test_the_pool_wakes_when_a_worker_ends_not_at_its_next_poll():
    """The pool's wait between polls returns when any worker ends (the next job starts then), when one has ended
    already, and otherwise at its timeout; an hour-long poll interval would make a sweep of tiny runs crawl."""
    from pipeline.sweep.local import wait_for_a_child

    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        started = time.monotonic()
        wait_for_a_child([slow, quick], timeout=300)
        assert time.monotonic() - started < 60, "woke at its timeout, not when the quick worker ended"
        assert quick.poll() == 0 and slow.poll() is None
        wait_for_a_child([slow, quick], timeout=300)  # ended and reaped already: at once
        assert time.monotonic() - started < 60
        started = time.monotonic()
        wait_for_a_child([slow], timeout=0.5)  # nothing ends: the timeout
        assert 0.4 < time.monotonic() - started < 60 and slow.poll() is None
    finally:
        slow.kill()
        slow.wait()


def test_slurm_route_through_submitit_executes_the_same_runs(tmp_path):
    """Two LSTM runs and a Stack run, packed by model: the LSTMs' array task trains them as a population (a state per
    member) in a process of submitit's local executor, as a SLURM array task would; the Stack's task, a single run
    (its state), is the same callable with one folder, called here in process (a second executor process would
    show nothing more, ~6 CPU-s)."""
    from pipeline.sweep.grid import prepare
    from pipeline.sweep.slurm import SubmititRun

    path = profile(tmp_path, models=("lstm1",), tasks=("copy", "reversal"), max_batches=10)
    data = yaml.safe_load(path.read_text())
    data["grid"].append({**data["grid"][0], "tasks": ["copy"], "models": ["stack"]})
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    prepare(sweep, tmp_path / "runs", retry_failed=False)
    stack = next(r.run_id() for r in sweep.runs() if r.model.name == "stack")
    assert SubmititRun(2)(str(tmp_path / "runs" / stack)) == "finished"
    jobs = submit_slurm(sweep, tmp_path / "runs", cluster="local", wait=True, echo=lambda _: None, population=2)
    assert [job.result() for job in jobs] == [["finished", "finished"]]  # the LSTMs' population, one task
    statuses = sweep_status(sweep, tmp_path / "runs")
    assert all(s.state == "finished" for s in statuses)
    named = sorted(len(json.loads((s.run_dir / "results.json").read_text()).get("population", [])) for s in statuses)
    assert named == [0, 2, 2]  # the population's two members name it; the single run names none
    assert submit_slurm(sweep, tmp_path / "runs", cluster="local", echo=lambda _: None) == []  # nothing left


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_only_runs_the_runs_it_selects_and_refuses_a_pattern_that_selects_none(tmp_path):
    """`--only` splits a grid between machines (its deep LSTMs on a GPU): the selected runs train, the others are left
    alone, and the sweep succeeds when the selected ones are finished; a pattern matching no run id is refused before
    anything is written. What the sweep and `--status` say is the selection's: its runs, and the time its own runs
    take (a sweep of one run once said "at most ~118 h left" for the whole grid at its one worker)."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    path = profile(tmp_path, models=("lstm1", "stack"), max_batches=10)
    runs = tmp_path / "runs"
    typo = CliRunner().invoke(app, ["sweep", str(path), "--runs-dir", str(runs), "--only", "*-lstm9-*"])
    assert typo.exit_code == 2 and "--only '*-lstm9-*' matches none of the 2 run ids" in " ".join(typo.output.split())
    assert not runs.exists()
    result = CliRunner().invoke(app, ["sweep", str(path), "--runs-dir", str(runs), "--only", "*-lstm1-*",
                                      "--workers", "1"])
    assert result.exit_code == 0, result.output
    states = {s.config.model.name: s.state for s in sweep_status(load_sweep(path), runs)}
    assert states == {"lstm1": "finished", "stack": "pending"}
    lines = [line for line in result.output.splitlines() if line.startswith("sweep ")]
    assert lines[0].startswith(f"sweep {load_sweep(path).name}: 1 of 2 runs (--only), 1 to execute"), lines[0]
    said = lines[-1]
    assert said.endswith("1 finished, 0 running, 0 failed, 0 to go"), said  # not the Stack's "1 to go; ~... left"
    stack = next(s.run_dir.name for s in sweep_status(load_sweep(path), runs) if s.config.model.name == "stack")
    listed = CliRunner().invoke(app, ["sweep", str(path), "--runs-dir", str(runs), "--status", "--only", "*-stack-*"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert [line.split()[-1] for line in lines[:-1]] == [stack], lines  # the selection's one run, not the LSTM
    assert lines[-1].startswith("0 finished, 0 running, 0 failed, 1 to go"), lines[-1]


def test_the_slurm_route_speaks_for_its_only_selection(tmp_path):
    """The SLURM route's summary is the selection's too (the same ``sweep_status(..., only=)`` as the pool's): with
    its one selected run finished it has nothing to submit and says so of that run, not "1 to go" of a run it was told
    to leave alone. The selected run trains in process, as its array task would."""
    from pipeline.sweep.grid import prepare
    from pipeline.sweep.slurm import SubmititRun

    path = profile(tmp_path, models=("lstm1", "stack"), max_batches=10)
    sweep, runs = load_sweep(path), tmp_path / "runs"
    prepare(sweep, runs, retry_failed=False, only=["*-lstm1-*"])
    lstm = next(r.run_id() for r in sweep.runs() if r.model.name == "lstm1")
    assert SubmititRun()(str(runs / lstm)) == "finished"
    said = []
    assert submit_slurm(sweep, runs, cluster="local", echo=said.append, only=["*-lstm1-*"]) == []
    assert said == [f"sweep {sweep.name}: nothing to submit; 1 finished, 0 running, 0 failed, 0 to go"], said
    statuses = {s.config.model.name: s.state for s in sweep_status(sweep, runs)}
    assert statuses == {"lstm1": "finished", "stack": "pending"}  # the Stack, not selected, was left alone


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_grid_split_between_machines_comes_back_into_the_pending_runs_of_the_first(tmp_path):
    """Machine A prepared the whole grid (every run folder holds its config) and trains the Stack; machine B trains
    only the LSTM (`--only`) and archives it. Restored on A, the LSTM's archive fills its pending folder, results
    last; a folder whose run has begun is never written into."""
    from pipeline.runs import archive_runs, restore_runs
    from pipeline.sweep.grid import prepare

    path = profile(tmp_path, models=("lstm1", "stack"), max_batches=10)
    sweep = load_sweep(path)
    here, there, archive = tmp_path / "here", tmp_path / "there", tmp_path / "archive"
    prepare(sweep, here, retry_failed=False)
    assert {s.state for s in sweep_status(sweep, here)} == {"pending"}
    run_local(sweep, there, only=["*-lstm1-*"], echo=lambda _: None)
    archive_runs(path, archive, there)
    lstm = next(r.run_id() for r in sweep.runs() if r.model.name == "lstm1")
    (here / lstm / "metrics.csv").write_text("step\n")  # begun here meanwhile: left alone
    assert restore_runs(path, archive, here) == []
    (here / lstm / "metrics.csv").unlink()
    assert restore_runs(path, archive, here) == [lstm]
    states = {s.config.model.name: s.state for s in sweep_status(sweep, here)}
    assert states == {"lstm1": "finished", "stack": "pending"}
    assert (here / lstm / "results.json").read_text() == (there / lstm / "results.json").read_text()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_memory_run_its_cap_stopped_still_falling_keeps_its_checkpoints_so_a_raised_cap_extends_it(tmp_path,
                                                                                                    monkeypatch):
    """Issue 78: a memory cell's run that reaches its cap still falling has its cap raised and goes on. Its
    checkpoints left with the finished archive, so a raised cap trained it again from batch 0 (150,000 batches of a
    Stack-LSTM: five hours). The unfinished archive now keeps them: restored and its cap raised, it is extended from
    its checkpoint (that an extended run writes its straight twin's log is test_faults.py's). Not kept: the same run
    flat at its cap, a deep LSTM's run, a run cut by halving."""
    import dataclasses

    import pipeline.runs
    from pipeline.runs import archive_runs, archive_unfinished_runs, capped_still_falling, restore_runs

    path = profile(tmp_path, name="capped", models=("stack",), max_batches=20)
    (run,) = load_sweep(path).runs()
    runs, fresh = tmp_path / "runs", tmp_path / "fresh"
    finished, unfinished = tmp_path / "archive" / "finished_runs", tmp_path / "archive" / "unfinished_runs"
    run_local(load_sweep(path), runs, echo=lambda _: None)
    run_dir = runs / run.run_id()
    assert RunDir(run_dir).read_results()["stop_reason"] == "budget"
    assert capped_still_falling(run_dir, "finished", False, run)  # 20 batches in: falling fast
    assert not capped_still_falling(run_dir, "finished", True, run)  # cut by halving: never resumed
    lstm = dataclasses.replace(run, model=dataclasses.replace(run.model, name="lstm1"))
    assert not capped_still_falling(run_dir, "finished", False, lstm)
    flat = tmp_path / "flat"
    shutil.copytree(run_dir, flat)
    with open(flat / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    with open(flat / "metrics.csv", "w", newline="") as f:  # the same log, its perplexity flat at 30
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "train/perplexity": "30.0" if r["train/perplexity"] else ""} for r in rows)
    assert not capped_still_falling(flat, "finished", False, run)

    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 20)
    assert archive_runs(path, finished, runs) == [run.run_id()]
    assert archive_unfinished_runs(path, unfinished, runs) == ([run.run_id()], [])
    assert (unfinished / run.run_id() / "checkpoints" / "last.ckpt").is_file()
    data = yaml.safe_load(path.read_text())
    data["defaults"]["training"]["max_batches"] = 30  # the cap raised
    path.write_text(yaml.safe_dump(data))
    restore_runs(path, unfinished, fresh, unfinished=True)
    restore_runs(path, finished, fresh)
    assert [(s.state, s.batches_done) for s in run_local(load_sweep(path), fresh, echo=lambda _: None)] == [
        ("finished", 30)]
    assert "again from batch 0" not in (fresh / run.run_id() / "train.log").read_text()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_memory_run_standing_at_its_results_is_archived_with_the_trace_of_their_checkpoint(tmp_path, monkeypatch):
    """A run standing at results it reported (here its cap raised, not resumed yet; a rung's winner alike) is a
    cell's run in the report, whose trace is of the checkpoint those results were read at. The unfinished archive
    draws it while that checkpoint is the run's best, so every checkout's report shows the same figure rather than
    drawing it on its own CPU; not once the best checkpoint is another batch's (the run trained on)."""
    import pipeline.runs
    from pipeline.inspection import load_trace, trace_file
    from pipeline.runs import archive_unfinished_runs

    path = profile(tmp_path, name="standing", models=("stack",), max_batches=20)
    (run,) = load_sweep(path).runs()
    runs, unfinished = tmp_path / "runs", tmp_path / "archive" / "unfinished_runs"
    run_local(load_sweep(path), runs, echo=lambda _: None)
    run_dir = runs / run.run_id()
    data = yaml.safe_load(path.read_text())
    data["defaults"]["training"]["max_batches"] = 30  # the cap raised: it stands at its results of 20 batches
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 20)
    assert not trace_file(run_dir).exists()
    assert archive_unfinished_runs(path, unfinished, runs) == ([run.run_id()], [])
    step = RunDir(run_dir).read_results()["selected_step"]
    assert load_trace(trace_file(unfinished / run.run_id())).step == step

    shutil.rmtree(unfinished)
    trace_file(run_dir).unlink()
    results = json.loads(RunDir(run_dir).results_file.read_text())
    RunDir(run_dir).results_file.write_text(json.dumps(results | {"selected_step": step - 10}))  # another batch's
    assert archive_unfinished_runs(path, unfinished, runs) == ([run.run_id()], [])
    assert not trace_file(unfinished / run.run_id()).exists()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_run_waiting_at_its_rung_keeps_its_checkpoints_so_a_later_machine_extends_it(tmp_path, monkeypatch):
    """Issue 78's searches span sessions: a run finished at a halving rung whose bracket has not decided yet (another
    setting still training to it) is archived with its checkpoints (unfinished_runs/, beside its finished copy), so
    that when its bracket goes on elsewhere it is extended from the rung, not trained again from batch 0, to the log
    of a twin trained in one go; once cut or done to its cap, the checkpoints leave the archive. Only from
    KEEP_WAITING_FROM batches on: a shorter run is cheaper to train again than to keep."""
    import pipeline.runs
    from pipeline.runs import archive_runs, archive_unfinished_runs, restore_runs

    path = profile(tmp_path, name="waiting", models=("lstm1",), max_batches=20)
    data = yaml.safe_load(path.read_text())
    data["grid"][0].update(lr=[1e-2, 1e-3], halving={"at": [10], "keep": [1]})
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    first, second = (run.run_id() for run in sweep.runs())
    runs, fresh, twin = tmp_path / "runs", tmp_path / "fresh", tmp_path / "twin"
    finished, unfinished = tmp_path / "archive" / "finished_runs", tmp_path / "archive" / "unfinished_runs"
    run_local(sweep, runs, echo=lambda _: None, only=[first])  # the other setting has not reached the rung yet
    assert {s.run_dir.name: s.state for s in sweep_status(sweep, runs)} == {first: "finished", second: "pending"}
    assert archive_runs(path, finished, runs) == [first]
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 11)  # a rung of 10: too short to be worth megabytes
    assert archive_unfinished_runs(path, unfinished, runs) == ([], [])
    monkeypatch.setattr(pipeline.runs, "KEEP_WAITING_FROM", 10)
    assert archive_unfinished_runs(path, unfinished, runs) == ([first], [])
    assert (unfinished / first / "checkpoints" / "last.ckpt").is_file()
    restore_runs(path, unfinished, fresh, unfinished=True)
    restore_runs(path, finished, fresh)
    statuses = run_local(sweep, fresh, echo=lambda _: None)  # the bracket decides; its winner goes on to 20
    run_local(sweep, twin, echo=lambda _: None)
    for run_id in (first, second):
        assert (fresh / run_id / "metrics.csv").read_text() == (twin / run_id / "metrics.csv").read_text()
    assert not any("again from batch 0" in (fresh / r / "train.log").read_text() for r in (first, second))
    # the run that waited won its rung (lr 1e-2 is the lower perplexity at 10 batches): it was the one extended
    assert {s.run_dir.name: (s.state, s.batches_done) for s in statuses} == {first: ("finished", 20),
                                                                             second: ("pruned", 10)}
    archive_runs(path, finished, fresh)
    assert archive_unfinished_runs(path, unfinished, fresh) == ([], [first])  # done now: its checkpoints leave
