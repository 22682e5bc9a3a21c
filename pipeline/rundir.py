"""A run's folder: the one place that names its files.

    config.yaml               the resolved config (a folder belongs to exactly one config)
    metrics.csv               Lightning's CSV log: perplexity every 100 batches, accuracies every eval_every
    timings.csv               wall-clock seconds at every logged step (kept out of metrics.csv)
    checkpoints/last.ckpt     for resuming; checkpoints/best.ckpt: the weights selected for reporting
    results.json              written last, atomically: the run is finished once it exists
    results.<batches>.json    the results of a run before it was extended or reopened
    earlier_draws.json        the results of earlier draws of the run: trained again from batch 0 where its
                              checkpoint was lost (another machine's floats make another draw of one seed)
    failed.json               why the last attempt failed (a sweep's worker writes it)
    accuracy_by_length.csv    coarse/fine per source length on the cached train, test and long sets
    first_errors.csv          where in the target the first error falls (by tenth), per split (final evaluation)
    far_lengths.csv           accuracy in bands of source length out to 512 (pipeline.generalisation), if measured
    rungs.json                its standing at each decided rung of successive halving (pipeline.sweep.halving):
                              kept when the run is trained again, so a decided rung stays decided
    commits.txt               the commits that trained it, oldest first
    train.log                 a sweep worker's output
    traces/                   memory traces drawn by the report
    wandb/                    the offline dashboard, unless tracking is off
    .lock                     held by the one process training the run (pipeline.runlock)

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
import math
import shutil
import time
import zipfile
from pathlib import Path

import yaml

from pipeline.config import ConfigError, RunConfig, stored_run_config, to_dict
from pipeline.files import atomic_write_text, parse_yaml, read_complete_rows
from pipeline.runlock import LOCK_FILE, is_locked, lock_trouble

CONFIG = "config.yaml"
METRICS = "metrics.csv"
TIMINGS = "timings.csv"
RESULTS = "results.json"
EARLIER_DRAWS = "earlier_draws.json"
FAILED = "failed.json"
ACCURACY_BY_LENGTH = "accuracy_by_length.csv"
FIRST_ERRORS = "first_errors.csv"
FAR_LENGTHS = "far_lengths.csv"
RUNGS = "rungs.json"  # accuracy far past the test lengths (pipeline.generalisation), when measured
COMMITS = "commits.txt"
TRAIN_LOG = "train.log"
CHECKPOINTS = "checkpoints"
TRACES = "traces"
WANDB = "wandb"
LOCK = LOCK_FILE  # held by the one process training the run (pipeline.runlock)
REOPEN = ".reopen"  # continue the run although its checkpoint says it stopped (pipeline.training.monitor)

# What every results file holds, whatever its schema (a file without one is damaged)
RESULTS_REQUIRED = ("batches", "train_perplexity", "train_coarse", "test_coarse")
# What a run's training writes (``clear`` removes them, with the checkpoints and earlier results), and what an
# archive keeps of a finished run (everything reports and sweeps read, without checkpoints and the W&B folder).
OUTPUTS = (METRICS, TIMINGS, RESULTS, FAILED, ACCURACY_BY_LENGTH, FIRST_ERRORS, FAR_LENGTHS, REOPEN)
ARCHIVED_FILES = (CONFIG, RESULTS, METRICS, TIMINGS, ACCURACY_BY_LENGTH, FIRST_ERRORS, FAR_LENGTHS, RUNGS, COMMITS,
                  TRAIN_LOG, EARLIER_DRAWS)
ARCHIVED_GLOBS = ("results.*.json", f"{TRACES}/*.json.gz")
# The accuracies results.json holds (each in [0, 1]: RunDir.check)
ACCURACIES = tuple(f"{split}_{grain}" for split in ("train", "test", "long") for grain in ("coarse", "fine"))

STATES = ("finished", "pruned", "failed", "damaged", "running", "interrupted", "pending")
DONE = ("finished", "pruned")  # nothing left to train
TO_GO = ("interrupted", "pending")  # what a sweep trains next (with the failed ones, when asked)


class DamagedRun(ConfigError):
    """A run file that exists but cannot be read as what it should be; the message names it and what is wrong."""


# results.json's layout, recorded in it as "schema" (version 1: every results.json written before it was recorded).
# Whatever reads one reads it through upgraded_results, the one place an older layout is made the current one.
RESULTS_SCHEMA = 2


def upgraded_results(results: dict) -> dict:
    """A run's results of any schema, in the current one. Version 1 (before "schema" was recorded) lacked, in its
    oldest runs, ``stop_reason`` (they said only ``stopped_early``, which then meant converged) and ``plateau_rule``
    (the rule's first version judged them), and in some ``commit``."""
    version = results.get("schema", 1)
    if version >= RESULTS_SCHEMA:
        return results
    out = dict(results)
    out.setdefault("stop_reason", "converged" if out.get("stopped_early") else "budget")
    out.setdefault("plateau_rule", 1)
    out.setdefault("commit", "")
    out["schema"] = RESULTS_SCHEMA
    return out


def results_cover(results: dict, config) -> bool:
    """Whether stored results answer ``config`` (a RunConfig, or None for "any budget"): the run trained the whole
    budget, or stopped early (converged). A budget raised since means the run is to be extended."""
    if config is None:
        return True
    return results["batches"] >= config.training.max_batches or stop_reason(results) != "budget"


def stop_reason(results: dict) -> str:
    """Why a finished run stopped (see pipeline.training.stopping), in results of any schema."""
    return upgraded_results(results)["stop_reason"]


def results_mismatch(results: dict, config: RunConfig) -> str:
    """'' when a run's ``results.json`` records the settings ``config`` has (task, model, hidden size, learning rate,
    seed: what results.json keeps of its config), else the first that differs, said as "hidden 16, where config.yaml
    says 32"."""
    for key, now in (("task", config.task), ("model", config.model.name), ("hidden", config.model.hidden),
                     ("lr", config.training.lr), ("seed", config.training.seed)):
        if key in results and results[key] != now:
            return f"{key} {results[key]!r}, where config.yaml says {now!r}"
    return ""


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
    first_errors_file = property(lambda self: self.path / FIRST_ERRORS)
    far_lengths_file = property(lambda self: self.path / FAR_LENGTHS)

    def far_lengths_of(self, checkpoint: str) -> Path:
        """Where the far lengths of ``checkpoint`` go: ``far_lengths.csv`` for "best", the checkpoint the results
        report (the report reads it as theirs), ``far_lengths-<checkpoint>.csv`` for any other (never over it)."""
        return self.far_lengths_file if checkpoint == "best" else self.path / f"far_lengths-{checkpoint}.csv"
    rungs_file = property(lambda self: self.path / RUNGS)
    commits_file = property(lambda self: self.path / COMMITS)
    log_file = property(lambda self: self.path / TRAIN_LOG)
    checkpoints = property(lambda self: self.path / CHECKPOINTS)
    last_checkpoint = property(lambda self: self.path / CHECKPOINTS / "last.ckpt")
    best_checkpoint = property(lambda self: self.path / CHECKPOINTS / "best.ckpt")
    # best.ckpt as it was before the evaluation that ends a run off its schedule (TrainingMonitor.finish): a run
    # extended later goes on from there, as its twin trained straight to the longer budget does
    best_before_end = property(lambda self: self.path / CHECKPOINTS / "best-before-end.ckpt")
    traces = property(lambda self: self.path / TRACES)
    wandb_dir = property(lambda self: self.path / WANDB)

    def checkpoint(self, which: str) -> Path:
        """``checkpoints/<which>.ckpt`` for "best" or "last"."""
        if which not in ("best", "last"):
            raise ConfigError(f"checkpoint must be 'best' or 'last', got {which!r}")
        return self.path / CHECKPOINTS / f"{which}.ckpt"

    def earlier_results_file(self, batches: int) -> Path:
        return self.path / f"results.{batches}.json"

    def latest_earlier_results_file(self) -> Path | None:
        """The ``results.<batches>.json`` of the most batches: what the run had reached when it was reopened to train
        further (a halving rung it won, a raised budget); None if it never was."""
        earlier = [(int(f.name.split(".")[1]), f) for f in self.path.glob("results.*.json")
                   if f.name.split(".")[1].isdigit()]
        return max(earlier)[1] if earlier else None

    def standing_results(self) -> dict | None:
        """The results a run stands at while it is not done: ``results.json`` where its budget outgrew it (a rung it
        won, a raised cap; not resumed yet), else, once it trains on, the latest ``results.<batches>.json`` it was
        reopened after; None if it never reported any."""
        results = self.read_results()
        return results if results is not None else self.read_earlier_results()

    def read_earlier_results(self) -> dict | None:
        """The latest ``results.<batches>.json`` (:meth:`latest_earlier_results_file`) in the current schema; None if
        the run was never reopened; :class:`DamagedRun` if it does not parse."""
        earlier = self.latest_earlier_results_file()
        return None if earlier is None else upgraded_results(_read_json(earlier, required=RESULTS_REQUIRED))

    def was_reopened(self) -> bool:
        """Whether the run trained on past results it had reported (a rung it won, a raised cap, a lifted stop), or
        was trained again from batch 0: its checkpoints then are not all of one reported run."""
        return self.latest_earlier_results_file() is not None or self.earlier_draws_file.exists()

    @property
    def reopen_marker(self) -> Path:
        return self.path / REOPEN

    def trace_file(self, split: str, index: int) -> Path:
        """Where the trace of cached sequence ``index`` of ``split`` is kept (pipeline.inspection)."""
        return self.path / TRACES / f"{split}_{index}.json.gz"

    # ------------------------------------------------------------------------------------------ writers
    def write_config(self, config: RunConfig) -> None:
        """Store ``config`` as the run's, its model's start resolved: a later default never changes what it means."""
        atomic_write_text(self.config_file, yaml.safe_dump(to_dict(config.resolved()), sort_keys=False))

    def archive_results(self) -> None:
        """Keep the results as ``results.<batches>.json``: the run is to train further (extended or reopened)."""
        stored = self.read_results()
        self.results_file.rename(self.earlier_results_file(stored["batches"]))

    earlier_draws_file = property(lambda self: self.path / EARLIER_DRAWS)

    def read_earlier_draws(self) -> list[dict]:
        """The results of the run's earlier draws, oldest first (:meth:`new_draw`); none for most runs."""
        try:
            data = json.loads(self.earlier_draws_file.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            raise DamagedRun(f"{self.earlier_draws_file}: unreadable ({error})") from None
        if not isinstance(data, list) or not all(isinstance(draw, dict) for draw in data):
            raise DamagedRun(f"{self.earlier_draws_file}: not a list of results")
        return data

    def new_draw(self) -> None:
        """Train the run again from batch 0 (its checkpoint lost), keeping what this draw reported, if anything
        (its results, else the latest earlier results it was reopened after), in ``earlier_draws.json``."""
        latest = self.latest_earlier_results_file()
        results = self.read_results() or (upgraded_results(_read_json(latest, required=())) if latest else None)
        if results:
            atomic_write_text(self.earlier_draws_file, json.dumps([*self.read_earlier_draws(), results], indent=2))
        if self.log_file.exists():  # appended to, not removed: a sweep worker may be writing to it already
            with open(self.log_file, "a") as log:
                log.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC: trained again from batch 0; "
                          f"the lines above are the replaced draw's (its results: {EARLIER_DRAWS})\n")
        self.clear()

    def clear(self) -> None:
        """Remove what the run has trained and logged, and the commits that trained it (not its config, nor the rungs
        the sweep decided on it): it starts again from batch 0, and what trains it from there records its own commit.
        A replaced draw's commits stay in its results, in ``earlier_draws.json`` (:meth:`new_draw`)."""
        for name in (*OUTPUTS, COMMITS):
            (self.path / name).unlink(missing_ok=True)
        for old in (*self.path.glob("results.*.json"), *self.path.glob("far_lengths-*.csv")):
            old.unlink()
        shutil.rmtree(self.checkpoints, ignore_errors=True)
        shutil.rmtree(self.traces, ignore_errors=True)  # drawn from the replaced draw's checkpoints

    def read_rungs(self) -> dict[int, float]:
        """Rung (batches) -> the run's standing there, as recorded when the rung was decided (none before)."""
        data = _read_json(self.rungs_file, required=())
        try:
            return {int(rung): float(standing) for rung, standing in (data or {}).items()}
        except (TypeError, ValueError) as error:
            raise DamagedRun(f"{self.rungs_file}: unreadable ({error})") from None

    def record_rung(self, rung: int, standing: float) -> None:
        """Record the run's standing at a rung just decided (a rung already recorded keeps its first record)."""
        rungs = self.read_rungs()
        if rung not in rungs:
            rungs[rung] = standing
            atomic_write_text(self.rungs_file, json.dumps({str(k): v for k, v in sorted(rungs.items())}) + "\n")

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
        """``failed.json``: a :func:`failure_record`."""
        atomic_write_text(self.failed_file, json.dumps(failure, indent=2) + "\n")

    def clear_failure(self) -> None:
        self.failed_file.unlink(missing_ok=True)

    def write_accuracy_by_length(self, rows: list[dict]) -> None:
        header = ["split", "source_length", "n", "coarse", "fine"]
        atomic_write_text(self.accuracy_file, "\n".join([",".join(header)]
                                                        + [",".join(str(r[k]) for k in header) for r in rows]) + "\n")

    def write_first_errors(self, rows: list[dict]) -> None:
        header = ["split", "where", "n", "mean_target_length"]
        lines = [",".join(header)] + [",".join(str(r[k]) for k in header) for r in rows]
        atomic_write_text(self.first_errors_file, "\n".join(lines) + "\n")

    def read_first_errors(self, split: str) -> list[tuple[str, int]]:
        """(where, sequences) of ``split`` from ``first_errors.csv`` (none from a run finished before it existed)."""
        if not self.first_errors_file.exists():
            return []
        _, rows = read_complete_rows(self.first_errors_file)
        try:
            return [(r["where"], int(r["n"])) for r in rows if r["split"] == split]
        except (KeyError, ValueError) as error:
            raise DamagedRun(f"{self.first_errors_file}: unreadable ({error})") from None

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
        """``results.json`` in the current schema (None before the run has finished); :class:`DamagedRun` if it does
        not parse."""
        results = _read_json(self.results_file, required=RESULTS_REQUIRED)
        return None if results is None else upgraded_results(results)

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
            for column, value in row.items():
                if value not in (None, ""):
                    try:
                        float(value)
                    except ValueError:
                        raise DamagedRun(f"{self.metrics_file}: {column} at step {row['step']} is {value!r}, not a "
                                         "number") from None
        return rows

    def check(self) -> dict | None:
        """Raise :class:`DamagedRun` naming the first file a report or a listing could not trust: results that do
        not parse (``results.json``, or the earlier results a run training on stands at), a log that does not, or a
        finished run whose log stops before its results' batches. Returns the results (None before the run has
        finished), read once."""
        trouble = lock_trouble(self.path)
        if trouble:
            raise DamagedRun(trouble)
        results = self.read_results()
        rows = self.read_metrics()
        self.read_failure()
        if results is not None:
            self._check_results(results)
            if self.config_file.is_file():
                mismatch = results_mismatch(results, self.read_config())
                if mismatch:
                    raise DamagedRun(f"{self.results_file}: trained with {mismatch} (config.yaml edited after the run "
                                     "trained?)")
            logged = max((int(row["step"]) for row in rows), default=0)
            if logged < int(results["batches"]):
                raise DamagedRun(f"{self.metrics_file}: logs {logged} batches but {RESULTS} reports "
                                 f"{results['batches']}; the log of a finished run was cut or emptied")
            self._check_accuracy_by_length(results)
            self._check_checkpoint(self.best_checkpoint)
        else:  # an unfinished run resumes from last.ckpt: one that is cut short cannot resume, so it is damaged
            self._check_checkpoint(self.last_checkpoint)
            earlier = self.read_earlier_results()  # reopened past them: the report reads them until it is done
            if earlier is not None:
                self._check_results(earlier)
        return results

    def _check_results(self, results: dict) -> None:
        """Every number a report reads from ``results.json`` is what a run can write: accuracies in [0, 1], a
        finite training perplexity of at least 1 (a NaN loss fails a run, it never finishes one), a positive
        batch count."""
        def number(key):
            value = results[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise DamagedRun(f"{self.results_file}: {key} is {value!r}, not a number")
            return value

        if not (isinstance(results["batches"], int) and results["batches"] > 0):
            raise DamagedRun(f"{self.results_file}: batches is {results['batches']!r}, not a positive integer")
        for key in ACCURACIES:
            if key in results and not 0 <= number(key) <= 1:
                raise DamagedRun(f"{self.results_file}: {key} is {results[key]!r}, outside [0, 1]")
        perplexity = number("train_perplexity")
        if not (math.isfinite(perplexity) and perplexity >= 1):
            raise DamagedRun(f"{self.results_file}: train_perplexity is {perplexity!r}, not a finite number >= 1")

    def _check_accuracy_by_length(self, results: dict) -> None:
        """A finished run's ``accuracy_by_length.csv``, where it has one (runs from before it existed have none),
        counts every sequence its final evaluation scored: a truncated file would silently drop evidence."""
        if not self.accuracy_file.exists():
            return
        try:
            _, rows = read_complete_rows(self.accuracy_file)
            counts: dict[str, int] = {}
            for row in rows:
                int(row["source_length"]), float(row["coarse"]), float(row["fine"])  # each a number, or unreadable
                counts[row["split"]] = counts.get(row["split"], 0) + int(row["n"])
        except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError) as error:
            raise DamagedRun(f"{self.accuracy_file}: unreadable ({type(error).__name__}: {error})") from None
        for split, size in (results.get("eval_sizes") or {}).items():
            if counts.get(split, 0) != size:
                raise DamagedRun(f"{self.accuracy_file}: counts {counts.get(split, 0)} {split} sequences where "
                                 f"{RESULTS} evaluated {size}; the file was cut short")

    def _check_checkpoint(self, path: Path) -> None:
        """A checkpoint, where there is one (an archived run keeps none), is a whole zip archive, as torch writes
        them: a truncated one loses its central directory. Cheap (the directory only, no tensors read)."""
        if not path.exists():
            return
        try:
            with zipfile.ZipFile(path) as archive:
                archive.namelist()
        except (OSError, zipfile.BadZipFile) as error:
            from pipeline.provenance import command_line

            raise DamagedRun(f"{path}: not a readable checkpoint ({error}); `"
                             f"{command_line('transduce', 'train', '--restart', '--run-dir', self.path)}` trains the "
                             "run again from batch 0") from None

    def state(self, config: RunConfig | None = None) -> str:
        """One of :data:`STATES` (``config``: the budget asked of the run now; None: any budget)."""
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


def failure_record(error: str, traceback: str = "") -> dict:
    """What ``failed.json`` holds: the error's line, its traceback, the commit and the time (a sweep's worker, or a
    population for a member whose loss stopped being finite)."""
    import time

    from pipeline.provenance import git_commit

    return {"error": error, "traceback": traceback, "commit": git_commit(), "time": time.strftime("%Y-%m-%d %H:%M:%S")}


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
