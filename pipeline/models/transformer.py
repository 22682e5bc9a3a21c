"""A decoder-only Transformer over the joint sequence: a modern baseline beside the paper, not part of its Table 3.

It reads ``<s> source <|> target`` as every other model does (:class:`TransductionModel`): the 64-dimensional input
embedding i_t, projected to the model width d, plus a positional encoding PE(p_t), then pre-LayerNorm blocks

    x_t = W_in i_t + b_in + PE(p_t)
    x = x + Attention(LN(x))                      causal: position t attends to positions 1 .. t only
    x = x + W_2 relu(W_1 LN(x) + b_1) + b_2
    h = LN(x)                                     the top state; o = tanh(W_o h + b_o), logits = E_out o + b (Readout)

The positions p_t (``model.positional_encoding``):

* ``sinusoidal``: PE(p)_{2i} = sin(p / 10000^(2i/d)), PE(p)_{2i+1} = cos(p / 10000^(2i/d)) at p_t = 0, 1, 2, ...
  (Vaswani et al. 2017);
* ``learned``: an absolute table of :data:`MAX_POSITIONS` rows, as many as the longest joint sequence evaluated;
* ``none``: nothing added: causal masking alone tells positions apart (a position can count what it sees);
* ``randomised`` (Ruoss et al. 2023): the sinusoids at p_1 < p_2 < ... < p_L, an ordered random subset of
  [0, :data:`RANDOM_RANGE`), drawn afresh for every sequence, so that training meets positions as far out as any
  test sequence reaches. Their evaluation draws too (``range_evaluation.py`` hands the model a fresh random key for
  every batch, and the encoding samples with it whatever the mode), and so does ours.

The random draws come from a generator of the model's own, seeded from ``position_seed``, a number drawn from torch's
generator when the model is built (after the run's seed is set) and kept with the weights. Before training batch
``n`` the generator is seeded from (``position_seed``, n) (:meth:`before_batch`), so a resumed run draws what an
uninterrupted one would have; at every switch to evaluation mode it is seeded alike, so every evaluation draws the
same positions, whatever was trained before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.models.base import TransductionModel

MAX_SOURCE = 512  # the longest source any evaluation reads (pipeline.generalisation's far bands; tested)
# <s> source <|> target </s> at the longest source, a target at most twice its source (duplicate_string's)
MAX_POSITIONS = 3 * MAX_SOURCE + 3
RANDOM_RANGE = 4096  # Ruoss et al.'s L, the positions a randomised encoding draws from: over twice MAX_POSITIONS
ENCODINGS = ("sinusoidal", "learned", "none", "randomised")  # pipeline.config.POSITIONAL_ENCODINGS (tested)
EVALUATION = -1  # the stream of draws every evaluation starts from (training batch n draws from stream n)


def sinusoids(positions: Tensor, width: int, dtype: torch.dtype) -> Tensor:
    """PE(p)_{2i} = sin(p / 10000^(2i/d)), PE(p)_{2i+1} = cos(p / 10000^(2i/d)): positions (...) -> (..., d)."""
    rates = 10000.0 ** (-torch.arange(0, width, 2, dtype=dtype, device=positions.device) / width)
    angles = positions.to(dtype).unsqueeze(-1) * rates
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


class Block(nn.Module):
    """One pre-LayerNorm block: causal multi-head self-attention, then a feed-forward layer, each added back."""

    def __init__(self, width: int, heads: int, feedforward: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.feedforward_norm = nn.LayerNorm(width)
        self.feedforward = nn.Sequential(nn.Linear(width, feedforward), nn.ReLU(), nn.Linear(feedforward, width))

    def forward(self, x: Tensor, cache: KeyValueCache | None = None) -> Tensor:
        """x (B, T, d): a whole sequence, or (``cache``: the keys and values of every position before it) the one
        next position, whose keys and values are added to the cache. Returns the new x."""
        batch, steps, width = x.shape
        q, k, v = (z.view(batch, steps, self.heads, -1).transpose(1, 2)
                   for z in self.qkv(self.attention_norm(x)).chunk(3, dim=-1))
        if cache is not None:
            k, v = cache.append(k, v)
        # A whole sequence: causal, position t sees 1 .. t. The next position after the cached ones sees them all.
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, steps, width))
        return x + self.feedforward(self.feedforward_norm(x))


class KeyValueCache:
    """One block's keys and values of the positions read so far, (B, heads, positions, d / heads) each, in buffers
    made for ``capacity`` positions and written in place: growing a tensor by concatenation at every step would copy
    the whole cache each time (a sequence of T steps: T^2 / 2 positions copied, and a fresh allocation per step),
    where a step needs only to write its own position. Past ``capacity`` the buffers double. Like a memory model's
    state, it is stepped forward only: stepping again from an earlier state overwrites what a later one wrote."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.length = capacity, 0
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the keys and values of the next positions (B, heads, n, d / heads); return those of every position so
        far (views of the buffers)."""
        end = self.length + k.shape[2]
        if self.keys is None or end > self.keys.shape[2]:
            size = max(end, self.capacity if self.keys is None else 2 * self.keys.shape[2])
            keys, values = k.new_empty(*k.shape[:2], size, k.shape[3]), v.new_empty(*v.shape[:2], size, v.shape[3])
            if self.keys is not None:
                keys[:, :, : self.length], values[:, :, : self.length] = self.keys[:, :, : self.length], \
                    self.values[:, :, : self.length]
            self.keys, self.values = keys, values
        self.keys[:, :, self.length : end], self.values[:, :, self.length : end] = k, v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]


@dataclass
class TransformerState:
    caches: list[KeyValueCache]  # per block: the keys and values of the positions read so far
    read: int  # positions read so far
    positions: Tensor | None  # (B, capacity): a randomised encoding's positions, drawn at the start; else None


class Transformer(TransductionModel):
    def __init__(self, input_size: int, output_size: int, embedding: int, width: int, layers: int, heads: int,
                 feedforward: int, positional_encoding: str = "sinusoidal", readout_width: int | None = None) -> None:
        super().__init__(input_size, output_size, width, embedding, readout_width)
        if positional_encoding not in ENCODINGS:
            raise ValueError(f"positional_encoding must be one of {', '.join(ENCODINGS)}; got {positional_encoding!r}")
        if width % heads:
            raise ValueError(f"heads ({heads}) must divide the width ({width})")
        self.width, self.positional_encoding = width, positional_encoding
        self.project = nn.Linear(embedding, width)
        self.position_table = nn.Embedding(MAX_POSITIONS, width) if positional_encoding == "learned" else None
        self.blocks = nn.ModuleList(Block(width, heads, feedforward) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.randomised = positional_encoding == "randomised"
        if self.randomised:
            self.register_buffer("position_seed", torch.randint(2**62, ()))  # a buffer: checkpoints keep it
            self.position_generator = torch.Generator()
            self._reseed(0)

    # -- positions ---------------------------------------------------------------------------------------------------

    def _reseed(self, stream: int) -> None:
        """Draw the next positions from stream ``stream`` (training batch n: n; evaluation: :data:`EVALUATION`)."""
        self.position_generator.manual_seed((int(self.position_seed) + (stream + 2) * 0x9E3779B97F4A7C15) % 2**63)

    def before_batch(self, step: int) -> None:
        if self.randomised:
            self._reseed(step)

    def train(self, mode: bool = True) -> Transformer:
        if self.randomised and not mode:
            self._reseed(EVALUATION)
        return super().train(mode)

    def random_positions(self, batch: int, length: int, lengths: Tensor | None = None) -> Tensor:
        """(B, L): per sequence, an ordered random subset of [0, RANDOM_RANGE) of its own length (``lengths``; else
        L), its right padding after it (at RANDOM_RANGE and beyond)."""
        if length > RANDOM_RANGE:
            raise ValueError(f"a randomised positional encoding draws from {RANDOM_RANGE} positions; this sequence "
                             f"has {length}")
        # the first n of a random permutation of the range: a uniformly random n-subset, for every n at once
        draws = torch.rand(batch, RANDOM_RANGE, generator=self.position_generator).argsort(dim=1)[:, :length]
        if lengths is not None:
            columns = torch.arange(length)
            draws = torch.where(columns < lengths.cpu().unsqueeze(1), draws, RANDOM_RANGE + columns)
        return draws.sort(dim=1).values

    def encode(self, embedded: Tensor, positions: Tensor) -> Tensor:
        """x = W_in i + b_in + PE(p): embedded inputs (B, T, E) at positions (B, T) -> (B, T, d)."""
        x = self.project(embedded)
        if self.positional_encoding in ("sinusoidal", "randomised"):
            x = x + sinusoids(positions, self.width, x.dtype)
        elif self.positional_encoding == "learned":
            if int(positions.max()) >= MAX_POSITIONS:
                raise ValueError(f"a learned positional encoding has {MAX_POSITIONS} positions; this sequence "
                                 f"reaches position {int(positions.max())}")
            x = x + self.position_table(positions)
        return x

    # -- the whole sequence ------------------------------------------------------------------------------------------

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        # Right padding comes after every real position of its row, and a position attends only to itself and the
        # positions before it: no real position sees padding, so causality is the only mask needed (the loss masks
        # the padded positions themselves).
        batch, length = inputs.shape
        positions = (self.random_positions(batch, length, lengths).to(inputs.device) if self.randomised
                     else torch.arange(length, device=inputs.device).expand(batch, -1))
        x = self.encode(self.embed(inputs), positions)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.norm(x))

    # -- one position at a time: the keys and values of the positions read so far are kept ---------------------------

    def initial_state(self, batch_size: int, capacity: int | None = None,
                      lengths: Tensor | None = None) -> TransformerState:
        """A randomised encoding draws the positions of ``capacity`` steps (default :data:`MAX_POSITIONS`) here, one
        ordered subset per sequence (of its own ``lengths``, where given), and each step reads at the next of them."""
        positions = None
        if self.randomised:
            positions = self.random_positions(batch_size, capacity or MAX_POSITIONS, lengths)
            positions = positions.to(self.project.weight.device)
        return TransformerState([KeyValueCache(capacity or MAX_POSITIONS) for _ in self.blocks], 0, positions)

    def step(self, tokens: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState]:
        t = state.read
        if state.positions is None:
            position = torch.full((tokens.shape[0], 1), t, device=tokens.device)
        elif t < state.positions.shape[1]:
            position = state.positions[:, t : t + 1]
        else:
            raise ValueError(f"positions were drawn for {state.positions.shape[1]} steps (initial_state's capacity); "
                             f"this is step {t + 1}")
        x = self.encode(self.embed(tokens).unsqueeze(1), position)
        for block, cache in zip(self.blocks, state.caches):
            x = block(x, cache)
        return self.readout(self.norm(x[:, 0])), TransformerState(state.caches, t + 1, state.positions)
