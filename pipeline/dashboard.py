"""One local dashboard for a whole profile: ``transduce dashboard configs/cpu.yaml``.

Every run keeps its own offline W&B run under ``<run dir>/wandb/offline-run-*`` (unless its tracking is off), and
W&B's terminal viewer, ``wandb leet <folder>``, lists the runs of one folder and overlays their curves. So the
dashboard is a folder of links, one per offline run of the profile (or of a runs folder), optionally only some
tasks and models, made afresh each time under ``<runs folder>/.dashboard/``; then ``wandb leet`` opens it. Each link
keeps W&B's own folder name, ``run-<date>_<time>-<W&B id>``: leet selects only folders named so (a link named
``run-<run id>`` was listed and never opened), and its run overview (Enter) names the run by its run id. A run
without an offline W&B run (trained with tracking off, as the smoke profile and the studies are, or restored from
an archive, which keeps ``metrics.csv`` only) gets one made from its ``metrics.csv`` on demand, kept under
``<runs folder>/.dashboard-made/`` and made again only when the log changes (about half a second a run). No account
and no network: everything is read from the run directories.
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
    legend: list[tuple[str, str]]  # (link name as leet lists it, run id), in the list's order
    without_wandb: list[str]  # runs of the selection that have no offline W&B run (tracking off, or archived)


def writable(folder: Path) -> bool:
    """Whether this process may make files in ``folder``."""
    return os.access(folder, os.W_OK | os.X_OK)


def link_home(root: Path, links: Path | None = None) -> Path:
    """Where the dashboard's folders go: ``links`` when given, else ``<runs folder>/`` when this process may write
    there, else a folder of its own under the system's temporary folder (a shared or read-only runs folder is viewed
    without writing into it)."""
    if links is not None:
        return Path(links)
    if writable(root):
        return root
    import hashlib
    import tempfile

    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"transduce-dashboard-{os.getuid()}-{digest}"


def gather(where: str | Path, runs_root: Path | None = None, tasks: list[str] | None = None,
           models: list[str] | None = None, links: Path | None = None) -> Dashboard:
    """Link every offline W&B run of the selected runs of ``where`` (a profile or a folder of runs) into one
    folder (under ``links``, else :func:`link_home`); the runs folder itself is only read. The folder is rebuilt
    from scratch: a run removed or filtered out since does not linger."""
    from pipeline.runs import list_runs

    where = Path(where)
    table = list_runs(where, runs_root, tasks=tasks, models=models)
    if where.is_file():
        from pipeline.sweep import load_sweep, sweep_root

        root = sweep_root(load_sweep(where), runs_root)
    else:
        root = where
    home = link_home(root, links)
    folder = home / ".dashboard"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    linked, missing, legend = [], [], []
    for run_id in table.id:
        offline = sorted(RunDir(root / run_id).wandb_dir.glob("offline-run-*"))
        if not offline:
            made = made_from_log(RunDir(root / run_id), home / ".dashboard-made")
            offline = [made] if made is not None else []
        if not offline:
            missing.append(run_id)
            continue
        for run in offline:  # a run resumed in several processes has one offline run per process
            name = link_name(run)
            (folder / name).symlink_to(run.resolve(), target_is_directory=True)
            legend.append((name, run_id))
        linked.append(run_id)
    legend.sort(reverse=True)  # leet lists the newest first
    return Dashboard(folder, linked, legend, missing)


def link_name(offline_run: Path) -> str:
    """The name a run is linked by: W&B's own folder name, ``offline-run-<date>_<time>-<W&B id>``, without its
    ``offline-`` (eight more columns for the id in leet's list). ``wandb leet`` selects only folders whose names match
    ``run-<8 digits>_<6 digits>-<id>`` and reads ``run-<id>.wandb`` inside; any other name is listed but never
    opens (the run id as the name did exactly that)."""
    return Path(offline_run).name.removeprefix("offline-")


def made_from_log(run: RunDir, store: Path) -> Path | None:
    """An offline W&B run written from ``run``'s ``metrics.csv`` (None when it has logged nothing, or its files are
    damaged), kept under ``store/<run name>/`` and rewritten only when the log has changed since."""
    from pipeline.config import to_dict
    from pipeline.rundir import DamagedRun

    try:
        rows = run.read_metrics()
        config = run.read_config()
    except (DamagedRun, ConfigError):
        return None
    if not rows:
        return None
    info = run.metrics_file.stat()
    stamp = f"{info.st_size}-{info.st_mtime_ns}"
    target = store / run.name
    made = sorted((target / "wandb").glob("offline-run-*"))
    if made and (target / "stamp").is_file() and (target / "stamp").read_text() == stamp:
        return made[-1]
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    identity = config.run_id().rsplit("-", 1)[1]
    record = wandb.init(mode="offline", dir=str(target), project=config.tracking.project, name=run.name,
                        id=f"{config.task}-{config.model.name}-{identity}-log", config=to_dict(config),
                        reinit="create_new", settings=wandb.Settings(console="off", x_disable_stats=True))
    for row in rows:
        values = {k: float(v) for k, v in row.items() if k != "step" and v not in (None, "")}
        record.log(values, step=int(row["step"]))
    record.finish()
    (target / "stamp").write_text(stamp)
    return sorted((target / "wandb").glob("offline-run-*"))[-1]


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
