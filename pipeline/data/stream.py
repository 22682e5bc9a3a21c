"""The endless training stream: batch ``i`` is a pure function of (task, seed, split, batch size, i).

Each batch gets its own generator, seeded from ``SeedSequence([tag, seed, batch_size, i])``, so a run resumed at
batch 5000 sees exactly the batches it would have seen without the restart, without replaying the first 5000.
The tag (a CRC of the task and split names) keeps streams of different tasks apart and, because evaluation sets are
drawn from ``default_rng(<documented seed>)`` instead, keeps the stream from ever reproducing an evaluation set.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator

import numpy as np
from torch.utils.data import IterableDataset

from pipeline.checks import check_integer
from pipeline.data.encoding import Batch, JointVocabulary, collate
from pipeline.tasks import Pair, Task, check_split, get_task


class TrainingStream:
    def __init__(self, task: Task | str, seed: int, batch_size: int = 10, split: str = "train"):
        self.task = get_task(task) if isinstance(task, str) else task
        check_split(split)
        self.seed, self.batch_size = check_integer("seed", seed, 0), check_integer("batch_size", batch_size)
        self.split = split
        self._tag = zlib.crc32(f"training-stream/{self.task.name}/{split}".encode())

    def batch(self, index: int) -> list[Pair]:
        """Batch number ``index`` (0-based); O(batch_size) work whatever the index."""
        index = check_integer("batch index", index, 0)
        entropy = [self._tag, self.seed, self.batch_size, int(index)]
        rng = np.random.default_rng(np.random.SeedSequence(entropy))
        return self.task.sample_batch(rng, self.split, self.batch_size)

    def batches(self, start: int = 0) -> Iterator[list[Pair]]:
        """``batch(start), batch(start + 1), ...``: where a resumed run picks the stream up."""
        return (self.batch(index) for index in itertools.count(start))

    def __iter__(self) -> Iterator[list[Pair]]:
        return self.batches(0)

    def __repr__(self) -> str:
        return (f"TrainingStream({self.task.name!r}, seed={self.seed}, batch_size={self.batch_size}, "
                f"split={self.split!r})")


# ----------------------------------------------------------------------------------------------------------------
# The batches a run trains on.
#
# The training batches: the task's endless seeded stream, regrouped by length, resumable at any batch index.
#
# Batch i depends only on (task, seed, batch size, pool size, i): after a restart at batch i the stream continues
# exactly where it stopped without replaying anything. Length grouping: ``pool`` consecutive batches of the stream
# are drawn together, sorted by length, cut back into ``pool`` batches and shuffled (with a generator seeded from
# the pool's index). Every sequence is still an independent draw from the task's training distribution and is used
# exactly once; only which sequences share a batch changes, which cuts the padding a batch carries (its length is
# its longest sequence's). ``pool=1`` gives the plain stream.

_POOL_ORDER_TAG = 0x9E3779B9  # distinguishes the pool-shuffling generator from the stream's own


class TrainingBatches(IterableDataset):
    def __init__(self, task: Task, vocab: JointVocabulary, seed: int, batch_size: int, pool: int, start: int = 0):
        self.stream = TrainingStream(task, seed=seed, batch_size=batch_size)
        self.vocab = vocab
        self.seed = seed
        self.batch_size = batch_size
        self.pool = pool
        self.start = start
        self._cached: tuple[int, list[list[Pair]]] | None = None

    def pairs(self, index: int) -> list[Pair]:
        """The sequences of training batch ``index``."""
        p, offset = divmod(index, self.pool)
        if self._cached is None or self._cached[0] != p:
            self._cached = (p, self._regroup(p))
        return self._cached[1][offset]

    def _regroup(self, p: int) -> list[list[Pair]]:
        drawn = [pair for i in range(p * self.pool, (p + 1) * self.pool) for pair in self.stream.batch(i)]
        if self.pool == 1:
            return [drawn]
        drawn.sort(key=lambda pair: len(pair.source) + len(pair.target))
        batches = [drawn[k : k + self.batch_size] for k in range(0, len(drawn), self.batch_size)]
        order = np.random.default_rng([self.seed, _POOL_ORDER_TAG, p]).permutation(len(batches))
        return [batches[k] for k in order]

    def batch(self, index: int) -> Batch:
        return collate(self.pairs(index), self.vocab)

    def __iter__(self):
        index = self.start
        while True:
            yield self.batch(index)
            index += 1


def padding_fraction(batches: list[Batch]) -> float:
    """Share of the computed positions (batch × longest sequence) that are padding."""
    total = sum(b.inputs.numel() for b in batches)
    real = sum(int(b.lengths.sum()) for b in batches)
    return 1 - real / total

