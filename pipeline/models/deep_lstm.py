"""Deep LSTM baselines (paper §4.4: "the Deep LSTMs described in [1]", with 1, 2, 4 and 8 layers).

The joint sequence is read left to right by a stack of LSTM layers; the top layer's state is the network output.
Every layer above the first also receives the input embedding beside the layer below (a skip connection from the
input, as in Graves' deep LSTMs). Plain stacking matches Table 2's parameter counts to within 10%; with the input
skip the 2-, 4- and 8-layer counts match to within 2% (see ``docs/models.md``), so this is the reading we take.
The initial states h_0, c_0 of every layer are learned (§3.4).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pipeline.models.base import TransductionModel


class DeepLSTM(TransductionModel):
    def __init__(self, input_size: int, output_size: int, hidden: int, embedding: int, layers: int,
                 readout_width: int | None = None) -> None:
        super().__init__(input_size, output_size, hidden, embedding, readout_width)
        self.layers = nn.ModuleList(
            nn.LSTM(embedding if i == 0 else embedding + hidden, hidden, batch_first=True) for i in range(layers)
        )
        self.h0 = nn.Parameter(0.1 * torch.randn(layers, hidden))
        self.c0 = nn.Parameter(0.1 * torch.randn(layers, hidden))

    def initial_state(self, batch_size: int, capacity: int | None = None,
                      lengths: Tensor | None = None) -> list[tuple[Tensor, Tensor]]:
        return [
            (self.h0[i].expand(1, batch_size, -1).contiguous(), self.c0[i].expand(1, batch_size, -1).contiguous())
            for i in range(len(self.layers))
        ]

    def _run(self, x: Tensor, state: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        below, next_state = None, []
        for lstm, hc in zip(self.layers, state):
            below, hc = lstm(x if below is None else torch.cat([x, below], dim=-1), hc)
            next_state.append(hc)
        return below, next_state

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        # Right padding comes after every real position of its row, so a left-to-right LSTM never lets it
        # influence a real position; the loss masks the padded positions themselves.
        top, _ = self._run(self.embed(inputs), self.initial_state(inputs.shape[0]))
        return self.readout(top)

    def step(self, tokens: Tensor, state: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, list]:
        top, state = self._run(self.embed(tokens).unsqueeze(1), state)
        return self.readout(top.squeeze(1)), state
