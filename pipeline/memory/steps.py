"""One memory step, forwards and backwards: the equations of §3 and appendix A, written once.

Both ways of running a memory call these functions and nothing else for the memory's maths:

* the readable memories (:class:`~pipeline.memory.NeuralStack`, ``NeuralQueue``, ``NeuralDeQue``), one step per
  call, through the autograd Functions at the bottom of this file;
* the fused sequence-level path of the memory-enhanced LSTMs (:mod:`pipeline.models.fused`), inside its own loop.

A step of the Stack (``from_top=True``) or the Queue (``from_top=False``), with the new value already written as
the last row of ``values`` (eq. 1):

    pop    eq. 2 / 4   s'[i] = max(0, s_{t-1}[i] - max(0, u_t - ahead_{t-1}[i]))     for the rows before t
    push               s_t = [s'; d_t]
    read   eq. 3 / 5   r_t = sum_i min(s_t[i], max(0, 1 - ahead_t[i])) V_t[i]

where ``ahead[i]`` sums the strengths a traversal from the popping end meets before row i (rows above i for the
Stack, below for the Queue). A DeQue step (eq. 6–11), rows in deque order (bottom first), both new rows written:
pop the top (eq. 7), pop the bottom (eq. 8), push both ends (eq. 9), read both ends (eq. 10, 11).

Backwards (appendix A): a read's adjoint gives the strengths' gradient (eq. 18) and adds ``w[i] dL/dr`` to row i's
value gradient (eq. 15); the push's gradient is the new row's strength gradient (eq. 14); a pop's adjoint gives the
previous strengths' and the pop signal's gradients (eq. 16–17). The traversals themselves (pop, read and their
adjoints) are :mod:`pipeline.memory.operations`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pipeline.memory.operations import PopTrace, ReadTrace, pop_backward, pop_forward, read_backward, read_forward


def value_handle(like: Tensor, rows: int) -> Tensor:
    """A (B, rows, m) tensor of zeros that owns no memory; it only carries the value rows' gradient back to the
    memory's value store (:class:`pipeline.memory.base.Memory` explains the arrangement)."""
    return like.new_zeros(()).expand(like.shape[0], rows, like.shape[-1])


class SingleEndedTrace(NamedTuple):
    pop: PopTrace
    read: ReadTrace


class DeQueTrace(NamedTuple):
    top_pop: PopTrace
    bottom_pop: PopTrace
    top_read: ReadTrace
    bottom_read: ReadTrace


def add_row_gradients(g_rows: Tensor | None, weights: Tensor, g_r: Tensor, in_place: bool) -> Tensor:
    """Eq. 15: a read with weights w (B, n) adds ``w[i] * dL/dr`` to row i's gradient (B, n, m). ``in_place``: into
    ``g_rows`` itself (the fused path's own buffer); otherwise a new tensor (autograd's incoming gradient is not
    ours to modify, and functorch transforms of the readable memories need out-of-place operations)."""
    if in_place:
        return g_rows.addcmul_(weights.unsqueeze(-1), g_r.unsqueeze(1))
    if g_rows is None:
        return weights.unsqueeze(-1) * g_r.unsqueeze(1)
    return torch.baddbmm(g_rows, weights.unsqueeze(-1), g_r.unsqueeze(1))


# -- Stack and Queue -------------------------------------------------------------------------------------------------


def single_ended_step(s_prev: Tensor, d: Tensor, u: Tensor, values: Tensor, from_top: bool,
                      read_from_top: bool | None = None) -> tuple[Tensor, Tensor, SingleEndedTrace]:
    """Pop ``u``, push ``d``, read (eq. 2–3 or 4–5). ``s_prev`` (B, t-1); ``d``, ``u`` (B,); ``values`` (B, t, m)
    with v_t as its last row. ``from_top``: the end the pop (and, unless ``read_from_top`` says otherwise, the read)
    starts from. Returns r_t (B, m), s_t (B, t) and what the backward needs."""
    read_from_top = from_top if read_from_top is None else read_from_top
    s_popped, pop = pop_forward(s_prev, u, from_top)
    s = torch.cat([s_popped, d.unsqueeze(-1)], dim=-1)
    r, read = read_forward(s, values, read_from_top)
    return r, s, SingleEndedTrace(pop, read)


def single_ended_step_backward(g_r: Tensor, g_s: Tensor | None, trace: SingleEndedTrace, values: Tensor,
                               g_rows: Tensor | None, from_top: bool, in_place: bool = False,
                               read_from_top: bool | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The adjoint of :func:`single_ended_step`. ``g_s``: dL/ds_t from later steps (None: none); ``g_rows``
    (B, t, m): the value rows' gradient from later steps, to which the read's is added (eq. 15; see
    :func:`add_row_gradients`). Returns dL/ds_{t-1}, dL/dd_t, dL/du_t and the rows' gradient."""
    read_from_top = from_top if read_from_top is None else read_from_top
    g_s_t = read_backward(g_r, trace.read, values, read_from_top)  # eq. 18
    if g_s is not None:
        g_s_t += g_s
    g_rows = add_row_gradients(g_rows, trace.read.weights, g_r, in_place)  # eq. 15
    g_s_prev, g_u = pop_backward(g_s_t[:, :-1], trace.pop, from_top)  # eq. 16-17
    return g_s_prev, g_s_t[:, -1], g_u, g_rows  # eq. 14: dL/dd_t is the new row's strength gradient


# -- DeQue -----------------------------------------------------------------------------------------------------------


def deque_step(s_prev: Tensor, d_top: Tensor, d_bot: Tensor, u_top: Tensor, u_bot: Tensor,
               rows: Tensor) -> tuple[Tensor, Tensor, Tensor, DeQueTrace]:
    """Pop the top, pop the bottom, push both ends, read both ends (eq. 7–11). ``s_prev`` (B, 2(t-1)); ``rows``
    (B, 2t, m) in deque order with both new rows written (eq. 6). Returns r_top, r_bot (B, m), s_t (B, 2t), trace."""
    s_top, top_pop = pop_forward(s_prev, u_top, from_top=True)  # eq. 7
    s_both, bottom_pop = pop_forward(s_top, u_bot, from_top=False)  # eq. 8
    s = torch.cat([d_bot.unsqueeze(-1), s_both, d_top.unsqueeze(-1)], dim=-1)  # eq. 9
    r_top, top_read = read_forward(s, rows, from_top=True)  # eq. 10
    r_bot, bottom_read = read_forward(s, rows, from_top=False)  # eq. 11
    return r_top, r_bot, s, DeQueTrace(top_pop, bottom_pop, top_read, bottom_read)


def deque_step_backward(g_r_top: Tensor, g_r_bot: Tensor, g_s: Tensor | None, trace: DeQueTrace, rows: Tensor,
                        g_rows: Tensor | None, in_place: bool = False) -> tuple[Tensor, ...]:
    """The adjoint of :func:`deque_step`; both reads' value gradients are added to ``g_rows`` (B, 2t, m) as in
    :func:`single_ended_step_backward`. Returns dL/ds_{t-1}, dL/dd_top, dL/dd_bot, dL/du_top, dL/du_bot and the
    rows' gradient."""
    g_s_t = read_backward(g_r_top, trace.top_read, rows, from_top=True)
    g_s_t += read_backward(g_r_bot, trace.bottom_read, rows, from_top=False)
    if g_s is not None:
        g_s_t += g_s
    g_rows = add_row_gradients(g_rows, trace.top_read.weights, g_r_top, in_place)
    g_rows = add_row_gradients(g_rows, trace.bottom_read.weights, g_r_bot, in_place)
    g_s_top, g_u_bot = pop_backward(g_s_t[:, 1:-1], trace.bottom_pop, from_top=False)  # eq. 8
    g_s_prev, g_u_top = pop_backward(g_s_top, trace.top_pop, from_top=True)  # eq. 7
    return g_s_prev, g_s_t[:, -1], g_s_t[:, 0], g_u_top, g_u_bot, g_rows


# -- The readable memories' autograd Functions -----------------------------------------------------------------------
# The state the memories carry between steps: the strengths, the value rows (written once into a buffer, see
# pipeline.memory.base) and a zero-cost "handle" whose gradient carries the rows' value gradients back (eq. 15).


class SingleEndedStep(torch.autograd.Function):
    """One step of a Stack (``from_top=True``) or a Queue (``from_top=False``), backward written out."""

    @staticmethod
    def forward(ctx, s_prev, rows_prev, v, d, u, rows, from_top: bool, read_from_top: bool | None = None):

        del rows_prev  # carries only the value rows' gradient
        rows.append_top(v)  # eq. 1: the new row goes on top, whatever d is
        values = rows.view()
        r, s, trace = single_ended_step(s_prev, d, u, values, from_top, read_from_top)
        ctx.set_materialize_grads(False)
        ctx.from_top, ctx.read_from_top = from_top, read_from_top
        ctx.values = values  # a view of rows that never change again; not a copy (see base.py)
        ctx.save_for_backward(*trace.pop, *trace.read)
        return r, s, value_handle(v, values.shape[1])

    @staticmethod
    @once_differentiable  # written out for first derivatives only: a second-order backward raises, not lies
    def backward(ctx, g_r, g_s, g_rows):
        saved = ctx.saved_tensors
        trace = SingleEndedTrace(PopTrace(*saved[:2]), ReadTrace(*saved[2:]))
        values = ctx.values
        g_r = torch.zeros_like(values[:, 0]) if g_r is None else g_r
        g_s_prev, g_d, g_u, g_rows = single_ended_step_backward(g_r, g_s, trace, values, g_rows, ctx.from_top,
                                                                read_from_top=ctx.read_from_top)
        return g_s_prev, g_rows[:, :-1], g_rows[:, -1], g_d, g_u, None, None, None


class DeQueStep(torch.autograd.Function):
    """One DeQue step (eq. 6–11), backward written out (appendix A, extended to both ends)."""

    @staticmethod
    def forward(ctx, s_prev, rows_prev, v_top, v_bot, d_top, d_bot, u_top, u_bot, rows):

        del rows_prev  # carries only the value rows' gradient
        rows.append_bottom(v_bot)  # eq. 6
        rows.append_top(v_top)
        values = rows.view()
        r_top, r_bot, s, trace = deque_step(s_prev, d_top, d_bot, u_top, u_bot, values)
        ctx.set_materialize_grads(False)
        ctx.values = values
        ctx.save_for_backward(*trace.top_pop, *trace.bottom_pop, *trace.top_read, *trace.bottom_read)
        return r_top, r_bot, s, value_handle(v_top, values.shape[1])

    @staticmethod
    @once_differentiable  # written out for first derivatives only: a second-order backward raises, not lies
    def backward(ctx, g_r_top, g_r_bot, g_s, g_rows):
        saved = ctx.saved_tensors
        trace = DeQueTrace(PopTrace(*saved[0:2]), PopTrace(*saved[2:4]), ReadTrace(*saved[4:7]),
                           ReadTrace(*saved[7:10]))
        values = ctx.values
        zeros = torch.zeros_like(values[:, 0])
        g_r_top = zeros if g_r_top is None else g_r_top
        g_r_bot = zeros if g_r_bot is None else g_r_bot
        g_s_prev, g_d_top, g_d_bot, g_u_top, g_u_bot, g_rows = deque_step_backward(g_r_top, g_r_bot, g_s, trace,
                                                                                   values, g_rows)
        return (g_s_prev, g_rows[:, 1:-1], g_rows[:, -1], g_rows[:, 0], g_d_top, g_d_bot, g_u_top, g_u_bot, None)
