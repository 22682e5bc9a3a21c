"""The Joulin-Mikolov stack (Joulin & Mikolov 2015, "Inferring algorithmic patterns with stack-augmented recurrent
nets") with an LSTM controller: a modern baseline beside the paper, not part of its Table 3.

The controller is the Stack-LSTM's (an ``nn.LSTMCell`` with learned h_0, c_0, reading the input embedding beside what
the memory gave at the step before), so that the two stacks are compared under one controller. At step t:

    (h_t, c_t) = LSTM([i_t; s_{t-1}[0]; ...; s_{t-1}[k-1]], (h_{t-1}, c_{t-1}))    the top k rows (model.stack_read)
    a_t = softmax(A h_t + b_a)          the probabilities of (push, pop, no-op)
    v_t = tanh(D h_t + b_v)             what a push puts on top, a row of model.memory_width
    s_t = jm_stack_update(s_{t-1}, a_t, v_t)        (the superposition of the three actions: its docstring)
    o_t = tanh(W_o h_t + b_o)           the network output (models.base)

The stack starts empty (all zeros) and has a fixed depth (``model.stack_depth``): a push drops its bottom row.
``model.push_bias``, where set, is the push action's initial bias (b_a's push entry; null, the default: nn.Linear's, so
the three actions start near a third each), the Stack-LSTM's push bias in the JM stack's terms.

The pushed value is tanh, where Joulin and Mikolov's is a sigmoid: the neural Stack's values are tanh (§3.4), so the
two stacks hold values of one range, and an empty row (zero) is the middle of that range, as the neural Stack's read
of nothing is, rather than one end of it. Delétang et al. (2023) push a linear value and read the top row only;
Joulin and Mikolov's controller reads the top k. One row is the default here, as the Stack-LSTM's read is one row.

Its forward loops over the positions in Python: a baseline, not a fast path. Only the rows that can matter are
computed, which gives the values (and gradients) of the whole depth (tested) at the cost of those rows:
* the rows a step can have reached: a push moves the stack down by one row, so after t steps every row from the
  t-th down is still zero. The stack is kept k rows deep at the start and one row deeper each step, up to its depth;
* the rows a later read can still reach: a pop moves the stack up by one row, and the last read of a sequence of T
  positions is of s_{T-2} (by h_{T-1}), so a row deeper than k + (T - 2 - t) of s_t can never come within the top k
  rows before the sequence ends. Those rows are dropped (a row dropped can feed only rows dropped later) wherever T,
  or a bound on it, is known: `forward` knows it, and `step` takes it from `initial_state`'s capacity (greedy decoding
  passes the most steps it can take; a step past the capacity is an error, as the cut would be wrong there). A
  sequence of T positions costs about T^2 / 4 row updates, not T^2 / 2.
Padding comes after every real position of its row, and the model reads left to right, so padding never reaches a
real position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.models.base import TransductionModel

ACTIONS = ("push", "pop", "no-op")  # the order of a_t's columns


def jm_stack_update(stack: Tensor, actions: Tensor, value: Tensor) -> Tensor:
    """One step of the stack (Joulin & Mikolov 2015): ``stack`` s (B, D, m), row 0 the top; ``actions`` a (B, 3),
    the probabilities of (push, pop, no-op); ``value`` v (B, m). Returns s' (B, D, m):

        s'[0] = a_push v       + a_pop s[1]   + a_no-op s[0]
        s'[i] = a_push s[i-1]  + a_pop s[i+1] + a_no-op s[i]      for 0 < i < D, with s[D] = 0 (zeros below the bottom)

    With a one-hot a it is a classical stack of depth D: push puts v on top and drops the bottom row, pop removes the
    top (an empty row comes up from below), no-op leaves it."""
    push, pop, noop = actions.unsqueeze(-1).unsqueeze(-1).unbind(1)  # each (B, 1, 1)
    pushed = torch.cat([value.unsqueeze(1), stack[:, :-1]], dim=1)  # row i after a push: v on top, then s[i-1]
    popped = F.pad(stack[:, 1:], (0, 0, 0, 1))  # row i after a pop: s[i+1], zeros below the bottom
    return push * pushed + pop * popped + noop * stack


def step_stack(stack: Tensor, actions: Tensor, value: Tensor, depth: int, keep: int | None) -> Tensor:
    """One step of a stack kept to the rows that matter (the module's docstring): one row deeper while it is short of
    ``depth`` (a push can reach one more), :func:`jm_stack_update`, then its top ``keep`` rows only (those a later read
    can reach; None: all)."""
    if stack.shape[1] < depth:
        stack = F.pad(stack, (0, 0, 0, 1))
    stack = jm_stack_update(stack, actions, value)
    return stack if keep is None else stack[:, :keep]


@dataclass
class JMStackState:
    h: Tensor  # (B, H)
    c: Tensor  # (B, H)
    stack: Tensor  # (B, rows, m): its top rows, those reached so far that a later read can reach (module docstring)
    actions: Tensor | None = None  # (B, 3): a_t at the last step (None before any)
    steps: int = 0  # the steps taken so far
    horizon: int | None = None  # the most steps that will be taken in all (initial_state's capacity), if known


class JMStackLSTM(TransductionModel):
    def __init__(self, input_size: int, output_size: int, hidden: int, embedding: int, width: int, depth: int,
                 read: int = 1, readout_width: int | None = None, push_bias: float | None = None) -> None:
        super().__init__(input_size, output_size, hidden, embedding, readout_width)
        if not 1 <= read <= depth:
            raise ValueError(f"the stack's read ({read} rows) must lie in [1, its depth ({depth})]")
        self.width, self.depth, self.read = width, depth, read
        self.controller = nn.LSTMCell(embedding + read * width, hidden)
        self.actions = nn.Linear(hidden, len(ACTIONS))  # A, b_a
        if push_bias is not None:  # the push action's start (model.push_bias): P(push) starts near e^b / (e^b + 2)
            with torch.no_grad():  # set after nn.Linear's draw, so that every other weight is the seed's as without
                self.actions.bias[ACTIONS.index("push")] = push_bias
        self.value = nn.Linear(hidden, width)  # D, b_v
        self.h0 = nn.Parameter(0.1 * torch.randn(hidden))
        self.c0 = nn.Parameter(0.1 * torch.randn(hidden))

    def initial_state(self, batch_size: int, capacity: int | None = None,
                      lengths: Tensor | None = None) -> JMStackState:
        """``capacity``, where given, bounds the steps that will follow: rows no read within it can reach are dropped
        (the module's docstring)."""
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be a whole number of steps, at least 1, got {capacity}")
        stack = self.h0.new_zeros(batch_size, self.read, self.width)  # empty: the rows the first step reads
        return JMStackState(self.h0.expand(batch_size, -1), self.c0.expand(batch_size, -1), stack, horizon=capacity)

    def advance(self, x: Tensor, state: JMStackState) -> tuple[Tensor, JMStackState]:
        """One step on the input embedding x (B, E): returns h_t and the next state."""
        t = state.steps
        if state.horizon is not None and t >= state.horizon:
            raise ValueError(f"step {t + 1} of a JM stack state made for {state.horizon} steps (initial_state's "
                             "capacity): its stack has dropped the rows that step could read")
        top = state.stack[:, : self.read].flatten(1)
        h, c = self.controller(torch.cat([x, top], dim=-1), (state.h, state.c))
        actions = torch.softmax(self.actions(h), dim=-1)
        # the rows of s_t a later read can reach: the last read is of s_{horizon-2}
        keep = None if state.horizon is None else max(self.read, self.read + state.horizon - 2 - t)
        stack = step_stack(state.stack, actions, torch.tanh(self.value(h)), self.depth, keep)
        return h, JMStackState(h, c, stack, actions, t + 1, state.horizon)

    def step(self, tokens: Tensor, state: JMStackState) -> tuple[Tensor, JMStackState]:
        h, state = self.advance(self.embed(tokens), state)
        return self.readout(h), state

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        x = self.embed(inputs)
        state = self.initial_state(x.shape[0], capacity=x.shape[1])
        outputs = []
        for t in range(x.shape[1]):
            h, state = self.advance(x[:, t], state)
            outputs.append(h)
        return self.readout(torch.stack(outputs, dim=1))
