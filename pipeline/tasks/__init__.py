"""The paper's five transduction tasks behind one registry: :func:`register_task` adds one (its builder, title and
evaluation-set seeds), and everything else reads :data:`TASKS`.

    task = get_task("svo_sov")
    pair = task.sample(np.random.default_rng(0), split="train")
    task.decode(pair)  # {"source": [...], "target": [...]}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from pipeline.registry import Names, register
from pipeline.tasks.base import (
    DEFAULT_LENGTH_DISTRIBUTION,
    LENGTH_DISTRIBUTIONS,
    SPLITS,
    Pair,
    Task,
    check_length_distribution,
    check_split,
)
from pipeline.tasks.itg import GrammarTask
from pipeline.tasks.synthetic import SyntheticTask, copy, flip_bigrams, reverse


@dataclass(frozen=True)
class TaskEntry:
    """Everything about a task, in one place."""

    name: str  # what configs and commands call it
    build: Callable[[], Task]
    title: str  # how the paper and the reports title it
    seed_base: int  # its evaluation sets' seeds: seed_base + the split's offset (pipeline.data.cache)


TASKS: dict[str, TaskEntry] = {}


def register_task(entry: TaskEntry) -> TaskEntry:
    """Add a task: the one call that makes it known to configs, the CLI, the cache and the reports."""
    return register(TASKS, entry, "task", unique=("seed_base",))


register_task(TaskEntry("copy", lambda: SyntheticTask("copy", copy), "Sequence copying", 1000))
register_task(TaskEntry("reversal", lambda: SyntheticTask("reversal", reverse), "Sequence reversal", 2000))
register_task(TaskEntry("bigram_flip", lambda: SyntheticTask("bigram_flip", flip_bigrams, even_lengths=True),
                        "Bigram flipping", 3000))
register_task(TaskEntry("svo_sov", lambda: GrammarTask.from_config("svo_sov"), "SVO to SOV", 4000))
register_task(TaskEntry("gender", lambda: GrammarTask.from_config("gender"), "Gender conjugation", 5000))
TASK_NAMES = Names(TASKS)  # live: a task registered later is listed too


def check_task_name(name: str) -> str:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from: {', '.join(TASK_NAMES)}")
    return name


def get_task(name: str, length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> Task:
    """The task called ``name`` with its source lengths distributed as ``length_distribution`` says (a reading of
    :data:`LENGTH_DISTRIBUTIONS`; tasks with one distribution ignore it). Built once per process: loading a grammar
    validates its YAML."""
    return _task(check_task_name(name), check_length_distribution(length_distribution))


@cache
def _task(name: str, length_distribution: str) -> Task:
    if length_distribution != DEFAULT_LENGTH_DISTRIBUTION:
        return _task(name, DEFAULT_LENGTH_DISTRIBUTION).with_length_distribution(length_distribution)
    return TASKS[name].build().with_length_distribution(length_distribution)


get_task.cache_clear = _task.cache_clear  # a task registered or removed later (tests) is built afresh


def has_length_choice(name: str) -> bool:
    """Whether task ``name``'s data depend on the length distribution (the ITG tasks)."""
    return get_task(name).length_distribution is not None


__all__ = ["DEFAULT_LENGTH_DISTRIBUTION", "LENGTH_DISTRIBUTIONS", "SPLITS", "TASKS", "TASK_NAMES", "TaskEntry",
           "register_task", "Pair", "Task", "check_length_distribution", "check_split", "check_task_name",
           "get_task", "has_length_choice"]
