"""The paper's five transduction tasks behind one registry.

    task = get_task("svo_sov")
    pair = task.sample(np.random.default_rng(0), split="train")
    task.decode(pair)  # {"source": [...], "target": [...]}
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from pipeline.tasks.base import SPLITS, Pair, Task, check_split
from pipeline.tasks.itg import GrammarTask
from pipeline.tasks.synthetic import SyntheticTask, copy, flip_bigrams, reverse

_REGISTRY: dict[str, Callable[[], Task]] = {
    "copy": lambda: SyntheticTask("copy", copy),
    "reversal": lambda: SyntheticTask("reversal", reverse),
    "bigram_flip": lambda: SyntheticTask("bigram_flip", flip_bigrams, even_lengths=True),
    "svo_sov": lambda: GrammarTask.from_config("svo_sov"),
    "gender": lambda: GrammarTask.from_config("gender"),
}
TASK_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def check_task_name(name: str) -> str:
    if name not in _REGISTRY:
        raise ValueError(f"unknown task {name!r}; choose from: {', '.join(TASK_NAMES)}")
    return name


@cache
def get_task(name: str) -> Task:
    """The task called ``name`` (built once per process: loading a grammar validates its YAML)."""
    return _REGISTRY[check_task_name(name)]()


__all__ = ["SPLITS", "TASK_NAMES", "Pair", "Task", "check_split", "check_task_name", "get_task"]
