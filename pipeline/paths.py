"""Where things live. The package is installed in editable mode from the repository, whose top level holds
``configs/``, ``data_cache/``, ``reports/`` and (git-ignored) ``runs/``."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"
GRAMMAR_DIR = CONFIG_DIR / "grammars"  # the ITG grammars are data, kept with the other configs
REPORTS_DIR = REPO_ROOT / "reports"
RUNS_DIR = REPO_ROOT / "runs"


def data_cache() -> Path:
    """The evaluation-set cache: ``data_cache/`` in the repository, or ``$TRANSDUCE_DATA_CACHE`` when set (for a
    shared cache on a cluster, or a private one in tests). Read at each call, so that worker processes agree."""
    return Path(os.environ.get("TRANSDUCE_DATA_CACHE") or REPO_ROOT / "data_cache")
