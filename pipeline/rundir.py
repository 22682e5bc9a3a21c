"""A run's folder: the one place that names its files.

    config.yaml               the resolved config (a folder belongs to exactly one config)
    metrics.csv               Lightning's CSV log: perplexity every 100 batches, accuracies every eval_every
    timings.csv               wall-clock seconds at every logged step (kept out of metrics.csv)
    checkpoints/last.ckpt     for resuming; checkpoints/best.ckpt: the weights selected for reporting
    results.json              written last, atomically: the run is finished once it exists
    results.<batches>.json    the results of a run before it was extended or reopened
    failed.json               why the last attempt failed (a sweep's worker writes it)
    accuracy_by_length.csv    coarse/fine per source length on the cached train, test and long sets
    commits.txt               the commits that trained it, oldest first
    train.log                 a sweep worker's output
    traces/                   memory traces drawn by the report
    wandb/                    the offline dashboard, unless tracking is off
    .lock                     held by the one process training the run (pipeline.sweep.locks)

A run is in one of :data:`STATES`, read off its folder by :meth:`RunDir.state`:

* **finished** once ``results.json`` exists and covers the run's budget (it trained ``max_batches``, or stopped
  early: see :mod:`pipeline.training.stopping`): never trained again. A run that hit its budget, whose budget was
  raised since, is *interrupted* again: it resumes from its last checkpoint up to the new budget;
* **pruned** when it was stopped on its initial plateau by the profile's pruning rule: done, not failed;
* **failed** when ``failed.json`` exists (an exception or a NaN loss, with the traceback): left alone unless
  retried; a sweep goes on with the other runs;
* **damaged** when a file the reports read cannot be read (a truncated ``results.json``, a ``metrics.csv`` that
  lost its rows): named, never trained over and never reported from; :meth:`RunDir.check` says what is wrong;
* **running** while a process holds its lock;
* **interrupted** when it has a checkpoint but no process: it resumes from ``last.ckpt``;
* **pending** otherwise.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from pipeline.config import ConfigError, RunConfig, stored_run_config, to_dict
from pipeline.files import atomic_write_text, parse_yaml, read_complete_rows

CONFIG = "config.yaml"
METRICS = "metrics.csv"
TIMINGS = "timings.csv"
RESULTS = "results.json"
FAILED = "failed.json"
ACCURACY_BY_LENGTH = "accuracy_by_length.csv"
COMMITS = "commits.txt"
TRAIN_LOG = "train.log"
CHECKPOINTS = "checkpoints"
TRACES = "traces"
WANDB = "wandb"
LOCK = ".lock"  # pipeline.sweep.locks
REOPEN = ".reopen"  # continue the run although its checkpoint says it stopped (pipeline.training.monitor)

# What a run's training writes (``clear`` removes them, with the checkpoints and earlier results), and what an
# archive keeps of a finished run (everything reports and sweeps read, without checkpoints and the W&B folder).
OUTPUTS = (METRICS, TIMINGS, RESULTS, FAILED, ACCURACY_BY_LENGTH, REOPEN)
ARCHIVED_FILES = (CONFIG, RESULTS, METRICS, TIMINGS, ACCURACY_BY_LENGTH, COMMITS, TRAIN_LOG)
ARCHIVED_GLOBS = ("results.*.json", f"{TRACES}/*.json.gz")

STATES = ("finished", "pruned", "failed", "damaged", "running", "interrupted", "pending")
DONE = ("finished", "pruned")  # nothing left to train


class DamagedRun(ConfigError):
    """A run file that exists but cannot be read as what it should be; the message names it and what is wrong."""


class RunDir:
    """Paths of one run folder and the readers of its files. Cheap: it holds a path, nothing is read until asked."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    # ------------------------------------------------------------------------------------------- files
    config_file = property(lambda self: self.path / CONFIG)
    metrics_file = property(lambda self: self.path / METRICS)
    timings_file = property(lambda self: self.path / TIMINGS)
    results_file = property(lambda self: self.path / RESULTS)
    failed_file = property(lambda self: self.path / FAILED)
    accuracy_file = property(lambda self: self.path / ACCURACY_BY_LENGTH)
    commits_file = property(lambda self: self.path / COMMITS)
    log_file = property(lambda self: self.path / TRAIN_LOG)
    checkpoints = property(lambda self: self.path / CHECKPOINTS)
    last_checkpoint = property(lambda self: self.path / CHECKPOINTS / "last.ckpt")
    best_checkpoint = property(lambda self: self.path / CHECKPOINTS / "best.ckpt")
    traces = property(lambda self: self.path / TRACES)
    wandb_dir = property(lambda self: self.path / WANDB)

    def checkpoint(self, which: str) -> Path:
        """``checkpoints/<which>.ckpt`` for "best" or "last"."""
        if which not in ("best", "last"):
            raise ConfigError(f"checkpoint must be 'best' or 'last', got {which!r}")
        return self.path / CHECKPOINTS / f"{which}.ckpt"

    def earlier_results_file(self, batches: int) -> Path:
        return self.path / f"results.{batches}.json"

    @property
    def reopen_marker(self) -> Path:
        return self.path / REOPEN

    def trace_file(self, split: str, index: int) -> Path:
        """Where the trace of cached sequence ``index`` of ``split`` is kept (pipeline.inspection)."""
        return self.path / TRACES / f"{split}_{index}.json.gz"

    # ------------------------------------------------------------------------------------------ writers
    def write_config(self, config: RunConfig) -> None:
        atomic_write_text(self.config_file, yaml.safe_dump(to_dict(config), sort_keys=False))

    def archive_results(self) -> None:
        """Keep the results as ``results.<batches>.json``: the run is to train further (extended or reopened)."""
        stored = self.read_results()
        self.results_file.rename(self.earlier_results_file(stored["batches"]))

    def clear(self) -> None:
        """Remove what the run has trained and logged (not its config or commits): it starts again from batch 0."""
        for name in OUTPUTS:
            (self.path / name).unlink(missing_ok=True)
        for old in self.path.glob("results.*.json"):
            old.unlink()
        shutil.rmtree(self.checkpoints, ignore_errors=True)

    def read_commits(self) -> list[str]:
        return self.commits_file.read_text().split() if self.commits_file.exists() else []

    def record_commit(self, commit: str) -> list[str]:
        """Append ``commit`` to ``commits.txt`` unless it is the last one there; returns all of them."""
        commits = self.read_commits()
        if not commits or commits[-1] != commit:
            commits.append(commit)
            atomic_write_text(self.commits_file, "\n".join(commits) + "\n")
        return commits

    def write_failure(self, failure: dict) -> None:
        atomic_write_text(self.failed_file, json.dumps(failure, indent=2) + "\n")

    def clear_failure(self) -> None:
        self.failed_file.unlink(missing_ok=True)

    def write_accuracy_by_length(self, rows: list[dict]) -> None:
        header = ["split", "source_length", "n", "coarse", "fine"]
        atomic_write_text(self.accuracy_file, "\n".join([",".join(header)]
                                                        + [",".join(str(r[k]) for k in header) for r in rows]) + "\n")

    def write_timings(self, timings: list[tuple[int, float]]) -> None:
        atomic_write_text(self.timings_file, "step,elapsed_s\n" + "".join(f"{s},{t}\n" for s, t in timings))

    def seconds_trained(self) -> float:
        """Wall seconds of training at the last logged step (``timings.csv``; 0 before any)."""
        if not self.timings_file.exists():
            return 0.0
        rows = read_complete_rows(self.timings_file)[1]
        return float(rows[-1]["elapsed_s"]) if rows else 0.0

    # ------------------------------------------------------------------------------------------ readers
    def read_config(self) -> RunConfig:
        """The stored config, validated; a clear error naming the file when it is missing or damaged."""
        try:
            data = parse_yaml(self.config_file.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{self.path} is not a run directory (no {CONFIG})") from None
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"{self.config_file}: unreadable ({str(error).splitlines()[0]})") from None
        try:
            return stored_run_config(data)
        except ConfigError as error:
            raise ConfigError(f"{self.config_file}: {error}") from None

    def read_results(self) -> dict | None:
        """``results.json`` (None before the run has finished); :class:`DamagedRun` if it does not parse."""
        return _read_json(self.results_file, required=("batches", "train_perplexity", "train_coarse", "test_coarse"))

    def read_accuracy_by_length(self, split: str) -> list[tuple[int, int, float]]:
        """(source length, sequences, coarse accuracy) of ``split`` from ``accuracy_by_length.csv``, by length;
        none before the run has finished (or from a run finished before the file existed)."""
        if not self.accuracy_file.exists():
            return []
        _, rows = read_complete_rows(self.accuracy_file)
        try:
            return sorted((int(r["source_length"]), int(r["n"]), float(r["coarse"])) for r in rows
                          if r["split"] == split)
        except (KeyError, ValueError) as error:
            raise DamagedRun(f"{self.accuracy_file}: unreadable ({error})") from None

    def read_failure(self) -> str:
        """The first line of the error ``failed.json`` records ('' when there is none)."""
        failure = _read_json(self.failed_file, required=("error",))
        return "" if failure is None else str(failure["error"]).splitlines()[0]

    def read_metrics(self) -> list[dict]:
        """The rows of ``metrics.csv`` (none before the first log), a line cut short by a crash ignored;
        :class:`DamagedRun` if the file exists but has no header with a ``step`` column, or a step is not a
        number."""
        if not self.metrics_file.exists():
            return []
        try:
            header, rows = read_complete_rows(self.metrics_file)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise DamagedRun(f"{self.metrics_file}: unreadable ({error})") from None
        if "step" not in header:
            raise DamagedRun(f"{self.metrics_file}: " + ("empty" if not header else "no 'step' column in its header"))
        for row in rows:
            try:
                int(row["step"])
            except (TypeError, ValueError):
                raise DamagedRun(f"{self.metrics_file}: step {row['step']!r} is not a batch number") from None
        return rows

    def check(self) -> dict | None:
        """Raise :class:`DamagedRun` naming the first file a report or a listing could not trust: results that do
        not parse, a log that does not, or a finished run whose log stops before its results' batches. Returns the
        results (None before the run has finished), read once."""
        results = self.read_results()
        rows = self.read_metrics()
        self.read_failure()
        if results is not None:
            logged = max((int(row["step"]) for row in rows), default=0)
            if logged < int(results["batches"]):
                raise DamagedRun(f"{self.metrics_file}: logs {logged} batches but {RESULTS} reports "
                                 f"{results['batches']}; the log of a finished run was cut or emptied")
        return results

    def state(self, config: RunConfig | None = None) -> str:
        """One of :data:`STATES` (``config``: the budget asked of the run now; None: any budget)."""
        from pipeline.sweep.locks import is_locked
        from pipeline.training.results import results_cover, stop_reason

        try:
            results = self.check()
        except DamagedRun:
            return "running" if is_locked(self.path) else "damaged"
        if results is not None and results_cover(results, config):
            return "pruned" if stop_reason(results) == "pruned" else "finished"
        if is_locked(self.path):
            return "running"
        if self.failed_file.exists():
            return "failed"
        if self.last_checkpoint.exists():
            return "interrupted"
        return "pending"

    def damage(self) -> str:
        """What is wrong with the run's files ('' if nothing)."""
        try:
            self.check()
        except DamagedRun as error:
            return str(error)
        return ""


def _read_json(path: Path, required: tuple[str, ...]) -> dict | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise DamagedRun(f"{path}: unreadable ({error})") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        what = "empty" if not text.strip() else f"not valid JSON ({error})"
        raise DamagedRun(f"{path}: {what}") from None
    if not isinstance(data, dict):
        raise DamagedRun(f"{path}: not a JSON object")
    missing = [key for key in required if key not in data]
    if missing:
        raise DamagedRun(f"{path}: missing {', '.join(map(repr, missing))}")
    return data
