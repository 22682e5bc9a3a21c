"""The `transduce` command line: a thin layer over library functions that the tests call directly.

One file per group of commands, each registering on the one app (``pipeline.cli.app``, with its error boundary):

* ``data.py``: generate, sample, data-report;
* ``training.py``: train, evaluate, inspect;
* ``sweeps.py``: sweep, runs, dashboard, archive, study;
* ``reports.py``: report, params, bench.
"""

from pipeline.cli import data, reports, sweeps, training  # noqa: F401  (each registers its commands)
from pipeline.cli.app import app

__all__ = ["app"]
