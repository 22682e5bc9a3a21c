"""Typed configuration, by concern: the settings (:mod:`~pipeline.config.settings`: frozen dataclasses that mirror
the YAML files under ``configs/``, validated before any compute starts), configs to and from plain data and YAML
(:mod:`~pipeline.config.plain`), older layouts read as today's (:mod:`~pipeline.config.migrations`), the command
line's map onto a run config (:mod:`~pipeline.config.options`), and the errors and checks of one value they share
(:mod:`~pipeline.config.values`). What the rest of the code uses is imported from here."""

from __future__ import annotations

from pipeline.config.migrations import (
    LATER_BLOCK_KEYS,
    LATER_HALVING_KEYS,
    profile_hash,
    stored_run_config,
)
from pipeline.config.options import (
    OPTION_PATHS,
    resolve_run_config,
)
from pipeline.config.plain import (
    config_hash,
    from_dict,
    load_yaml,
    to_dict,
)
from pipeline.config.settings import (
    GRID_AXES,
    INITIAL_VALUES,
    LATER_MODEL_KEYS,
    LATER_TRAINING_KEYS,
    LEGACY_LENGTH_DISTRIBUTION,
    MAX_BIAS,
    MAX_LAYERS,
    MAX_PROJECT,
    MAX_SEED,
    MAX_STACK_DEPTH,
    MAX_WIDTH,
    MEASUREMENT_KEYS,
    MODEL_CHECKS,
    MODEL_NAMES,
    MODEL_START,
    MODEL_STARTS,
    POSITIONAL_ENCODINGS,
    PROBE_KEYS,
    START_BIASES,
    START_KEYS,
    GridBlock,
    Halving,
    ModelConfig,
    ProbeConfig,
    RunConfig,
    SlurmConfig,
    SweepConfig,
    TrackingConfig,
    TrainingConfig,
    model_settings,
)
from pipeline.config.values import (
    MAX_POPULATION,
    ConfigError,
    check_population_size,
)

__all__ = [
    "ConfigError",
    "MAX_POPULATION",
    "check_population_size",
    "to_dict",
    "config_hash",
    "from_dict",
    "load_yaml",
    "MODEL_NAMES",
    "MODEL_STARTS",
    "MODEL_CHECKS",
    "MAX_WIDTH",
    "MAX_SEED",
    "MODEL_START",
    "START_BIASES",
    "INITIAL_VALUES",
    "MAX_BIAS",
    "POSITIONAL_ENCODINGS",
    "MAX_LAYERS",
    "MAX_STACK_DEPTH",
    "ProbeConfig",
    "ModelConfig",
    "PROBE_KEYS",
    "model_settings",
    "TrainingConfig",
    "TrackingConfig",
    "MAX_PROJECT",
    "RunConfig",
    "LATER_TRAINING_KEYS",
    "MEASUREMENT_KEYS",
    "LATER_MODEL_KEYS",
    "LEGACY_LENGTH_DISTRIBUTION",
    "GRID_AXES",
    "Halving",
    "START_KEYS",
    "GridBlock",
    "SlurmConfig",
    "SweepConfig",
    "stored_run_config",
    "LATER_BLOCK_KEYS",
    "LATER_HALVING_KEYS",
    "profile_hash",
    "OPTION_PATHS",
    "resolve_run_config",
]
