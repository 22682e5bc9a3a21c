"""The neural DeQue (paper §3.3, eq. 6–11): a double-ended queue, pushed, popped and read at both ends.

State at step t: a value matrix V_t (2t × m) and strengths s_t (2t); index 1 is the bottom end, index 2t the top.
Every step writes one row at each end (eq. 6) and, in this order, pops from the top, pops from the bottom, pushes
both ends and reads both ends:

    (6)  V_t[1] = v_t^bot,   V_t[2t] = v_t^top,   V_t[i] = V_{t-1}[i-1] for 1 < i < 2t
    (7)  s_t^top[i]  = max(0, s_{t-1}[i] - max(0, u_t^top - sum_{j=i+1}^{2(t-1)} s_{t-1}[j]))   1 <= i <= 2(t-1)
    (8)  s_t^both[i] = max(0, s_t^top[i] - max(0, u_t^bot - sum_{j=1}^{i-1} s_t^top[j]))     1 <= i <= 2(t-1)
    (9)  s_t[1] = d_t^bot,   s_t[2t] = d_t^top,   s_t[i] = s_t^both[i-1] for 1 < i < 2t
    (10) r_t^top = sum_{i=1}^{2t} min(s_t[i], max(0, 1 - sum_{j=i+1}^{2t} s_t[j])) * V_t[i]
    (11) r_t^bot = sum_{i=1}^{2t} min(s_t[i], max(0, 1 - sum_{j=1}^{i-1} s_t[j])) * V_t[i]

Index slips in the printed eq. 7–8. The paper prints the range of eq. 7 and 8 as ``1 <= i < 2(t-1)`` and the upper
limit of eq. 7's sum as ``2(t-1) - 1``. s_{t-1} has 2(t-1) entries, so read literally the topmost row of the
previous step would be neither popped (no s^top / s^both entry for it) nor counted above the rows below it, and
eq. 9 (which reads s^both up to index 2t - 1 - 1 = 2(t-1)) would use an undefined entry. The intended forms, which
mirror the Stack's eq. 2 where the sum runs to the last index of the previous strengths, are the ones above:
both ranges are ``1 <= i <= 2(t-1)`` and eq. 7's sum runs to ``2(t-1)``. With them, pushes and pops of 0/1 behave
exactly as a classical deque (tested).

Cost per step: O(t) for the two pops and O(t·m) for the two reads, forward and backward, vectorised over the batch;
the values are stored once (see :mod:`pipeline.memory.base`).
"""

from __future__ import annotations

from torch import Tensor

from pipeline.memory.base import Memory
from pipeline.memory.steps import DeQueStep


class NeuralDeQue(Memory):
    """A differentiable double-ended queue (eq. 6–11), empty at t = 0.

    >>> dq = NeuralDeQue(batch_size=B, width=m)
    >>> r_top, r_bot = dq.step(v_top, v_bot, d_top, d_bot, u_top, u_bot)
    >>> dq.strengths           # (B, 2t); index 0 = the bottom end

    ``capacity`` (steps to preallocate), ``check_values``, dtype and device: as for the Stack.
    """

    two_ended = True

    def step(
        self, v_top: Tensor, v_bot: Tensor, d_top: Tensor, d_bot: Tensor, u_top: Tensor, u_bot: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Pop the top, pop the bottom, push both ends, read both ends. Returns (r_top, r_bot), each (B, m)."""
        self._validate(
            {"v_top": v_top, "v_bot": v_bot}, {"d_top": d_top, "d_bot": d_bot, "u_top": u_top, "u_bot": u_bot}
        )
        r_top, r_bot, self._strengths, self._handle = DeQueStep.apply(
            self._strengths, self._handle, v_top, v_bot, d_top, d_bot, u_top, u_bot, self._rows
        )
        return r_top, r_bot
