"""The joint sequence <s> source <|> target </s> as model inputs and scored targets."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.data.encoding import IGNORE_INDEX, SPECIAL_INPUTS, JointVocabulary, collate
from pipeline.tasks import Pair, get_task

VOCAB = JointVocabulary(source=("a", "b", "c"), target=("A", "B"))


def test_special_ids_and_sizes():
    assert SPECIAL_INPUTS == ("<pad>", "<s>", "<|>")
    assert (VOCAB.PAD, VOCAB.BOS, VOCAB.SEP) == (0, 1, 2)
    assert VOCAB.input_size == 3 + 3 + 2 and VOCAB.output_size == 3 and VOCAB.eos == 2
    assert VOCAB.input_words == ("<pad>", "<s>", "<|>", "a", "b", "c", "A", "B")
    assert VOCAB.output_words == ("A", "B", "</s>")


def test_the_documented_example():
    """<s> a b <|> A B </s>: read <s> a b <|> A B, scored at positions 3, 4, 5 for A, B, </s>."""
    batch = collate([Pair((0, 1), (0, 1))], VOCAB)
    assert batch.inputs.tolist() == [[1, 3, 4, 2, 6, 7]]
    assert batch.targets.tolist() == [[IGNORE_INDEX] * 3 + [0, 1, 2]]
    assert (batch.lengths.tolist(), batch.source_lengths.tolist(), batch.target_lengths.tolist()) == ([6], [2], [3])
    assert all(t.dtype == torch.long for t in (batch.inputs, batch.targets, batch.lengths))


def test_padding_is_never_scored():
    batch = collate([Pair((2,), (1,)), Pair((0, 1, 2, 0), (1, 0, 0))], VOCAB)
    assert batch.inputs.shape == (2, 9)
    assert batch.inputs[0].tolist() == [1, 5, 2, 7, 0, 0, 0, 0, 0]
    assert batch.targets[0].tolist() == [IGNORE_INDEX, IGNORE_INDEX, 1, 2] + [IGNORE_INDEX] * 5
    assert batch.targets[1].tolist() == [IGNORE_INDEX] * 5 + [1, 0, 0, 2]


pairs_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 2), min_size=1, max_size=12), st.lists(st.integers(0, 1), min_size=1,
                                                                               max_size=12)),
    min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(raw=pairs_strategy)
def test_collate_round_trips_and_scores_exactly_the_target_and_eos(raw):
    pairs = [Pair(tuple(s), tuple(t)) for s, t in raw]
    batch = collate(pairs, VOCAB)
    words = VOCAB.input_words
    assert batch.inputs.shape[1] == max(len(p.source) + len(p.target) + 2 for p in pairs)
    for row, pair in enumerate(pairs):
        k, n = len(pair.source), len(pair.target)
        read = [words[i] for i in batch.inputs[row, :batch.lengths[row]].tolist()]
        assert read == ["<s>", *(VOCAB.source[i] for i in pair.source), "<|>", *(VOCAB.target[j] for j in pair.target)]
        assert (batch.inputs[row, batch.lengths[row]:] == VOCAB.PAD).all()
        scored = (batch.targets[row] != IGNORE_INDEX).nonzero().flatten().tolist()
        assert scored == list(range(k + 1, k + 2 + n))
        assert batch.targets[row, scored].tolist() == [*pair.target, VOCAB.eos]
        assert batch.target_lengths[row] == n + 1 and batch.source_lengths[row] == k
    # </s> is predicted but never read
    assert batch.inputs.max() < VOCAB.input_size and batch.targets.max() == VOCAB.eos


def test_for_task_keeps_the_tasks_vocabularies():
    task = get_task("gender")
    vocab = JointVocabulary.for_task(task)
    assert (vocab.input_size, vocab.output_size) == (3 + 104 + 107, 108)
    pairs = task.sample_batch(np.random.default_rng(0), "train", 10)
    batch = collate(pairs, vocab)
    assert batch.targets.max() < vocab.output_size and batch.inputs.max() < vocab.input_size
    # Source words and target words never share an input id.
    first = pairs[0]
    ids = batch.inputs[0, 1:1 + len(first.source)].tolist()
    assert [vocab.input_words[i] for i in ids] == [task.source_vocab[i] for i in first.source]
