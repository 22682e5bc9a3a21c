"""The one check of a whole-number argument that library functions share (configs have their own, which name the
key's path; the CLI has Typer's)."""

from __future__ import annotations

import numbers


def check_integer(name: str, value, minimum: int = 1, what: str = "") -> int:
    """``value`` as an int if it is a whole number (not a bool) of at least ``minimum``; else a one-line ValueError
    that names it, says what is allowed and shows what was given. ``what`` adds what the number means."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        meaning = f" ({what})" if what else ""
        raise ValueError(f"{name}{meaning} must be an integer >= {minimum}, got {value!r}")
    return int(value)
