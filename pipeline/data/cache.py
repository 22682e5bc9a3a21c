"""Evaluation sets, generated once into ``data_cache/`` and verified every time they are loaded.

Per task there are three sets of ``EVAL_SET_SIZE`` pairs: ``train`` (the paper's training-length condition),
``test`` (its test-length condition) and ``long`` (ours, for accuracy-by-length curves), each over the task's own
window of source lengths (``Task.window``: the paper's for its five tasks). Set ``(task, split)`` is
``task.sample_batch(np.random.default_rng(eval_seed(task, split)), split, EVAL_SET_SIZE)``, so any machine
regenerates identical files.

Layout, one pair of files per set::

    data_cache/<task>/<split>.json           the pairs (token ids) and both vocabularies, one pair per line
    data_cache/<task>/<split>.manifest.json  task, split, seed, size, generator version, task fingerprint, sha256

A task whose lengths can be distributed two ways (the ITG tasks: ``pipeline.tasks.LENGTH_DISTRIBUTIONS``) has one
set per reading, under ``data_cache/<task>/<reading>-lengths/``, each with its own fingerprint.

A set is used only if its manifest matches what the current code would generate (generator version, task
fingerprint, seed, size, source-length window) and the data file matches the manifest's checksum and the task's
vocabularies.
Otherwise it is regenerated with a :class:`CacheWarning` that says what was wrong; it is never used silently.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.files import atomic_write_bytes
from pipeline.paths import data_cache
from pipeline.tasks import (
    DEFAULT_LENGTH_DISTRIBUTION,
    LENGTH_DISTRIBUTIONS,
    PAPER_TASK_NAMES,
    SPLITS,
    TASKS,
    Pair,
    check_length_distribution,
    check_split,
    check_task_name,
    get_task,
    has_length_choice,
)

EVAL_SET_SIZE = 1000
# Bump whenever a code change alters the sets a seed produces; every cached set then reads as stale.
GENERATOR_VERSION = "1"

# seed of set (task, split) = task base + split offset: copy/train 1001, ..., gender/long 5003.
_SPLIT_SEED_OFFSET = {"train": 1, "test": 2, "long": 3}


class CacheWarning(UserWarning):
    """A cached evaluation set was missing, stale or corrupt and has been regenerated."""


class _Unusable(Exception):
    """Why a cached set cannot be used (the message ends up in the CacheWarning)."""


@dataclass(frozen=True)
class EvalSet:
    task: str
    split: str
    seed: int
    pairs: list[Pair]
    source_vocab: tuple[str, ...]
    target_vocab: tuple[str, ...]
    generator_version: str = GENERATOR_VERSION
    length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION  # tasks with one distribution ignore it

    def __len__(self) -> int:
        return len(self.pairs)


def eval_seed(task_name: str, split: str) -> int:
    """The documented seed of evaluation set ``(task_name, split)``."""
    check_split(split)
    return TASKS[check_task_name(task_name)].seed_base + _SPLIT_SEED_OFFSET[split]


def build_eval_set(task_name: str, split: str, length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> EvalSet:
    """Generate set ``(task_name, split)`` in memory (what the cache holds)."""
    seed = eval_seed(task_name, split)
    task = get_task(task_name, length_distribution)
    pairs = task.sample_batch(np.random.default_rng(seed), split, EVAL_SET_SIZE)
    return EvalSet(task_name, split, seed, pairs, task.source_vocab, task.target_vocab,
                   length_distribution=length_distribution)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, or by default :func:`pipeline.paths.data_cache` (``data_cache/`` in the repository)."""
    return Path(cache_dir) if cache_dir is not None else data_cache()


def set_paths(task_name: str, split: str, cache_dir: str | Path | None = None,
              length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> tuple[Path, Path]:
    """(data file, manifest file) of set ``(task_name, split)`` under ``length_distribution``."""
    folder = cache_root(cache_dir) / task_name
    if has_length_choice(task_name):
        folder = folder / f"{check_length_distribution(length_distribution)}-lengths"
    return folder / f"{split}.json", folder / f"{split}.manifest.json"


def write_eval_set(eval_set: EvalSet, cache_dir: str | Path | None = None) -> Path:
    """Write the data file, then its manifest, each atomically; returns the data file's path."""
    reading = eval_set.length_distribution
    data_path, manifest_path = set_paths(eval_set.task, eval_set.split, cache_dir, reading)
    header = {"task": eval_set.task, "split": eval_set.split, "seed": eval_set.seed,
              "generator_version": eval_set.generator_version,
              "source_vocab": list(eval_set.source_vocab), "target_vocab": list(eval_set.target_vocab)}
    lines = ",\n".join(json.dumps([list(p.source), list(p.target)], separators=(",", ":")) for p in eval_set.pairs)
    data = (json.dumps(header)[:-1] + ',\n"pairs": [\n' + lines + "\n]}\n").encode()
    task = get_task(eval_set.task, reading)
    manifest = {"task": eval_set.task, "split": eval_set.split, "seed": eval_set.seed, "size": len(eval_set),
                "source_lengths": list(task.window(eval_set.split)), "generator_version": eval_set.generator_version,
                "length_distribution": task.length_distribution, "task_fingerprint": task.fingerprint(),
                "data_file": data_path.name, "sha256": hashlib.sha256(data).hexdigest()}
    atomic_write_bytes(data_path, data)
    atomic_write_bytes(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode())
    return data_path


def read_eval_set(task_name: str, split: str, cache_dir: str | Path | None = None,
                  length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> EvalSet:
    """The cached set, verified; raises ``FileNotFoundError`` if absent and ``ValueError`` saying what is wrong
    if it is stale or corrupt."""
    try:
        return _read_verified(task_name, split, cache_dir, length_distribution)
    except _Unusable as problem:
        raise ValueError(str(problem)) from None


def load_eval_set(task_name: str, split: str, cache_dir: str | Path | None = None,
                  length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> EvalSet:
    """The cached set if it verifies; otherwise (missing, stale, corrupt) it is regenerated with a warning."""
    check_task_name(task_name)
    check_split(split)
    check_length_distribution(length_distribution)
    cache_dir = cache_root(cache_dir)
    try:
        return _read_verified(task_name, split, cache_dir, length_distribution)
    except FileNotFoundError as missing:
        reason = f"missing ({missing.filename})"
    except _Unusable as problem:
        reason = str(problem)
    warnings.warn(f"regenerating eval set {_label(task_name, split, length_distribution)} in {cache_dir}: {reason}",
                  CacheWarning, stacklevel=2)
    eval_set = build_eval_set(task_name, split, length_distribution)
    write_eval_set(eval_set, cache_dir)
    return eval_set


def generate_eval_sets(task_names: Iterable[str] | None = None, splits: Iterable[str] | None = None,
                       cache_dir: str | Path | None = None, force: bool = False,
                       progress: Callable[[str], None] | None = None,
                       length_distributions: Iterable[str] | None = None) -> list[EvalSet]:
    """Fill the cache: every (task, split) set not already there and valid is generated (all of them with
    ``force``) for ``task_names`` (default: the paper's five, :data:`~pipeline.tasks.PAPER_TASK_NAMES`), for each
    reading of ``length_distributions`` (default: all) of a task that has a choice. Stale or corrupt sets are
    replaced with a CacheWarning. ``progress`` is called with ``"task/split"`` (``"task/split
    (reading lengths)"``) after each set. All names are checked before any work starts."""
    cache_dir = cache_root(cache_dir)
    task_names = list(PAPER_TASK_NAMES if task_names is None else task_names)
    splits = list(SPLITS if splits is None else splits)
    readings = list(LENGTH_DISTRIBUTIONS if length_distributions is None else length_distributions)
    for name in task_names:
        check_task_name(name)
    for split in splits:
        check_split(split)
    for reading in readings:
        check_length_distribution(reading)
    sets = []
    for name, reading in set_keys(task_names, readings):
        for split in splits:
            eval_set = None
            if not force:
                try:
                    eval_set = _read_verified(name, split, cache_dir, reading)
                except FileNotFoundError:
                    pass
                except _Unusable as problem:
                    warnings.warn(f"regenerating eval set {_label(name, split, reading)} in {cache_dir}: {problem}",
                                  CacheWarning, stacklevel=2)
            if eval_set is None:
                eval_set = build_eval_set(name, split, reading)
                write_eval_set(eval_set, cache_dir)
            sets.append(eval_set)
            if progress is not None:
                progress(_label(name, split, reading))
    return sets


def set_keys(task_names: Iterable[str], readings: Iterable[str]) -> list[tuple[str, str]]:
    """(task, reading) of every distinct family of sets: a task without a length choice has one, whatever the
    readings asked for."""
    readings = list(readings)
    keys = []
    for name in task_names:
        for reading in readings if has_length_choice(name) else [DEFAULT_LENGTH_DISTRIBUTION]:
            if (name, reading) not in keys:
                keys.append((name, reading))
    return keys


def _label(task_name: str, split: str, reading: str) -> str:
    return f"{task_name}/{split}" + (f" ({reading} lengths)" if has_length_choice(task_name) else "")


# The pairs of the data files this process parsed and checked, by their task, split, reading and SHA-256: a population
# opens the same sets once per member and a test process once per run it trains, and parsing is most of a load. The
# manifest is checked and the data file read and hashed at every load all the same: an edited file never hits.
_PARSED: dict[tuple, tuple[list[Pair], tuple[str, ...], tuple[str, ...]]] = {}


def _read_verified(task_name: str, split: str, cache_dir: str | Path,
                   length_distribution: str = DEFAULT_LENGTH_DISTRIBUTION) -> EvalSet:
    data_path, manifest_path = set_paths(task_name, split, cache_dir, length_distribution)
    if not manifest_path.exists() and not data_path.exists():
        raise FileNotFoundError(2, "no cached set", str(data_path))
    try:
        manifest = json.loads(manifest_path.read_text())
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        raise _Unusable(f"manifest {manifest_path} is unreadable ({error})") from None
    task = get_task(task_name, length_distribution)
    expected = {"task": task_name, "split": split, "seed": eval_seed(task_name, split), "size": EVAL_SET_SIZE,
                "source_lengths": list(task.window(split)), "generator_version": GENERATOR_VERSION,
                "task_fingerprint": task.fingerprint()}
    for key, value in expected.items():
        if manifest.get(key) != value:
            raise _Unusable(f"stale: manifest {manifest_path} has {key}={manifest.get(key)!r}, "
                            f"the current code makes {value!r}")
    try:
        data = data_path.read_bytes()
    except OSError as error:
        raise _Unusable(f"data file {data_path} is unreadable ({error})") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest.get("sha256"):
        raise _Unusable(f"corrupt: checksum of {data_path} does not match its manifest (edited or truncated?)")
    parsed = (task_name, split, length_distribution, digest)
    if parsed not in _PARSED:
        try:
            content = json.loads(data)
            pairs = [Pair(tuple(source), tuple(target)) for source, target in content["pairs"]]
            vocabularies = (tuple(content["source_vocab"]), tuple(content["target_vocab"]))
        except (ValueError, KeyError, TypeError) as error:
            raise _Unusable(f"corrupt: {data_path} does not parse ({error})") from None
        if vocabularies != (task.source_vocab, task.target_vocab):
            raise _Unusable(f"stale: the vocabularies in {data_path} differ from the task's")
        low, high = task.window(split)
        if len(pairs) != EVAL_SET_SIZE or not all(low <= len(p.source) <= high for p in pairs):
            raise _Unusable(f"corrupt: {data_path} does not hold {EVAL_SET_SIZE} pairs of source length {low}..{high}")
        _PARSED[parsed] = (pairs, *vocabularies)
    pairs, source_vocab, target_vocab = _PARSED[parsed]
    return EvalSet(task_name, split, manifest["seed"], list(pairs), source_vocab, target_vocab,  # the caller's list
                   manifest["generator_version"], length_distribution)
