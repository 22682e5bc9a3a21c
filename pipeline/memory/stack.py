"""The neural Stack (paper §3.1, eq. 1–3; backward dynamics: appendix A, eq. 12–18).

State at step t: a value matrix V_t (t × m; row i holds v_i, whether or not it is still logically on the stack) and
a strength vector s_t (t). One step, with push d_t, pop u_t in [0, 1] and value v_t:

    (1)  V_t[i] = V_{t-1}[i] for i < t,   V_t[t] = v_t
    (2)  s_t[i] = max(0, s_{t-1}[i] - max(0, u_t - sum_{j=i+1}^{t-1} s_{t-1}[j]))   for i < t,   s_t[t] = d_t
    (3)  r_t = sum_{i=1}^{t} min(s_t[i], max(0, 1 - sum_{j=i+1}^{t} s_t[j])) * V_t[i]

so a step pops with u_t from the previous strengths, then pushes v_t with strength d_t (the row is written whatever
d_t is; d_t = 0 makes it invisible), then reads with a read quantity of 1 from the top. At ties of max/min the
derivative is the left argument's (footnote 1): see :mod:`pipeline.memory.operations`.

Cost per step: O(t) for the pop and O(t·m) for the read, forward and backward, vectorised over the batch. Memory:
the values are stored once (B·T·m over T steps) plus O(t) strengths and branch masks saved per step for backward.
"""

from __future__ import annotations

from pipeline.memory.base import SingleEndedMemory
from pipeline.memory.kinds import Stack


class NeuralStack(SingleEndedMemory):
    """A differentiable stack (eq. 1–3), empty at t = 0.

    >>> mem = NeuralStack(batch_size=B, width=m)
    >>> r = mem.step(v, d, u)   # v (B, m); d, u (B,) in [0, 1]  ->  r_t (B, m)
    >>> mem.strengths           # s_t, (B, t); index 0 = first pushed (the bottom)
    """

    def __init__(self, batch_size: int, width: int, **options) -> None:
        super().__init__(batch_size, width, kind=Stack(), **options)  # where it pops and reads: kinds.Stack
