"""Stack-, Queue- and DeQue-LSTMs: one LSTM controller wrapped around a neural memory (paper §3.4, appendix B).

At step t the controller reads the input embedding concatenated with the previous read(s) and its previous state:

    (h_t, c_t) = LSTM([i_t; r_{t-1}], (h_{t-1}, c_{t-1}))          o'_t = h_t
    d_t = sigmoid(W_d o'_t + b_d)     u_t = sigmoid(W_u o'_t + b_u)     v_t = tanh(W_v o'_t + b_v)
    o_t = tanh(W_o o'_t + b_o)                                       (the network output, see models.base)
    r_t = memory.step(v_t, d_t, u_t)                                 (fed back at step t + 1)

The DeQue-LSTM has a second set of d, u, v for the bottom end, and feeds both reads back. h_0 and c_0 are learned;
r_0 and the memory start at zero. Every pop bias b_u starts at -1 (appendix B): a controller that initially pops
more than it pushes uses the memory as one more recurrent layer and never learns to keep values on it.

Two implementations of the same function, chosen by ``implementation``:

* ``"reference"``: the equations above, one step at a time, with the memories of :mod:`pipeline.memory` and
  autograd. This is the readable definition.
* ``"fused"``: :mod:`pipeline.models.fused` runs the whole sequence in one autograd node with the backward written
  out and the weight gradients of all steps computed as one matrix product. Tests check that it equals the reference,
  outputs and gradients of every parameter.

Padding: at right-padded positions d and u are forced to 0, so padding never pushes, pops or otherwise changes the
memory (and, coming after every real position, cannot affect one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pipeline.memory.base import Memory
from pipeline.memory.kinds import MemoryKind
from pipeline.models.base import TransductionModel, live_mask


@dataclass
class ControllerState:
    h: Tensor  # (B, H)
    c: Tensor  # (B, H)
    reads: Tensor  # (B, reads * m): r_{t-1}, the DeQue's two reads side by side (top, then bottom)
    memory: Memory
    push: Tensor | None = None  # (B, ends): d_t, as the memory received it at the last step (None before any)
    pop: Tensor | None = None  # (B, ends): u_t, likewise


class MemoryLSTM(TransductionModel):
    def __init__(
        self,
        input_size: int,
        output_size: int,
        hidden: int,
        embedding: int,
        memory: MemoryKind,
        memory_width: int,
        pop_bias: float = -1.0,
        implementation: str = "fused",
        readout_width: int | None = None,
        push_bias: float | None = None,
        bottom_push_bias: float | None = None,
        bottom_pop_bias: float | None = None,
        bottom_read_gain: float | None = None,
        value_gain: float | None = None,
        bottom_read_heard_from: int | None = None,
        read_zeroed: bool = False,
    ) -> None:
        super().__init__(input_size, output_size, hidden, embedding, readout_width)
        if not isinstance(memory, MemoryKind):
            raise ValueError(f"memory must be a MemoryKind (pipeline.memory.kinds); got {memory!r}")
        if implementation not in ("fused", "reference"):
            raise ValueError(f"implementation must be 'fused' or 'reference'; got {implementation!r}")
        self.memory = memory
        self.memory_width = memory_width
        self.ends = memory.ends
        self.implementation = implementation
        self.controller = nn.LSTMCell(embedding + memory.reads * memory_width, hidden)
        # One projection for all memory signals: [d (ends), u (ends), v (ends * m)], ends ordered (top, bottom).
        self.signals = nn.Linear(hidden, self.ends * (2 + memory_width))
        with torch.no_grad():
            # bias layout: [d (ends), u (ends), v ...]; the memory says where each end's signals sit. None leaves
            # nn.Linear's initialisation; a memory without a bottom end ignores the bottom biases.
            self.signals.bias[self.ends : 2 * self.ends].fill_(pop_bias)
            if push_bias is not None:
                self.signals.bias[: self.ends].fill_(push_bias)
            for signal, value in (("push", bottom_push_bias), ("pop", bottom_pop_bias)):
                index = memory.bias_index(signal, "bottom")
                if value is not None and index is not None:
                    self.signals.bias[index] = value
            # The controller's input is [i_t; r_top; r_bottom]: scaling the bottom read's input weights sets how
            # loudly the controller first hears the DeQue's bottom end (0: not at all, until training makes it
            # listen; the gradient of those weights is the read itself, so it can). None leaves nn.LSTMCell's
            # initialisation; a memory with one read ignores it.
            self._bottom_read = slice(embedding + memory_width, embedding + 2 * memory_width)  # its input columns
            if bottom_read_gain is not None and memory.reads > 1:
                self.controller.weight_ih[:, self._bottom_read].mul_(bottom_read_gain)
            # The value head (the rows after every d and u) starts scaled by value_gain: how loud the memory's
            # contents are before training. None leaves nn.Linear's initialisation (v at ~0.06 rms).
            if value_gain is not None:
                self.signals.weight[2 * self.ends :].mul_(value_gain)
                self.signals.bias[2 * self.ends :].mul_(value_gain)
            # The bottom read unheard for the first bottom_read_heard_from batches: a mask over the controller's
            # input columns (0 there until :meth:`before_batch` reaches that batch) keeps the read out of the
            # controller and every gradient from its input weights, so they wait unchanged and the controller's
            # gradient never flows into the bottom read either. They wait at bottom_read_gain times their
            # initialisation, null meaning 0 here (they then grow from 0 after the batch, as the first runs with this
            # key did); at 1 the read comes in at nn.LSTMCell's start. A memory with one read ignores it.
            self.bottom_read_heard_from = bottom_read_heard_from if memory.reads > 1 else None
            # The ablation (probes.read_zeroed): every read column of the controller's input masked for good, as if
            # each read were zeros; the memory is still written, and never heard.
            self.read_zeroed = read_zeroed
            if self.bottom_read_heard_from is not None or read_zeroed:
                if self.bottom_read_heard_from is not None and bottom_read_gain is None:
                    self.controller.weight_ih[:, self._bottom_read].zero_()
                self.register_buffer("input_mask", torch.ones(self.controller.weight_ih.shape[1]))
                self.before_batch(0)
        self.h0 = nn.Parameter(0.1 * torch.randn(hidden))
        self.c0 = nn.Parameter(0.1 * torch.randn(hidden))

    def before_batch(self, step: int) -> None:
        """Called before training batch ``step + 1`` (``step`` batches done): hear the bottom read from its batch."""
        if self.bottom_read_heard_from is not None:
            self.input_mask[self._bottom_read] = float(step >= self.bottom_read_heard_from)
        if self.read_zeroed:
            self.input_mask[self.input_mask.shape[0] - self.memory.reads * self.memory_width:] = 0.0

    def controller_input_weight(self) -> Tensor:
        """The controller's input weights [W_ie | W_ir] as the step uses them: the bottom read's columns masked
        while it is unheard (``bottom_read_heard_from``), every read's for good under ``read_zeroed``, so that no
        gradient reaches them."""
        w = self.controller.weight_ih
        return w if self.bottom_read_heard_from is None and not self.read_zeroed else w * self.input_mask

    # -- one step at a time: the reference definition ------------------------------------------------------------

    def initial_state(self, batch_size: int, capacity: int | None = None,
                      lengths: Tensor | None = None) -> ControllerState:
        memory = self.memory.new_memory(batch_size, self.memory_width, capacity)
        h = self.h0.expand(batch_size, -1)
        reads = h.new_zeros(batch_size, self.memory.reads * self.memory_width)
        return ControllerState(h, self.c0.expand(batch_size, -1), reads, memory)

    def advance(self, x: Tensor, state: ControllerState, live: Tensor | None = None) -> tuple[Tensor, ControllerState]:
        """One controller step on the input embedding x (B, E): returns o'_t = h_t and the next state."""
        cell = self.controller
        h, c = torch.lstm_cell(torch.cat([x, state.reads], dim=-1), (state.h, state.c), self.controller_input_weight(),
                               cell.weight_hh, cell.bias_ih, cell.bias_hh)
        d, u, v = self.memory_signals(h)
        if live is not None:
            d, u = d * live.unsqueeze(-1), u * live.unsqueeze(-1)
        reads = self.memory.reference_step(state.memory, v, d, u)
        return h, ControllerState(h, c, reads, state.memory, d, u)

    def memory_signals(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """d (B, ends), u (B, ends), v (B, ends * m) from the controller output."""
        z = self.signals(h)
        e = self.ends
        return torch.sigmoid(z[:, :e]), torch.sigmoid(z[:, e : 2 * e]), torch.tanh(z[:, 2 * e :])

    def step(self, tokens: Tensor, state: ControllerState) -> tuple[Tensor, ControllerState]:
        h, state = self.advance(self.embed(tokens), state)
        return self.readout(h), state

    # -- the whole sequence --------------------------------------------------------------------------------------

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        x = self.embed(inputs)
        live = live_mask(lengths, inputs.shape[1], x)
        if self.implementation == "fused":
            from pipeline.models.fused import fused_controller_outputs

            outputs = fused_controller_outputs(self, x, live)
        else:
            outputs = self.reference_controller_outputs(x, live)
        return self.readout(outputs)

    @torch.no_grad()
    def memory_signals_over(self, inputs: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Push and pop signals d, u (B, L, ends) at every position, as the memory receives them."""
        x = self.embed(inputs)
        live = live_mask(lengths, inputs.shape[1], x)
        state = self.initial_state(x.shape[0], capacity=x.shape[1])
        pushes, pops = [], []
        for t in range(x.shape[1]):
            _, state = self.advance(x[:, t], state, None if live is None else live[:, t])
            pushes.append(state.push)
            pops.append(state.pop)
        return torch.stack(pushes, dim=1), torch.stack(pops, dim=1)

    def reference_controller_outputs(self, x: Tensor, live: Tensor | None) -> Tensor:
        """o'_1 .. o'_L (B, L, H), one :meth:`advance` per position."""
        state = self.initial_state(x.shape[0], capacity=x.shape[1])
        outputs = []
        for t in range(x.shape[1]):
            h, state = self.advance(x[:, t], state, None if live is None else live[:, t])
            outputs.append(h)
        return torch.stack(outputs, dim=1)
