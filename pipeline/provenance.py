"""What made a result: the command, the commit, the locked environment and the time. Every report and every run
records it."""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys
from pathlib import Path

from pipeline.paths import REPO_ROOT


def git_commit() -> str:
    """The checked-out commit, with ``-dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


LOCK_FILE = REPO_ROOT / "requirements.lock"


def lock_hash() -> str:
    """The first 12 hex digits of requirements.lock's sha256: the exact environment (``make venv`` installs it);
    ``none`` without one."""
    try:
        return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()[:12]
    except OSError:
        return "none"


def current_command() -> str:
    return " ".join([Path(sys.argv[0]).name] + sys.argv[1:])


def provenance(command: str | None = None) -> str:
    """One markdown line: the command, commit, environment lock and UTC time that produced a report."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Made by `{command or current_command()}` at commit `{git_commit()}` with environment lock "
            f"`{lock_hash()}` (requirements.lock), {now}.")
