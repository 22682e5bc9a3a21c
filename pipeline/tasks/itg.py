"""The two ITG tasks of §4.2: sentence pairs from the synchronous grammars in ``configs/grammars/``."""

from __future__ import annotations

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
