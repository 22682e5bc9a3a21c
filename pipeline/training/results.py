"""What a run logged (``metrics.csv``), read for reports, studies and listings (kept apart from the training code so
that a status probe can read it without importing torch). What its ``results.json`` answers for is
:mod:`pipeline.rundir`'s (``results_cover``, ``stop_reason``, its schema: ``upgraded_results``)."""

from __future__ import annotations

LEARNED_COARSE = 0.99  # the training coarse accuracy at which a run counts as having learned its task

# The logged metrics' names (metrics.csv columns, W&B keys): the monitor writes them, the reports, the stopping
# replay and successive halving read them; one spelling, here.
TRAIN_PERPLEXITY = "train/perplexity"  # mean training perplexity of the last perplexity_every batches
TRAIN_COARSE, TRAIN_FINE = "train/coarse", "train/fine"  # on fresh training-length sequences, every evaluation
TEST_COARSE, TEST_FINE = "test/coarse", "test/fine"  # on cached test-length sequences, every evaluation


def logged_rows(run_dir) -> list[dict]:
    """The rows of a run's ``metrics.csv`` (none if it has not logged yet), a cut-off last line ignored; a file
    that does not parse raises :class:`pipeline.rundir.DamagedRun` naming it."""
    from pipeline.rundir import RunDir

    return RunDir(run_dir).read_metrics()


def logged_values(rows: list[dict], column: str) -> list[tuple[int, float]]:
    """(step, value) of every row that logged ``column``, in order."""
    return [(int(row["step"]), float(row[column])) for row in rows if row.get(column) not in (None, "")]


def last_logged(rows: list[dict], column: str) -> float:
    """The last value logged in ``column``; NaN if none."""
    values = logged_values(rows, column)
    return values[-1][1] if values else float("nan")

