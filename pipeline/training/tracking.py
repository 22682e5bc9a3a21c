"""Weights & Biases as the dashboard: offline by default (runs are written under ``<run dir>/wandb`` and can be
uploaded later with ``wandb sync``), online when asked, off with ``--wandb off``. It must never block training on
the network: an online run that cannot start within a short timeout falls back to offline with a warning. The CSV
log is written regardless and is what the reports are made from."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from pipeline.config import RunConfig, config_hash, to_dict

ONLINE_INIT_TIMEOUT_S = 20


def wandb_logger(config: RunConfig, run_dir: Path):
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_DISABLE_GIT", "true")
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    mode = config.tracking.wandb
    run_id = f"{config.task}-{config.model.name}-{config_hash(to_dict(config))}"  # wandb ids: no dots
    common = dict(project=config.tracking.project, name=config.run_id(), id=run_id, save_dir=str(run_dir),
                  config=to_dict(config), resume="allow")
    if mode == "online":
        try:
            logger = WandbLogger(**common, settings=wandb.Settings(init_timeout=ONLINE_INIT_TIMEOUT_S))
            logger.experiment  # start the run now, where a failure can still fall back
            return logger
        except Exception as error:  # no network, no credentials, server down: keep training, log offline
            warnings.warn(f"wandb online run could not start ({error}); logging offline instead. "
                          f"Upload later with: wandb sync {run_dir / 'wandb'}", stacklevel=2)
    return WandbLogger(**common, offline=True, settings=wandb.Settings(mode="offline"))
