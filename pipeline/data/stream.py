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

from pipeline.tasks import Pair, Task, check_split, get_task


class TrainingStream:
    def __init__(self, task: Task | str, seed: int, batch_size: int = 10, split: str = "train"):
        self.task = get_task(task) if isinstance(task, str) else task
        check_split(split)
        for name, value, least in (("seed", seed, 0), ("batch_size", batch_size, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        self.seed, self.batch_size, self.split = int(seed), int(batch_size), split
        self._tag = zlib.crc32(f"training-stream/{self.task.name}/{split}".encode())

    def batch(self, index: int) -> list[Pair]:
        """Batch number ``index`` (0-based); O(batch_size) work whatever the index."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ValueError(f"batch index must be an integer >= 0, got {index!r}")
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
