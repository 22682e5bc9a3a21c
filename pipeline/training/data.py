"""The training batches: the task's endless seeded stream, regrouped by length, resumable at any batch index.

Batch i depends only on (task, seed, batch size, pool size, i): after a restart at batch i the stream continues
exactly where it stopped without replaying anything. Length grouping: ``pool`` consecutive batches of the stream
are drawn together, sorted by length, cut back into ``pool`` batches and shuffled (with a generator seeded from
the pool's index). Every sequence is still an independent draw from the task's training distribution and is used
exactly once; only which sequences share a batch changes, which cuts the padding a batch carries (its length is
its longest sequence's). ``pool=1`` gives the plain stream.
"""

from __future__ import annotations

import numpy as np
from torch.utils.data import IterableDataset

from pipeline.data.encoding import Batch, JointVocabulary, collate
from pipeline.data.stream import TrainingStream
from pipeline.tasks import Pair, Task

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

