"""What a fault probe and a new user tripped on (issue 25), one test per row of its table, on tiny runs."""

import json
import re
from pathlib import Path

import pytest
import yaml
from tiny import tiny, tiny_profile
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ConfigError, RunConfig, SweepConfig, from_dict, to_dict
from pipeline.rundir import RunDir
from pipeline.runlock import claim_owner, run_lock
from pipeline.training.run import RunBusy, train

runner = CliRunner()
# what these tests hold of a report is where it writes, what it refuses and what its text says: its figures are
# built but not rendered (conftest.py)
pytestmark = pytest.mark.usefixtures("figures_unrendered")


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def flat(text: str) -> str:
    """Error text without Rich's box drawing and line wrapping."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


# -- row 1: only one process trains a run -------------------------------------------------------------------------

def test_a_second_process_cannot_train_a_run_that_is_being_trained(tmp_path):
    run_dir = tmp_path / "run"
    with run_lock(run_dir) as lock:  # what a running `transduce train` or sweep worker holds
        claim_owner(lock)
        with pytest.raises(RunBusy, match=r"is being trained by another process \(pid \d+ on .+\)"):
            train(tiny(), run_dir, progress=False)
        result = runner.invoke(app, ["train", "--run-dir", str(run_dir), "--task", "reversal", "--model", "stack",
                                     "--hidden", "8", "--max-batches", "20", "--wandb", "off", "--no-progress"])
        assert result.exit_code == 2
        assert "is being trained by another process" in result.stderr
        assert "Traceback" not in result.output
    assert not (run_dir / "metrics.csv").exists()  # the refused process wrote nothing
    assert train(tiny(), run_dir, progress=False)["batches"] == 20  # free again: it trains


# -- row 7: a learning rate of inf is refused before compute, like nan ---------------------------------------------

@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_non_finite_learning_rate_flag_is_refused_before_compute(value, tmp_path):
    result = runner.invoke(app, ["train", "--lr", value, "--run-dir", str(tmp_path / "run"), "--wandb", "off"])
    assert result.exit_code == 2
    assert "must be a finite number > 0" in flat(result.stderr)
    assert not (tmp_path / "run").exists()


def test_a_non_finite_learning_rate_in_a_config_or_profile_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="training.lr must be positive and finite, got inf"):
        from_dict(RunConfig, yaml.safe_load("training: {lr: .inf}"))
    profile = yaml.safe_load("name: p\ngrid: [{tasks: [copy], models: [stack], lr: [.inf]}]")
    with pytest.raises(ConfigError, match=r"grid\[0\].lr\[0\] must be positive and finite, got inf"):
        from_dict(SweepConfig, profile)


# -- row 6: SIGTERM stops a run with a non-zero exit that says it resumes -----------------------------------------

def test_sigterm_stops_training_with_a_non_zero_exit_and_the_run_resumes(tmp_path, monkeypatch):
    import os
    import signal

    from pipeline.training.engine import Loop
    from pipeline.training.run import RunStopped

    step = Loop.step

    def step_then_sigterm(self):
        if self.batches_done == 15:
            os.kill(os.getpid(), signal.SIGTERM)  # what `kill <pid>` or a cluster's pre-emption sends
        return step(self)

    run_dir = tmp_path / "run"
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(Loop, "step", step_then_sigterm)
    with pytest.raises(RunStopped, match="stopped by SIGTERM at batch 1[56], before the run ended; run the same "
                                         "command again to resume") as stopped:
        train(tiny(max_batches=30), run_dir, progress=False)
    assert stopped.value.exit_code == 143 and signal.getsignal(signal.SIGTERM) is before  # the handler given back
    assert not (run_dir / "results.json").exists()
    monkeypatch.setattr(Loop, "step", step)
    assert train(tiny(max_batches=30), run_dir, progress=False)["batches"] == 30  # resumed from its checkpoint


def test_ctrl_c_stops_training_with_130_and_a_line_and_the_run_resumes(tmp_path, monkeypatch):
    """Issue 35, fault 6: Lightning turns a KeyboardInterrupt into exit status 1 with no message; the README
    promises 130 and a line saying the run resumes."""
    import os
    import signal

    from pipeline.training.engine import Loop

    step = Loop.step

    def step_then_ctrl_c(self):
        if self.batches_done == 15:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in the terminal sends
        return step(self)

    run_dir = tmp_path / "run"
    # The handler in force before the run: Python's default_int_handler in a terminal, SIG_IGN where the shell
    # started the tests in the background without job control.
    handler_before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(Loop, "step", step_then_ctrl_c)
    result = runner.invoke(app, ["train", "--config", str(tiny_config_file(tmp_path, max_batches=30)),
                                 "--run-dir", str(run_dir), "--no-progress"])
    assert result.exit_code == 130, result.output
    assert "stopped by an interrupt (Ctrl-C) at batch 1" in flat(result.stderr)
    assert "run the same command again to resume" in flat(result.stderr)
    assert signal.getsignal(signal.SIGINT) is handler_before  # the handler is given back
    monkeypatch.setattr(Loop, "step", step)
    assert train(tiny(max_batches=30), run_dir, progress=False)["batches"] == 30  # resumed from its checkpoint


def tiny_config_file(folder, **training):
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(to_dict(tiny(**training))))
    return path


# -- rows 2, 3, 4: damaged run files are named, never silently reported from; a report never shrinks by accident --

@pytest.fixture(scope="module")
def finished_profile(tmp_path_factory, cache_dir):
    """A two-run profile trained to its end once for this module: (profile file, runs folder)."""
    import os

    from pipeline.sweep import load_sweep, sweep_root

    os.environ["TRANSDUCE_DATA_CACHE"] = str(cache_dir)
    folder = tmp_path_factory.mktemp("finished")
    path = tiny_profile(folder)
    sweep = load_sweep(path)
    root = sweep_root(sweep, folder / "runs")
    for run in sweep.runs():
        train(run, root / run.run_id(), progress=False)
    return path, root


@pytest.fixture
def runs_copy(finished_profile, tmp_path):
    import shutil

    path, root = finished_profile
    shutil.copytree(root, tmp_path / "runs")
    return path, tmp_path / "runs"


def test_a_finished_run_whose_log_was_emptied_is_damaged_and_refuses_the_report(runs_copy, tmp_path):
    from pipeline.reports.build import ReportRefused, write_report
    from pipeline.sweep import load_sweep

    path, runs = runs_copy
    sweep = load_sweep(path)
    write_report(sweep, path, runs, tmp_path / "out", command="pytest")
    before = (tmp_path / "out" / "table3.csv").read_text()
    victim = sorted(runs.iterdir())[0]
    (victim / "metrics.csv").write_text("")
    with pytest.raises(ReportRefused, match=re.escape(str(victim / "metrics.csv")) + ": empty"):
        write_report(sweep, path, runs, tmp_path / "out", command="pytest")
    assert (tmp_path / "out" / "table3.csv").read_text() == before  # nothing rewritten
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "damaged files" in result.stderr and "Traceback" not in result.output
    # a log cut short of the run's results is damaged too
    (victim / "metrics.csv").write_text("step,train/perplexity\n10,5.0\n")
    with pytest.raises(ReportRefused, match="logs 10 batches but results.json reports 20"):
        write_report(sweep, path, runs, tmp_path / "out", command="pytest")


def edit_results(run_dir, **values):
    import json

    results = json.loads((run_dir / "results.json").read_text())
    (run_dir / "results.json").write_text(json.dumps({**results, **values}))


def cut_accuracy_by_length(run_dir):
    lines = (run_dir / "accuracy_by_length.csv").read_text().splitlines(keepends=True)
    (run_dir / "accuracy_by_length.csv").write_text("".join(lines[: len(lines) // 2]))


def spoil_a_metrics_cell(run_dir):
    text = (run_dir / "metrics.csv").read_text().splitlines(keepends=True)
    header = text[0].rstrip("\n").split(",")
    column = header.index("train/perplexity")
    for i, line in enumerate(text[1:], 1):
        cells = line.rstrip("\n").split(",")
        if cells[column]:
            cells[column] = "lots"
            text[i] = ",".join(cells) + "\n"
            break
    (run_dir / "metrics.csv").write_text("".join(text))


def cut_best_checkpoint(run_dir):
    best = run_dir / "checkpoints" / "best.ckpt"
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])


@pytest.mark.parametrize("damage, what", [
    (lambda d: (d / "results.json").write_text('{"batches": 2'), "results.json: not valid JSON"),
    (lambda d: (d / "results.json").write_text(""), "results.json: empty"),
    (lambda d: (d / "metrics.csv").write_bytes(b"\x00garbage\x00\n1,2\n"), "metrics.csv: no 'step' column"),
    # issue 35, faults 3 and 4: values a run cannot write, a cut file, a cut checkpoint
    (lambda d: edit_results(d, test_coarse=1.5), "results.json: test_coarse is 1.5, outside [0, 1]"),
    (lambda d: edit_results(d, train_perplexity=float("nan")), "results.json: train_perplexity is nan"),
    (cut_accuracy_by_length, "accuracy_by_length.csv: counts"),
    (spoil_a_metrics_cell, "metrics.csv: train/perplexity at step 10 is 'lots', not a number"),
    (cut_best_checkpoint, "best.ckpt: not a readable checkpoint"),
])
def test_a_garbage_run_file_is_named_in_one_line_and_the_other_runs_are_still_listed(runs_copy, damage, what):
    path, runs = runs_copy
    victim, other = sorted(runs.iterdir())
    damage(victim)
    for args in (["runs", str(path), "--runs-dir", str(runs)], ["runs", str(runs)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert other.name in result.stdout and victim.name in result.stdout
        assert "damaged" in result.stdout
        warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: damaged run:")]
        assert len(warnings) == 1 and str(victim) in warnings[0] and what in warnings[0]
    result = runner.invoke(app, ["sweep", str(path), "--runs-dir", str(runs), "--status"])
    assert result.exit_code == 0, result.output
    assert re.search(rf"damaged\s+\d+/20\s+{victim.name}", result.stdout)
    assert re.search(rf"finished\s+20/20\s+{other.name}", result.stdout)
    assert what in result.stderr and "Traceback" not in result.output
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(runs.parent / "out")])
    assert result.exit_code == 2 and what in flat(result.stderr) and "Traceback" not in result.output


def test_a_report_from_no_runs_or_fewer_than_before_is_refused_and_stale_figures_go(runs_copy, finished_profile,
                                                                                   tmp_path):
    import shutil

    from pipeline.reports.build import ReportRefused, write_report
    from pipeline.sweep import load_sweep

    path, runs = runs_copy
    sweep = load_sweep(path)
    out = tmp_path / "out"
    write_report(sweep, path, runs, out, command="pytest")
    committed = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "convergence_copy.png").write_bytes(b"an old report's figure")  # a task this profile does not train
    with pytest.raises(ReportRefused, match=r"0 done run\(s\) in .*missing, where the report in .* counted 2"):
        write_report(sweep, path, tmp_path / "missing", out, command="pytest")
    (tmp_path / "emptied").mkdir()
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(tmp_path / "emptied"), "--out", str(out)])
    assert result.exit_code == 2 and "--force writes the report anyway" in flat(result.stderr)
    shutil.rmtree(sorted(runs.iterdir())[0])
    with pytest.raises(ReportRefused, match="1 done run"):
        write_report(sweep, path, runs, out, command="pytest")
    assert all(p.read_bytes() == data for p, data in committed.items())  # the report there is untouched
    write_report(sweep, path, runs, out, command="pytest", force=True)
    assert not (out / "convergence_copy.png").exists()  # never left behind by a newer report

    # A profile whose grid shrank (a cell's runs replaced by fewer), every run of it done: nothing was lost, so no
    # --force. Here the two-run report stands, and the profile keeps only the run still in the folder.
    again = tmp_path / "again"
    write_report(sweep, path, finished_profile[1], again, command="pytest")
    data = yaml.safe_load(path.read_text())
    data["grid"][0]["models"] = [sorted(runs.iterdir())[0].name.split("-")[1]]
    shrunk_path = tmp_path / "shrunk" / path.name
    shrunk_path.parent.mkdir()
    shrunk_path.write_text(yaml.safe_dump(data))
    shrunk = load_sweep(shrunk_path)
    assert len(shrunk.runs()) == 1
    write_report(shrunk, shrunk_path, runs, again, command="pytest")
    assert len((again / "all_runs.csv").read_text().splitlines()) == 2  # its header and the one run


def test_a_reports_made_by_line_remakes_that_report(runs_copy, tmp_path):
    """Fault 7 of issue 35: a report made with the profile's defaults names the command `make report` runs, so a
    regenerated report is the committed one byte for byte. Issue 80: one made with --runs-dir, --out or --force names
    them, each path quoted as a shell reads it back (a space in it), so that its "Made by" line remakes it."""
    import shlex

    path, runs = runs_copy
    spaced = tmp_path / "runs folder"
    runs.rename(spaced)
    outs = []
    for extra in ([], ["--force"]):
        out = tmp_path / f"out {len(extra)}"
        result = runner.invoke(app, ["report", str(path), "--runs-dir", str(spaced), "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        readme = (out / "README.md").read_text()
        made = re.search(r"Made by `([^`]+)` with the code", readme).group(1)
        assert shlex.split(made) == ["transduce", "report", str(path), "--runs-dir", str(spaced), "--out", str(out),
                                     *extra]
        outs.append({p.relative_to(out): p.read_bytes().replace(made.encode(), b"") for p in out.rglob("*")
                     if p.suffix in (".md", ".csv")})
    assert outs[0] == outs[1]  # the same report apart from the command that made it
    from pipeline.reports.build import profile_header
    from pipeline.sweep import load_sweep

    assert f"Made by `transduce report {path}` with the code at commit" in profile_header(load_sweep(path), path)


# -- row 5: a checkpoint a kill left unreadable is named, with the way out ------------------------------------------

@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all"])
def test_an_unreadable_checkpoint_is_named_with_restart_suggested(content, finished_tiny):
    from pipeline.rundir import DamagedRun

    run_dir = finished_tiny
    (run_dir / "results.json").unlink()  # as if killed before the end
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(content)
    with pytest.raises(DamagedRun, match=r"last.ckpt: not a readable checkpoint .*--restart --run-dir"):
        train(tiny(max_batches=40), run_dir, progress=False)
    result = runner.invoke(app, ["train", "--run-dir", str(run_dir), "--max-batches", "40", "--no-progress"])
    assert result.exit_code == 2 and "not a readable checkpoint" in result.stderr
    assert "Traceback" not in result.output and "Aborted" not in result.output
    assert train(tiny(max_batches=20), run_dir, progress=False, restart=True)["batches"] == 20  # from batch 0


def test_a_cut_last_checkpoint_of_an_unfinished_run_is_listed_damaged_not_interrupted(runs_copy):
    """Issue 80: a corrupt last.ckpt was listed as interrupted (`transduce runs`, `sweep --status`), contrary to the
    README: an unfinished run that cannot resume is damaged, named with the file."""
    path, runs = runs_copy
    victim, other = sorted(runs.iterdir())
    (victim / "results.json").unlink()  # as if killed before the end
    last = victim / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    result = runner.invoke(app, ["runs", str(path), "--runs-dir", str(runs), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert f"{victim.name},reversal" in result.stdout and ",damaged," in result.stdout
    assert "last.ckpt: not a readable checkpoint" in result.stderr
    result = runner.invoke(app, ["sweep", str(path), "--runs-dir", str(runs), "--status"])
    assert re.search(rf"damaged\s+\d+/20\s+{victim.name}", result.stdout), result.output
    assert re.search(rf"finished\s+20/20\s+{other.name}", result.stdout)


def test_far_lengths_of_the_last_checkpoint_never_replace_the_reported_checkpoints(runs_copy):
    """Issue 80: `transduce evaluate RUN --far --checkpoint last` overwrote far_lengths.csv, which the report reads as
    the selected (best) checkpoint's. The last checkpoint's go to far_lengths-last.csv."""
    from pipeline.generalisation import read_far_lengths
    from pipeline.training.run import measure_far_lengths

    _, runs = runs_copy
    run = sorted(runs.iterdir())[0]
    best = "low,high,n,coarse,fine,batches\n129,192,2,0.25,0.5,20\n"  # the best checkpoint's, measured before
    (run / "far_lengths.csv").write_text(best)
    rows = measure_far_lengths(run, "last", per_band=2)
    assert (run / "far_lengths.csv").read_text() == best
    assert len((run / "far_lengths-last.csv").read_text().splitlines()) == len(rows) + 1
    assert read_far_lengths(run)[0]["coarse"] == 0.25  # what the report reads is still the best checkpoint's
    RunDir(run).clear()  # trained again from batch 0: neither is kept
    assert not (run / "far_lengths-last.csv").exists()


def test_a_refused_foreign_folder_is_left_as_it_was(tmp_path):
    """Issue 80: a folder no run made (a metrics.csv without a step column) was refused, but left holding our
    config.yaml and .lock."""
    from pipeline.rundir import DamagedRun

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "metrics.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DamagedRun, match="no 'step' column"):
        train(tiny(), foreign, progress=False)
    assert sorted(p.name for p in foreign.iterdir()) == ["metrics.csv"]
    result = runner.invoke(app, ["train", "--run-dir", str(foreign), "--hidden", "8", "--max-batches", "20",
                                 "--wandb", "off", "--no-progress", "--allow-dirty"])
    assert result.exit_code == 2 and "no 'step' column" in result.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["metrics.csv"]


# -- row 8: a resumed run's progress counts from the batch it resumed at -------------------------------------------

def test_the_progress_bar_of_a_resumed_run_counts_from_where_it_resumed():
    import io

    from rich.console import Console

    from pipeline.training.engine import ProgressLine

    out = io.StringIO()
    bar = ProgressLine(60, console=Console(file=out, force_terminal=True, width=120))
    bar.start(40)  # the run's own step, resumed at 40
    task = bar._progress.tasks[0]
    assert (task.completed, task.total, task.description) == (40, 60, "batches (resumed at 40)")
    bar.update(41, {"ppl": 12.5})
    bar.stop()
    assert "41/60" in out.getvalue() and "resumed at 40" in out.getvalue() and "ppl 12.5" in out.getvalue()


# -- row 9 and a pipe: inspect checks its output before any compute; JSON to standard output ------------------------

def test_inspect_checks_the_output_extension_before_compute_and_writes_json_to_stdout(tmp_path, monkeypatch):
    import json

    import pipeline.inspection

    run_dir = tmp_path / "run"
    train(tiny(max_batches=10), run_dir, progress=False)
    calls = []
    real = pipeline.inspection.inspect_run
    monkeypatch.setattr(pipeline.inspection, "inspect_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    result = runner.invoke(app, ["inspect", str(run_dir), "--out", str(tmp_path / "x.jpgg")])
    assert result.exit_code == 2 and "a png trace is written to a .png file, got '.jpgg'" in flat(result.stderr)
    result = runner.invoke(app, ["inspect", str(run_dir), "--out", "-"])
    assert result.exit_code == 2 and "takes --format json" in flat(result.stderr)
    assert calls == []  # refused before any compute
    result = runner.invoke(app, ["inspect", str(run_dir), "--format", "json", "--out", "-", "--source", "a1 a2"])
    assert result.exit_code == 0, result.output
    trace = json.loads(result.stdout)
    assert trace["source_length"] == 2 and trace["read_ends"] == ["top"] and calls == [1]


# -- row 12: evidence in the run's own window; continuations matched by run id only ---------------------------------

def test_a_small_profiles_evidence_uses_its_own_window_and_cites_only_its_own_continuations(runs_copy, tmp_path):
    import csv
    import json

    from pipeline.reports.build import write_report
    from pipeline.sweep import load_sweep

    path, runs = runs_copy
    sweep = load_sweep(path)
    other = tmp_path / "experiments" / "stack-reversal-elsewhere"  # the same cell in another configuration
    other.mkdir(parents=True)
    (other / "results.json").write_text(json.dumps(dict(task="reversal", model="stack", run_id="reversal-stack-h256-x",
                                                        batches=40000, stop_reason="budget", train_coarse=1.0,
                                                        test_coarse=1.0, train_perplexity=1.0)))
    readme = write_report(sweep, path, runs, tmp_path / "out", command="pytest",
                          experiments_dir=tmp_path / "experiments")
    assert "stack-reversal-elsewhere" not in readme.read_text()
    with open(tmp_path / "out" / "table3.csv") as f:
        ours = [r for r in csv.DictReader(f) if r["in_profile"] == "True"]
    assert ours and all("1,000" not in r["evidence"] for r in ours)
    assert any("last 10 batches" in r["evidence"] for r in ours if r["stop_reason"] == "budget")


# -- a --runs-dir to read from that is not there is a typo, said as one (not a sweep with no runs) -------------------

@pytest.mark.parametrize("command", [["report", "--force"], ["runs"], ["dashboard", "--print-only"], ["archive"],
                                     ["sweep", "--status"]])
def test_a_command_that_reads_runs_refuses_a_runs_folder_that_is_not_there(command, runs_copy, tmp_path):
    path, runs = runs_copy
    archive, out = tmp_path / "archive", tmp_path / "out"
    archive.mkdir()
    (archive / "kept").write_text("an earlier archive")
    extra = {"report": ["--out", str(out)], "archive": ["--to", str(archive)]}.get(command[0], [])
    (tmp_path / "a-file").write_text("")
    for typo, what in ((tmp_path / "runz", "does not exist"), (tmp_path / "a-file", "is not a folder")):
        result = runner.invoke(app, [command[0], str(path), "--runs-dir", str(typo), *command[1:], *extra])
        assert result.exit_code == 2, result.output
        assert flat(result.stderr) == (f"Error: --runs-dir '{typo}' {what}: a command that reads runs needs the "
                                       "folder that holds them (default: runs/<profile name>)")
        assert not typo.is_dir() and not out.exists()  # nothing written: no empty report, no folder made
        assert [p.name for p in archive.iterdir()] == ["kept"]  # nothing archived, nothing touched
    result = runner.invoke(app, [command[0], str(path), "--runs-dir", str(runs), *command[1:], *extra])
    assert result.exit_code == 0, result.output  # the folder that is there is read as before


# -- row 11: one state vocabulary ----------------------------------------------------------------------------------

def test_runs_filters_on_the_states_sweep_and_report_print(runs_copy, tmp_path):
    from pipeline.rundir import STATES
    from pipeline.sweep.status import STATES as SWEEP_STATES

    path, runs = runs_copy
    assert STATES == SWEEP_STATES and "pending" in STATES and "not started" not in STATES
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["runs", str(path), "--runs-dir", str(tmp_path / "empty"), "--status", "pending"])
    assert result.exit_code == 0 and result.stdout.count("pending") == 2
    result = runner.invoke(app, ["runs", str(path), "--runs-dir", str(runs), "--status", "not started"])
    assert result.exit_code == 2 and "--status must be one of finished, pruned, failed, damaged" in flat(result.stderr)


# -- row 13: defaults shown, a directory named as one, a key given twice refused ----------------------------------

def test_help_shows_defaults_a_directory_is_named_and_duplicate_yaml_keys_are_refused(tmp_path):
    from pipeline.bench import DEFAULT_ROUNDS

    result = runner.invoke(app, ["bench", "--help"], terminal_width=200)
    assert f"[default: {DEFAULT_ROUNDS}]" in flat(result.stdout)
    result = runner.invoke(app, ["sweep", str(tmp_path), "--status"])
    assert result.exit_code == 2 and "is a directory" in flat(result.stderr) and "does not exist" not in result.stderr
    twice = tmp_path / "twice.yaml"
    twice.write_text("name: p\nworkers: 1\nworkers: 2\ngrid: [{tasks: [copy], models: [stack]}]\n")
    result = runner.invoke(app, ["sweep", str(twice), "--status"])
    assert result.exit_code == 2 and "key 'workers' is given twice (line 3)" in flat(result.stderr)
    config = tmp_path / "run.yaml"
    config.write_text("task: copy\nmodel: {name: stack, name: queue}\n")
    result = runner.invoke(app, ["train", "--config", str(config), "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and "key 'name' is given twice" in flat(result.stderr)
    assert not (tmp_path / "r").exists()


# -- row 10: a trace kept before traces said where each read acts is read with the right ends ------------------------

def test_a_queue_trace_kept_by_an_older_version_says_it_reads_at_the_bottom():
    import gzip

    from pipeline.inspection import load_trace
    from pipeline.paths import REPO_ROOT

    # A Queue/copy trace from the first cpu profile's archive (written before traces named their read ends), kept
    # as it was: the archive now holds the final profile's traces.
    kept = REPO_ROOT / "tests" / "data" / "queue_trace_before_read_ends.json.gz"
    assert '"read_ends"' not in gzip.decompress(kept.read_bytes()).decode()
    trace = load_trace(kept)
    assert (trace.push_ends, trace.pop_ends, trace.read_ends) == (["top"], ["bottom"], ["bottom"])
    assert all(list(step) == ["bottom"] for step in trace.reads)


# -- row 14: one dashboard for a profile ------------------------------------------------------------------------------

def test_the_dashboard_of_a_read_only_runs_folder_places_its_links_elsewhere(runs_copy, tmp_path, monkeypatch):
    """Issue 80: `transduce dashboard <read-only runs folder>` failed on `.dashboard`. A shared or read-only runs
    folder is only read: the links go to --links, or to a temporary folder of their own."""
    import pipeline.dashboard as dashboard

    _, runs = runs_copy
    for run in runs.iterdir():
        (run / "wandb" / f"offline-run-20261125_120000-{run.name}" / "files").mkdir(parents=True)
    before = sorted(p.name for p in runs.iterdir())
    result = runner.invoke(app, ["dashboard", str(runs), "--print-only", "--links", str(tmp_path / "links")])
    assert result.exit_code == 0, result.output
    assert result.stdout.split()[-1] == str(tmp_path / "links" / ".dashboard")
    runs_listed = lambda folder: [p for p in folder.iterdir() if p.name.startswith("run-")]  # noqa: E731
    assert len(runs_listed(tmp_path / "links" / ".dashboard")) == 2
    real = dashboard.writable
    monkeypatch.setattr(dashboard, "writable", lambda folder: Path(folder) != runs and real(folder))
    result = runner.invoke(app, ["dashboard", str(runs), "--print-only"])  # read-only (as root, chmod is no test)
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.split()[-1])
    assert not str(folder).startswith(str(runs)) and len(runs_listed(folder)) == 2
    assert sorted(p.name for p in runs.iterdir()) == before  # nothing written into the runs folder


def test_the_dashboard_gathers_every_offline_wandb_run_of_a_profile_into_one_folder(runs_copy):
    path, runs = runs_copy
    lstm, stack = sorted(runs.iterdir())  # reversal-lstm1-..., reversal-stack-...
    for run in (lstm, stack):  # what an offline W&B run leaves in a run directory
        offline = run / "wandb" / f"offline-run-20261125_120000-{run.name}"
        offline.mkdir(parents=True)
        (offline / f"run-{run.name}.wandb").write_bytes(b"log")
    result = runner.invoke(app, ["dashboard", str(path), "--runs-dir", str(runs), "--print-only"])
    assert result.exit_code == 0, result.output
    folder = runs / ".dashboard"
    assert result.stdout.split()[-2:] == ["leet", str(folder)]
    # named by task, model, rate and seed in 15 columns after leet's run-<8 digits>_<6 digits>- (the digits number
    # the list), each folder holding the run's own log under that name: an 80-column leet shows the whole name
    names = ["run-00000000_000001-rev-L1-1e-3-s0", "run-00000000_000002-rev-stk-1e-3-s0"]
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == names
    for name, run in zip(names, (lstm, stack)):
        (log,) = (folder / name).iterdir()
        assert log.name == f"run-{name.split('-', 2)[-1]}.wandb" and log.read_bytes() == b"log"
        assert log.resolve() == run / "wandb" / f"offline-run-20261125_120000-{run.name}" / f"run-{run.name}.wandb"
        assert len(name) <= 35 and f"{name.removeprefix('run-00000000_')}" in result.stderr and run.name in \
            result.stderr
    assert json.loads((folder / ".wandb-leet.json").read_text())["selected_runs"] == names  # every curve drawn
    resumed = lstm / "wandb" / f"offline-run-20261126_080000-{lstm.name}"  # resumed once, in another process
    resumed.mkdir(parents=True)
    (resumed / f"run-{lstm.name}.wandb").write_bytes(b"more")
    runner.invoke(app, ["dashboard", str(path), "--runs-dir", str(runs), "--print-only"])
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        "run-00000000_000001-rev-L1-1e-3-s0", "run-00000000_000002-rev-L1-1e-3-s0.2",
        "run-00000000_000003-rev-stk-1e-3-s0"]
    result = runner.invoke(app, ["dashboard", str(runs), "--model", "stack", "--print-only"])  # a runs folder
    assert result.exit_code == 0 and [p.name for p in folder.iterdir() if p.is_dir()] == [names[0].replace(
        "rev-L1", "rev-stk")]  # rebuilt, filtered
    import shutil

    # a run trained with tracking off (or restored from an archive) gets an offline W&B run made from its log
    shutil.rmtree(stack / "wandb")
    result = runner.invoke(app, ["dashboard", str(runs), "--model", "stack", "--print-only"])
    assert result.exit_code == 0, result.output
    (entry,) = [p for p in folder.iterdir() if p.is_dir()]
    (log,) = entry.iterdir()
    made = log.resolve()  # W&B's own run log, which leet reads
    assert made.parent.parent.parent == runs / ".dashboard-made" / stack.name and made.suffix == ".wandb"
    runner.invoke(app, ["dashboard", str(runs), "--model", "stack", "--print-only"])
    assert next(next(p for p in folder.iterdir() if p.is_dir()).iterdir()).resolve() == made  # not made again
    (stack / "metrics.csv").write_text("")  # damaged: nothing to show, and said
    result = runner.invoke(app, ["dashboard", str(runs), "--model", "stack", "--print-only"])
    assert result.exit_code == 2 and "no run of" in result.stderr and "nothing to show" in result.stderr


def test_dashboard_names_fit_leets_list_and_tell_runs_apart():
    from pathlib import Path

    from pipeline.config import RunConfig, from_dict
    from pipeline.dashboard import distinct_names, short_name

    def config(**changes):
        data = {"task": "bigram_flip", "model": {"name": "lstm8"}, "training": {"lr": 5e-5, "seed": 1}}
        for key, value in changes.items():
            section, _, name = key.partition("__")
            data.setdefault(section, {})[name] = value
        return from_dict(RunConfig, data)

    assert short_name(config()) == "bgf-L8-5e-5-s1"
    assert short_name(config(model__name="transformer", model__positional_encoding="randomised")) == "bgf-tfR-5e-5-s1"
    assert max(len(short_name(config(model__name=m))) for m in ("stack", "queue", "deque", "lstm1", "jm_stack")) <= 15
    wide, narrow = config(model__hidden=512), config()
    entries = [(short_name(c), c, c.run_id(), 0, Path(f"/{k}")) for k, c in enumerate((wide, narrow))]
    assert [name for name, _, _ in distinct_names(entries)] == ["bgf-L8-5e-5-s1-h256", "bgf-L8-5e-5-s1-h512"]


# -- issue 26: a profile's workers default to the cores this process may use ----------------------------------------

def test_workers_default_to_the_usable_cores_and_the_profile_or_flag_wins(monkeypatch, tmp_path):
    import os

    from pipeline.provenance import machine, usable_cores
    from pipeline.sweep import default_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert usable_cores() == 3 and machine().endswith(", 3 usable cores")
    sweep = from_dict(SweepConfig, yaml.safe_load(tiny_profile(tmp_path).read_text()))
    assert sweep.workers == 1 and default_workers(sweep) == 1  # the profile's own number wins
    unset = from_dict(SweepConfig, {**yaml.safe_load(tiny_profile(tmp_path).read_text()), "workers": None})
    assert default_workers(unset) == 3  # affinity, not the 64 cores of the machine
    monkeypatch.delattr(os, "sched_getaffinity")
    assert default_workers(unset) == 64  # where affinity cannot be read: every core


def test_the_compute_line_names_the_workers_and_machine_the_runs_recorded(tmp_path):
    import pandas as pd

    from pipeline.reports.build import compute_line

    sweep = from_dict(SweepConfig, yaml.safe_load(tiny_profile(tmp_path).read_text()))
    runs = pd.DataFrame([dict(model="stack", batches=100, train_seconds=3600.0, eval_seconds=0.0, workers=4,
                              machine="Some CPU, 4 usable cores")] * 2)
    line = compute_line(runs, sweep)
    assert "2.0 CPU-hours" in line and "0.5 h of wall time with 4 worker(s) on Some CPU, 4 usable cores" in line
    older = runs.drop(columns=["workers", "machine"])  # runs made before results recorded them
    assert "with 1 worker(s) (machine not recorded)" in compute_line(older, sweep)
    # A grid split between machines (the deep LSTMs' rows sent to a GPU): each machine's share, and the speeds of the
    # machine that did most of the work only.
    gpu = pd.DataFrame([dict(model="lstm8", batches=100, train_seconds=1800.0, eval_seconds=0.0, workers=6,
                             machine="Other CPU, 16 usable cores, GPU H200")])
    line = compute_line(pd.concat([runs, gpu]), sweep)
    assert "2.5 CPU-hours over the 3 done runs" in line and "about 0.6 h of wall time: 2.0 CPU-hours" in line
    assert ("2.0 CPU-hours over 2 runs with 4 worker(s) on Some CPU, 4 usable cores; 0.5 CPU-hours over 1 run with "
            "6 worker(s) on Other CPU, 16 usable cores, GPU H200.") in line
    assert "Training speed on Some CPU, 4 usable cores" in line and "8-layer" not in line
    # Pools of other sizes on one machine: the range of their workers, and each run's wall time at its own pool's size
    # (2 x 3600 / 4 + 1800 / 6 + 3600 / 12 = 2,400 s: 0.7 h; one pool size for the machine would give 0.8 or 0.6 h).
    wider = gpu.assign(train_seconds=3600.0, workers=12)
    line = compute_line(pd.concat([runs, gpu, wider]), sweep)
    assert "about 0.7 h of wall time" in line
    assert "1.5 CPU-hours over 2 runs with 6–12 worker(s) on Other CPU, 16 usable cores, GPU H200" in line
    # Runs trained as one population share its wall time: each counts its share, and the speed is per member-batch
    members = [f"r{k}" for k in range(4)]
    population = pd.DataFrame([dict(model="lstm2", batches=1000, train_seconds=200.0, eval_seconds=0.0, workers=1,
                                    machine="Other CPU, 16 usable cores, GPU H100", population=members)] * 4)
    line = compute_line(population, sweep)
    assert line.startswith("Compute: 0.1 hours over the 4 done runs") and "its time over its members" in line
    assert "training and evaluation, wall time)" in line  # a GPU's runs: their own time, no core shared to wait for
    assert "about 3 min of wall time" in line and "median ms a member-batch with 1 population(s) side by side: " \
        "2-layer LSTM 50." in line
    assert "member" not in compute_line(runs, sweep)  # single runs: as before
    assert "training and evaluation, wall time, which counts any wait for a shared core)" in compute_line(runs, sweep)


def test_a_run_costs_its_cpu_seconds_where_it_recorded_them_and_its_wall_seconds_where_not(tmp_path):
    import pandas as pd

    from pipeline.reports.build import compute_line, run_seconds

    sweep = from_dict(SweepConfig, yaml.safe_load(tiny_profile(tmp_path).read_text()))
    base = dict(model="stack", batches=100, train_seconds=3600.0, eval_seconds=0.0, workers=2,
                machine="Some CPU, 2 usable cores")
    timed = dict(base, train_cpu_seconds=1800.0, eval_cpu_seconds=0.0)  # it waited half its time for a core
    untimed = dict(base, train_cpu_seconds=None, eval_cpu_seconds=None)  # resumed from an older checkpoint
    runs = pd.DataFrame([timed, untimed])
    assert run_seconds(runs).tolist() == [1800.0, 3600.0]
    assert run_seconds(pd.DataFrame([base])).tolist() == [3600.0]  # runs from before: no column at all
    line = compute_line(runs, sweep)
    assert line.startswith("Compute: 1.5 CPU-hours over the 2 done runs")
    assert ("training and evaluation: the process's CPU time for 1 run, the wall time for the 1 that did not record "
            "it, which counts any wait for a shared core") in line
    assert "about 1.0 h of wall time" in line  # the wall time is still the wall time: 2 x 3600 / 2 workers
    assert "Stack-LSTM 27000." in line  # the speed too: the median of 18,000 (CPU) and 36,000 (wall) ms a batch
    line = compute_line(pd.DataFrame([timed, timed]), sweep)
    assert line.startswith("Compute: 1.0 CPU-hours")
    assert "(one thread each; training and evaluation, the process's CPU time)" in line


# -- issue 35, faults 1 and 5: everything checked before anything in a finished run's folder changes ----------------

def folder_snapshot(run_dir):
    return {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("loss", ["archived", "deleted", "truncated"])
def test_extending_a_run_without_a_usable_checkpoint_changes_nothing(finished_tiny, loss):
    run_dir = finished_tiny
    last = run_dir / "checkpoints" / "last.ckpt"
    if loss == "archived":  # restored from an archive: no checkpoints at all
        import shutil

        shutil.rmtree(run_dir / "checkpoints")
    elif loss == "deleted":
        last.unlink()
    else:
        last.write_bytes(last.read_bytes()[:1000])
    before = folder_snapshot(run_dir)
    result = runner.invoke(app, ["train", "--run-dir", str(run_dir), "--max-batches", "40", "--no-progress"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("cannot be continued to 40; nothing was changed" in flat(result.stderr) if loss != "truncated"
            else "last.ckpt: not a readable checkpoint" in flat(result.stderr))
    assert folder_snapshot(run_dir) == before  # results.json not renamed, config.yaml's budget as it was
    assert RunDir(run_dir).state() == "finished"


def test_a_finished_run_whose_config_was_edited_is_named_and_left_alone(tmp_path, finished_tiny):
    run_dir = finished_tiny
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("hidden: 8", "hidden: 16"))
    before = folder_snapshot(run_dir)
    for extra in ([], ["--max-batches", "40"]):
        result = runner.invoke(app, ["train", "--run-dir", str(run_dir), "--no-progress", *extra])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert "results.json: trained with hidden 8, where config.yaml says 16" in flat(result.stderr)
        assert folder_snapshot(run_dir) == before
    result = runner.invoke(app, ["runs", str(tmp_path)])
    assert "damaged" in result.stdout and "where config.yaml says 16" in flat(result.stderr)


# -- issue 80: no command writes over, or deletes from, a folder it does not own ------------------------------------

def test_a_report_never_writes_into_the_repository_root(runs_copy, tmp_path, monkeypatch):
    """`transduce report configs/smoke.yaml --out ""` wrote the report into the repository root and replaced its
    README.md. Refused in one line, with or without --force, and nothing there changes."""
    from pipeline import paths

    path, runs = runs_copy
    repo = tmp_path / "repo"
    (repo / "pipeline").mkdir(parents=True)
    (repo / "README.md").write_text("# transduce\n")
    (repo / "diagram.png").write_bytes(b"a figure of the repository's")
    monkeypatch.setattr(paths, "REPO_ROOT", repo)
    monkeypatch.chdir(repo)
    for extra in ([], ["--force"]):
        result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", "", *extra])
        assert result.exit_code == 2, result.output
        assert "is the repository" in result.stderr and "Traceback" not in result.output
    assert sorted(p.name for p in repo.iterdir()) == ["README.md", "diagram.png", "pipeline"]
    assert (repo / "README.md").read_text() == "# transduce\n"
    # nor into a runs folder, a run folder, or an archive into the runs folder it archives from
    for out in (runs, sorted(runs.iterdir())[0]):
        result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(out), "--force"])
        assert result.exit_code == 2 and "run" in result.stderr and not (out / "README.md").exists()
    result = runner.invoke(app, ["archive", str(path), "--runs-dir", str(runs), "--to", str(runs)])
    assert result.exit_code == 2 and "the runs folder it archives from" in result.stderr
    assert all((run / "checkpoints" / "best.ckpt").is_file() for run in runs.iterdir())


def test_a_report_never_replaces_another_profiles_report_whatever_path_leads_there(runs_copy, tmp_path,
                                                                                    monkeypatch):
    """`transduce report configs/smoke.yaml --out reports/cpu` replaced cpu's committed report and deleted its
    far_lengths.csv and far_lengths.png, exit 0: the profile-name and fewer-runs guards were skipped with --out."""
    from pipeline import paths

    path, runs = runs_copy
    other = tmp_path / "other.yaml"
    other.write_text(path.read_text().replace("name: tiny", "name: other"))
    theirs = tmp_path / "theirs"
    assert runner.invoke(app, ["report", str(other), "--runs-dir", str(runs), "--out", str(theirs)]).exit_code == 0
    (theirs / "far_lengths.csv").write_text("task,model\n")
    (theirs / "far_lengths.png").write_bytes(b"their figure")
    before = {p: p.read_bytes() for p in theirs.rglob("*") if p.is_file()}
    for out in (theirs, tmp_path / "link"):  # the folder, or a symlink to it
        if out.name == "link":
            out.symlink_to(theirs)
        result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert "holds the profile's report of 'other', not of 'tiny'" in result.stderr
    assert {p: p.read_bytes() for p in theirs.rglob("*") if p.is_file()} == before
    # a folder of files no report wrote is not a report's either
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "figure.png").write_bytes(b"a doc's figure")
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(tmp_path / "docs")])
    assert result.exit_code == 2 and "holds files that no report wrote" in result.stderr
    assert (tmp_path / "docs" / "figure.png").is_file()
    # another profile's reports folder (its reports: key in configs/), even before its report was written
    configs, reports = tmp_path / "configs", tmp_path / "reports"
    configs.mkdir()
    gpu = other.read_text().replace("name: other", "name: gpu-lstm\nreports: gpu/lstm")
    (configs / "gpu-lstm.yaml").write_text(gpu)
    monkeypatch.setattr(paths, "CONFIG_DIR", configs)
    monkeypatch.setattr(paths, "REPORTS_DIR", reports)
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(reports / "gpu" / "lstm")])
    assert result.exit_code == 2 and "is the reports folder of gpu-lstm.yaml" in result.stderr
    assert not (reports / "gpu" / "lstm").exists()
    # --force is the way to write there all the same
    result = runner.invoke(app, ["report", str(path), "--runs-dir", str(runs), "--out", str(theirs), "--force"])
    assert result.exit_code == 0, result.output


def test_an_interrupted_run_whose_log_lost_rows_is_refused_not_resumed_with_a_hole(runs_copy):
    """Issue 80: an interrupted run whose metrics.csv lost rows resumed without a word, its log holed and the run then
    listed finished. Its checkpoint records every perplexity window it logged: a log without one of them is refused
    in one line naming the steps, before anything in the folder changes."""
    path, runs = runs_copy
    victim = sorted(runs.iterdir())[0]
    (victim / "results.json").unlink()  # as if killed at its last checkpoint
    lines = (victim / "metrics.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    holed = [line for line in lines[1:] if line.split(",")[header.index("step")] != "10"]
    assert len(holed) < len(lines) - 1  # the rows of step 10 are gone
    (victim / "metrics.csv").write_text(lines[0] + "".join(holed))
    before = {p: p.read_bytes() for p in victim.rglob("*") if p.is_file()}
    config = RunDir(victim).read_config()
    with pytest.raises(ConfigError, match=r"metrics.csv: lacks the training-perplexity rows of step 10, which its "
                                          r"checkpoint at step 20 logged"):
        train(config, victim, progress=False)
    assert {p: p.read_bytes() for p in victim.rglob("*") if p.is_file()} == before  # nothing changed


@pytest.fixture(scope="module")
def straight_to_50(tmp_path_factory, cache_dir):
    """The twin trained straight to 50 batches (windows of 10, evaluations every 20), once for both cases below."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
        folder = tmp_path_factory.mktemp("straight") / "run"
        train(tiny(max_batches=50, perplexity_every=10, eval_every=20, checkpoint_every=10), folder, progress=False)
    return folder


# 30 (an evaluation not due at a window's end) is `slow`: 25 is off both schedules, so it holds the same undoing
@pytest.mark.parametrize("short", [25, pytest.param(30, marks=pytest.mark.slow)])
def test_a_run_extended_past_an_off_schedule_end_writes_its_straight_twins_log(tmp_path, short, straight_to_50):
    """Issue 80: extending a run from 250 to 400 batches added an evaluation row at 250 and a short perplexity window
    at 260, so it differed from its twin trained straight to 400. A run's end off its schedule (its last window
    closed early, an evaluation where none was due: 25 batches with windows of 10 and evaluations every 20; or 30,
    a window's end but no evaluation's) is undone when it goes on: the same metrics.csv and best checkpoint as its
    twin's."""
    import torch

    extended, straight = tmp_path / "extended", straight_to_50
    train(tiny(max_batches=short, perplexity_every=10, eval_every=20, checkpoint_every=10), extended, progress=False)
    train(tiny(max_batches=50, perplexity_every=10, eval_every=20, checkpoint_every=10), extended, progress=False)
    assert (extended / "metrics.csv").read_text() == (straight / "metrics.csv").read_text()
    assert (extended / f"results.{short}.json").is_file()  # what it reported at its first end is kept
    best = [torch.load(where / "checkpoints" / "best.ckpt", weights_only=False) for where in (extended, straight)]
    assert best[0]["global_step"] == best[1]["global_step"]
    for key, value in best[1]["state_dict"].items():
        assert torch.equal(best[0]["state_dict"][key], value), key
