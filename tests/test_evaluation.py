"""Coarse and fine accuracy (§4.3): the definitions, and the teacher-forced shortcut against literal greedy
decoding on real model outputs."""

import functools

import numpy as np
import pytest
import torch

from pipeline.config import ModelConfig
from pipeline.data.encoding import JointVocabulary, collate
from pipeline.evaluation import (
    coarse_accuracy,
    correct_prefix_from_logits,
    evaluate,
    fine_accuracy,
    greedy_correct_prefix,
    memory_usage,
)
from pipeline.models import build_model
from pipeline.tasks import Pair, get_task


def test_coarse_and_fine_definitions():
    prefix = torch.tensor([4, 2, 0, 5])
    lengths = torch.tensor([4, 5, 3, 5])  # |target| + 1
    assert coarse_accuracy(prefix, lengths) == pytest.approx(2 / 4)
    assert fine_accuracy(prefix, lengths) == pytest.approx((1 + 2 / 5 + 0 + 1) / 4)


def test_correct_prefix_counts_up_to_the_first_error_including_eos():
    vocab = JointVocabulary(source=("a", "b", "c"), target=("A", "B", "C"))
    pairs = [Pair((0, 1), (0, 1)), Pair((2,), (2,)), Pair((0, 1, 2), (2, 1, 0))]
    batch = collate(pairs, vocab)
    logits = torch.zeros(*batch.targets.shape, vocab.output_size)
    wanted = batch.targets.clamp(min=0)
    logits.scatter_(-1, wanted.unsqueeze(-1), 1.0)  # predict every target right ...
    logits[0, 2 + 1 + 1, :] = 0  # row 0 (k = 2) is scored at 3, 4, 5
    logits[0, 2 + 1 + 1, 2] = 1.0  # ... except row 0's second symbol (B -> C)
    logits[1, 1 + 1 + 1, :] = 0  # row 1 (k = 1) is scored at 2, 3
    logits[1, 1 + 1 + 1, 0] = 1.0  # row 1 misses </s>
    logits[2, 0, :] = 5.0  # noise at an unscored position changes nothing
    prefix = correct_prefix_from_logits(logits, batch)
    assert prefix.tolist() == [1, 1, 4]
    assert batch.target_lengths.tolist() == [3, 2, 4]


@functools.cache
def _trained_model(name):
    """A small model after a few dozen training steps on svo_sov: its outputs already have structure. Trained once
    per process and model (the tests only score it: none trains it on or changes it)."""
    torch.manual_seed(0)
    task = get_task("svo_sov")
    vocab = JointVocabulary.for_task(task)
    model = build_model(ModelConfig(name=name, hidden=24, memory_width=8, embedding=8), vocab.input_size,
                        vocab.output_size)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9)
    rng = np.random.default_rng(0)
    for _ in range(20):
        batch = collate(task.sample_batch(rng, "train", 10), vocab)
        logits = model(batch.inputs, batch.lengths)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    # After 20 steps the model cannot yet tell where a target ends. Raise the </s> bias so that about half of the
    # greedy outputs end within 12 symbols: a greedy output ends at the first step where </s> is within the bias
    # of the winning logit (the bias changes nothing before that), so the outputs end at all sorts of lengths.
    model.eval()
    margins = [_greedy_output(model, p.source, vocab, limit=12)[2].min() for p in task.sample_batch(rng, "train", 20)]
    with torch.no_grad():
        model.readout.output_embedding.bias[vocab.eos] += torch.stack(margins).median()
    return model, task, vocab


@torch.no_grad()
def _greedy_output(model, source, vocab, limit):
    """The model's own greedy output (output ids, without </s>), whether it ended with </s>, and at each step the
    margin by which the winning logit beat </s>'s."""
    state = model.initial_state(1)
    for token in [vocab.BOS] + [vocab.source_offset + s for s in source] + [vocab.SEP]:
        logits, state = model.step(torch.tensor([token]), state)
    out, gaps = [], []
    while len(out) < limit:
        symbol = int(logits.argmax(-1))
        gaps.append(float(logits.max() - logits[0, vocab.eos]))
        if symbol == vocab.eos:
            return out, True, torch.tensor(gaps)
        out.append(symbol)
        logits, state = model.step(torch.tensor([vocab.target_offset + symbol]), state)
    return out, False, torch.tensor(gaps)


# the 2-layer LSTM and the Queue are `slow`: what is each model's own, its step against its whole-sequence forward, is
# tests/test_models.py's for every model; the shortcut compared here is the same code for all
@pytest.mark.parametrize("name", [pytest.param("lstm2", marks=pytest.mark.slow), "stack",
                                  pytest.param("queue", marks=pytest.mark.slow), "deque"])
def test_teacher_forced_scores_equal_greedy_decoding(name):
    """Targets are built from the model's own greedy output: its first j symbols, then a different symbol (or,
    when the output ended with </s>, sometimes the whole output). So the correct prefixes are spread over many
    lengths, fully right sequences included, and both evaluations must find exactly them."""
    model, task, vocab = _trained_model(name)
    model.eval()
    rng = np.random.default_rng(1)
    pairs, expected = [], []
    for source_pair in task.sample_batch(rng, "train", 24):
        output, ended, _ = _greedy_output(model, source_pair.source, vocab, limit=len(source_pair.source) + 8)
        if ended and rng.random() < 0.3:
            pairs.append(Pair(source_pair.source, tuple(output)))
            expected.append(len(output) + 1)
            continue
        j = int(rng.integers(0, len(output) + 1))
        wrong = (output[j] + 1) % len(vocab.target) if j < len(output) else int(rng.integers(len(vocab.target)))
        tail = tuple(int(x) for x in rng.integers(0, len(vocab.target), size=int(rng.integers(0, 4))))
        pairs.append(Pair(source_pair.source, tuple(output[:j]) + (wrong,) + tail))
        expected.append(j)
    scores = evaluate(model, pairs, vocab, batch_size=16)
    greedy = greedy_correct_prefix(model, pairs, vocab)
    assert greedy.tolist() == expected
    assert scores.correct_prefix.tolist() == expected
    assert len(set(expected)) >= 4 and (torch.tensor(expected) == scores.target_lengths).any()
    assert scores.coarse == coarse_accuracy(greedy, scores.target_lengths)
    assert scores.fine == fine_accuracy(greedy, scores.target_lengths)


def test_scores_by_source_length():
    model, task, vocab = _trained_model("lstm1")
    pairs = task.sample_batch(np.random.default_rng(2), "train", 30)
    scores = evaluate(model, pairs, vocab)
    rows = scores.by_source_length()
    assert sum(r["n"] for r in rows) == 30
    assert sorted(r["source_length"] for r in rows) == sorted(set(len(p.source) for p in pairs))
    weighted = sum(r["fine"] * r["n"] for r in rows) / 30
    assert weighted == pytest.approx(scores.fine)


def test_memory_usage_separates_source_and_target_halves():
    model, task, vocab = _trained_model("deque")
    pairs = task.sample_batch(np.random.default_rng(3), "train", 8)
    usage = memory_usage(model, pairs, vocab)
    assert set(usage) == {f"memory/{op}_{half}_{end}" for op in ("push", "pop") for half in ("source", "target")
                          for end in ("top", "bottom")}
    assert all(0 < v < 1 for v in usage.values())
    # the same numbers by hand, from the signals the memory receives
    from pipeline.data.encoding import collate
    batch = collate(pairs, vocab)
    d, _ = model.memory_signals_over(batch.inputs, batch.lengths)
    k = len(pairs[0].source)
    first = d[0, 1 : k + 1, 0]
    assert memory_usage(model, pairs[:1], vocab)["memory/push_source_top"] == pytest.approx(first.mean().item())
    lstm = build_model(ModelConfig(name="lstm1", hidden=8), vocab.input_size, vocab.output_size)
    assert memory_usage(lstm, pairs, vocab) == {}
