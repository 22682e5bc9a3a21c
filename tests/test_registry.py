"""Adding an architecture or a task is one registry entry: a toy of each, registered here and nowhere else, is
validated by configs, trained by the real loop, cached, and reported with a name, a colour and a title."""

import numpy as np
import pytest

from pipeline.config import ConfigError, RunConfig, from_dict
from pipeline.models import DISPLAY_NAMES, MODEL_NAMES, MODELS, ModelEntry, build_model, register_model
from pipeline.models.deep_lstm import DeepLSTM
from pipeline.reports.build import TASK_TITLES, model_style
from pipeline.tasks import TASK_NAMES, TASKS, TaskEntry, get_task, register_task
from pipeline.tasks.synthetic import SyntheticTask


def duplicate(source: np.ndarray) -> np.ndarray:
    """a1 a2 -> a1 a1 a2 a2"""
    return np.repeat(source, 2)


@pytest.fixture
def toys(monkeypatch, cache_dir):
    """The one entry each; removed again after the test."""
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    register_model(ModelEntry("lstm3", "3-layer LSTM", lambda c, i, o: DeepLSTM(i, o, c.hidden, c.embedding, 3),
                              dict(color="#123456", ls="-", marker="*")))
    register_task(TaskEntry("duplicate", lambda: SyntheticTask("duplicate", duplicate), "Symbol doubling", 6000))
    yield
    MODELS.pop("lstm3")
    TASKS.pop("duplicate")
    get_task.cache_clear()


def test_a_toy_model_and_task_are_known_everywhere_after_one_entry_each(toys, tmp_path):
    from pipeline.training.run import train

    config = from_dict(RunConfig, {"task": "duplicate", "model": {"name": "lstm3", "hidden": 8, "embedding": 4},
                                   "training": dict(max_batches=10, eval_every=10, eval_size=10, test_eval_size=10,
                                                    final_eval_size=10, perplexity_every=10),
                                   "tracking": {"wandb": "off"}})
    assert isinstance(build_model(config.model, 20, 10), DeepLSTM)
    results = train(config, tmp_path / "run", progress=False)  # the real loop, the cache, the evaluation
    assert results["batches"] == 10 and 0 <= results["test_fine"] <= 1
    assert "lstm3" in MODEL_NAMES and "duplicate" in TASK_NAMES and DISPLAY_NAMES["lstm3"] == "3-layer LSTM"
    assert model_style("lstm3")["color"] == "#123456" and TASK_TITLES["duplicate"] == "Symbol doubling"


def test_registration_refuses_clashes():
    with pytest.raises(ValueError, match="model 'stack' is already registered"):
        register_model(ModelEntry("stack", "Another", lambda c, i, o: None))
    with pytest.raises(ValueError, match="task 'toy': seed_base 1000 is already 'copy''s"):
        register_task(TaskEntry("toy", lambda: None, "Toy", 1000))
    assert "toy" not in TASKS and len(MODEL_NAMES) == 7 and len(TASK_NAMES) == 5


def test_an_unregistered_model_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="model.name must be one of lstm1, lstm2, lstm4, lstm8, stack, queue, "
                                          "deque; got 'lstm3'"):
        from_dict(RunConfig, {"model": {"name": "lstm3"}})
