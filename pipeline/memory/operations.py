"""The two traversals every neural memory is made of, with their hand-written adjoints (paper appendix A).

A Stack, a Queue and a DeQue differ only in *which end* of the strength vector a traversal starts from:

* **pop** (eq. 2, 4, 7, 8): a deletion quantity ``u`` walks from one end towards the other; each strength it
  meets is reduced by what is left of ``u``, which shrinks by that strength, until nothing is left::

      s'[i] = max(0, s[i] - max(0, u - ahead[i]))        ahead[i] = sum of the strengths between i and the end

* **read** (eq. 3, 5, 10, 11): a fixed read quantity of 1 walks the same way; row ``i`` is weighted by the part of
  its strength that still fits under the quantity left::

      w[i] = min(s[i], max(0, 1 - ahead[i]))             r = sum_i w[i] * V[i]

``from_top=True`` walks from the highest index down (stack, DeQue top); ``from_top=False`` from index 0 up
(queue, DeQue bottom). Strength vectors are ``(B, n)`` with index 0 the oldest row (stack bottom, queue front).

Ties (footnote 1). ``max`` and ``min`` are not differentiable where their arguments are equal; the paper takes the
derivative of the *left* argument there. So ``max(0, x)`` passes no gradient to ``x`` at ``x == 0`` (the left
argument is the constant 0) and ``min(s, cap)`` passes the gradient to ``s`` at ``s == cap``. ``max(0, x)`` is
``torch.relu``, whose derivative is exactly that (1 where x > 0, else 0; ``clamp(min=0)`` would pass 1 at zero),
and the min is a ``torch.where`` on ``s <= cap`` (``torch.minimum`` splits ties 50/50). The backward functions
replay these rules: ``positive_part_adjoint`` is relu's own adjoint, applied to each max(0, ·) from its saved
output; the min's branch is saved as a mask.

Each ``*_forward`` returns its result and a trace of what its adjoint needs; ``*_backward`` replays the adjoint
from that trace. Every function is vectorised over the batch and costs O(n) (pop) or O(n·m) (read). They run at
every position of every sequence, so they are written with as few ATen calls as the equations allow, and without
Python-number operands where a tensor one will do (those cost about twice as much per call on a CPU).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


def exclusive_sum(s: Tensor, from_top: bool) -> Tensor:
    """``ahead[i]``: the sum of ``s[j]`` over the rows a traversal from that end visits before row ``i``.

    ``from_top``: sum over j > i (the total minus the inclusive sum); otherwise sum over j < i (the inclusive sum
    minus the row itself). Either way the row at the traversal's start gets exactly 0 and integer-valued strengths
    (the classical limit) stay exact.
    """
    c = s.cumsum(-1)
    if from_top:
        return c[..., -1:] - c
    return c - s


def exclusive_sum_adjoint(g: Tensor, from_top: bool) -> Tensor:
    """Vector-Jacobian product of :func:`exclusive_sum`: ``ahead[i]`` depends on ``s[j]`` for j on the start side
    of ``i``, so ``s[j]`` collects the gradients of the rows *after* it in traversal order."""
    return exclusive_sum(g, not from_top)


def positive_part_adjoint(g: Tensor, positive_part: Tensor) -> Tensor:
    """The adjoint of ``y = max(0, x)`` under footnote 1, from its output: ``g`` where ``y > 0``, else 0."""
    return torch.ops.aten.threshold_backward(g, positive_part, 0)


class PopTrace(NamedTuple):
    """What the adjoint of a pop needs (eq. 16–17): its two max(0, ·) outputs."""

    taken: Tensor  # max(0, u - ahead[i]): the deletion quantity left when the walk reaches row i
    kept: Tensor  # s'[i] = max(0, s[i] - taken[i]): the strength row i keeps


def pop_forward(s: Tensor, u: Tensor, from_top: bool) -> tuple[Tensor, PopTrace]:
    """Remove the quantity ``u`` (shape (B,)) from the strengths ``s`` (B, n), nearest end first."""
    taken = torch.relu(u.unsqueeze(-1) - exclusive_sum(s, from_top))
    kept = torch.relu(s - taken)
    return kept, PopTrace(taken, kept)


def pop_backward(g_out: Tensor, trace: PopTrace, from_top: bool) -> tuple[Tensor, Tensor]:
    """Gradients of a pop w.r.t. its strengths and its pop signal, given the gradient of its output."""
    g_kept = positive_part_adjoint(g_out, trace.kept)  # dL/d(s[i] - taken[i])
    g_ahead = positive_part_adjoint(g_kept, trace.taken)  # taken[i] = max(0, u - ahead[i]) enters with sign -1
    return g_kept + exclusive_sum_adjoint(g_ahead, from_top), g_ahead.sum(-1).neg()


class ReadTrace(NamedTuple):
    """What the adjoint of a read needs (eq. 15, 18)."""

    weights: Tensor  # w[i] = min(s[i], cap[i]), (B, n)
    take_strength: Tensor  # s[i] <= cap[i]: the min took its left argument
    cap: Tensor  # max(0, 1 - ahead[i]): the read quantity left when the walk reaches row i


def read_weights(s: Tensor, from_top: bool) -> tuple[Tensor, Tensor, Tensor]:
    """How much of each row a read of quantity 1 from one end takes (eq. 3 / 5 / 10 / 11):
    ``w[i] = min(s[i], max(0, 1 - ahead[i]))``. Returns (w, whether the min took s[i], the cap)."""
    cap = torch.relu(1.0 - exclusive_sum(s, from_top))
    take_strength = s <= cap
    return torch.where(take_strength, s, cap), take_strength, cap


def read_forward(s: Tensor, values: Tensor, from_top: bool) -> tuple[Tensor, ReadTrace]:
    """Read with quantity 1 from one end: ``r = sum_i w[i] V[i]`` with ``values`` (B, n, m). Returns (B, m)."""
    weights, take_strength, cap = read_weights(s, from_top)
    r = torch.bmm(weights.unsqueeze(1), values).squeeze(1)
    return r, ReadTrace(weights, take_strength, cap)


def read_backward(g_r: Tensor, trace: ReadTrace, values: Tensor, from_top: bool) -> Tensor:
    """Gradient of a read w.r.t. the strengths (eq. 18). The value rows' gradient, ``w[i] * g_r`` (eq. 15), is
    accumulated by the caller, which owns the value storage."""
    # g_w[i] = <V[i], g_r>. Written as (1 × m)·(m × n) per batch row: several times faster on CPU than the
    # equivalent (n × m)·(m × 1) product, whose matrix-vector kernel handles the tall shape poorly.
    g_w = torch.bmm(g_r.unsqueeze(1), values.transpose(1, 2)).squeeze(1)
    g_s = torch.where(trace.take_strength, g_w, 0.0)
    g_room = positive_part_adjoint(g_w - g_s, trace.cap)  # cap = max(0, room), room = 1 - ahead
    return g_s - exclusive_sum_adjoint(g_room, from_top)
