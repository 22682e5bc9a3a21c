"""The report a profile gets, chosen once: Table 3 beside the paper's (:mod:`pipeline.reports.build`) for a grid of
the paper's models and tasks, the baselines' report (:mod:`pipeline.reports.baselines`) for one with a model or task
beside them. ``transduce report`` writes it."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import SweepConfig
from pipeline.reports.baselines import write_baselines_report
from pipeline.reports.build import beside_the_paper, write_report


def write_profile_report(sweep: SweepConfig, config_file: str | Path, runs_root: Path | None = None,
                         out_dir: Path | None = None, command: str | None = None, force: bool = False) -> Path:
    """Write ``reports/<profile>/`` (or ``out_dir``) with the report the profile's grid calls for. Returns the
    README's path; refused as each report refuses (:class:`~pipeline.reports.kinds.ReportRefused`)."""
    if beside_the_paper(sweep):
        return write_baselines_report(sweep, config_file, runs_root, out_dir, command, force)
    return write_report(sweep, config_file, runs_root, out_dir, command, force=force)
