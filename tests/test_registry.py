"""Adding an architecture or a task is one registry entry: a toy of each, registered here and nowhere else, is
validated by configs, trained by the real loop, cached, and reported with a name, a colour and a title."""

import numpy as np
import pytest

from pipeline.config import ConfigError, RunConfig, from_dict
from pipeline.models import (
    DISPLAY_NAMES,
    MODEL_NAMES,
    MODELS,
    PAPER_MODEL_NAMES,
    ModelEntry,
    build_model,
    register_model,
)
from pipeline.models.deep_lstm import DeepLSTM
from pipeline.reports.build import TASK_TITLES, model_style
from pipeline.tasks import PAPER_TASK_NAMES, TASK_NAMES, TASKS, TaskEntry, get_task, register_task
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


def test_table2_counts_a_model_registered_again_under_its_name_afresh(monkeypatch):
    """parameter_table builds each model once per process to count it; a name registered again (here a 3-layer
    LSTM, then a 1-layer one) is counted from its new entry, never from the count kept for the old one."""
    from pipeline.reports.table2 import parameter_table

    counts = []
    for layers in (3, 1):
        monkeypatch.setitem(MODELS, "lstm3", ModelEntry("lstm3", "LSTM", lambda c, i, o, k=layers: DeepLSTM(
            i, o, c.hidden, c.embedding, k)))
        counts.append(parameter_table(models=["lstm3", "lstm1"]).set_index(["model", "hidden"])["params"])
    assert counts[1][("lstm3", 256)] == counts[1][("lstm1", 256)] < counts[0][("lstm3", 256)]


def test_registration_refuses_clashes():
    with pytest.raises(ValueError, match="model 'stack' is already registered"):
        register_model(ModelEntry("stack", "Another", lambda c, i, o: None))
    with pytest.raises(ValueError, match="task 'toy': seed_base 1000 is already 'copy''s"):
        register_task(TaskEntry("toy", lambda: None, "Toy", 1000))
    assert "toy" not in TASKS and len(MODEL_NAMES) == 9 and len(PAPER_MODEL_NAMES) == 7
    assert len(TASK_NAMES) == 7 and len(PAPER_TASK_NAMES) == 5


def test_an_unregistered_model_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="model.name must be one of lstm1, lstm2, lstm4, lstm8, stack, queue, "
                                          "deque, transformer, jm_stack; got 'lstm3'"):
        from_dict(RunConfig, {"model": {"name": "lstm3"}})


# -- a new memory: one class, one registry entry ---------------------------------------------------------------------

from pipeline.memory.kinds import SingleEnded  # noqa: E402
from pipeline.models import memory_model  # noqa: E402


class NewestReadQueue(SingleEnded):
    """A queue (pushes at the top, pops from the bottom) that reads its newest row: the toy memory of issue 24."""

    name, pop_from_top, read_from_top = "newest-read queue", False, True


@pytest.fixture
def toy_memory(monkeypatch, cache_dir):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    register_model(memory_model("nrqueue", "Newest-read Queue-LSTM", NewestReadQueue()))
    yield
    MODELS.pop("nrqueue")


def test_a_toy_memory_trains_fused_and_reference_alike_and_is_inspected_with_its_own_ends(toy_memory, tmp_path):
    import json

    import torch
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.config import ModelConfig
    from pipeline.training.run import train

    # the fused path equals the reference path, outputs and every parameter's gradient (float64)
    torch.manual_seed(1)
    models = [build_model(ModelConfig(name="nrqueue", hidden=12, memory_width=6, embedding=5, implementation=impl),
                          11, 7).double() for impl in ("reference", "fused")]
    models[1].load_state_dict(models[0].state_dict())
    gen = torch.Generator().manual_seed(2)
    inputs = torch.randint(1, 11, (3, 9), generator=gen)
    weights = torch.randn(3, 9, 7, generator=gen, dtype=torch.float64)
    results = []
    for model in models:
        out = model(inputs)
        (out * weights).sum().backward()
        results.append((out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (ref_out, ref_grads), (fused_out, fused_grads) = results
    assert torch.allclose(ref_out, fused_out, atol=1e-10)
    assert all(torch.allclose(ref_grads[n], fused_grads[n], atol=1e-10) for n in ref_grads)

    # it is neither the Queue nor the Stack: the literal oracles disagree with it where they should
    memory = NewestReadQueue().new_memory(1, 3)
    values = torch.eye(3, dtype=torch.float64).unsqueeze(1)
    one, zero = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    for t in range(3):
        r = memory.step(values[t], one, zero)
    assert torch.equal(r[0], values[2, 0])  # reads its newest row, as a stack would ...
    memory.step(torch.zeros(1, 3, dtype=torch.float64), zero, one)  # pop 1, push nothing
    assert memory.strengths[0].tolist() == [0.0, 1.0, 1.0, 0.0]  # ... but popped the oldest, as a queue does

    # trained by the real loop (fused), and inspected with its own labels
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": "nrqueue", "hidden": 8, "memory_width": 4,
                                                                 "embedding": 4},
                                   "training": dict(max_batches=10, eval_every=10, eval_size=10, test_eval_size=10,
                                                    final_eval_size=10, perplexity_every=10),
                                   "tracking": {"wandb": "off"}})
    assert train(config, tmp_path / "run", progress=False)["batches"] == 10
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "run"), "--source", "a1 a2 a3", "--format", "json",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    trace = json.loads(out.read_text())
    assert (trace["push_ends"], trace["pop_ends"], trace["read_ends"]) == (["top"], ["bottom"], ["top"])
    assert set(trace["steps"][1]["pop"]) == {"bottom"} and set(trace["steps"][1]["read_weights"]) == {"top"}
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "run"), "--source", "a1 a2 a3", "--out",
                                      str(tmp_path / "trace.png")])
    assert result.exit_code == 0 and (tmp_path / "trace.png").read_bytes()[:4] == b"\x89PNG"
