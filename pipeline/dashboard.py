"""One local dashboard for a whole profile: ``transduce dashboard configs/cpu.yaml``.

Every run keeps its own offline W&B run under ``<run dir>/wandb/offline-run-*`` (unless its tracking is off), and
W&B's terminal viewer, ``wandb leet <folder>``, lists the runs of one folder and overlays their curves. So the
dashboard is a folder made afresh each time under ``<runs folder>/.dashboard/`` (or under ``--links``; for a runs
folder this process may not write into, under a temporary folder of its own: the runs are only read), one entry per
offline run of the profile (or of a runs folder), optionally only some tasks and models; then ``wandb leet`` opens
it.

leet opens only folders named ``run-<8 digits>_<6 digits>-<id>`` holding ``run-<id>.wandb``, and its runs list shows
those names cut to 32 columns in an 80-column terminal. So each entry is named for what tells the runs apart, in 15
columns: ``run-00000000_000001-rev-stk-1e-3-s0`` is the first of the list, reversal, Stack-LSTM, lr 1e-3, seed 0
(:func:`short_name`; the digits only number the list, in the names' order), a folder holding one link to the
run's own ``.wandb`` log under that id. Where two runs of the selection would share a name, the setting that
differs (hidden size) or the start of the run id's hash is added (the list then cuts it; Enter shows the run id).
Every run starts selected, so leet overlays every curve. A run without an offline W&B run (trained with tracking
off, as the smoke profile and the studies are, or restored from an archive, which keeps ``metrics.csv`` only) gets
one made from its ``metrics.csv`` on demand, kept under ``<runs folder>/.dashboard-made/`` and made again only when
the log changes (about half a second a run). No account and no network: everything is read from the run
directories.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import ConfigError
from pipeline.rundir import RunDir

# Short codes of tasks and models in the names leet lists (anything else keeps its own name)
TASK_CODES = {"copy": "cpy", "reversal": "rev", "bigram_flip": "bgf", "svo_sov": "svo", "gender": "gen",
              "reverse_string": "rvs", "duplicate_string": "dup"}
MODEL_CODES = {"lstm1": "L1", "lstm2": "L2", "lstm4": "L4", "lstm8": "L8", "stack": "stk", "queue": "que",
               "deque": "deq", "jm_stack": "jm", "transformer": "tf"}
# the Transformer's positional encoding, one letter after "tf": sinusoidal, learned, none, randomised
ENCODING_CODES = {"sinusoidal": "S", "learned": "L", "none": "N", "randomised": "R"}
LEET_PREFIX = "run-00000000_"  # where leet wants a date; the six digits after it number the list
SETTINGS_FILE = ".wandb-leet.json"  # leet's state of one folder: which runs are selected (their curves drawn)


@dataclass(frozen=True)
class Dashboard:
    folder: Path  # the folder that `wandb leet` opens
    linked: list[str]  # the runs shown (run directory names)
    legend: list[tuple[str, str]]  # (name as leet lists it, run id), in the list's order
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


def short_name(config) -> str:
    """``<task>-<model>-<lr>-s<seed>`` in short codes, 15 columns for the paper's tasks and models at seeds below
    10: ``rev-stk-1e-3-s0``, ``bgf-L8-5e-5-s1``, ``dup-tfR-1e-3-s2`` (the Transformer's positional encoding)."""
    model = MODEL_CODES.get(config.model.name, config.model.name)
    if config.model.name == "transformer":
        encoding = config.model.positional_encoding
        model += ENCODING_CODES.get(encoding, encoding[:1])
    rate = f"{config.training.lr:.0e}".replace("e-0", "e-").replace("e+0", "e")
    return f"{TASK_CODES.get(config.task, config.task)}-{model}-{rate}-s{config.training.seed}"


def gather(where: str | Path, runs_root: Path | None = None, tasks: list[str] | None = None,
           models: list[str] | None = None, links: Path | None = None) -> Dashboard:
    """Gather every offline W&B run of the selected runs of ``where`` (a profile or a folder of runs) into one
    folder (under ``links``, else :func:`link_home`), each under its short name, every one selected; the runs folder
    itself is only read. The folder is rebuilt from scratch: a run removed or filtered out since does not linger."""
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
    linked, missing, entries = [], [], []
    for run_id in table.id:
        run = RunDir(root / run_id)
        logs = [log for offline in sorted(run.wandb_dir.glob("offline-run-*")) for log in offline.glob("*.wandb")]
        if not logs:
            made = made_from_log(run, home / ".dashboard-made")
            logs = list(made.glob("*.wandb")) if made is not None else []
        try:
            config = run.read_config() if logs else None
        except ConfigError:
            config = None
        if config is None:
            missing.append(run_id)
            continue
        for part, log in enumerate(logs):  # a run resumed in several processes has one offline run per process
            entries.append((short_name(config), config, run_id, part, log))
        linked.append(run_id)
    legend = []
    for number, (name, run_id, log) in enumerate(distinct_names(entries), start=1):
        entry = folder / f"{LEET_PREFIX}{number:06d}-{name}"
        entry.mkdir()
        (entry / f"run-{name}.wandb").symlink_to(log.resolve())
        legend.append((entry.name, run_id))
    (folder / SETTINGS_FILE).write_text(json.dumps({"selected_runs": [name for name, _ in legend]}, indent=2) + "\n")
    return Dashboard(folder, linked, legend, missing)


def distinct_names(entries: list[tuple]) -> list[tuple[str, str, Path]]:
    """(name, run id, log) for each entry (short name, config, run id, part, log), sorted by name. A short name
    that two runs share gets each one's hidden size where theirs differ, else the first four characters of its run
    id's hash; a run's second and later logs (resumed in another process) ``.2``, ``.3``."""
    runs = Counter(base for base, _, _, part, _ in entries if part == 0)

    def name(base, config, run_id) -> str:
        if runs[base] < 2:
            return base
        hiddens = {c.model.hidden for b, c, _, p, _ in entries if b == base and p == 0}
        return f"{base}-h{config.model.hidden}" if len(hiddens) == runs[base] else \
            f"{base}-{run_id.rsplit('-', 1)[-1][:4]}"

    return sorted((name(base, config, run_id) + (f".{part + 1}" if part else ""), run_id, log)
                  for base, config, run_id, part, log in entries)


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
