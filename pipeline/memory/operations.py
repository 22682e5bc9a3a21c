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
argument is the constant 0) and ``min(s, cap)`` passes the gradient to ``s`` at ``s == cap``. Written with
``torch.where`` and these exact comparisons, the forward below gives the paper's rule under autograd too;
``torch.maximum``/``torch.minimum`` (which split ties 50/50) and ``clamp(min=0)`` (which passes 1 at zero) do not.

Each ``*_forward`` returns its result and a trace of the branch each ``max``/``min`` took; ``*_backward`` replays
the adjoint from that trace. Every function is vectorised over the batch and costs O(n) (pop) or O(n·m) (read).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor


def exclusive_sum(s: Tensor, from_top: bool) -> Tensor:
    """``ahead[i]``: the sum of ``s[j]`` over the rows a traversal from that end visits before row ``i``.

    ``from_top``: sum over j > i; otherwise sum over j < i. Computed from one cumulative sum, arranged so that the
    row at the traversal's start gets exactly 0 and integer-valued strengths (the classical limit) stay exact.
    """
    c = s.cumsum(-1)
    if from_top:
        return c[..., -1:] - c
    return F.pad(c[..., :-1], (1, 0))


def exclusive_sum_adjoint(g: Tensor, from_top: bool) -> Tensor:
    """Vector-Jacobian product of :func:`exclusive_sum`: ``ahead[i]`` depends on ``s[j]`` for j on the start side
    of ``i``, so ``s[j]`` collects the gradients of the rows *after* it in traversal order."""
    return exclusive_sum(g, not from_top)


class PopTrace(NamedTuple):
    """Which branch each ``max`` took in a pop; all the adjoint needs (eq. 16–17)."""

    deleting: Tensor  # u - ahead[i] > 0: deletion quantity was left when the walk reached row i
    alive: Tensor  # s[i] - max(0, u - ahead[i]) > 0: the row keeps some strength (s'[i] > 0)


def pop_forward(s: Tensor, u: Tensor, from_top: bool) -> tuple[Tensor, PopTrace]:
    """Remove the quantity ``u`` (shape (B,)) from the strengths ``s`` (B, n), nearest end first."""
    left = u.unsqueeze(-1) - exclusive_sum(s, from_top)  # deletion quantity left on reaching row i
    deleting = left > 0
    reduced = s - torch.where(deleting, left, 0.0)  # s[i] - max(0, u - ahead[i])
    alive = reduced > 0
    return torch.where(alive, reduced, 0.0), PopTrace(deleting, alive)


def pop_backward(g_out: Tensor, trace: PopTrace, from_top: bool) -> tuple[Tensor, Tensor]:
    """Gradients of a pop w.r.t. its strengths and its pop signal, given the gradient of its output."""
    g_reduced = torch.where(trace.alive, g_out, 0.0)
    g_left = torch.where(trace.deleting, -g_reduced, 0.0)
    g_s = g_reduced - exclusive_sum_adjoint(g_left, from_top)
    return g_s, g_left.sum(-1)


class ReadTrace(NamedTuple):
    """What the adjoint of a read needs (eq. 15, 18)."""

    weights: Tensor  # w[i] = min(s[i], max(0, 1 - ahead[i])), (B, n)
    take_strength: Tensor  # s[i] <= cap[i]: the min took its left argument
    capped: Tensor  # 1 - ahead[i] > 0: the inner max took its right argument


def read_forward(s: Tensor, values: Tensor, from_top: bool) -> tuple[Tensor, ReadTrace]:
    """Read with quantity 1 from one end: ``r = sum_i w[i] V[i]`` with ``values`` (B, n, m). Returns (B, m)."""
    room = 1.0 - exclusive_sum(s, from_top)
    capped = room > 0
    cap = torch.where(capped, room, 0.0)
    take_strength = s <= cap
    weights = torch.where(take_strength, s, cap)
    r = torch.bmm(weights.unsqueeze(1), values).squeeze(1)
    return r, ReadTrace(weights, take_strength, capped)


def read_backward(g_r: Tensor, trace: ReadTrace, values: Tensor, from_top: bool) -> Tensor:
    """Gradient of a read w.r.t. the strengths (eq. 18). The value rows' gradient, ``w[i] * g_r`` (eq. 15), is
    accumulated by the caller, which owns the value storage."""
    # g_w[i] = <V[i], g_r>. Written as (1 × m)·(m × n) per batch row: several times faster on CPU than the
    # equivalent (n × m)·(m × 1) product, whose matrix-vector kernel handles the tall shape poorly.
    g_w = torch.bmm(g_r.unsqueeze(1), values.transpose(1, 2)).squeeze(1)
    g_s = torch.where(trace.take_strength, g_w, 0.0)
    g_room = torch.where(trace.capped, g_w - g_s, 0.0)
    return g_s - exclusive_sum_adjoint(g_room, from_top)
