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

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pipeline.memory.base import Memory, ValueRows, add_row_gradients, value_handle
from pipeline.memory.operations import PopTrace, ReadTrace, pop_backward, pop_forward, read_backward, read_forward


class SingleEndedStep(torch.autograd.Function):
    """One step of a Stack (``from_top=True``, eq. 1–3) or a Queue (``from_top=False``, eq. 1, 4, 5): pop, push,
    read, with the backward of appendix A written out instead of taped by autograd."""

    @staticmethod
    def forward(ctx, s_prev, rows_prev, v, d, u, rows: ValueRows, from_top: bool):
        del rows_prev  # carries only the value rows' gradient (see pipeline.memory.base)
        rows.append_top(v)  # eq. 1: the new row goes on top, whatever d is
        s_popped, pop_trace = pop_forward(s_prev, u, from_top)  # eq. 2 / eq. 4, rows i < t
        s = torch.cat([s_popped, d.unsqueeze(-1)], dim=-1)  # eq. 2 / eq. 4, row t: the push
        values = rows.view()
        r, read_trace = read_forward(s, values, from_top)  # eq. 3 / eq. 5

        ctx.set_materialize_grads(False)
        ctx.from_top = from_top
        ctx.values = values  # a view of rows that never change again; not a copy (see base.py)
        ctx.save_for_backward(*pop_trace, *read_trace)
        return r, s, value_handle(v, values.shape[1])

    @staticmethod
    @once_differentiable  # written out for first derivatives only: a second-order backward raises, not lies
    def backward(ctx, g_r, g_s, g_rows):
        saved = ctx.saved_tensors
        pop_trace, read_trace = PopTrace(*saved[:2]), ReadTrace(*saved[2:])
        values = ctx.values
        g_r = torch.zeros_like(values[:, 0]) if g_r is None else g_r
        g_s_read = read_backward(g_r, read_trace, values, ctx.from_top)  # eq. 18
        g_s = g_s_read if g_s is None else g_s + g_s_read
        # eq. 15: this read adds w[i] * dL/dr_t to row i; the handle brings the shares of every later read
        g_rows = add_row_gradients(g_rows, read_trace.weights, g_r)
        g_d = g_s[:, -1]  # eq. 14
        g_s_prev, g_u = pop_backward(g_s[:, :-1], pop_trace, ctx.from_top)  # eq. 16-17
        return g_s_prev, g_rows[:, :-1], g_rows[:, -1], g_d, g_u, None, None


class SingleEndedMemory(Memory):
    """The Stack and the Queue: one value, push and pop per step. ``from_top`` picks the end that pops and reads
    start from. ``capacity`` preallocates that many steps of value storage (it doubles when exceeded);
    ``check_values=False`` skips the [0, 1] / NaN checks of the inputs (shapes are always checked); dtype and
    device follow the inputs of the first step."""

    from_top: bool

    def step(self, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        """Pop ``u``, push ``v`` with strength ``d``, read. Returns r_t, (B, m)."""
        self._validate({"v": v}, {"d": d, "u": u})
        r, self._strengths, self._handle = SingleEndedStep.apply(
            self._strengths, self._handle, v, d, u, self._rows, self.from_top
        )
        return r


class NeuralStack(SingleEndedMemory):
    """A differentiable stack (eq. 1–3), empty at t = 0.

    >>> mem = NeuralStack(batch_size=B, width=m)
    >>> r = mem.step(v, d, u)   # v (B, m); d, u (B,) in [0, 1]  ->  r_t (B, m)
    >>> mem.strengths           # s_t, (B, t); index 0 = first pushed (the bottom)
    """

    from_top = True
