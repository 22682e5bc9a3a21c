"""How far past its training lengths a trained model stays exact: accuracy in bands of source length out to 512,
four times the paper's test lengths and eight times its training lengths (the benchmarks of Delétang et al. 2023
test every length up to 500).

The bands' sequences are drawn as the cached evaluation sets are (each band its own documented seed, the task's
own sampler, for the ITG tasks the run's length reading), scored teacher-forced as the final evaluation scores
(:func:`pipeline.evaluation.evaluate`: coarse = every target symbol right, fine = the share of the target's correct
prefix), and written to the run's ``far_lengths.csv`` with the batch count of the checkpoint measured, so a report
can tell a measurement of this checkpoint from one of an earlier one. ``transduce evaluate RUN --far``
(:func:`pipeline.training.run.measure_far_lengths`) measures a finished run; the report draws what its selected
runs have."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from pipeline.files import atomic_write_text
from pipeline.rundir import RunDir
from pipeline.tasks import TASKS, get_task

# Inclusive source-length bands past the test lengths (65-128): the "long" set's two halves, then to 512
FAR_BANDS: tuple[tuple[int, int], ...] = ((129, 192), (193, 256), (257, 320), (321, 384), (385, 448), (449, 512))
FAR_PER_BAND = 100
FAR_SEED_OFFSET = 10  # band k of a task is drawn with seed task.seed_base + 10 + k (the cached sets use + 1..3)
FAR_COLUMNS = ("low", "high", "n", "coarse", "fine", "batches")


def far_seed(task_name: str, band: int) -> int:
    """The documented seed of band ``band`` (an index into :data:`FAR_BANDS`) of ``task_name``."""
    return TASKS[task_name].seed_base + FAR_SEED_OFFSET + band


def far_pairs(task_name: str, band: int, n: int = FAR_PER_BAND, length_distribution: str = "uniform"):
    """The ``n`` pairs of band ``band``, the same on every call."""
    task = get_task(task_name, length_distribution)
    return task.sample_window(np.random.default_rng(far_seed(task_name, band)), FAR_BANDS[band], n)


def far_rows(module, per_band: int = FAR_PER_BAND, batches: int = 0) -> list[dict]:
    """A trained module (:class:`~pipeline.training.module.TransductionModule`) scored on every band of
    :data:`FAR_BANDS`, ``per_band`` sequences each: one row per band, tagged with the checkpoint's ``batches``."""
    from pipeline.evaluation import evaluate

    config, rows = module.config, []
    for band, (low, high) in enumerate(FAR_BANDS):
        pairs = far_pairs(config.task, band, per_band, config.length_distribution)
        scores = evaluate(module.model, pairs, module.vocab)
        rows.append(dict(low=low, high=high, n=len(pairs), coarse=scores.coarse, fine=scores.fine, batches=batches))
    return rows


def write_far_lengths(run_dir: str | Path, rows: list[dict], checkpoint: str = "best") -> Path:
    """``far_lengths.csv`` of a run (of its ``checkpoint``: :meth:`RunDir.far_lengths_of`), written atomically.
    Returns its path."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FAR_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = RunDir(run_dir).far_lengths_of(checkpoint)
    atomic_write_text(path, buffer.getvalue())
    return path


def read_far_lengths(run_dir: str | Path) -> list[dict]:
    """The rows of a run's ``far_lengths.csv`` measured on the checkpoint its results report (none if it was not
    measured, or measured before the run trained on)."""
    folder = RunDir(run_dir)
    if not folder.far_lengths_file.exists() or not folder.results_file.exists():
        return []
    batches = json.loads(folder.results_file.read_text()).get("batches")  # a damaged run is RunDir.check's to name
    with open(folder.far_lengths_file) as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return [row for row in rows if batches is not None and int(row["batches"]) == int(batches)]


def longest_exact_band(rows: list[dict]) -> tuple[int, int] | None:
    """The longest band up to which every band is exact (every sequence right), or None if the first is not."""
    exact = None
    for row in sorted(rows, key=lambda r: r["low"]):
        if row["coarse"] < 1.0:
            break
        exact = (int(row["low"]), int(row["high"]))
    return exact
