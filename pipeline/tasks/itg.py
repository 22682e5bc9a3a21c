"""The two ITG tasks of §4.2: sentence pairs from the synchronous grammars in ``configs/grammars/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.tasks.base import Pair, Task, check_count, check_split
from pipeline.tasks.grammar import Grammar

# The grammars are data, kept with the other configs at the repository root (the package is installed editable).
GRAMMAR_DIR = Path(__file__).resolve().parents[2] / "configs" / "grammars"


class GrammarTask(Task):
    """Pairs from a grammar, rejection-sampled into the split's window of *source* lengths (§4.2). Both grammars
    translate word for word, so target and source lengths are equal; the constructor insists on it, because the
    windows would otherwise not bound the target."""

    def __init__(self, name: str, grammar: Grammar):
        if not grammar.preserves_length:
            raise ValueError(f"grammar {grammar.name!r} changes sentence length; the length windows assume it does not")
        self.name = name
        self.grammar = grammar
        self.source_vocab = grammar.source_vocab
        self.target_vocab = grammar.target_vocab

    @classmethod
    def from_config(cls, name: str, grammar_dir: Path = GRAMMAR_DIR) -> GrammarTask:
        return cls(name, Grammar.from_yaml(grammar_dir / f"{name}.yaml"))

    def sample_batch(self, rng: np.random.Generator, split: str, n: int) -> list[Pair]:
        low, high = check_split(split)
        return [Pair(source, target) for source, target in self.grammar.sample(rng, check_count(n), low, high)]

    def fingerprint(self) -> str:
        return f"{self.name}:{self.grammar.fingerprint()}"
