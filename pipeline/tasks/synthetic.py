"""The three synthetic tasks of §4.1: copy, reversal and bigram flipping over 128 meaningless symbols."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.tasks.base import Pair, Task, check_count, check_split

VOCAB_SIZE = 128


def copy(source: np.ndarray) -> np.ndarray:
    """a1 ... ak -> a1 ... ak"""
    return source


def reverse(source: np.ndarray) -> np.ndarray:
    """a1 a2 ... ak -> ak ... a2 a1"""
    return source[::-1]


def flip_bigrams(source: np.ndarray) -> np.ndarray:
    """a1 a2 a3 a4 ... -> a2 a1 a4 a3 ...: swap the i-th and (i+1)-th symbol for every odd i (even lengths only)."""
    return source.reshape(-1, 2)[:, ::-1].reshape(-1)


class SyntheticTask(Task):
    """Sources of length uniform over the split's window, symbols uniform with replacement; the target is a
    deterministic function of the source. Source and target have separate vocabularies (§4) that happen to share
    spellings ``a1 .. a128``, so that a person reading a copy example sees the copy."""

    def __init__(self, name: str, transform: Callable[[np.ndarray], np.ndarray], even_lengths: bool = False):
        self.name = name
        self.transform = transform
        self.even_lengths = even_lengths
        self.source_vocab = tuple(f"a{i}" for i in range(1, VOCAB_SIZE + 1))
        self.target_vocab = self.source_vocab

    def lengths(self, split: str) -> tuple[int, int]:
        """Smallest and largest source length of ``split`` (the window, shrunk to even numbers for bigram flip)."""
        return self.window_lengths(check_split(split))

    def window_lengths(self, window: tuple[int, int]) -> tuple[int, int]:
        low, high = window
        if self.even_lengths:
            low, high = low + low % 2, high - high % 2
        return low, high

    def sample_window(self, rng: np.random.Generator, window: tuple[int, int], n: int) -> list[Pair]:
        n = check_count(n)
        low, high = self.window_lengths(window)
        step = 2 if self.even_lengths else 1
        lengths = step * rng.integers(low // step, high // step + 1, size=n)
        symbols = rng.integers(0, VOCAB_SIZE, size=int(lengths.sum()))
        sources = np.split(symbols, np.cumsum(lengths)[:-1])
        return [Pair(tuple(s.tolist()), tuple(self.transform(s).tolist())) for s in sources]

    def fingerprint(self) -> str:
        return f"{self.name}:{self.transform.__name__}:{VOCAB_SIZE}:{'even' if self.even_lengths else 'all'}"
