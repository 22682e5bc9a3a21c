"""A slow, literal transcription of eq. 1–11: the oracle the fast memories are tested against.

Everything here follows the paper's notation: lists indexed from 1 (index 0 is unused), explicit loops over i
and j, one batch row at a time, scalar ``max``/``min`` that take the *left* argument at ties (footnote 1), and
autograd for the gradients. Nothing is vectorised or clever, so that each line can be checked against the paper.
For the DeQue, the ranges of eq. 7–8 are the intended ones (see :mod:`pipeline.memory.deque`).
"""

from __future__ import annotations

from torch import Tensor


def pmax(a, b):
    """max(a, b); at a tie the result *is* ``a``, so the derivative is the left argument's (footnote 1)."""
    return a if a >= b else b


def pmin(a, b):
    """min(a, b); at a tie the result *is* ``a`` (footnote 1)."""
    return a if a <= b else b


def total(s: list, lo: int, hi: int):
    """sum_{j=lo}^{hi} s[j], 0 when the range is empty."""
    acc = 0.0
    for j in range(lo, hi + 1):
        acc = acc + s[j]
    return acc


class Reference:
    """State at t = 0: lists indexed from 1 like the paper (index 0 unused)."""

    def __init__(self) -> None:
        self.t = 0
        self.V: list = [None]
        self.s: list = [None]


class ReferenceStack(Reference):
    """Eq. 1–3 for one batch row. ``step(v, d, u)`` with v a (m,) tensor and d, u scalar tensors."""

    def step(self, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        t = self.t = self.t + 1
        self.V = self.V + [v]  # eq. 1
        prev = self.s
        s = [None]
        for i in range(1, t):  # eq. 2
            s.append(pmax(0.0, prev[i] - pmax(0.0, u - total(prev, i + 1, t - 1))))
        s.append(d)
        self.s = s
        r = 0.0 * v
        for i in range(1, t + 1):  # eq. 3
            r = r + pmin(s[i], pmax(0.0, 1 - total(s, i + 1, t))) * self.V[i]
        return r


class ReferenceQueue(Reference):
    """Eq. 1, 4, 5 for one batch row."""

    def step(self, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        t = self.t = self.t + 1
        self.V = self.V + [v]  # eq. 1
        prev = self.s
        s = [None]
        for i in range(1, t):  # eq. 4
            s.append(pmax(0.0, prev[i] - pmax(0.0, u - total(prev, 1, i - 1))))
        s.append(d)
        self.s = s
        r = 0.0 * v
        for i in range(1, t + 1):  # eq. 5
            r = r + pmin(s[i], pmax(0.0, 1 - total(s, 1, i - 1))) * self.V[i]
        return r


class ReferenceDeQue(Reference):
    """Eq. 6–11 for one batch row."""

    def step(self, v_top, v_bot, d_top, d_bot, u_top, u_bot) -> tuple[Tensor, Tensor]:
        t = self.t = self.t + 1
        V = [None] * (2 * t + 1)  # eq. 6
        V[1] = v_bot
        V[2 * t] = v_top
        for i in range(2, 2 * t):
            V[i] = self.V[i - 1]
        self.V = V
        prev = self.s
        n = 2 * (t - 1)
        s_top = [None]
        for i in range(1, n + 1):  # eq. 7
            s_top.append(pmax(0.0, prev[i] - pmax(0.0, u_top - total(prev, i + 1, n))))
        s_both = [None]
        for i in range(1, n + 1):  # eq. 8
            s_both.append(pmax(0.0, s_top[i] - pmax(0.0, u_bot - total(s_top, 1, i - 1))))
        s = [None] * (2 * t + 1)  # eq. 9
        s[1] = d_bot
        s[2 * t] = d_top
        for i in range(2, 2 * t):
            s[i] = s_both[i - 1]
        self.s = s
        r_top = 0.0 * v_top
        r_bot = 0.0 * v_bot
        for i in range(1, 2 * t + 1):
            r_top = r_top + pmin(s[i], pmax(0.0, 1 - total(s, i + 1, 2 * t))) * V[i]  # eq. 10
            r_bot = r_bot + pmin(s[i], pmax(0.0, 1 - total(s, 1, i - 1))) * V[i]  # eq. 11
        return r_top, r_bot
