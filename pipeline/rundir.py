"""A run's folder: the one place that names its files.

    config.yaml               the resolved config (a folder belongs to exactly one config)
    metrics.csv               Lightning's CSV log: perplexity every 100 batches, accuracies every eval_every
    timings.csv               wall-clock seconds at every logged step (kept out of metrics.csv)
    checkpoints/last.ckpt     for resuming; checkpoints/best.ckpt: the weights selected for reporting
    results.json              written last, atomically: the run is finished once it exists
    results.<batches>.json    the results of a run before it was extended or reopened
    failed.json               why the last attempt failed (a sweep's worker writes it)
    accuracy_by_length.csv    coarse/fine per source length on the cached train, test and long sets
    commits.txt               the commits that trained it, oldest first
    train.log                 a sweep worker's output
    traces/                   memory traces drawn by the report
    wandb/                    the offline dashboard, unless tracking is off
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.config import ConfigError, RunConfig, stored_run_config

CONFIG = "config.yaml"
METRICS = "metrics.csv"
TIMINGS = "timings.csv"
RESULTS = "results.json"
FAILED = "failed.json"
ACCURACY_BY_LENGTH = "accuracy_by_length.csv"
COMMITS = "commits.txt"
TRAIN_LOG = "train.log"
CHECKPOINTS = "checkpoints"
TRACES = "traces"
WANDB = "wandb"


class RunDir:
    """Paths of one run folder and the readers of its files. Cheap: it holds a path, nothing is read until asked."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    # ------------------------------------------------------------------------------------------- files
    config_file = property(lambda self: self.path / CONFIG)
    metrics_file = property(lambda self: self.path / METRICS)
    timings_file = property(lambda self: self.path / TIMINGS)
    results_file = property(lambda self: self.path / RESULTS)
    failed_file = property(lambda self: self.path / FAILED)
    accuracy_file = property(lambda self: self.path / ACCURACY_BY_LENGTH)
    commits_file = property(lambda self: self.path / COMMITS)
    log_file = property(lambda self: self.path / TRAIN_LOG)
    checkpoints = property(lambda self: self.path / CHECKPOINTS)
    last_checkpoint = property(lambda self: self.path / CHECKPOINTS / "last.ckpt")
    best_checkpoint = property(lambda self: self.path / CHECKPOINTS / "best.ckpt")
    traces = property(lambda self: self.path / TRACES)
    wandb_dir = property(lambda self: self.path / WANDB)

    def checkpoint(self, which: str) -> Path:
        """``checkpoints/<which>.ckpt`` for "best" or "last"."""
        if which not in ("best", "last"):
            raise ConfigError(f"checkpoint must be 'best' or 'last', got {which!r}")
        return self.path / CHECKPOINTS / f"{which}.ckpt"

    def earlier_results_file(self, batches: int) -> Path:
        return self.path / f"results.{batches}.json"

    # ------------------------------------------------------------------------------------------ readers
    def read_config(self) -> RunConfig:
        """The stored config, validated; a clear error naming the file when it is missing or damaged."""
        try:
            data = yaml.safe_load(self.config_file.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{self.path} is not a run directory (no {CONFIG})") from None
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"{self.config_file}: unreadable ({str(error).splitlines()[0]})") from None
        try:
            return stored_run_config(data)
        except ConfigError as error:
            raise ConfigError(f"{self.config_file}: {error}") from None
