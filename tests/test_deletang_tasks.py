"""The cross-check tasks of Delétang et al. 2023 (reverse_string, duplicate_string: binary strings at their lengths)
and their score; and that adding them left the paper's five tasks, their windows and their cached sets as they were."""

import json
import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ModelConfig
from pipeline.data.cache import build_eval_set, eval_seed, load_eval_set, read_eval_set, set_paths, write_eval_set
from pipeline.data.encoding import JointVocabulary, collate
from pipeline.evaluation import (
    batched_greedy_correct_tokens,
    correct_tokens,
    evaluate,
    greedy_correct_prefix,
    greedy_correct_tokens,
    length_averaged_token_accuracy,
    token_accuracy,
)
from pipeline.models import build_model
from pipeline.models.transformer import RANDOM_RANGE
from pipeline.tasks import (
    PAPER_TASK_NAMES,
    SPLITS,
    TASK_NAMES,
    TASKS,
    Pair,
    get_task,
    longest_training_sequence,
)
from pipeline.tasks.deletang import DELETANG_SPLITS, SCORED_LENGTHS, TRAINING_LENGTHS, duplicate
from pipeline.tasks.synthetic import reverse

DELETANG = ("reverse_string", "duplicate_string")


# ---------------------------------------------------------------------------------------- the definitions

def test_the_examples_of_their_docstrings():
    # tasks/dcf/reverse_string.py: "011010 -> 010110"; tasks/cs/duplicate_string.py: "101 -> 101 101"
    assert reverse(np.array([0, 1, 1, 0, 1, 0])).tolist() == [0, 1, 0, 1, 1, 0]
    assert duplicate(np.array([1, 0, 1])).tolist() == [1, 0, 1, 1, 0, 1]
    assert get_task("reverse_string").decode(Pair((0, 1, 1), (1, 1, 0))) == {"source": ["0", "1", "1"],
                                                                            "target": ["1", "1", "0"]}


@pytest.mark.parametrize("split", SPLITS)
def test_targets_follow_the_definitions_on_every_split(split):
    rng = np.random.default_rng(3)
    for pair in get_task("reverse_string").sample_batch(rng, split, 200):
        assert pair.target == pair.source[::-1]
    for pair in get_task("duplicate_string").sample_batch(rng, split, 200):
        assert pair.target == pair.source + pair.source


def test_the_binary_vocabularies():
    for name in DELETANG:
        task = get_task(name)
        assert task.source_vocab == task.target_vocab == ("0", "1")
        pairs = task.sample_batch(np.random.default_rng(4), "long", 50)
        symbols = np.concatenate([p.source for p in pairs])
        assert set(symbols.tolist()) == {0, 1} and abs(symbols.mean() - 0.5) < 0.02  # uniform, with replacement
        assert all(set(p.target) <= {0, 1} for p in pairs)


def test_target_lengths_the_pipeline_plans_with():
    assert [get_task("reverse_string").target_length(k) for k in (1, 40, 500)] == [1, 40, 500]
    assert [get_task("duplicate_string").target_length(k) for k in (1, 40, 500)] == [2, 80, 1000]
    assert get_task("duplicate_string").longest_joint_sequence("long") == 500 + 1000 + 3


# -------------------------------------------------------------------------------------------- the lengths

def test_their_lengths_cut_into_our_three_splits():
    assert TRAINING_LENGTHS == (1, 40) and SCORED_LENGTHS == (41, 500)
    assert DELETANG_SPLITS == {"train": (1, 40), "test": (41, 80), "long": (81, 500)}
    assert DELETANG_SPLITS["test"][1] + 1 == DELETANG_SPLITS["long"][0]  # test and long: exactly their lengths
    assert (DELETANG_SPLITS["test"][0], DELETANG_SPLITS["long"][1]) == SCORED_LENGTHS
    assert all(get_task(name).splits == DELETANG_SPLITS for name in DELETANG)


@pytest.mark.parametrize("name", DELETANG)
@pytest.mark.parametrize("split", SPLITS)
def test_lengths_stay_in_their_window(name, split):
    low, high = get_task(name).window(split)
    lengths = [len(p.source) for p in get_task(name).sample_batch(np.random.default_rng(5), split, 300)]
    assert low <= min(lengths) and max(lengths) <= high


def test_training_lengths_are_uniform_over_1_to_40():
    """As their UniformCurriculum(values=range(1, 41)) draws them (one length per batch there, per pair here)."""
    lengths = np.array([len(p.source) for p in get_task("reverse_string").sample_batch(np.random.default_rng(6),
                                                                                        "train", 8000)])
    counts = np.bincount(lengths, minlength=41)[1:]
    assert set(lengths.tolist()) == set(range(1, 41))
    assert counts.min() > 0.7 * counts.mean() and counts.max() < 1.3 * counts.mean()


# ------------------------------------------------------------------------------------- seeds and the cache

def test_registered_beside_the_paper_with_their_own_seeds():
    assert [TASKS[name].paper for name in TASK_NAMES] == [True] * 5 + [False] * 2
    assert all(name not in PAPER_TASK_NAMES for name in DELETANG)
    assert [eval_seed(name, split) for name in DELETANG for split in SPLITS] == [7001, 7002, 7003, 8001, 8002, 8003]
    assert list(build_eval_set("duplicate_string", "test").pairs) == get_task("duplicate_string").sample_batch(
        np.random.default_rng(8002), "test", 1000)


def test_transduce_generate_makes_their_sets_when_named_and_only_the_papers_by_default(tmp_path, monkeypatch):
    runner = CliRunner()
    result = runner.invoke(app, ["generate", "reverse_string", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "reverse_string").glob("*.manifest.json")) == [
        "long.manifest.json", "test.manifest.json", "train.manifest.json"]
    manifest = json.loads(set_paths("reverse_string", "long", tmp_path)[1].read_text())
    assert manifest["source_lengths"] == [81, 500] and manifest["task_fingerprint"] == "reverse_string:reverse:2:all"
    assert read_eval_set("reverse_string", "long", tmp_path).pairs == build_eval_set("reverse_string", "long").pairs

    asked = []
    monkeypatch.setattr("pipeline.cli.data.generate_eval_sets", lambda names, **_: asked.append(names) or [])
    assert runner.invoke(app, ["generate", "--cache-dir", str(tmp_path)]).exit_code == 0
    assert asked == [list(PAPER_TASK_NAMES)]


# ------------------------------------------------------------------------ the paper's five, left as they were

# Written by the code before tasks had their own windows (and equal to the data_cache/ of the runs made then).
PAPER_FINGERPRINTS = {"copy": "copy:copy:128:all", "reversal": "reversal:reverse:128:all",
                      "bigram_flip": "bigram_flip:flip_bigrams:128:even",
                      "svo_sov": "svo_sov:f316932c2189179a:uniform-lengths",
                      "gender": "gender:86955664149b1be1:uniform-lengths"}
PAPER_SET_SHA256 = {
    ("copy", "train", "uniform"): "5e7fd4511f96d426a4ecac4039f5f2104ec28c594dd133ddb408542db24347ba",
    ("copy", "test", "uniform"): "61a70d2f28a6c04d02a8a14db61bc3b62cc39016fa42d2924d63e05cd0df17ba",
    ("copy", "long", "uniform"): "1faf6f78cb635805fca08a66dbfb4f174f48edf50b7ff2aacc961479af00405a",
    ("reversal", "train", "uniform"): "1b300f3c763f24a67d693c240c93101a981d643aaf27de212d9030868f46e945",
    ("reversal", "test", "uniform"): "078e1689c0508930e747fd02f6fe8552aea58930f4ddd9d47fe2f14adbc7426d",
    ("reversal", "long", "uniform"): "3d3f92641ec2fc43a386c68214912c6b1fc6bfb048eb75166ececd61b98c43e5",
    ("bigram_flip", "train", "uniform"): "b240966cfda27535cbf703dbbd655902632d1006318caf28c3854cd4f69f7f39",
    ("bigram_flip", "test", "uniform"): "ccd0efc7defea8a10acdd2e3ee813dfa9e5386231e34ef1c397c7b63273bd8df",
    ("bigram_flip", "long", "uniform"): "f2ab8f86a4e09ca2a34619226446a353ec4b0a37cf8e6674237a9d3af74117a7",
    # The grammar tasks' train sets only: their other splits run the same code over other windows, seconds longer.
    ("svo_sov", "train", "uniform"): "ba3237af6848dd0b408d22eb5cd46e16f24828a6eaeeb4e7a182408d7079457a",
    ("svo_sov", "train", "grammar"): "94f47223b25b73369fc545542d05101b79927eaa804287325a371bebef7755da",
    ("gender", "train", "uniform"): "b03e1da04f8e1947151c94c0312288c6d920865220ef448c5b2c52cc80d9f68d",
    ("gender", "train", "grammar"): "a14418c1621196d4c2246ae7b29bf98073a5e57f2205e8bda1c52ced37040769",
}


def test_the_papers_tasks_keep_the_papers_windows():
    assert PAPER_TASK_NAMES == ("copy", "reversal", "bigram_flip", "svo_sov", "gender")
    assert SPLITS == {"train": (8, 64), "test": (65, 128), "long": (129, 256)}
    for name in PAPER_TASK_NAMES:
        task = get_task(name)
        assert task.splits == SPLITS and {s: task.window(s) for s in SPLITS} == SPLITS
        assert task.target_length(64) == 64
    assert longest_training_sequence() == 2 * 64 + 3  # the static training length, as before the new tasks


def test_the_papers_fingerprints_are_unchanged():
    assert {name: get_task(name).fingerprint() for name in PAPER_TASK_NAMES} == PAPER_FINGERPRINTS


@pytest.mark.parametrize("name, split, reading", list(PAPER_SET_SHA256))
def test_the_papers_cached_sets_are_byte_for_byte_unchanged(name, split, reading, tmp_path):
    write_eval_set(build_eval_set(name, split, reading), tmp_path)
    manifest = json.loads(set_paths(name, split, tmp_path, reading)[1].read_text())
    assert manifest["sha256"] == PAPER_SET_SHA256[name, split, reading]
    assert manifest["source_lengths"] == list(SPLITS[split])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and it verifies: no CacheWarning
        assert len(load_eval_set(name, split, tmp_path, reading)) == 1000


# ------------------------------------------------------------------------------------------------ the score

def test_correct_tokens_counts_every_position_missing_ones_wrong_extra_ones_ignored():
    target = (1, 0, 0, 1)
    assert correct_tokens([1, 1, 0, 1], target) == 3  # the error at position 1 does not end the count
    assert correct_tokens([1, 0], target) == 2  # ended early: positions 2 and 3 are wrong
    assert correct_tokens([1, 0, 0, 1, 1, 1], target) == 4  # past the target: not scored
    assert correct_tokens([1, 0, 2, 1], target) == 3  # </s> (output id 2 of a binary task) is never a symbol


def test_the_score_averages_per_length_accuracies_over_the_lengths():
    """Length 41: two sequences, 41 and 0 tokens right of 41 each -> 0.5. Length 42: 21 of 42 -> 0.5. Length 500:
    450 of 500 -> 0.9. Each length counts once: (0.5 + 0.5 + 0.9) / 3, not the mean over the four sequences."""
    correct = torch.tensor([41, 0, 21, 450])
    source_lengths = torch.tensor([41, 41, 42, 500])
    score = length_averaged_token_accuracy(correct, source_lengths, source_lengths)  # reverse: |target| = |source|
    assert score == pytest.approx((0.5 + 0.5 + 0.9) / 3)
    assert score != pytest.approx((1 + 0 + 0.5 + 0.9) / 4)
    # duplicate_string: |target| = 2 |source|; within a length the tokens are pooled, as their accuracy_fn pools them
    assert length_averaged_token_accuracy(torch.tensor([4, 1, 3]), torch.tensor([4, 4, 6]),
                                          torch.tensor([2, 2, 3])) == pytest.approx((5 / 8 + 3 / 6) / 2)


class Scripted(torch.nn.Module):
    """A model that, once it has read the separator, outputs ``script`` one symbol a step (then </s>) whatever it is
    fed back: what greedy decoding makes of a known output."""

    def __init__(self, script, vocab):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # greedy decoding asks where the parameters live
        self.script, self.vocab = script, vocab

    def initial_state(self, batch_size, capacity=None):
        return -1  # outputs given so far; -1 until the separator is read

    def step(self, tokens, state):
        state = 0 if int(tokens) == self.vocab.SEP else state + 1 if state >= 0 else -1
        logits = torch.zeros(1, self.vocab.output_size)
        logits[0, self.script[state] if 0 <= state < len(self.script) else self.vocab.eos] = 1.0
        return logits, state


@pytest.mark.parametrize("script, target, tokens, prefix", [
    ([1, 1, 0, 1], (1, 0, 0, 1), 3, 1),  # greedy decoding goes on past the error, fed its own output
    ([0, 1], (0, 1, 1), 2, 2),  # then </s>: the missing symbol is wrong
    ([0, 0, 0, 0], (1, 1), 0, 0),  # only |target| outputs are asked for
])
def test_greedy_correct_tokens_scores_the_models_own_output(script, target, tokens, prefix):
    vocab = JointVocabulary.for_task(get_task("reverse_string"))
    model, pairs = Scripted(script, vocab), [Pair(target[::-1], target)]
    assert greedy_correct_tokens(model, pairs, vocab).tolist() == [tokens]
    assert greedy_correct_prefix(model, pairs, vocab).tolist() == [prefix]  # coarse/fine's count stops at the error


def test_a_model_reads_and_is_scored_on_targets_twice_as_long_as_their_sources():
    """Nothing downstream assumes |target| = |source|: the joint sequence, the scores, where the first error falls."""
    task = get_task("duplicate_string")
    vocab = JointVocabulary.for_task(task)
    model = build_model(ModelConfig(name="stack", hidden=8, memory_width=4, embedding=4), vocab.input_size,
                        vocab.output_size)
    pairs = task.sample_batch(np.random.default_rng(7), "train", 6) + [Pair((1, 0, 1), (1, 0, 1, 1, 0, 1))]
    batch = collate(pairs, vocab)
    assert batch.lengths.tolist() == [3 * len(p.source) + 2 for p in pairs]  # <s> source <|> target
    scores = evaluate(model, pairs, vocab)
    assert scores.target_lengths.tolist() == [2 * len(p.source) + 1 for p in pairs]
    assert sum(row["n"] for row in scores.first_errors()) == len(pairs)
    assert ((0 <= scores.correct_prefix) & (scores.correct_prefix <= scores.target_lengths)).all()
    tokens = greedy_correct_tokens(model, pairs, vocab)
    assert ((0 <= tokens) & (tokens <= torch.tensor([len(p.target) for p in pairs]))).all()


# -- the batched decoder against the literal one --------------------------------------------------------------------

# Every kind of state a model keeps while it decodes: plain and stacked LSTMs, the three memories, the JM stack (rows
# dropped past its horizon) and the Transformer's key-value cache under each positional encoding but the randomised
MODELS_TO_DECODE = [dict(name="lstm1"), dict(name="lstm2"), dict(name="stack"), dict(name="queue"),
                    dict(name="deque"), dict(name="jm_stack", stack_depth=64),
                    *(dict(name="transformer", positional_encoding=p, layers=2, heads=2)
                      for p in ("sinusoidal", "learned", "none"))]


def tiny(seed: int, vocab: JointVocabulary, **settings) -> torch.nn.Module:
    torch.manual_seed(seed)
    sizes = dict(hidden=8, embedding=4) | (dict(memory_width=4) if settings["name"] != "transformer" else {})
    return build_model(ModelConfig(**sizes, **settings), vocab.input_size, vocab.output_size).double()


@pytest.mark.parametrize("settings", MODELS_TO_DECODE, ids=lambda s: s.get("positional_encoding", s["name"]))
@pytest.mark.parametrize("task", ["reverse_string", "duplicate_string"])
def test_the_batched_decoder_gives_each_pair_what_decoding_it_alone_gives(task, settings):
    """Untrained models in float64 (no near-ties between outputs), pairs of mixed lengths in batches of 3, so rows of
    one batch read their separators and end at different steps, and some end early with </s>. The count of every
    pair is the literal decoder's, and so is the score."""
    task_ = get_task(task)
    vocab = JointVocabulary.for_task(task_)
    rng = np.random.default_rng(3)
    pairs = [task_.sample_window(rng, (n, n), 1)[0] for n in (1, 9, 2, 5, 5, 13, 3, 7)]
    model = tiny(0, vocab, **settings)
    alone = greedy_correct_tokens(model, pairs, vocab)
    side_by_side = batched_greedy_correct_tokens(model, pairs, vocab, batch_size=3)
    assert side_by_side.tolist() == alone.tolist()
    assert 0 < int(alone.sum()) < sum(len(p.target) for p in pairs)  # neither all right nor all wrong: a real test
    assert token_accuracy(model, pairs, vocab, batch_size=3) == pytest.approx(
        length_averaged_token_accuracy(alone, torch.tensor([len(p.target) for p in pairs]),
                                       torch.tensor([len(p.source) for p in pairs])))


def test_a_pair_that_ends_early_is_scored_as_decoding_it_alone_scores_it():
    """The scripted model ends with </s> before the target's end on one pair and not on the other, side by side."""
    vocab = JointVocabulary.for_task(get_task("reverse_string"))
    pairs = [Pair((0, 1), (1, 0)), Pair((1, 0, 0, 1, 1), (1, 1, 0, 0, 1))]
    model = BatchScripted([1, 0], vocab)  # two symbols, then </s>
    # the first: both right, no </s> asked for; the second: 1 right, 0 wrong, then </s> and nothing for the rest
    assert batched_greedy_correct_tokens(model, pairs, vocab).tolist() == [2, 1]
    assert greedy_correct_tokens(model, pairs, vocab).tolist() == [2, 1]


class BatchScripted(Scripted):
    """:class:`Scripted` for a batch: each row's outputs so far, -1 until it has read its separator."""

    def initial_state(self, batch_size, capacity=None, lengths=None):
        return torch.full((batch_size,), -1)

    def step(self, tokens, state):
        state = torch.where(tokens == self.vocab.SEP, 0, torch.where(state >= 0, state + 1, -1))
        logits = torch.zeros(len(tokens), self.vocab.output_size)
        for row, n in enumerate(state.tolist()):
            logits[row, self.script[n] if 0 <= n < len(self.script) else self.vocab.eos] = 1.0
        return logits, state


def test_a_randomised_transformer_decodes_one_pair_alone_as_greedy_decoding_does_and_draws_per_row():
    """One row alone draws exactly what the literal decoder draws (the same positions: equal counts); side by side,
    each row's positions are an ordered draw over its own length, so a short row's are not the first of a long
    row's."""
    task = get_task("reverse_string")
    vocab = JointVocabulary.for_task(task)
    rng = np.random.default_rng(5)
    pairs = [task.sample_window(rng, (n, n), 1)[0] for n in (4, 11, 6)]
    model = tiny(1, vocab, name="transformer", positional_encoding="randomised", layers=1, heads=2)
    alone = [int(batched_greedy_correct_tokens(model, [pair], vocab)[0]) for pair in pairs]
    assert alone == greedy_correct_tokens(model, pairs, vocab).tolist()
    model.eval()
    state = model.initial_state(2, capacity=30, lengths=torch.tensor([30, 8]))
    short = state.positions[1, :8]
    assert bool((short[1:] > short[:-1]).all()) and int(short[-1]) < RANDOM_RANGE
    assert int(state.positions[1, 8]) >= RANDOM_RANGE  # past its own length: padding
