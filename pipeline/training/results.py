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
