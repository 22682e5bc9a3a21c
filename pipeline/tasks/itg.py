"""The two ITG tasks of §4.2: sentence pairs from the synchronous grammars in ``configs/grammars/``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.paths import GRAMMAR_DIR
from pipeline.tasks.base import (
    DEFAULT_LENGTH_DISTRIBUTION,
    Pair,
    Task,
    check_count,
    check_length_distribution,
)
from pipeline.tasks.grammar import Grammar


@dataclass(frozen=True)
class ReferencePerplexities:
    """What two content-blind models reach on a task's training distribution, per target token (``</s>`` included,
    as the training perplexity counts them), with each estimate's relative standard error (of the perplexity).

    * ``skeleton``: a model that knows the target's *skeleton* (every literal word, and the class of every content
      word) and no content word: each content word costs log(class size), the rest nothing. A lower bound for any
      model that does not carry content words from source to target, so a run below it carries some.
    * ``source_unread``: the best model that reads no source word: the target's probability under the grammar and
      the task's length distribution alone (:meth:`~pipeline.tasks.grammar.Grammar.target_probability`).

    Monte Carlo over ``samples`` training pairs drawn with the recorded ``seed``."""

    skeleton: float
    skeleton_error: float
    source_unread: float
    source_unread_error: float
    samples: int
    seed: int


class GrammarTask(Task):
    """Pairs from a grammar whose *source* length lies in the split's window (§4.2).

    ``length_distribution`` "uniform": every length of the window the grammar can derive is equally likely, and a
    pair of that length follows the grammar's distribution given the length (exact conditioned sampling).
    "grammar": the grammar's own lengths, by rejection sampling into the window — the sampler, streams and
    evaluation sets of the runs made before the choice existed, unchanged. Both grammars translate word for word,
    so target and source lengths are equal; the constructor insists on it, because the windows would otherwise not
    bound the target."""

    def __init__(self, name: str, grammar: Grammar, length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION):
        if not grammar.preserves_length:
            raise ValueError(f"grammar {grammar.name!r} changes sentence length; the length windows assume it does not")
        self.name = name
        self.grammar = grammar
        self.length_distribution = check_length_distribution(length_distribution)
        self.source_vocab = grammar.source_vocab
        self.target_vocab = grammar.target_vocab

    @classmethod
    def from_config(cls, name: str, grammar_dir: Path = GRAMMAR_DIR) -> GrammarTask:
        return cls(name, Grammar.from_yaml(grammar_dir / f"{name}.yaml"))

    def with_length_distribution(self, reading: str) -> GrammarTask:
        if check_length_distribution(reading) == self.length_distribution:
            return self
        return GrammarTask(self.name, self.grammar, reading)

    def sample_window(self, rng: np.random.Generator, window: tuple[int, int], n: int) -> list[Pair]:
        low, high = window
        sample = self.grammar.sample_uniform_lengths if self.length_distribution == "uniform" else self.grammar.sample
        return [Pair(source, target) for source, target in sample(rng, check_count(n), low, high)]

    def fingerprint(self) -> str:
        # The "grammar" reading keeps the fingerprint it had before the choice existed: its sets are the same.
        suffix = "" if self.length_distribution == "grammar" else f":{self.length_distribution}-lengths"
        return f"{self.name}:{self.grammar.fingerprint()}{suffix}"

    def reference_perplexities(self, split: str = "train", samples: int = 1000, seed: int = 0
                               ) -> ReferencePerplexities:
        """The two content-blind references of :class:`ReferencePerplexities` on ``split``'s distribution.

        A pair of source length L is drawn with probability P(L) * P_grammar(pair | L), so a target alone has
        P(L) * P_grammar(target) / P_grammar(L): P(L) uniform over the lengths the grammar derives in the window
        ("uniform"), or P_grammar(L) / P_grammar(window) ("grammar")."""
        grammar = self.grammar
        low, high = self.window(split)
        lengths = grammar.length_sampler(high)
        length_probability, possible = lengths.length_probabilities(), lengths.possible_lengths(low, high)
        window_probability = float(length_probability[possible].sum())
        class_size = {word: len(c.target) for c in grammar.classes.values() for word in c.target}
        pairs = self.sample_window(np.random.default_rng(seed), (low, high), check_count(samples))
        blind, unread, tokens = (np.empty(len(pairs)) for _ in range(3))
        for k, pair in enumerate(pairs):
            words = [self.target_vocab[i] for i in pair.target]
            blind[k] = sum(math.log(class_size[w]) for w in words if w in class_size)
            if self.length_distribution == "uniform":
                length_term = -math.log(len(possible)) - math.log(length_probability[len(words)])
            else:
                length_term = -math.log(window_probability)
            unread[k] = -(math.log(grammar.target_probability(words)) + length_term)
            tokens[k] = len(words) + 1

        def estimate(nats: np.ndarray) -> tuple[float, float]:
            # a ratio of means (nats per token over the pairs); its standard error by the delta method
            rate = nats.sum() / tokens.sum()
            spread = np.sqrt(((nats - rate * tokens) ** 2).sum() / (len(nats) * (len(nats) - 1))) / tokens.mean()
            return math.exp(rate), float(spread)

        return ReferencePerplexities(*estimate(blind), *estimate(unread), samples=len(pairs), seed=seed)
