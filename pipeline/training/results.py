"""What a finished run's ``results.json`` answers for (kept apart from the training code so that a sweep's status
probe can read it without importing torch)."""

from __future__ import annotations


def results_cover(results: dict, config) -> bool:
    """Whether stored results answer ``config`` (a RunConfig, or None for "any budget"): the run trained the whole
    budget, or stopped early (converged). A budget raised since means the run is to be extended."""
    if config is None:
        return True
    return results["batches"] >= config.training.max_batches or bool(results.get("stopped_early"))
