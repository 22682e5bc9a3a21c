"""What differs between memories, in one object per memory: the models, the fused path, inspection and the reports
ask it instead of testing a memory's name.

A :class:`MemoryKind` says how many (push, pop, value) signal triples a step takes (``ends``), where each push goes,
where each pop and each read start from (end names, for labels and traces), how to build the readable memory and
step it (the reference path), and the fused path's step and its adjoint over a preallocated buffer of value rows.
The maths is :mod:`pipeline.memory.steps` in every case.

Adding a memory is one subclass and one model registry entry (``docs/models.md``). A single-ended memory that pops
from one end and reads from either is just two flags::

    class NewestReadQueue(SingleEnded):
        name, pop_from_top, read_from_top = "newest-read queue", False, True
"""

from __future__ import annotations

import torch
from torch import Tensor

from pipeline.memory.base import Memory, SingleEndedMemory
from pipeline.memory.deque import NeuralDeQue
from pipeline.memory.operations import read_weights
from pipeline.memory.steps import deque_step, deque_step_backward, single_ended_step, single_ended_step_backward


class MemoryKind:
    """One memory's behaviour. Subclasses set the attributes and implement the methods."""

    name: str  # for people: "stack", "queue", ...
    ends: int  # (push, pop, value) signal triples per step; the signal head's layout is [d (ends), u (ends), v]
    push_ends: tuple[str, ...]  # where each push goes ("top" / "bottom"), one per signal triple
    pop_ends: tuple[str, ...]  # where each pop starts from, one per signal triple
    read_ends: tuple[str, ...]  # where each read starts from, one per read vector given to the controller
    rows_grow_at_both_ends: bool = False  # a step adds rows below the old ones too (the DeQue): traces align rows

    @property
    def reads(self) -> int:
        return len(self.read_ends)

    def signal_labels(self) -> tuple[str, ...]:
        """How logs and reports name each (push, pop, value) triple: nothing for a memory with one (``memory/
        push_source``), else the end it pushes at (``memory/push_source_top``, ``..._bottom``)."""
        return ("",) if self.ends == 1 else tuple(self.push_ends)

    def bias_index(self, signal: str, end: str) -> int | None:
        """Where the push (``signal="push"``) or pop (``"pop"``) of the triple that pushes at ``end`` sits in the
        signal head's bias, laid out [d (ends), u (ends), v ...]; None where no triple pushes at that end."""
        if end not in self.push_ends:
            return None
        k = self.push_ends.index(end)
        return k if signal == "push" else self.ends + k

    # -- the readable memory, one step at a time (the reference path) --------------------------------------------
    def new_memory(self, batch_size: int, width: int, capacity: int | None = None) -> Memory:
        raise NotImplementedError

    def reference_step(self, memory: Memory, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        """Step ``memory`` with values v (B, ends·m), pushes d and pops u (B, ends); returns the reads (B, reads·m)."""
        raise NotImplementedError

    # -- the fused path (pipeline.models.fused): steps over one value buffer of ``ends·L`` rows --------------------
    def fused_step(self, s: Tensor, d: Tensor, u: Tensor, v: Tensor, values: Tensor, t: int, L: int, out: Tensor):
        """Step t of L: write v's rows into ``values``, pop, push, read into ``out`` (B, reads·m). Returns the new
        strengths and what :meth:`fused_step_backward` needs."""
        raise NotImplementedError

    def fused_step_backward(self, g_r: Tensor, g_s: Tensor | None, trace, values: Tensor, g_values: Tensor, t: int,
                            L: int) -> tuple[Tensor, Tensor, Tensor]:
        """The adjoint of :meth:`fused_step`: dL/ds_{t-1}, dL/d(d, u) (B, 2·ends) and dL/dv (B, ends·m), with the
        reads' value gradients added to ``g_values``."""
        raise NotImplementedError

    has_native_step: bool = False  # pipeline/memory/native.c implements this memory's step (the Stack, Queue, DeQue)

    def native_sequence(self, sigs: Tensor, live: Tensor | None, values: Tensor, reads: Tensor):
        """The C step over one fused sequence (:class:`~pipeline.memory.native.NativeSequence`), or None where
        this memory has none or it cannot serve these tensors: the fused path then calls :meth:`fused_step`."""
        from pipeline.memory import native

        if not (self.has_native_step and native.available(sigs)):
            return None
        return native.NativeSequence(self, sigs, live, values, reads)

    # -- traces -------------------------------------------------------------------------------------------------
    def read_weights(self, strengths: Tensor) -> dict[str, Tensor]:
        """How much of each row every read takes (eq. 3 / 5 / 10 / 11), by the end it starts from."""
        return {end: read_weights(strengths, from_top=end == "top")[0] for end in self.read_ends}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SingleEnded(MemoryKind):
    """One push, one pop and one read per step; each new row goes on top (eq. 1). ``pop_from_top`` and
    ``read_from_top`` pick the end the pop and the read start from: the Stack both, the Queue neither."""

    ends = 1
    push_ends = ("top",)
    has_native_step = True  # every pop end and read end: native.c takes both as flags
    pop_from_top: bool
    read_from_top: bool

    @property
    def pop_ends(self) -> tuple[str, ...]:
        return ("top" if self.pop_from_top else "bottom",)

    @property
    def read_ends(self) -> tuple[str, ...]:
        return ("top" if self.read_from_top else "bottom",)

    def new_memory(self, batch_size: int, width: int, capacity: int | None = None) -> Memory:
        return SingleEndedMemory(batch_size, width, kind=self, capacity=capacity, check_values=False)

    def reference_step(self, memory: Memory, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        return memory.step(v, d[:, 0], u[:, 0])

    def fused_step(self, s, d, u, v, values, t, L, out):
        values[:, t] = v  # eq. 1
        r, s, trace = single_ended_step(s, d[:, 0], u[:, 0], values[:, : t + 1], self.pop_from_top,
                                        self.read_from_top)
        out.copy_(r)
        return s, trace

    def fused_step_backward(self, g_r, g_s, trace, values, g_values, t, L):
        g_rows = g_values[:, : t + 1]
        g_s, g_d, g_u, _ = single_ended_step_backward(g_r, g_s, trace, values[:, : t + 1], g_rows,
                                                      self.pop_from_top, in_place=True,
                                                      read_from_top=self.read_from_top)
        return g_s, torch.stack([g_d, g_u], dim=1), g_rows[:, t]


class Stack(SingleEnded):
    """§3.1, eq. 1–3: pops and reads from the top."""

    name, pop_from_top, read_from_top = "stack", True, True


class Queue(SingleEnded):
    """§3.2, eq. 1, 4, 5: pushes at the top (the back), pops and reads from the bottom (the front)."""

    name, pop_from_top, read_from_top = "queue", False, False


class DeQue(MemoryKind):
    """§3.3, eq. 6–11: pushes, pops and reads at both ends; signals and reads ordered (top, bottom). In the fused
    buffer of 2L rows, step t's live rows are ``L-1-t .. L+t``: the bottom rows grow downwards from the middle."""

    name = "deque"
    ends = 2
    push_ends = pop_ends = read_ends = ("top", "bottom")
    rows_grow_at_both_ends = True
    has_native_step = True

    def new_memory(self, batch_size: int, width: int, capacity: int | None = None) -> Memory:
        return NeuralDeQue(batch_size, width, capacity=capacity, check_values=False)

    def reference_step(self, memory: Memory, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        m = v.shape[1] // 2
        r_top, r_bot = memory.step(v[:, :m], v[:, m:], d[:, 0], d[:, 1], u[:, 0], u[:, 1])
        return torch.cat([r_top, r_bot], dim=-1)

    def fused_step(self, s, d, u, v, values, t, L, out):
        m = values.shape[-1]
        lo, hi = L - 1 - t, L + t + 1
        values[:, lo] = v[:, m:]  # eq. 6
        values[:, hi - 1] = v[:, :m]
        r_top, r_bot, s, trace = deque_step(s, d[:, 0], d[:, 1], u[:, 0], u[:, 1], values[:, lo:hi])
        torch.cat([r_top, r_bot], dim=-1, out=out)
        return s, trace

    def fused_step_backward(self, g_r, g_s, trace, values, g_values, t, L):
        m = values.shape[-1]
        lo, hi = L - 1 - t, L + t + 1
        g_rows = g_values[:, lo:hi]
        g_s, g_d_top, g_d_bot, g_u_top, g_u_bot, _ = deque_step_backward(
            g_r[:, :m], g_r[:, m:], g_s, trace, values[:, lo:hi], g_rows, in_place=True)
        g_v = torch.cat([g_rows[:, -1], g_rows[:, 0]], dim=-1)  # (top, bottom)
        return g_s, torch.stack([g_d_top, g_d_bot, g_u_top, g_u_bot], dim=1), g_v
