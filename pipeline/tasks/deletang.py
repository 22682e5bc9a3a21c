"""The two cross-check tasks of Delétang et al. 2023, "Neural Networks and the Chomsky Hierarchy" (ICLR; code:
google-deepmind/neural_networks_chomsky_hierarchy): ``reverse_string`` and ``duplicate_string`` over binary strings,
at their lengths, so that our models can be set beside their published scores on their metric
(:func:`pipeline.evaluation.length_averaged_token_accuracy`). Not among the paper's five (``TaskEntry.paper``).

Their setup, from their code (docs/tasks.md quotes it): the alphabet is {0, 1} (``tasks/dcf/reverse_string.py``,
``tasks/cs/duplicate_string.py``: "In the paper, we use only binary strings"); training strings have a length
uniform over 1..40 (``training/example.py``: ``UniformCurriculum(values=list(range(1, sequence_length + 1)))`` with
``sequence_length = 40``); the score is the per-token accuracy at each length past training, averaged over the
lengths up to 500.
"""

from __future__ import annotations

import numpy as np

from pipeline.tasks.synthetic import SyntheticTask, reverse

BINARY = ("0", "1")
TRAINING_LENGTHS = (1, 40)  # their N = 40
SCORED_LENGTHS = (41, 500)  # the lengths their score averages over: N + 1 .. 500

# Our three splits over their two conditions. "train" is theirs. Their test lengths are cut in two: "test", the
# first doubling of the training lengths (as the paper's test split doubles its training lengths), which the
# monitor scores during training and is cheap; "long", the rest. Together they are exactly SCORED_LENGTHS, so their
# score is computed over the test and long sets (2000 pairs), without a third set or a length they did not test.
DELETANG_SPLITS = {"train": TRAINING_LENGTHS, "test": (41, 80), "long": (81, SCORED_LENGTHS[1])}


def duplicate(source: np.ndarray) -> np.ndarray:
    """s1 ... sn -> s1 ... sn s1 ... sn: the string twice, no separator (the target is twice as long)."""
    return np.concatenate([source, source])


def binary_task(name: str, transform) -> SyntheticTask:
    """A task of theirs: ``transform`` over binary strings, at their lengths."""
    return SyntheticTask(name, transform, symbols=BINARY, splits=DELETANG_SPLITS)


def reverse_string() -> SyntheticTask:
    """s1 ... sn -> sn ... s1 (theirs: deterministic context-free)."""
    return binary_task("reverse_string", reverse)


def duplicate_string() -> SyntheticTask:
    """s1 ... sn -> s1 ... sn s1 ... sn (theirs: context-sensitive)."""
    return binary_task("duplicate_string", duplicate)
