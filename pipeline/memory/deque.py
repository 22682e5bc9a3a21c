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

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pipeline.memory.base import Memory, ValueRows, add_row_gradients, value_handle
from pipeline.memory.operations import PopTrace, ReadTrace, pop_backward, pop_forward, read_backward, read_forward


class DeQueStep(torch.autograd.Function):
    """One DeQue step (eq. 6–11) with the backward written out (appendix A, extended to both ends)."""

    @staticmethod
    def forward(ctx, s_prev, rows_prev, v_top, v_bot, d_top, d_bot, u_top, u_bot, rows: ValueRows):
        del rows_prev  # carries only the value rows' gradient (see pipeline.memory.base)
        rows.append_bottom(v_bot)  # eq. 6
        rows.append_top(v_top)
        s_top, top_pop = pop_forward(s_prev, u_top, from_top=True)  # eq. 7
        s_both, bottom_pop = pop_forward(s_top, u_bot, from_top=False)  # eq. 8
        s = torch.cat([d_bot.unsqueeze(-1), s_both, d_top.unsqueeze(-1)], dim=-1)  # eq. 9
        values = rows.view()
        r_top, top_read = read_forward(s, values, from_top=True)  # eq. 10
        r_bot, bottom_read = read_forward(s, values, from_top=False)  # eq. 11

        ctx.set_materialize_grads(False)
        ctx.values = values  # a view of rows that never change again; not a copy (see base.py)
        ctx.save_for_backward(*top_pop, *bottom_pop, *top_read, *bottom_read)
        return r_top, r_bot, s, value_handle(v_top, values.shape[1])

    @staticmethod
    @once_differentiable  # written out for first derivatives only: a second-order backward raises, not lies
    def backward(ctx, g_r_top, g_r_bot, g_s, g_rows):
        saved = ctx.saved_tensors
        top_pop, bottom_pop = PopTrace(*saved[0:2]), PopTrace(*saved[2:4])
        top_read, bottom_read = ReadTrace(*saved[4:7]), ReadTrace(*saved[7:10])
        values = ctx.values
        zeros = torch.zeros_like(values[:, 0])
        g_r_top = zeros if g_r_top is None else g_r_top
        g_r_bot = zeros if g_r_bot is None else g_r_bot

        g_s_read = read_backward(g_r_top, top_read, values, from_top=True) + read_backward(
            g_r_bot, bottom_read, values, from_top=False
        )
        g_s = g_s_read if g_s is None else g_s + g_s_read
        g_rows = add_row_gradients(g_rows, top_read.weights, g_r_top)
        g_rows = add_row_gradients(g_rows, bottom_read.weights, g_r_bot)

        g_s_top, g_u_bot = pop_backward(g_s[:, 1:-1], bottom_pop, from_top=False)  # eq. 8
        g_s_prev, g_u_top = pop_backward(g_s_top, top_pop, from_top=True)  # eq. 7
        return (
            g_s_prev,
            g_rows[:, 1:-1],
            g_rows[:, -1],  # v_top
            g_rows[:, 0],  # v_bot
            g_s[:, -1],  # d_top
            g_s[:, 0],  # d_bot
            g_u_top,
            g_u_bot,
            None,
        )


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
