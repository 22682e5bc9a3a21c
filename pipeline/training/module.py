"""The LightningModule that trains any registered model on any task (paper §4.4).

Teacher forcing on the joint sequence ``<s> source <|> target </s>``: the model reads every input position and
the loss is the cross-entropy of the predictions at the target positions only (from the separator on, the final
``</s>`` included), averaged over those positions in the batch. Padding carries ``IGNORE_INDEX`` and never
contributes. Optimiser: RMSProp with the configured learning rate; gradient clipping is set on the Trainer.
"""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from pipeline.config import RunConfig, to_dict
from pipeline.data.encoding import IGNORE_INDEX, Batch, JointVocabulary
from pipeline.data.stream import TrainingBatches
from pipeline.models import build_model
from pipeline.tasks import get_task


class TransductionModule(L.LightningModule):
    def __init__(self, config: RunConfig) -> None:
        super().__init__()
        self.save_hyperparameters(to_dict(config))  # the run's config, so that every checkpoint describes itself
        self.config = config
        self.task = get_task(config.task, config.length_distribution)
        self.vocab = JointVocabulary.for_config(self.task, self.config.model)
        self.model = build_model(self.config.model, self.vocab.input_size, self.vocab.output_size)

    @classmethod
    def from_config(cls, config: RunConfig) -> "TransductionModule":
        return cls(config)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(inputs, lengths)

    def target_nll(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed negative log-likelihood of the target positions, and how many there are."""
        logits = self.model(batch.inputs, batch.lengths)
        nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE_INDEX,
                              reduction="sum")
        return nll, batch.target_lengths.sum()

    def on_train_batch_start(self, batch: Batch, batch_idx: int) -> None:
        self.model.before_batch(self.global_step)  # global_step: batches done, restored with a checkpoint too

    def training_step(self, batch: Batch, batch_idx: int) -> dict:
        nll, tokens = self.target_nll(batch)
        if not torch.isfinite(nll):
            raise FloatingPointError(f"training loss is {nll.item()} at batch {self.global_step + 1}")
        return {"loss": nll / tokens, "nll": nll.detach(), "tokens": tokens}

    def configure_optimizers(self):
        t = self.config.training
        return torch.optim.RMSprop(self.parameters(), lr=t.lr, alpha=t.rmsprop_alpha, eps=t.rmsprop_eps)

    def train_dataloader(self) -> DataLoader:
        # Called after a checkpoint is restored, so global_step is the next batch to draw: the stream resumes
        # exactly where the checkpoint left it.
        t = self.config.training
        batches = TrainingBatches(self.task, self.vocab, seed=t.seed, batch_size=t.batch_size, pool=t.length_pool,
                                  start=self.trainer.global_step)
        return DataLoader(batches, batch_size=None, num_workers=0)
