"""The command line's map onto a run config: each ``transduce train`` option's place (:data:`OPTION_PATHS`), and
:func:`resolve_run_config`, the defaults, then a file, then the options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.config.plain import _merge, from_dict, load_yaml, to_dict
from pipeline.config.settings import GRID_AXES, RunConfig

OPTION_PATHS = {**GRID_AXES, "length_distribution": ("length_distribution",),
                "max_batches": ("training", "max_batches"), "eval_every": ("training", "eval_every"),
                "checkpoint_every": ("training", "checkpoint_every"), "optimizer": ("training", "optimizer"),
                "wandb": ("tracking", "wandb")}


def resolve_run_config(file: str | Path | RunConfig | None = None, **overrides: Any) -> RunConfig:
    """A run config from the defaults (the paper's settings), then ``file`` (YAML, any subset of the keys; or a run
    config already read, such as a run directory's own, which the caller reads with ``RunDir.read_config``), then the
    command line's ``overrides`` (None = not given): keys of :data:`OPTION_PATHS`."""
    data = to_dict(RunConfig())
    if isinstance(file, RunConfig):
        _merge(data, to_dict(file))
    elif file is not None:
        _merge(data, to_dict(load_yaml(RunConfig, file)))
    for key, value in overrides.items():
        if value is None:
            continue
        *parents, leaf = OPTION_PATHS[key]
        node = data
        for parent in parents:
            node = node[parent]
        node[leaf] = value
    config = from_dict(RunConfig, data)
    config.training.check_prune_checkpoints("training")
    return config
