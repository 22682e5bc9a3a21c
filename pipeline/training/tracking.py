"""Weights & Biases as the dashboard: offline by default (runs are written under ``<run dir>/wandb`` and can be
uploaded later with ``wandb sync``), online when asked, off with ``--wandb off``. It must never block training on
the network: an online run that cannot start within a short timeout falls back to offline with a warning. The CSV
log is written regardless and is what the reports are made from.

Each run directory is one W&B run (resumed runs continue it), grouped by the folder that holds it: the runs of a
profile (``runs/<profile>/*``) form one group, so ``wandb sync runs/<profile>/*/wandb/offline-run-*`` puts a whole
grid side by side in one project, and ``wandb leet runs/<profile>/<run>/wandb`` shows one run locally."""

from __future__ import annotations

import os
import shutil
import socket
import warnings
from pathlib import Path
from urllib.parse import urlparse

from pipeline.config import RunConfig, config_hash, to_dict

ONLINE_INIT_TIMEOUT_S = 20
# A population trains many runs in one process, each its own W&B run: a new run must not finish the others (wandb's
# default in a script) nor become the process's global ``wandb.run`` (which Lightning's logger would then reuse).
REINIT = "create_new"


def wandb_run_id(config: RunConfig, run_dir: Path) -> str:
    """One W&B id per run directory, the same across resumes (so a resumed run continues its W&B run) and different
    for two directories holding the same config (which would otherwise merge on ``wandb sync``)."""
    where = config_hash(str(Path(run_dir).resolve()), length=6)
    identity = config.run_id().rsplit("-", 1)[1]  # the run id's hash: not the budget, so an extended run continues
    return f"{config.task}-{config.model.name}-{identity}-{where}"  # wandb ids: no dots


def log_final_results(loggers, results: dict) -> None:
    """The final evaluation (training-, test- and long-length coarse/fine) into the W&B run's summary."""
    from lightning.pytorch.loggers import WandbLogger

    for logger in loggers:
        if isinstance(logger, WandbLogger):
            logger.experiment.summary.update({f"final/{k}": v for k, v in results.items()
                                              if isinstance(v, (int, float)) and not isinstance(v, bool)})
            logger.experiment.finish()


def wandb_logger(config: RunConfig, run_dir: Path):
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_DISABLE_GIT", "true")
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    mode = config.tracking.wandb
    common = dict(project=config.tracking.project, name=config.run_id(), id=wandb_run_id(config, run_dir),
                  group=Path(run_dir).resolve().parent.name, save_dir=str(run_dir), config=to_dict(config),
                  resume="allow")
    if mode == "online":
        unreachable = wandb_unreachable()
        if unreachable:  # no network: say so at once rather than after wandb's init timeout
            warnings.warn(f"wandb online: {unreachable}; logging offline instead. Upload later with: wandb sync "
                          f"{run_dir / 'wandb'}", stacklevel=2)
        else:
            before = _wandb_folders(run_dir)
            try:
                logger = _without_anonymous(WandbLogger(**common,
                                                        settings=wandb.Settings(init_timeout=ONLINE_INIT_TIMEOUT_S,
                                                                                reinit=REINIT)))
                _ = logger.experiment  # start the run now, where a failure can still fall back
                return logger
            except Exception as error:  # no credentials, server down: keep training, log offline
                # The timed-out online run is still held by wandb's service process ("run ID ... is in use" when
                # the offline run below reuses the id): end that process (the offline run starts a fresh one), and
                # drop the folder the attempt made, which holds nothing of the run.
                wandb.teardown()
                for folder in _wandb_folders(run_dir) - before:
                    shutil.rmtree(Path(run_dir) / "wandb" / folder, ignore_errors=True)
                warnings.warn(f"wandb online run could not start ({error}); logging offline instead. "
                              f"Upload later with: wandb sync {run_dir / 'wandb'}", stacklevel=2)
    return _without_anonymous(WandbLogger(**common, offline=True, settings=wandb.Settings(mode="offline",
                                                                                          reinit=REINIT)))


def wandb_unreachable(timeout_s: float = 3.0) -> str | None:
    """Why W&B's server (``$WANDB_BASE_URL``, else api.wandb.ai) cannot be reached, or None when a TCP connection
    opens within ``timeout_s``."""
    url = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    host, port = url.hostname or "api.wandb.ai", url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as error:
        return f"{host}:{port} cannot be reached ({error.strerror or error})"


def _wandb_folders(run_dir: Path) -> set[str]:
    """The run folders wandb has written under ``<run dir>/wandb`` (not its ``latest-run`` and log links)."""
    root = Path(run_dir) / "wandb"
    return {p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()} if root.is_dir() else set()


def _without_anonymous(logger):
    """Lightning passes wandb ``anonymous=None``, which wandb >= 0.19 answers with a deprecation warning on every
    run; the setting does nothing, so drop it before the run starts."""
    getattr(logger, "_wandb_init", {}).pop("anonymous", None)
    return logger
