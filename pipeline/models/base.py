"""The interface every model implements, and the pieces all of them share (paper §4, §3.4).

A model reads the joint sequence ``<s> source <|> target`` one input id at a time (ids from
:class:`pipeline.data.encoding.JointVocabulary`) and emits, at every position, logits over the output vocabulary
(target symbols and ``</s>``). Two ways to run it:

* ``forward(inputs, lengths)``: the whole sequence at once, teacher-forced: logits (B, L, V_out).
* ``initial_state(B)`` then ``step(tokens, state)``: one position at a time, for greedy decoding, where the
  model's own previous prediction is fed back.

Both compute the same function: ``tests/test_models.py`` checks that stepping through a sequence reproduces
``forward``'s logits.

Embeddings (§4): input ids are embedded in 64 dimensions; the output side has its own 64-dimensional embedding
matrix, separate from the input one. A model's top hidden state h (or controller output o') becomes the network
output ``o = tanh(W_o h + b_o)`` of the embedding size (§3.4), and the logits are ``E_out o + b``. Table 2's
parameter counts fit this output layer (see ``docs/models.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor, nn


class Readout(nn.Module):
    """o = tanh(W_o h + b_o) (§3.4), then logits = E_out o + b over the output vocabulary."""

    def __init__(self, hidden: int, embedding: int, output_size: int) -> None:
        super().__init__()
        self.project = nn.Linear(hidden, embedding)
        self.output_embedding = nn.Linear(embedding, output_size)

    def forward(self, h: Tensor) -> Tensor:
        return self.output_embedding(torch.tanh(self.project(h)))


class TransductionModel(nn.Module, ABC):
    """Base class: an input embedding, a recurrent core (subclass) and a :class:`Readout`."""

    def __init__(self, input_size: int, output_size: int, hidden: int, embedding: int,
                 readout_width: int | None = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.hidden = hidden
        self.embed = nn.Embedding(input_size, embedding)
        self.readout = Readout(hidden, readout_width or embedding, output_size)

    @abstractmethod
    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (B, L, V_out) for input ids (B, L); ``lengths`` (B,) marks right padding."""

    def before_batch(self, step: int) -> None:
        """Called by training before each batch with the number of batches done; a model whose training changes
        with the batch (the DeQue's bottom read heard from a batch on) acts on it. Nothing by default."""

    @abstractmethod
    def initial_state(self, batch_size: int, capacity: int | None = None, lengths: Tensor | None = None) -> Any:
        """The state before the first input; ``capacity`` is a hint of how many steps will follow; ``lengths`` (B,),
        where given, how many each sequence will take (``capacity`` their most), for a model whose state depends on
        its sequence's own length (a randomised Transformer draws its positions over it)."""

    @abstractmethod
    def step(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """Read one input id per sequence (B,), return logits (B, V_out) and the next state."""


def live_mask(lengths: Tensor | None, steps: int, like: Tensor) -> Tensor | None:
    """(B, L) float mask, 1 at real positions and 0 at right padding; None when there is no padding info."""
    if lengths is None:
        return None
    positions = torch.arange(steps, device=lengths.device)
    return (positions.unsqueeze(0) < lengths.unsqueeze(1)).to(like.dtype)
