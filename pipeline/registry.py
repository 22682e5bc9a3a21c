"""Live views of a registry (a dict of entries): the names in registration order, and one field of every entry.

Tasks (:data:`pipeline.tasks.TASKS`) and models (:data:`pipeline.models.MODELS`) are registries whose entries
carry everything about the thing: adding one is one ``register_*`` call. Code that needs the names (config
validation, the CLI's choices, reports) reads them through these views, so a newly registered entry is known
everywhere at once, and :class:`LazyNames` and :class:`LazyField` let ``pipeline.config`` read models without
importing torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence


class Names(Sequence):
    """The keys of ``registry``, in registration order, as a live read-only sequence; with ``keep``, only those of
    the entries it keeps (the paper's architectures: :data:`pipeline.models.PAPER_MODEL_NAMES`)."""

    _keep: Callable | None = None

    def __init__(self, registry: dict, keep: Callable | None = None) -> None:
        self._registry, self._keep = registry, keep

    def _keys(self) -> tuple[str, ...]:
        return tuple(name for name, entry in self._registry.items() if self._keep is None or self._keep(entry))

    def __getitem__(self, index):
        return self._keys()[index]

    def __len__(self) -> int:
        return len(self._keys())

    def __repr__(self) -> str:
        return repr(self._keys())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and self._keys() == tuple(other)

    __hash__ = None


class _ImportedRegistry:
    """The registry of a view, found at ``module.attribute`` (``_where``) and imported on first use: so that a module
    the registry's own module imports can read it without an import cycle (and without importing torch early)."""

    _where: tuple[str, str]

    @property
    def _registry(self) -> dict:
        module, attribute = self._where
        return getattr(importlib.import_module(module), attribute)


class LazyNames(_ImportedRegistry, Names):
    """:class:`Names` of a registry found at ``module.attribute``, imported on first use."""

    def __init__(self, module: str, attribute: str) -> None:
        self._where = (module, attribute)


class Field(Mapping):
    """``name -> getattr(entry, field)`` over a registry, live."""

    def __init__(self, registry: dict, field: str) -> None:
        self._registry, self._field = registry, field

    def __getitem__(self, name: str):
        return getattr(self._registry[name], self._field)

    def __iter__(self):
        return iter(self._registry)

    def __len__(self) -> int:
        return len(self._registry)


class LazyField(_ImportedRegistry, Field):
    """:class:`Field` of a registry found at ``module.attribute``, imported on first use."""

    def __init__(self, module: str, attribute: str, field: str) -> None:
        self._where, self._field = (module, attribute), field


def register(registry: dict, entry, kind: str, unique: tuple[str, ...] = ()):
    """Add ``entry`` (with a ``name``) to ``registry``, refusing a name, or a value of a ``unique`` field, already
    taken."""
    if entry.name in registry:
        raise ValueError(f"{kind} {entry.name!r} is already registered")
    for field in unique:
        clash = [e.name for e in registry.values() if getattr(e, field) == getattr(entry, field)]
        if clash:
            raise ValueError(f"{kind} {entry.name!r}: {field} {getattr(entry, field)!r} is already {clash[0]!r}'s")
    registry[entry.name] = entry
    return entry
