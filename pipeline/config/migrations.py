"""Older layouts read as today's: a run config stored before a key existed (:func:`stored_run_config`), and a profile
whose reports name a hash from before a key existed (:func:`profile_hash`)."""

from __future__ import annotations

from typing import Any

from pipeline.config.plain import config_hash, from_dict, to_dict
from pipeline.config.settings import (
    LEGACY_LENGTH_DISTRIBUTION,
    PROBE_KEYS,
    START_BIASES,
    RunConfig,
    SweepConfig,
    _without_later_keys,
)


def stored_run_config(data: Any, path: str = "") -> RunConfig:
    """A run config as a run directory (or a checkpoint) stores it. One written before ``length_distribution``
    existed reads as :data:`LEGACY_LENGTH_DISTRIBUTION`, the lengths that run was trained on; one written before
    ``model.push_bias`` (or the bottom biases) existed, as that bias None (``nn.Linear``'s initialisation, and the
    bottom end as the top: what that run had, where the default is now the model's own start); one written before
    the probes had their own section (``model.probes``), with them moved there."""
    if isinstance(data, dict) and "length_distribution" not in data:
        data = {**data, "length_distribution": LEGACY_LENGTH_DISTRIBUTION}
    if isinstance(data, dict) and isinstance(data.get("model"), dict):
        model = {**{key: None for key in START_BIASES}, **data["model"]}
        flat_probes = {key: model.pop(key) for key in PROBE_KEYS if key in model}
        if flat_probes:  # written before the probes had their own section
            model["probes"] = {**model.get("probes", {}), **flat_probes}
        data = {**data, "model": model}
    return from_dict(RunConfig, data, path)


# Grid-block and halving keys added after profiles had reports, with the value every earlier profile had: a profile
# that leaves them there keeps the hash its reports name (profile_hash).
LATER_BLOCK_KEYS = {"starts": []}


LATER_HALVING_KEYS = {"seeds_together": False}


def profile_hash(sweep: SweepConfig) -> str:
    """The hash a report names its profile by: of the profile as plain data, less the keys of
    :data:`LATER_BLOCK_KEYS` and :data:`LATER_HALVING_KEYS` at their earlier value."""
    data = to_dict(sweep)
    for block in data["grid"]:
        for key, value in LATER_BLOCK_KEYS.items():
            if block.get(key) == value:
                del block[key]
        if block.get("halving"):
            block["halving"] = _without_later_keys(block["halving"], LATER_HALVING_KEYS)
    return config_hash(data)
