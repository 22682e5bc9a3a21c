"""A config's errors and the checks of one value, which every part of :mod:`pipeline.config` shares."""

from __future__ import annotations

import math
from typing import Any


class ConfigError(ValueError):
    """A config value that is missing, unknown, of the wrong type or out of range. The message names its path."""


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _choice(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{path} must be one of {', '.join(allowed)}; got {value!r}")


def _at_most(path: str, value: int, limit: int) -> None:
    if value > limit:
        raise ConfigError(f"{path} must be at most {limit:,}, got {value!r}")


def _positive(path: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{path} must be positive{' and finite' if isinstance(value, float) else ''}, got {value!r}")


MAX_POPULATION = 1024  # members of one population: far past what one GPU's memory holds at hidden 256 (~256)


def check_population_size(size: int, path: str = "population") -> int:
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_POPULATION:
        raise ConfigError(f"{path} must be a whole number of runs in [1, {MAX_POPULATION}], got {size!r}")
    return size
