"""One run's model with its task and vocabulary: what a checkpoint holds and what evaluation reads (paper §4.4).

Teacher forcing on the joint sequence ``<s> source <|> target </s>``: the model reads every input position and is
scored on the target positions only (:func:`pipeline.training.step.target_nll`). Its ``state_dict`` (``model.*``) is a
checkpoint's ``state_dict``. The LightningModule that trains one run or a population of them is
:class:`pipeline.training.engine.PopulationModule`.
"""

from __future__ import annotations

import torch
from torch import nn

from pipeline.config import RunConfig, to_dict
from pipeline.data.encoding import JointVocabulary
from pipeline.models import build_model
from pipeline.tasks import get_task


class TransductionModule(nn.Module):
    def __init__(self, config: RunConfig) -> None:
        super().__init__()
        self.config = config
        self.task = get_task(config.task, config.length_distribution)
        self.vocab = JointVocabulary.for_config(self.task, self.config.model)
        self.model = build_model(self.config.model, self.vocab.input_size, self.vocab.output_size)

    @classmethod
    def from_config(cls, config: RunConfig) -> "TransductionModule":
        return cls(config)

    @property
    def hparams(self) -> dict:
        """The run's config as a checkpoint stores it (``hyper_parameters``): every checkpoint describes itself."""
        return to_dict(self.config)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(inputs, lengths)
