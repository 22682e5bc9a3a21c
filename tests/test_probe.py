"""What a fault probe and a new user tripped on (issue 25), one test per row of its table, on tiny runs."""

import re

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ConfigError, RunConfig, SweepConfig, from_dict
from pipeline.sweep.locks import claim_owner, run_lock
from pipeline.training.run import RunBusy, train

runner = CliRunner()


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def flat(text: str) -> str:
    """Error text without Rich's box drawing and line wrapping."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def tiny(max_batches=20, **training) -> RunConfig:
    settings = dict(max_batches=max_batches, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    settings.update(training)
    return from_dict(RunConfig, {"task": "reversal", "model": {"name": "stack", "hidden": 8, "memory_width": 4,
                                                               "embedding": 4},
                                 "training": settings, "tracking": {"wandb": "off"}})


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

    from pipeline.training.module import TransductionModule
    from pipeline.training.run import RunStopped

    step = TransductionModule.training_step

    def step_then_sigterm(self, batch, batch_idx):
        if self.global_step == 25:
            os.kill(os.getpid(), signal.SIGTERM)  # what `kill <pid>` or a cluster's pre-emption sends
        return step(self, batch, batch_idx)

    run_dir = tmp_path / "run"
    monkeypatch.setattr(TransductionModule, "training_step", step_then_sigterm)
    with pytest.raises(RunStopped, match="stopped by SIGTERM at batch 2[56], before the run ended; run the same "
                                         "command again to resume") as stopped:
        train(tiny(max_batches=60), run_dir, progress=False)
    assert stopped.value.exit_code == 143
    assert not (run_dir / "results.json").exists()
    monkeypatch.setattr(TransductionModule, "training_step", step)
    assert train(tiny(max_batches=60), run_dir, progress=False)["batches"] == 60  # resumed from its checkpoint
