"""What a finished run's ``results.json`` answers for (kept apart from the training code so that a sweep's status
probe can read it without importing torch)."""

from __future__ import annotations


def results_cover(results: dict, config) -> bool:
    """Whether stored results answer ``config`` (a RunConfig, or None for "any budget"): the run trained the whole
    budget, or stopped early (converged). A budget raised since means the run is to be extended."""
    if config is None:
        return True
    return results["batches"] >= config.training.max_batches or stop_reason(results) != "budget"


def stop_reason(results: dict) -> str:
    """Why a finished run stopped (see pipeline.training.stopping); results written before stop reasons existed
    say only whether they stopped early, which then meant converged."""
    if "stop_reason" in results:
        return results["stop_reason"]
    return "converged" if results.get("stopped_early") else "budget"


# -- what a run logged (metrics.csv), for reports and listings ---------------------------------------------------

LEARNED_COARSE = 0.99  # the training coarse accuracy at which a run counts as having learned its task


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
