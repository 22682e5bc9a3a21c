"""Where things live. The package is installed in editable mode from the repository, whose top level holds
``configs/``, ``data_cache/``, ``reports/`` and (git-ignored) ``runs/``."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"
DATA_CACHE = REPO_ROOT / "data_cache"
REPORTS_DIR = REPO_ROOT / "reports"
RUNS_DIR = REPO_ROOT / "runs"
