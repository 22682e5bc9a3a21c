"""The training stream: batch i depends only on (task, seed, split, batch size, i)."""

import itertools

import numpy as np
import pytest

from pipeline.data.stream import TrainingStream
from pipeline.tasks import SPLITS, TASK_NAMES, get_task


@pytest.mark.parametrize("name", TASK_NAMES)
def test_random_access_equals_iteration_and_survives_a_restart(name):
    stream = TrainingStream(name, seed=3)
    iterated = list(itertools.islice(stream, 6))
    restarted = TrainingStream(get_task(name), seed=3)  # a fresh process resuming at batch 4
    assert restarted.batch(4) == iterated[4]
    assert list(itertools.islice(restarted.batches(start=4), 2)) == iterated[4:6]
    assert all(len(batch) == 10 for batch in iterated)
    assert iterated[0] != iterated[1]


def test_the_stream_depends_on_seed_split_batch_size_and_task():
    base = TrainingStream("copy", seed=0).batch(0)
    assert TrainingStream("copy", seed=1).batch(0) != base
    assert TrainingStream("reversal", seed=0).batch(0) != base
    other_size = TrainingStream("copy", seed=0, batch_size=5).batch(0)
    assert len(other_size) == 5 and other_size != base[:5]
    test_split = TrainingStream("copy", seed=0, split="test").batch(0)
    assert all(SPLITS["test"][0] <= len(p.source) <= SPLITS["test"][1] for p in test_split)


def test_the_stream_does_not_replay_the_eval_sets():
    """Eval sets come from default_rng(documented seed); a stream with the same number as seed must differ."""
    eval_like = get_task("copy").sample_batch(np.random.default_rng(1001), "train", 10)
    assert TrainingStream("copy", seed=1001).batch(0) != eval_like


@pytest.mark.parametrize("kwargs, message", [
    ({"task": "copie", "seed": 0}, r"unknown task 'copie'"),
    ({"task": "copy", "seed": -1}, r"seed must be an integer >= 0, got -1"),
    ({"task": "copy", "seed": 0, "batch_size": 0}, r"batch_size must be an integer >= 1, got 0"),
    ({"task": "copy", "seed": 0, "split": "dev"}, r"unknown split 'dev'"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainingStream(**kwargs)


def test_negative_batch_index_is_an_error():
    with pytest.raises(ValueError, match=r"batch index must be an integer >= 0, got -1"):
        TrainingStream("copy", seed=0).batch(-1)
