"""The neural Queue (paper §3.2, eq. 4–5): a Stack whose pop and read traverse from the *lowest* index.

Values are appended exactly as in eq. 1. The strengths and the read become

    (4)  s_t[i] = max(0, s_{t-1}[i] - max(0, u_t - sum_{j=1}^{i-1} s_{t-1}[j]))   for i < t,   s_t[t] = d_t
    (5)  r_t = sum_{i=1}^{t} min(s_t[i], max(0, 1 - sum_{j=1}^{i-1} s_t[j])) * V_t[i]

so pops and reads act on the front (the oldest rows) while pushes go to the back. The step is the Stack's
(:func:`pipeline.memory.steps.single_ended_step`) with ``from_top=False``; costs are the Stack's.
"""

from __future__ import annotations

from pipeline.memory.base import SingleEndedMemory
from pipeline.memory.kinds import Queue


class NeuralQueue(SingleEndedMemory):
    """A differentiable queue (eq. 1, 4, 5), empty at t = 0.

    >>> mem = NeuralQueue(batch_size=B, width=m)
    >>> r = mem.step(v, d, u)   # v (B, m); d, u (B,) in [0, 1]  ->  r_t (B, m), read from the front
    >>> mem.strengths           # s_t, (B, t); index 0 = first pushed (the front)
    """

    def __init__(self, batch_size: int, width: int, **options) -> None:
        super().__init__(batch_size, width, kind=Queue(), **options)  # where it pops and reads: kinds.Queue
