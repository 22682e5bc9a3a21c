"""One run's model with its task and vocabulary: what a checkpoint holds and what evaluation reads (paper §4.4).

Teacher forcing on the joint sequence ``<s> source <|> target </s>``: the model reads every input position and is
scored on the target positions only (:func:`pipeline.training.step.target_nll`). Its ``state_dict`` (``model.*``) is a
checkpoint's ``state_dict``; :meth:`~TransductionModule.configure_optimizers` is the run's optimizer, from its settings
(:func:`pipeline.training.step.make_optimizer`). A LightningModule, trained by the loop of
:mod:`pipeline.training.engine`.
"""

from __future__ import annotations

import lightning as L
import torch

from pipeline.config import RunConfig, to_dict
from pipeline.data.encoding import JointVocabulary
from pipeline.models import build_model
from pipeline.tasks import get_task
from pipeline.training.step import make_optimizer


class TransductionModule(L.LightningModule):
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

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The run's optimizer over its parameters: ``training.optimizer`` at ``training.lr`` (a ``--lr`` or a
        profile's ``lr``: :func:`~pipeline.config.resolve_run_config` or the grid puts it in the config, and
        :func:`~pipeline.training.step.make_optimizer` hands it to torch)."""
        return make_optimizer(self.parameters(), self.config.training)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(inputs, lengths)
