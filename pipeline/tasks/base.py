"""What every task is: a pair of fixed vocabularies and a seeded sampler of (source, target) index pairs."""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from pipeline.checks import check_integer

# Inclusive source-length windows. "train" and "test" are the paper's two conditions (§4.1, §4.3); "long" is ours,
# for accuracy-by-length curves beyond the test lengths. These are the paper's tasks' windows; a task defined with
# other lengths (the cross-check tasks of Delétang et al., pipeline.tasks.deletang) has its own windows under the
# same three names (Task.splits): the seeds, the cache and the evaluation go by the names, the lengths by the task.
SPLITS: dict[str, tuple[int, int]] = {"train": (8, 64), "test": (65, 128), "long": (129, 256)}

# How the source lengths of a split are distributed, for tasks whose generator has a choice (the ITG grammars):
# "uniform", every length of the window the task can produce equally likely (§4.2's "relatively uniform
# distribution"); "grammar", the grammar's own, skewed, distribution. docs/tasks.md gives both readings.
LENGTH_DISTRIBUTIONS = ("uniform", "grammar")
DEFAULT_LENGTH_DISTRIBUTION = "uniform"


@dataclass(frozen=True, slots=True)
class Pair:
    """One example: indices into the task's ``source_vocab`` and ``target_vocab`` (no special symbols)."""

    source: tuple[int, ...]
    target: tuple[int, ...]


def check_split(split: str) -> str:
    """``split`` if it names a split, else a clear error. Its window is the task's (:meth:`Task.window`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from: {', '.join(SPLITS)}")
    return split


def check_length_distribution(reading: str) -> str:
    if reading not in LENGTH_DISTRIBUTIONS:
        raise ValueError(f"unknown length distribution {reading!r}; choose from: {', '.join(LENGTH_DISTRIBUTIONS)}")
    return reading


def check_count(n: int) -> int:
    return check_integer("the number of pairs", n)


class Task(abc.ABC):
    """A transduction task. Vocabularies are fixed by the task's definition, never derived from samples, so that
    every model, cache file and report agrees on what index ``i`` means."""

    name: str
    source_vocab: tuple[str, ...]
    target_vocab: tuple[str, ...]
    # The task's reading of LENGTH_DISTRIBUTIONS, or None when its generator has only one (the synthetic tasks draw
    # lengths uniformly whatever is asked, so both readings are the same data).
    length_distribution: str | None = None
    # The source-length window of each split, under SPLITS' names: the paper's unless the task has its own lengths.
    splits: dict[str, tuple[int, int]] = SPLITS

    def window(self, split: str) -> tuple[int, int]:
        """The source-length window of ``split`` (inclusive) for this task."""
        return self.splits[check_split(split)]

    def lengths(self, split: str) -> tuple[int, int]:
        """Smallest and largest source length ``split`` can hold: its window, unless the task narrows it."""
        return self.window(split)

    def target_length(self, source_length: int) -> int:
        """|target| for a source of ``source_length`` symbols: a function of the source length alone for every task
        here, and equal to it unless the task says otherwise (``duplicate_string``'s is twice as long)."""
        return source_length

    def longest_joint_sequence(self, split: str) -> int:
        """Tokens of the longest ``<s> source <|> target </s>`` of ``split``: at its longest source."""
        longest = self.lengths(split)[1]
        return longest + self.target_length(longest) + 3

    def with_length_distribution(self, reading: str) -> Task:
        """This task with its source lengths distributed as ``reading`` says (itself if it has no choice)."""
        check_length_distribution(reading)
        return self

    def sample(self, rng: np.random.Generator, split: str = "train") -> Pair:
        """One pair whose source length lies in the window of ``split``."""
        return self.sample_batch(rng, split, 1)[0]

    def sample_batch(self, rng: np.random.Generator, split: str, n: int) -> list[Pair]:
        """``n`` independent pairs from the window of ``split``, fully determined by the state of ``rng``."""
        return self.sample_window(rng, self.window(split), n)

    @abc.abstractmethod
    def sample_window(self, rng: np.random.Generator, window: tuple[int, int], n: int) -> list[Pair]:
        """``n`` independent pairs whose source lengths lie in ``window`` (inclusive), determined by ``rng``: a
        split's window, or one far past them (:mod:`pipeline.generalisation`)."""

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """A short digest of the task's definition; caches made under another definition are stale."""

    def decode(self, pair: Pair) -> dict[str, list[str]]:
        """The pair as words, for people and JSON: ``{"source": [...], "target": [...]}``."""
        return {"source": [self.source_vocab[i] for i in pair.source],
                "target": [self.target_vocab[i] for i in pair.target]}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
