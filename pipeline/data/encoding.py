"""The joint sequence ``<s> source <|> target </s>`` every model reads (paper §4).

Inputs and outputs have separate vocabularies and embedding matrices (§4), so they are numbered separately:

    input ids   0 <pad>, 1 <s>, 2 <|>, then the source symbols, then the target symbols
    output ids  the target symbols, then </s>

With ``shared=True`` (``model.target_inputs: shared``) and a task whose source and target alphabets are the same,
target symbol j is read back through source symbol j's input id instead, and there are no target input ids: the
model sees one symbol the same way on both sides of the separator. Tasks whose alphabets differ ignore it.

The model reads ``<s> a b <|> A B`` and is scored where it must predict ``A B </s>``: at the separator and at
every target position. ``</s>`` is only ever predicted, never read; source positions are never scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pipeline.tasks import Pair, Task

SPECIAL_INPUTS = ("<pad>", "<s>", "<|>")
EOS = "</s>"
IGNORE_INDEX = -100  # the default ignore_index of torch.nn.functional.cross_entropy


@dataclass(frozen=True)
class JointVocabulary:
    """Input and output numbering for one task's source and target vocabularies."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    shared: bool = False  # target symbols read through the source ids (only ever set when the alphabets agree)
    reversed_source: bool = False  # the source read last symbol first (model.source_order: reversed)

    PAD: ClassVar[int] = 0
    BOS: ClassVar[int] = 1
    SEP: ClassVar[int] = 2

    def __post_init__(self) -> None:
        if self.shared and self.source != self.target:
            raise ValueError("shared input ids need identical source and target alphabets")

    @classmethod
    def for_task(cls, task: Task, target_inputs: str = "separate", source_order: str = "forward") -> JointVocabulary:
        """The numbering for ``task``; ``target_inputs`` is ``model.target_inputs`` ("separate" or "shared"),
        ``source_order`` ``model.source_order`` ("forward" or "reversed")."""
        if target_inputs not in ("separate", "shared"):
            raise ValueError(f"target_inputs must be 'separate' or 'shared', got {target_inputs!r}")
        if source_order not in ("forward", "reversed"):
            raise ValueError(f"source_order must be 'forward' or 'reversed', got {source_order!r}")
        source, target = tuple(task.source_vocab), tuple(task.target_vocab)
        return cls(source, target, shared=target_inputs == "shared" and source == target,
                   reversed_source=source_order == "reversed")

    @classmethod
    def for_config(cls, task: Task, model) -> JointVocabulary:
        """The numbering a model config asks for (``model.target_inputs``, ``model.source_order``)."""
        return cls.for_task(task, model.target_inputs, model.source_order)

    def source_ids(self, source) -> np.ndarray:
        """Input ids of ``source`` in the order the model reads it."""
        ids = np.asarray(source, dtype=np.int64) + self.source_offset
        return ids[::-1] if self.reversed_source else ids

    @property
    def input_size(self) -> int:
        return len(SPECIAL_INPUTS) + len(self.source) + (0 if self.shared else len(self.target))

    @property
    def output_size(self) -> int:
        return len(self.target) + 1

    @property
    def eos(self) -> int:
        """Output id of ``</s>``."""
        return len(self.target)

    @property
    def source_offset(self) -> int:
        """Input id of source symbol 0."""
        return len(SPECIAL_INPUTS)

    @property
    def target_offset(self) -> int:
        """Input id of target symbol 0 (target symbol j is output id j and input id target_offset + j)."""
        return len(SPECIAL_INPUTS) + (0 if self.shared else len(self.source))

    @property
    def input_words(self) -> tuple[str, ...]:
        """Input id -> word, for printing what a model read."""
        return SPECIAL_INPUTS + self.source + (() if self.shared else self.target)

    @property
    def output_words(self) -> tuple[str, ...]:
        """Output id -> word, for printing what a model predicted."""
        return self.target + (EOS,)


@dataclass(frozen=True)
class Batch:
    """Right-padded joint sequences. ``targets`` holds output ids at the scored positions, IGNORE_INDEX elsewhere."""

    inputs: torch.Tensor  # (B, L) long
    targets: torch.Tensor  # (B, L) long
    lengths: torch.Tensor  # (B,) real input positions: |source| + |target| + 2
    source_lengths: torch.Tensor  # (B,) |source|
    target_lengths: torch.Tensor  # (B,) scored positions: |target| + 1 (</s> included)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(getattr(self, name).to(device) for name in self.__dataclass_fields__))


def collate(pairs: list[Pair], vocab: JointVocabulary) -> Batch:
    """Encode ``pairs`` as one batch of joint sequences (see the module docstring for the layout)."""
    if not pairs:
        raise ValueError("cannot collate an empty list of pairs")
    target_offset = vocab.target_offset
    source_lengths = np.array([len(p.source) for p in pairs], dtype=np.int64)
    target_lengths = np.array([len(p.target) for p in pairs], dtype=np.int64)
    lengths = source_lengths + target_lengths + 2
    inputs = np.full((len(pairs), lengths.max()), vocab.PAD, dtype=np.int64)
    targets = np.full_like(inputs, IGNORE_INDEX)
    for row, (pair, k, n) in enumerate(zip(pairs, source_lengths, target_lengths)):
        inputs[row, 0] = vocab.BOS
        inputs[row, 1:k + 1] = vocab.source_ids(pair.source)
        inputs[row, k + 1] = vocab.SEP
        inputs[row, k + 2:k + 2 + n] = np.asarray(pair.target, dtype=np.int64) + target_offset
        targets[row, k + 1:k + 1 + n] = pair.target
        targets[row, k + 1 + n] = vocab.eos
    return Batch(torch.from_numpy(inputs), torch.from_numpy(targets), torch.from_numpy(lengths),
                 torch.from_numpy(source_lengths), torch.from_numpy(target_lengths + 1))
