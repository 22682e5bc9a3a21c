"""The real training loop on tiny settings: every model family learns, runs resume after kill -9 exactly where
they stopped, and the run directory holds what reports need."""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import yaml

from pipeline.config import MODEL_NAMES, ModelConfig, RunConfig, TrackingConfig, TrainingConfig, to_dict
from pipeline.rundir import RunDir
from pipeline.training.run import evaluate_run, train


def tiny_config(model: str, task: str = "svo_sov", **training) -> RunConfig:
    # the final evaluation on 20 cached sequences a split, not the paper's 1000: what these tests hold is the same
    settings = dict(lr=1e-2, max_batches=40, perplexity_every=10, eval_every=20, eval_size=20, test_eval_size=20,
                    final_eval_size=20, checkpoint_every=10, early_stop_patience=0, length_pool=2)
    settings.update(training)
    return RunConfig(task=task, model=ModelConfig(name=model, hidden=16, memory_width=8, embedding=8),
                     training=TrainingConfig(**settings), tracking=TrackingConfig(wandb="off"))


def metric_rows(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


# the JM stack's (~6 CPU-s) is `slow`: test_inspection.py trains it on the same loop, and test_baseline_models.py
# checks its update against its literal one
@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.slow) if m == "jm_stack" else m
                                   for m in MODEL_NAMES])
def test_every_model_learns_on_the_real_training_loop(model, tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    results = train(tiny_config(model), run_dir, cache_dir=cache_dir, progress=False)
    perplexity = [float(r["train/perplexity"]) for r in metric_rows(run_dir) if r["train/perplexity"]]
    assert len(perplexity) == 4  # every 10 of 40 batches
    # Uniform guessing over the 101 output ids has perplexity 101; the grammar's structure is quickly learnt.
    assert perplexity[0] > 40 and perplexity[-1] < 0.7 * perplexity[0], perplexity
    assert results["batches"] == 40 and results["selected_step"] in (20, 40)
    for key in ("train_coarse", "train_fine", "test_coarse", "test_fine", "long_coarse", "long_fine"):
        assert 0.0 <= results[key] <= 1.0
    assert results["torch"].startswith(f"torch {torch.__version__}, ") and "usable cores" in results["machine"]
    assert "GPU" not in results["machine"]  # trained on the CPU (tests/test_cuda.py: a GPU run names its GPU)
    assert (run_dir / "checkpoints" / "best.ckpt").is_file() and (run_dir / "accuracy_by_length.csv").is_file()
    for split, n in results["eval_sizes"].items():  # where the first error falls: every evaluated sequence counted
        assert sum(count for _, count in RunDir(run_dir).read_first_errors(split)) == n
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved == to_dict(tiny_config(model).resolved())  # the model's start as numbers, never "default"
    assert "default" not in saved["model"].values()


def test_a_finished_run_is_not_trained_again(tmp_path, cache_dir):
    config = tiny_config("lstm1", max_batches=10)
    first = train(config, tmp_path / "run", cache_dir=cache_dir, progress=False)
    mtime = (tmp_path / "run" / "metrics.csv").stat().st_mtime
    assert train(config, tmp_path / "run", cache_dir=cache_dir, progress=False) == first
    assert (tmp_path / "run" / "metrics.csv").stat().st_mtime == mtime


def test_a_run_directory_refuses_a_different_config(tmp_path, cache_dir):
    train(tiny_config("lstm1", max_batches=10), tmp_path / "run", cache_dir=cache_dir, progress=False)
    with pytest.raises(ValueError, match="holds a run of a different config"):  # finished: no stale results
        train(tiny_config("lstm1", max_batches=10, lr=5e-3), tmp_path / "run", cache_dir=cache_dir, progress=False)
    (tmp_path / "run" / "results.json").unlink()
    with pytest.raises(ValueError, match="holds a run of a different config"):  # unfinished
        train(tiny_config("lstm1", max_batches=10, lr=5e-3), tmp_path / "run", cache_dir=cache_dir, progress=False)


def test_evaluate_run_reproduces_the_final_results(tmp_path, cache_dir):
    """Re-evaluating the selected checkpoint on the sequences the final evaluation scored (the first final_eval_size
    of each set) gives its numbers; gender at 40 batches, so that they are not all zero (fine > 0)."""
    config = tiny_config("stack", task="gender", max_batches=40)
    results = train(config, tmp_path / "run", cache_dir=cache_dir, progress=False)
    again = evaluate_run(tmp_path / "run", cache_dir=cache_dir, size=config.training.final_eval_size)
    assert any(results[f"{split}_fine"] > 0 for split in ("train", "test", "long"))
    for split in ("train", "test", "long"):
        assert again[split]["n"] == config.training.final_eval_size
        assert again[split]["coarse"] == results[f"{split}_coarse"]
        assert again[split]["fine"] == results[f"{split}_fine"]


# ----------------------------------------------------------------------------------------------------------------
# kill -9 and resume

_TRAIN = textwrap.dedent("""
    import json, sys
    from pipeline.config import from_dict, RunConfig
    from pipeline.training.run import train
    config = from_dict(RunConfig, json.loads(sys.argv[1]))
    train(config, sys.argv[2], cache_dir=sys.argv[3], progress=False)
""")


def _launch(config: RunConfig, run_dir, cache_dir):
    return subprocess.Popen([sys.executable, "-c", _TRAIN, json.dumps(to_dict(config)), str(run_dir), str(cache_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _checkpoint_step(run_dir) -> int:
    path = run_dir / "checkpoints" / "last.ckpt"
    if not path.exists():
        return 0
    try:
        return torch.load(path, map_location="cpu", weights_only=False)["global_step"]
    except Exception:  # being replaced right now
        return 0


def test_killed_run_resumes_from_its_checkpoint_as_if_never_interrupted(tmp_path, cache_dir):
    # reversal, not tiny_config's SVO->SOV: what resumes a run is the same for every task, and a synthetic task's
    # batches are cheaper to draw
    config = tiny_config("stack", "reversal", max_batches=40, perplexity_every=5, eval_every=20, checkpoint_every=5)
    reference = tmp_path / "uninterrupted"
    train(config, reference, cache_dir=cache_dir, progress=False)

    interrupted = tmp_path / "interrupted"
    process = _launch(config, interrupted, cache_dir)
    deadline = time.monotonic() + 120
    while _checkpoint_step(interrupted) < 15 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, f"training ended before it could be killed: {process.stderr.read()}"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = _checkpoint_step(interrupted)
    assert 15 <= killed_at < 40
    assert not (interrupted / "results.json").exists()

    train(config, interrupted, cache_dir=cache_dir, progress=False)  # run again (here, in process: what resumes it
    # is train's reading of the folder the killed process left, not how the process starts)

    got, want = metric_rows(interrupted), metric_rows(reference)
    steps = [int(r["step"]) for r in got]
    assert steps == sorted(set(steps)), "a step was logged twice or out of order"
    assert steps == [int(r["step"]) for r in want], "a step logged before the checkpoint was lost"
    for g, w in zip(got, want):  # the same data stream and optimiser state: the very same numbers
        for key in ("train/perplexity", "train/coarse", "train/fine", "test/coarse", "test/fine"):
            assert g[key] == w[key], (g["step"], key)
    a = json.loads((interrupted / "results.json").read_text())
    b = json.loads((reference / "results.json").read_text())
    for key in ("batches", "selected_step", "train_perplexity", "train_coarse", "train_fine", "test_coarse",
                "test_fine", "long_coarse", "long_fine"):
        assert a[key] == b[key], key


def test_the_loop_is_plain_python_with_no_stand_ins_for_lightning_and_no_silenced_warning(tmp_path, cache_dir,
                                                                                           monkeypatch):
    """Issue 79: the loop is written out (engine.Loop, Lightning Fabric for device and checkpoints): no dummy dataset,
    no member posing as a trainer, no Lightning warning silenced, and training a run raises none; each run's model
    is a LightningModule."""
    import warnings

    import lightning as L

    from pipeline.training import engine
    from pipeline.training.module import TransductionModule

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    for stand_in in ("Ticks", "quiet_lightning", "PopulationModule", "fit"):
        assert not hasattr(engine, stand_in), stand_in
    assert not hasattr(engine.Member, "global_step") and not hasattr(engine.Member, "save_checkpoint")
    assert issubclass(TransductionModule, L.LightningModule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(tiny_config("stack", max_batches=20), tmp_path / "run", progress=False)
    assert [str(w.message) for w in caught if "lightning" in w.filename] == []


def test_a_learning_rate_from_the_command_line_reaches_the_optimizer_through_four_files(tmp_path, cache_dir,
                                                                                        monkeypatch):
    """`--lr` (pipeline/cli/training.py) is placed in the run's config by resolve_run_config
    (pipeline/config/options.py); the run's model hands its training settings to the one optimizer constructor
    (TransductionModule.configure_optimizers, pipeline/training/module.py -> make_optimizer,
    pipeline/training/step.py). The optimizer is made there, and the run's checkpoint holds the rate given."""
    import traceback

    from typer.testing import CliRunner

    from pipeline.cli import app

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    made = []
    original = torch.optim.RMSprop.__init__

    def recording(self, params, lr=1e-2, **kwargs):
        made.append((lr, [(f.filename, f.name) for f in traceback.extract_stack() if "/pipeline/" in f.filename]))
        original(self, params, lr=lr, **kwargs)

    monkeypatch.setattr(torch.optim.RMSprop, "__init__", recording)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(to_dict(tiny_config("lstm1", max_batches=10))))
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--lr", "0.0123", "--run-dir",
                                      str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 0, result.output
    lr, stack = made[0]
    assert lr == 0.0123
    innermost = [(file.split("/pipeline/")[1], name) for file, name in stack[-2:]]
    assert innermost == [("training/module.py", "configure_optimizers"), ("training/step.py", "make_optimizer")]
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["optimizer_states"][0]["param_groups"][0]["lr"] == 0.0123
