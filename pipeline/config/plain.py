"""Configs to and from plain data (dicts, lists, scalars as YAML and JSON hold them): :func:`from_dict` builds a
dataclass and refuses unknown keys, wrong types and out-of-range values with an error that names the key's path
(``training.lr``) and what is allowed; :func:`to_dict` is its inverse, what a run writes as the exact config it used;
:func:`load_yaml` reads a file."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.config.values import ConfigError, _describe, _join
from pipeline.files import parse_yaml


def to_dict(config: Any) -> dict:
    """Plain data (dicts, lists, scalars) as YAML and JSON hold it: tuples become lists."""
    return _plain(dataclasses.asdict(config))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def config_hash(data: Any, length: int = 8) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:length]


def from_dict(cls: type, data: Any, path: str = ""):
    """Build the dataclass ``cls`` from plain data, refusing unknown keys and wrong types, naming the key path."""
    obj = _build(cls, data, path)
    if hasattr(obj, "validate"):
        obj.validate(path)
    return obj


def load_yaml(cls: type, file: str | Path):
    file = Path(file)
    if file.is_dir():
        raise ConfigError(f"config file {str(file)!r} is a directory; give a YAML file such as configs/cpu.yaml")
    if not file.is_file():
        raise ConfigError(f"config file {str(file)!r} does not exist")
    try:
        data = parse_yaml(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not a text file (not UTF-8); give a YAML file such as configs/cpu.yaml") from None
    except OSError as error:
        raise ConfigError(f"{file}: cannot be read ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{file}: not valid YAML: {' '.join(str(error).split())}") from None
    if data is None:  # an empty file (or comments only) would silently mean "all the defaults"
        raise ConfigError(f"{file}: empty; give at least one key (configs/run.yaml lists every run key, "
                          "configs/smoke.yaml is a small profile), or leave the file out for the defaults")
    try:
        return from_dict(cls, data)
    except ConfigError as error:
        raise ConfigError(f"{file}: {error}") from None


def _merged(base: dict, update: dict) -> dict:
    """``update`` deep-merged onto a copy of ``base`` (neither is changed)."""
    out = {key: _merged(value, {}) if isinstance(value, dict) else value for key, value in base.items()}
    for key, value in update.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _merge(base: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict):
            _merge(base[key], value)
        else:
            base[key] = value


@functools.cache
def _schema(tp: type) -> tuple[dict[str, Any], frozenset[str], tuple[str, ...]]:
    """A config dataclass's field types, its field names and the names it requires. Resolving the types
    (``typing.get_type_hints`` evaluates every string annotation) took four fifths of building a config, paid for
    every dataclass of every run a profile holds; a class's schema never changes, so it is resolved once."""
    fields = dataclasses.fields(tp)
    required = tuple(f.name for f in fields
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return typing.get_type_hints(tp), frozenset(f.name for f in fields), required


def _build(tp: Any, value: Any, path: str):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{path or 'config'} must be a mapping, got {_describe(value)}")
        hints, fields, required = _schema(tp)
        # keys of any type, in one order: YAML 1.1 reads a bare yes/no/on/off key as a bool, 1 as an int
        unknown = sorted(set(value) - fields, key=lambda key: (not isinstance(key, str), str(key)))
        if unknown:
            read = ("" if isinstance(unknown[0], str) else f" (YAML read it as the {type(unknown[0]).__name__} "
                    f"{unknown[0]!r}: quote a key that is yes, no, on, off or a number)")
            raise ConfigError(
                f"unknown key {_join(path, str(unknown[0]))!r}{read}; allowed keys here: {', '.join(sorted(fields))}"
            )
        missing = [key for key in required if key not in value]
        if missing:
            raise ConfigError(f"missing key {_join(path, missing[0])!r} (required keys here: {', '.join(required)})")
        kwargs = {key: _build(hints[key], val, _join(path, key)) for key, val in value.items()}
        return tp(**kwargs)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value is False and "off" in allowed:  # YAML 1.1 reads a bare `off` as false
            value = "off"
        if value not in allowed or isinstance(value, bool):
            raise ConfigError(f"{path} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        # At most one type besides None and named choices (float | None | Literal["default"]): a choice first.
        choices = [c for a in args if typing.get_origin(a) is Literal for c in typing.get_args(a)]
        if value in choices and not isinstance(value, bool):
            return value
        (inner,) = [a for a in args if a is not type(None) and typing.get_origin(a) is not Literal]
        try:
            return _build(inner, value, path)
        except ConfigError:
            if not choices:
                raise
            allowed = ["a number" if inner is float else f"a {inner.__name__}"] + (["null"] * (type(None) in args))
            raise ConfigError(f"{path} must be {', '.join(allowed)} or one of {', '.join(map(repr, choices))}; got "
                              f"{_describe(value)}") from None
    if origin in (tuple, list):
        (inner, *_rest) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path} must be a list, got {_describe(value)}")
        items = [_build(inner, item, f"{path}[{i}]") for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path} must be a mapping, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            value = _parse_float(value, path)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path} must be an integer, got {_describe(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path} must be true or false, got {_describe(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} must be a string, got {_describe(value)}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {path}")  # a bug in the dataclasses, not in the input


def _parse_float(value: Any, path: str) -> float:
    # YAML 1.1 reads "1e-3" (no dot) as a string; accept numeric strings, refuse anything else.
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ConfigError(f"{path} must be a number, got {_describe(value)}")
