"""The optimizer a run trains with (``training.optimizer``): RMSProp, the paper's and every profile's, unless a run asks
for Adam, the modern baselines' usual recipe. A setting added after runs were archived: at its default a run keeps
the id it had; Adam trains, checkpoints and resumes as RMSProp does; a batched population (RMSProp only) refuses it."""

import pandas as pd
import pytest
import torch
from engine_cases import golden_config

from pipeline.config import ConfigError, RunConfig, from_dict, to_dict
from pipeline.training.step import make_optimizer


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def with_optimizer(config: RunConfig, optimizer: str) -> RunConfig:
    data = to_dict(config)
    data["training"]["optimizer"] = optimizer
    return from_dict(RunConfig, data)


def test_the_default_is_the_papers_rmsprop_and_adam_is_another_run():
    config = RunConfig()
    assert config.training.optimizer == "rmsprop"
    adam = with_optimizer(config, "adam")
    assert adam.run_id() != config.run_id()
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    rmsprop = make_optimizer(parameters, config.training)
    assert isinstance(rmsprop, torch.optim.RMSprop) and rmsprop.defaults["alpha"] == config.training.rmsprop_alpha
    built = make_optimizer(parameters, adam.training)
    assert isinstance(built, torch.optim.Adam)
    assert (built.defaults["lr"], built.defaults["betas"]) == (adam.training.lr, (0.9, 0.999))


def test_an_unknown_optimizer_is_refused_in_one_line_naming_it_and_the_allowed_ones():
    with pytest.raises(ConfigError) as error:
        with_optimizer(RunConfig(), "sgd")
    message = str(error.value)
    assert "\n" not in message and "training.optimizer" in message and "'sgd'" in message
    assert "rmsprop" in message and "adam" in message


def test_an_adam_run_lowers_its_loss_and_resumes_from_its_checkpoint_bit_for_bit(tmp_path):
    """Adam's moments travel in the checkpoint: a run trained to 20 batches, then extended to 40, logs what one
    trained straight to 40 logs; and it learns (its last perplexity window below its first)."""
    from pipeline.training.run import train

    config = with_optimizer(golden_config("queue-copy-value", max_batches=40), "adam")
    train(config, tmp_path / "straight", progress=False)
    train(with_optimizer(golden_config("queue-copy-value", max_batches=20), "adam"), tmp_path / "halted",
          progress=False)
    train(config, tmp_path / "halted", progress=False)
    straight = (tmp_path / "straight" / "metrics.csv").read_text()
    assert (tmp_path / "halted" / "metrics.csv").read_text() == straight
    perplexity = pd.read_csv(tmp_path / "straight" / "metrics.csv")["train/perplexity"].dropna()
    assert perplexity.iloc[-1] < perplexity.iloc[0]
    # and it is not the RMSProp run under another name: their first perplexity windows (batches 1-10) differ
    train(golden_config("queue-copy-value", max_batches=10), tmp_path / "rmsprop", progress=False)
    first = lambda run: pd.read_csv(tmp_path / run / "metrics.csv").dropna(subset=["train/perplexity"]).iloc[0]  # noqa: E731
    assert first("rmsprop")["step"] == first("straight")["step"] == 10
    assert first("rmsprop")["train/perplexity"] != first("straight")["train/perplexity"]


def test_a_batched_population_refuses_adam_before_any_work_and_one_after_another_takes_it(tmp_path):
    from pipeline.training.run import cannot_batch, check_population

    adam = with_optimizer(golden_config("queue-copy-value"), "adam")
    assert cannot_batch(golden_config("queue-copy-value")) is None
    assert "steps RMSProp only" in cannot_batch(adam)
    with pytest.raises(ConfigError, match="cannot be stacked as one batched population \\(training.optimizer"):
        check_population([adam], [tmp_path / "a"], batched=True)
    check_population([adam], [tmp_path / "a"], batched=False)
    with pytest.raises(ConfigError, match="optimizer"):  # one population, one step: RMSProp and Adam do not mix
        check_population([adam, golden_config("queue-copy-value")], [tmp_path / "a", tmp_path / "b"],
                         batched=False)
