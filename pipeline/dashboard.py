"""One local dashboard for a whole profile: ``transduce dashboard configs/cpu.yaml``.

Every run keeps its own offline W&B run under ``<run dir>/wandb/offline-run-*`` (unless its tracking is off), and
W&B's terminal viewer, ``wandb leet <folder>``, lists the runs of one folder and overlays their curves. So the
dashboard is a folder of links, one per offline run of the profile (or of a runs folder), optionally only some
tasks and models, made afresh each time under ``<runs folder>/.dashboard/``; then ``wandb leet`` opens it. No
account and no network: everything is read from the run directories.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import ConfigError
from pipeline.rundir import RunDir


@dataclass(frozen=True)
class Dashboard:
    folder: Path  # the folder of links that `wandb leet` opens
    linked: list[str]  # the runs shown (run directory names)
    without_wandb: list[str]  # runs of the selection that have no offline W&B run (tracking off, or archived)


def gather(where: str | Path, runs_root: Path | None = None, tasks: list[str] | None = None,
           models: list[str] | None = None) -> Dashboard:
    """Link every offline W&B run of the selected runs of ``where`` (a profile or a folder of runs) into one
    folder. The folder is rebuilt from scratch: a run removed or filtered out since does not linger."""
    from pipeline.runs import list_runs

    where = Path(where)
    table = list_runs(where, runs_root)
    if tasks:
        table = table[table.task.isin(tasks)]
    if models:
        table = table[table.model.isin(models)]
    if where.is_file():
        from pipeline.sweep import load_sweep, sweep_root

        root = sweep_root(load_sweep(where), runs_root)
    else:
        root = where
    folder = root / ".dashboard"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    linked, missing = [], []
    for run_id in table.id:
        offline = sorted(RunDir(root / run_id).wandb_dir.glob("offline-run-*"))
        if not offline:
            missing.append(run_id)
            continue
        for run in offline:
            (folder / run.name).symlink_to(run.resolve(), target_is_directory=True)
        linked.append(run_id)
    return Dashboard(folder, linked, missing)


def wandb_command(folder: Path) -> list[str]:
    """``wandb leet <folder>`` with this environment's ``wandb``."""
    beside = Path(sys.executable).parent / "wandb"
    executable = str(beside) if beside.exists() else shutil.which("wandb")
    if executable is None:
        raise ConfigError("the wandb command is not installed in this environment (make venv installs it)")
    return [executable, "leet", str(folder)]


def open_dashboard(dashboard: Dashboard) -> None:
    """Replace this process by ``wandb leet`` on the dashboard's folder (a terminal UI; q quits)."""
    command = wandb_command(dashboard.folder)
    os.execv(command[0], command)
