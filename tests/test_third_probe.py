"""What the third fault probe tripped on (its items by number), each with the class behind it closed: an archive
never loses a copy that holds more; every non-finite or out-of-range setting is refused before compute, in one line;
valid YAML and valid overrides are read; SLURM is asked for only where it exists."""

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ConfigError, RunConfig, from_dict
from pipeline.files import parse_yaml
from pipeline.provenance import git_commit
from pipeline.rundir import RunDir
from pipeline.runs import ArchiveRefused, archive_runs, batches_held
from pipeline.sweep import load_sweep, run_local

runner = CliRunner()


def profile(path, max_batches, **top):
    data = {"name": "probe3", "workers": 1,
            "defaults": {"model": {"embedding": 4}, "tracking": {"wandb": "off"},
                         "training": dict(max_batches=max_batches, perplexity_every=10, eval_every=10, eval_size=10,
                                          test_eval_size=10, final_eval_size=10, checkpoint_every=10,
                                          early_stop_patience=0)},
            "grid": [{"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8]}], **top}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


# -- item 1: an archive never replaces a copy with one that holds fewer batches ---------------------------------------

@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_an_archive_keeps_the_longer_copy_unless_forced(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    short, long = profile(tmp_path / "a" / "p.yaml", 20), profile(tmp_path / "b" / "p.yaml", 30)
    first, second, archive = tmp_path / "runs1", tmp_path / "runs2", tmp_path / "archive"
    (run,) = run_local(load_sweep(short), first, echo=lambda _: None)
    shutil.copytree(first, second)
    run_local(load_sweep(long), second, echo=lambda _: None)  # the same run extended to 30 in another folder
    assert archive_runs(long, archive, second) == [run.run_dir.name]
    copy = archive / run.run_dir.name
    assert batches_held(copy) == 30 and (copy / "results.20.json").is_file()
    with pytest.raises(ArchiveRefused, match=r"--force replaces them.*holds 20 batches where the archived copy "
                                             r"holds 30"):
        archive_runs(short, archive, first)
    assert batches_held(copy) == 30 and (copy / "results.20.json").is_file()  # untouched
    result = runner.invoke(app, ["archive", str(short), "--runs-dir", str(first), "--to", str(archive)])
    assert result.exit_code == 2 and "kept the archived copy of 1" in result.stderr
    assert archive_runs(short, archive, first, force=True) == [run.run_dir.name] and batches_held(copy) == 20
    # a run whose files fail their checks never replaces a copy: a damaged log...
    (first / run.run_dir.name / "metrics.csv").write_text("")
    assert archive_runs(short, archive, first) == [] and RunDir(copy).read_metrics()
    # ... or results that disagree with its config
    shutil.rmtree(first / run.run_dir.name)
    shutil.copytree(second / run.run_dir.name, first / run.run_dir.name)
    results = (first / run.run_dir.name / "results.json")
    results.write_text(results.read_text().replace('"hidden": 8', '"hidden": 9'))
    with pytest.raises(ArchiveRefused, match="fail their checks"):
        archive_runs(long, archive, first, force=False)


# -- items 4, 11, 5: non-finite and out-of-range settings refused before compute --------------------------------------

@pytest.mark.parametrize("section, key, value, message", [
    ("model", "pop_bias", float("nan"), r"model.pop_bias must be a finite number in \[-20, 20\].*got nan"),
    ("model", "push_bias", float("inf"), r"model.push_bias must be a finite number .* got inf"),
    ("model", "bottom_pop_bias", -1e6, r"model.bottom_pop_bias must be a finite number .* got -1000000"),
    ("tracking", "project", "x" * 129, r"tracking.project must be 1 to 128 characters .* one of 129 characters"),
    ("tracking", "project", "a/b", r"tracking.project must be 1 to 128 characters"),
])
def test_a_setting_that_cannot_train_is_refused_in_one_line_before_any_folder(section, key, value, message,
                                                                               tmp_path):
    with pytest.raises(ConfigError, match=message):
        from_dict(RunConfig, {section: {key: value}})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({section: {key: value}}))
    result = runner.invoke(app, ["train", "--config", str(config), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


# -- item 7: --executor slurm without SLURM ----------------------------------------------------------------------------

def test_slurm_without_slurm_is_one_line_before_any_run_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda command: None)
    path = profile(tmp_path / "p.yaml", 20)
    result = runner.invoke(app, ["sweep", str(path), "--executor", "slurm", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "needs SLURM's sbatch and srun on the PATH" in result.stderr
    assert not (tmp_path / "runs").exists()


# -- items 15 and 16: valid input read ---------------------------------------------------------------------------------

def test_yaml_merge_keys_are_read_and_explicit_keys_win():
    data = parse_yaml("base: &b {lr: 0.01, seed: 2}\nrun:\n  <<: *b\n  seed: 3\n")
    assert data["run"] == {"lr": 0.01, "seed": 3}
    with pytest.raises(Exception, match="given twice"):
        parse_yaml("a: 1\na: 2\n")


def test_block_overrides_are_checked_against_the_profiles_defaults(tmp_path):
    path = profile(tmp_path / "p.yaml", 40)
    data = yaml.safe_load(path.read_text())
    data["grid"][0]["overrides"] = {"training": {"eval_every": 20}}  # perplexity_every is 10 in the defaults
    path.write_text(yaml.safe_dump(data))
    assert [run.training.eval_every for run in load_sweep(path).runs()] == [20]
    data["grid"][0]["overrides"] = {"training": {"eval_every": 5}}  # below the profile's perplexity_every: refused
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"grid\[0\].overrides.training.eval_every must be at least "
                                          r"perplexity_every \(10\)"):
        load_sweep(path)


# -- items 2, 3, 10: a checkpoint is checked against its run before anything in the folder changes -------------------

def test_another_runs_checkpoint_is_refused_before_the_folder_changes(tmp_path, cache_dir, monkeypatch):
    from pipeline.training.run import train

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    settings = dict(max_batches=30, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    mine = from_dict(RunConfig, {"task": "reversal", "model": {"name": "lstm1", "hidden": 8, "embedding": 4},
                                 "training": settings, "tracking": {"wandb": "off"}})
    other = from_dict(RunConfig, {"task": "copy", "model": {"name": "stack", "hidden": 8, "embedding": 4,
                                                            "memory_width": 4},
                                  "training": {**settings, "lr": 5e-3}, "tracking": {"wandb": "off"}})
    train(other, tmp_path / "other", progress=False)
    train(mine, tmp_path / "mine", progress=False)
    mine_dir = tmp_path / "mine"
    # interrupted mid-run (no results), then given another run's last.ckpt (item 2: the log was cut before a traceback;
    # item 10: one of the same shape resumed silently)
    (mine_dir / "results.json").unlink()
    shutil.copy(tmp_path / "other" / "checkpoints" / "last.ckpt", mine_dir / "checkpoints" / "last.ckpt")
    before = {p.name: p.read_bytes() for p in mine_dir.iterdir() if p.is_file()}
    result = runner.invoke(app, ["train", "--run-dir", str(mine_dir), "--no-progress"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "is a checkpoint of another run (copy-stack-h8-lr0.005" in result.stderr.replace("\n", " ")
    assert {p.name: p.read_bytes() for p in mine_dir.iterdir() if p.is_file()} == before  # metrics.csv uncut
    # item 3: inspect and evaluate on a best.ckpt of another architecture
    shutil.copy(tmp_path / "other" / "checkpoints" / "best.ckpt", mine_dir / "checkpoints" / "best.ckpt")
    for command in (["evaluate", str(mine_dir)], ["inspect", str(mine_dir), "--out", str(tmp_path / "t.png")]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert "checkpoint of another run" in result.stderr.replace("\n", " ")


# -- item 14: an unusable .lock names itself; SIGHUP ends training with a line ---------------------------------------

@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_lock_that_is_a_directory_is_one_damaged_run_not_a_failed_listing(tmp_path, cache_dir, monkeypatch):
    from pipeline.training.run import train

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    path = profile(tmp_path / "p.yaml", 20)
    runs = tmp_path / "runs"
    (run,) = run_local(load_sweep(path), runs, echo=lambda _: None)
    lock = run.run_dir / ".lock"
    lock.unlink()
    lock.mkdir()
    result = runner.invoke(app, ["runs", str(runs)])
    assert result.exit_code == 0 and "damaged" in result.stdout, result.output
    assert ".lock is a directory, not the run's lock file" in result.stderr.replace("\n", " ")
    with pytest.raises(ConfigError, match=r"\.lock is a directory, not the run's lock file; remove it"):
        train(load_sweep(path).runs()[0], run.run_dir, progress=False)


def test_sighup_stops_training_with_129_and_a_line_and_the_handler_is_given_back(tmp_path, cache_dir, monkeypatch):
    import os
    import signal

    from pipeline.training.engine import Loop

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    step = Loop.step

    def step_then_hangup(self):
        if self.batches_done == 15:
            os.kill(os.getpid(), signal.SIGHUP)  # what a closing terminal sends
        return step(self)

    monkeypatch.setattr(Loop, "step", step_then_hangup)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"model": {"name": "lstm1", "hidden": 8, "embedding": 4},
                                      "training": dict(max_batches=40, perplexity_every=10, eval_every=10,
                                                       eval_size=10, test_eval_size=10, final_eval_size=10,
                                                       checkpoint_every=10),
                                      "tracking": {"wandb": "off"}}))
    before = signal.getsignal(signal.SIGHUP)
    result = runner.invoke(app, ["train", "--config", str(config), "--run-dir", str(tmp_path / "run"),
                                 "--no-progress"])
    assert result.exit_code == 129, result.output
    assert "stopped by SIGHUP (its terminal closed) at batch" in result.stderr.replace("\n", " ")
    assert signal.getsignal(signal.SIGHUP) is before


# -- item 6: --wandb online without a network trains, logging offline ------------------------------------------------

@pytest.fixture
def fresh_wandb():
    """wandb keeps one service per process, and Lightning's offline logger sets $WANDB_MODE for the whole process:
    each test starts and ends without either."""
    import os

    import wandb

    wandb.teardown()
    os.environ.pop("WANDB_MODE", None)
    yield
    wandb.teardown()
    os.environ.pop("WANDB_MODE", None)


@pytest.fixture
def silent_server():
    """A W&B server that accepts connections and never answers (a network that swallows requests)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_wandb_online_without_a_network_says_so_at_once_and_logs_offline(tmp_path, monkeypatch, fresh_wandb):
    from pipeline.training import tracking

    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # the discard port: nothing listens there
    assert "cannot be reached" in tracking.wandb_unreachable()
    config = from_dict(RunConfig, {"task": "copy", "model": {"name": "lstm1", "hidden": 8},
                                   "tracking": {"wandb": "online"}})
    with pytest.warns(UserWarning, match="127.0.0.1:9 cannot be reached.*logging offline instead"):
        logger = tracking.wandb_logger(config, tmp_path)
    logger.experiment.log({"x": 1.0})
    logger.experiment.finish()
    assert [p.name.startswith("offline-run-") for p in (tmp_path / "wandb").iterdir() if p.is_dir()
            and not p.is_symlink()] == [True]


def test_an_online_run_that_times_out_falls_back_offline_under_the_same_id(tmp_path, monkeypatch, silent_server,
                                                                          fresh_wandb):
    from pipeline.training import tracking

    monkeypatch.setenv("WANDB_BASE_URL", silent_server)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setattr(tracking, "ONLINE_INIT_TIMEOUT_S", 3)
    config = from_dict(RunConfig, {"task": "copy", "model": {"name": "lstm1", "hidden": 8},
                                   "tracking": {"wandb": "online"}})
    with pytest.warns(UserWarning, match="could not start.*logging offline instead"):
        logger = tracking.wandb_logger(config, tmp_path)
    logger.experiment.log({"x": 1.0})  # before the fix: "run ID ... is in use"
    logger.experiment.finish()
    folders = [p.name for p in (tmp_path / "wandb").iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(folders) == 1 and folders[0].startswith("offline-run-")


# -- item 12: no command writes into another profile's runs or report without being told ------------------------------

@pytest.mark.parametrize("command", [
    ["sweep", "{copy}"], ["sweep", "{copy}", "--status"], ["archive", "{copy}"], ["archive", "{copy}", "--restore"],
    ["report", "{copy}"], ["study", "{copy}"], ["screen", "{copy}"]])
def test_a_copied_profile_that_kept_another_profiles_name_is_refused_before_writing(tmp_path, command):
    from pipeline.paths import CONFIG_DIR, REPORTS_DIR, RUNS_DIR

    copy = tmp_path / "mine.yaml"
    copy.write_text((CONFIG_DIR / "smoke.yaml").read_text())  # name: smoke
    before_runs = sorted(RUNS_DIR.glob("smoke/*")) if RUNS_DIR.is_dir() else []
    before_report = sorted(p.name for p in (REPORTS_DIR / "smoke").glob("*"))
    result = runner.invoke(app, [part.format(copy=copy) for part in command])
    if command[-1] == "--status":  # reads only
        assert "configs/smoke.yaml's" not in result.output
        return
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "name 'smoke'" in line and "configs/smoke.yaml's" in line, line
    assert (sorted(RUNS_DIR.glob("smoke/*")) if RUNS_DIR.is_dir() else []) == before_runs
    assert sorted(p.name for p in (REPORTS_DIR / "smoke").glob("*")) == before_report


def test_a_copied_profile_may_write_where_it_is_told(tmp_path):
    from pipeline.paths import CONFIG_DIR
    from pipeline.sweep.grid import check_own_folders, other_profile

    copy = tmp_path / "mine.yaml"
    copy.write_text((CONFIG_DIR / "smoke.yaml").read_text())
    sweep = load_sweep(copy)
    assert other_profile(sweep, copy, runs=True) == CONFIG_DIR / "smoke.yaml"
    assert other_profile(sweep, copy) is None  # writing nowhere by default: nothing to refuse
    assert other_profile(sweep, CONFIG_DIR / "smoke.yaml", runs=True, reports=True) is None  # its own folders
    renamed = profile(tmp_path / "renamed.yaml", 10, reports="cpu")  # its own name, another profile's report
    with pytest.raises(ConfigError, match=r"reports/cpu/.*configs/cpu.yaml|configs/cpu.yaml.*reports/cpu/"):
        check_own_folders(load_sweep(renamed), renamed, reports=True)
    check_own_folders(load_sweep(renamed), renamed, runs=True)  # its runs folder is its own
    (tmp_path / "none").mkdir()
    result = runner.invoke(app, ["report", str(copy), "--runs-dir", str(tmp_path / "none"), "--out",
                                 str(tmp_path / "out")])
    assert "configs/smoke.yaml's" not in result.output  # told where: the ownership check passes (no runs: refused)


# -- item 13: a full disk is said, names the run and the path, and loses nothing ---------------------------------------

def no_space(path):
    import errno

    return OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_file_that_cannot_be_written_whole_leaves_the_old_one_and_names_itself(tmp_path):
    from pipeline.files import atomic_write_text, written_atomically

    target = tmp_path / "run" / "last.ckpt"
    atomic_write_text(target, "the old checkpoint")
    with pytest.raises(OSError, match=r"No space left on device: '.*run/last.ckpt'$"):
        with written_atomically(target) as partial:
            partial.write_text("half of a new one")
            raise no_space("/tmp/tmpabc")  # what shutil and torch name: a temporary or a source file
    assert target.read_text() == "the old checkpoint"
    assert [p.name for p in target.parent.iterdir()] == ["last.ckpt"]  # no temporary file left behind


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_an_archive_onto_a_full_disk_names_the_copy_and_leaves_no_staging_folder(tmp_path, cache_dir, monkeypatch):
    import pipeline.runs

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    prof = profile(tmp_path / "p.yaml", 10)
    (run,) = run_local(load_sweep(prof), tmp_path / "runs", echo=lambda _: None)
    copy2 = shutil.copy2

    def fills_the_disk(source, target):
        copy2(source, target)
        raise no_space(source)  # shutil names the source file on ENOSPC

    monkeypatch.setattr(pipeline.runs.shutil, "copy2", fills_the_disk)
    archive = tmp_path / "archive"
    with pytest.raises(OSError) as raised:
        archive_runs(prof, archive, tmp_path / "runs")
    assert raised.value.filename == str(archive / run.run_dir.name)
    assert list(archive.iterdir()) == []  # no hidden staging folder


def test_a_run_whose_checkpoint_meets_a_full_disk_is_interrupted_and_resumes(tmp_path, cache_dir, monkeypatch):
    import contextlib

    import pipeline.training.monitor
    from pipeline.sweep.worker import run_one

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    from pipeline.sweep import prepare

    sweep = load_sweep(profile(tmp_path / "p.yaml", 20))
    (run_dir,) = prepare(sweep, tmp_path / "runs", retry_failed=False)

    @contextlib.contextmanager
    def full(path):
        raise no_space(path)
        yield

    monkeypatch.setattr(pipeline.training.monitor, "written_atomically", full)
    assert run_one(run_dir) == "interrupted"  # not "failed": nothing is wrong with the run
    assert not RunDir(run_dir).failed_file.exists() and not RunDir(run_dir).last_checkpoint.exists()
    monkeypatch.undo()
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    assert run_one(run_dir) == "finished"  # its first checkpoint was never written: it starts again from batch 0
    assert max(int(row["step"]) for row in RunDir(run_dir).read_metrics()) == 20


def test_the_sweep_says_when_its_disk_is_full(tmp_path, monkeypatch):
    import collections

    import pipeline.files

    prof = profile(tmp_path / "p.yaml", 10)
    (tmp_path / "runs").mkdir()
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(pipeline.files.shutil, "disk_usage", lambda path: usage(10 << 30, 10 << 30, 4096))
    result = runner.invoke(app, ["sweep", str(prof), "--status", "--runs-dir", str(tmp_path / "runs")])
    assert "No space left on device: the disk holding" in result.output and "4,096 bytes free" in result.output
    monkeypatch.setattr(pipeline.files.shutil, "disk_usage", lambda path: usage(10 << 30, 0, 10 << 30))
    result = runner.invoke(app, ["sweep", str(prof), "--status", "--runs-dir", str(tmp_path / "runs")])
    assert "No space" not in result.output


# -- the GPU grid (issue 57, item 3): workers spread over the visible GPUs; SLURM tasks ask for theirs ----------------

@pytest.mark.usefixtures("in_process_pool")  # what each worker is handed, not the worker itself
def test_workers_are_spread_over_the_visible_gpus(tmp_path, cache_dir, monkeypatch):
    import pipeline.sweep.local as local
    from pipeline.provenance import visible_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5,-1")
    assert visible_gpus() == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    assert local.least_busy(["0", "1"], ["0"]) == "1" and local.least_busy(["0", "1"], ["0", "1"]) == "0"
    assert local.least_busy([], [None]) is None

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    monkeypatch.setattr(local, "visible_gpus", lambda: ["0", "1"])  # a machine with two GPUs, faked
    seen, popen = [], local.subprocess.Popen  # the in-process worker: it runs its job on this CPU, whatever it is told

    def recording(command, *args, env=None, **kwargs):
        seen.append(env.get("CUDA_VISIBLE_DEVICES"))
        return popen(command, *args, env=env, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", recording)
    prof = profile(tmp_path / "p.yaml", 10, grid=[{"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8],
                                                   "seeds": [0, 1]}])
    statuses = run_local(load_sweep(prof), tmp_path / "runs", workers=2, echo=lambda _: None)
    assert [s.state for s in statuses] == ["finished", "finished"]
    assert sorted(seen) == ["0", "1"]  # two workers at once: one on each GPU


def test_a_population_profile_defaults_to_one_worker_per_gpu(tmp_path, monkeypatch):
    from pipeline.sweep.grid import default_workers

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert default_workers(load_sweep(profile(tmp_path / "a.yaml", 10, workers=None, population=8))) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert default_workers(load_sweep(profile(tmp_path / "b.yaml", 10, workers=None, population=8))) >= 1


def test_slurm_array_tasks_ask_for_the_profiles_gpus(tmp_path, monkeypatch):
    import submitit

    import pipeline.sweep.slurm as slurm

    asked = {}

    class Recording:
        def __init__(self, folder, cluster):
            pass

        def update_parameters(self, **parameters):
            asked.update(parameters)

        def map_array(self, fn, tasks):
            raise RuntimeError("submitted")

    monkeypatch.setattr(submitit, "AutoExecutor", Recording)
    monkeypatch.setattr(slurm, "check_slurm", lambda: None)
    prof = profile(tmp_path / "p.yaml", 10, slurm={"gpus_per_task": 2})
    with pytest.raises(RuntimeError, match="submitted"):
        slurm.submit_slurm(load_sweep(prof), tmp_path / "runs", echo=lambda _: None)
    assert asked["gpus_per_node"] == 2
    with pytest.raises(ConfigError, match="gpus_per_task must be an integer"):
        load_sweep(profile(tmp_path / "q.yaml", 10, slurm={"gpus_per_task": -1}))


@pytest.mark.parametrize("key, value", [("mem_gb", -1), ("time_min", 0), ("cpus_per_task", 0),
                                        ("array_parallelism", -3), ("gpus_per_task", 99)])
def test_a_profiles_slurm_section_is_validated_when_it_is_loaded(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"slurm\.{key}"):
        load_sweep(profile(tmp_path / "p.yaml", 10, slurm={key: value}))


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_the_sweep_keeps_the_draw_it_trains_again_from_batch_0(tmp_path, cache_dir, monkeypatch):
    """The sweep's own path (a worker training one run): a run whose results stop short of its budget and whose
    checkpoint is gone is trained again from batch 0, and the draw it replaces is kept in earlier_draws.json. The
    single-run path once cleared the folder without it (the population path kept it), so two runs retrained on
    the Intel machine lost their first draws' record and the archive refused their new draws."""
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    short, long = profile(tmp_path / "a" / "p.yaml", 20), profile(tmp_path / "b" / "p.yaml", 30)
    runs = tmp_path / "runs"
    (run,) = run_local(load_sweep(short), runs, echo=lambda _: None)
    folder = RunDir(runs / run.run_dir.name)
    folder.commits_file.write_text("0123abc-dirty\n")  # the first draw trained elsewhere, on a modified checkout
    first = {**folder.read_results(), "commit": "0123abc-dirty"}
    folder.results_file.write_text(json.dumps(first))
    shutil.rmtree(folder.checkpoints)  # archived without it, restored elsewhere
    (again,) = run_local(load_sweep(long), runs, echo=lambda _: None)
    assert again.state == "finished" and folder.read_results()["batches"] == 30
    assert folder.read_earlier_draws() == [first]
    # the new draw names only the code that trained it: the replaced draw's commits stay in its own record
    assert folder.read_commits() == [git_commit()] and folder.read_results()["commit"] == git_commit()


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_run_trained_again_from_batch_0_replaces_its_archived_copy_keeping_it_as_an_earlier_draw(
        tmp_path, cache_dir, monkeypatch):
    """A run whose checkpoint was lost is trained again from batch 0 (another machine's floats: another draw), and
    may stop sooner than the archived draw did. Its folder keeps that draw's results (earlier_draws.json), so the
    archive takes the new draw, where a copy that merely holds fewer batches is refused (the test above); restored,
    the run is done."""
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    short, long = profile(tmp_path / "a" / "p.yaml", 20), profile(tmp_path / "b" / "p.yaml", 30)
    runs, archive = tmp_path / "runs", tmp_path / "archive"
    (run,) = run_local(load_sweep(long), runs, echo=lambda _: None)
    archive_runs(long, archive, runs)
    folder = RunDir(runs / run.run_dir.name)
    archived = RunDir(archive / run.run_dir.name).read_results()
    first_log = folder.log_file.read_text()
    folder.new_draw()  # what a sweep does to a run whose checkpoint is gone
    assert not folder.results_file.exists() and folder.read_earlier_draws() == [archived]
    # its log keeps the replaced draw's lines, marked as such, and the new draw's follow them
    marked = folder.log_file.read_text()
    assert marked.startswith(first_log) and "trained again from batch 0; the lines above are the replaced draw's" in \
        marked.splitlines()[-1]
    run_local(load_sweep(short), runs, echo=lambda _: None)  # the new draw, stopped at 20
    assert folder.log_file.read_text().startswith(marked) and len(folder.log_file.read_text()) > len(marked)
    assert archive_runs(short, archive, runs) == [run.run_dir.name]
    copy = RunDir(archive / run.run_dir.name)
    assert batches_held(copy.path) == 20 and copy.read_earlier_draws() == [archived]
    # restored on a fresh checkout, the run is the new draw, finished: nothing is trained again
    shutil.rmtree(runs)
    shutil.copytree(archive, runs)
    assert RunDir(runs / run.run_dir.name).state(load_sweep(short).runs()[0]) == "finished"
