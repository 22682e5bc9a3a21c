"""Differentiable Stack, Queue and DeQue (paper §3.1–3.3, appendix A).

``operations`` holds the two traversals (pop, read) the three structures are built from; ``stack``, ``queue`` and
``deque`` hold each structure's equations; ``reference`` is a slow, literal transcription of eq. 1–11 used as the
oracle in tests. See ``docs/memory.md``.
"""

from pipeline.memory.deque import NeuralDeQue
from pipeline.memory.queue import NeuralQueue
from pipeline.memory.stack import NeuralStack

__all__ = ["NeuralStack", "NeuralQueue", "NeuralDeQue"]
