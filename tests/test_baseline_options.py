"""The baseline screen's options: the source read reversed, and the LSTM forget gates started at a bias. Each
checked against what it must mean, and each changes nothing at its default."""

import numpy as np
import pytest
import torch

from pipeline.config import ConfigError, ModelConfig, RunConfig, from_dict
from pipeline.data.encoding import JointVocabulary, collate
from pipeline.evaluation import evaluate, greedy_correct_prefix
from pipeline.models import build_model
from pipeline.tasks import Pair, get_task


def test_a_reversed_source_is_read_last_symbol_first_and_the_target_is_unchanged():
    task = get_task("reversal")
    forward = JointVocabulary.for_task(task)
    backward = JointVocabulary.for_config(task, ModelConfig(source_order="reversed"))
    pair = Pair(source=(3, 1, 4, 1, 5), target=(5, 1, 4, 1, 3))
    a, b = collate([pair], forward), collate([pair], backward)
    k = len(pair.source)
    assert b.inputs[0, 1:k + 1].tolist() == a.inputs[0, 1:k + 1].flip(0).tolist()
    assert torch.equal(a.inputs[0, k + 1:], b.inputs[0, k + 1:]) and torch.equal(a.targets, b.targets)
    # reversal read reversed is copy: the target is the source as read
    assert (b.inputs[0, 1:k + 1] - backward.source_offset).tolist() == list(pair.target)


def test_the_greedy_decoder_reads_the_source_as_training_does():
    # teacher-forced scores (from collate) and the literal one-step-at-a-time decoder agree under a reversed source
    task = get_task("reversal")
    config = ModelConfig(name="lstm1", hidden=8, embedding=4, source_order="reversed")
    vocab = JointVocabulary.for_config(task, config)
    torch.manual_seed(0)
    model = build_model(config, vocab.input_size, vocab.output_size)
    pairs = task.sample_batch(np.random.default_rng(0), "train", 6)
    fast = evaluate(model, pairs, vocab)
    assert torch.equal(fast.correct_prefix, greedy_correct_prefix(model, pairs, vocab))


@pytest.mark.parametrize("name", ["lstm1", "lstm2", "stack", "deque"])
def test_forget_bias_starts_every_forget_gate_there_and_leaves_the_rest_alone(name):
    vocab = JointVocabulary.for_task(get_task("copy"))
    torch.manual_seed(0)
    plain = build_model(ModelConfig(name=name, hidden=8, embedding=4, memory_width=4), vocab.input_size,
                        vocab.output_size)
    torch.manual_seed(0)
    biased = build_model(ModelConfig(name=name, hidden=8, embedding=4, memory_width=4, forget_bias=1.0),
                         vocab.input_size, vocab.output_size)
    cells = 0
    for (key, p), (_, q) in zip(plain.state_dict().items(), biased.state_dict().items()):
        if "bias_ih" in key or "bias_hh" in key:
            cells += "bias_ih" in key
            h = p.shape[0] // 4
            expected = 1.0 if "bias_ih" in key else 0.0
            assert torch.all(q[h:2 * h] == expected), key
            assert torch.equal(torch.cat([p[:h], p[2 * h:]]), torch.cat([q[:h], q[2 * h:]])), key
        else:
            assert torch.equal(p, q), key  # nothing else moves, and no random draw was spent
    assert cells == {"lstm1": 1, "lstm2": 2, "stack": 1, "deque": 1}[name]


def test_the_options_are_validated_and_keep_run_ids_at_their_defaults():
    with pytest.raises(ConfigError, match=r"model.source_order must be one of"):
        from_dict(RunConfig, {"model": {"source_order": "backwards"}})
    with pytest.raises(ConfigError, match=r"model.forget_bias must be a finite number .* got inf"):
        from_dict(RunConfig, {"model": {"forget_bias": float("inf")}})
    plain = RunConfig()
    assert from_dict(RunConfig, {"model": {"source_order": "forward", "forget_bias": None}}).run_id() == plain.run_id()
    assert from_dict(RunConfig, {"model": {"forget_bias": 1.0}}).run_id() != plain.run_id()
