"""The three synthetic tasks of §4.1: copy, reversal and bigram flipping over 128 meaningless symbols; and the same
kind of task over other alphabets and lengths (the binary cross-check tasks: :mod:`pipeline.tasks.deletang`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.tasks.base import SPLITS, Pair, Task, check_count

VOCAB_SIZE = 128
SYMBOLS = tuple(f"a{i}" for i in range(1, VOCAB_SIZE + 1))  # the paper's tasks' alphabet, spelt a1 .. a128


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
    deterministic function of the source. Source and target have separate vocabularies (§4) that share spellings
    (``a1 .. a128`` unless ``symbols`` says otherwise), so that a person reading a copy example sees the copy.
    ``splits``: the source-length windows, the paper's unless given."""

    def __init__(self, name: str, transform: Callable[[np.ndarray], np.ndarray], even_lengths: bool = False,
                 symbols: tuple[str, ...] = SYMBOLS, splits: dict[str, tuple[int, int]] = SPLITS):
        self.name = name
        self.transform = transform
        self.even_lengths = even_lengths
        self.source_vocab = tuple(symbols)
        self.target_vocab = self.source_vocab
        self.splits = splits

    def lengths(self, split: str) -> tuple[int, int]:
        """Smallest and largest source length of ``split`` (the window, shrunk to even numbers for bigram flip)."""
        return self.window_lengths(self.window(split))

    def target_length(self, source_length: int) -> int:
        # Whatever the transform makes of a source of that length (only its length matters to every transform here).
        return len(self.transform(np.zeros(source_length, dtype=np.int64)))

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
        symbols = rng.integers(0, len(self.source_vocab), size=int(lengths.sum()))
        sources = np.split(symbols, np.cumsum(lengths)[:-1])
        return [Pair(tuple(s.tolist()), tuple(self.transform(s).tolist())) for s in sources]

    def fingerprint(self) -> str:
        lengths = "even" if self.even_lengths else "all"
        return f"{self.name}:{self.transform.__name__}:{len(self.source_vocab)}:{lengths}"
