"""The runs of a profile or of a folder, one row each: what ``transduce runs`` lists and exports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import yaml

from pipeline.config import ConfigError, RunConfig, from_dict
from pipeline.sweep.status import run_state
from pipeline.training.results import last_logged, logged_rows

RUN_STATES = ("finished", "pruned", "running", "failed", "interrupted", "not started")
COLUMNS = ["id", "task", "model", "hidden", "lr", "seed", "status", "batches", "train_perplexity", "train_coarse",
           "train_fine", "test_coarse", "test_fine"]


def run_row(config: RunConfig, run_dir: Path) -> dict:
    """One run's row: settings from its config, state and numbers from its directory (the final results when it
    has them, else the last logged ones)."""
    state = run_state(run_dir, config)
    row = dict(id=run_dir.name, task=config.task, model=config.model.name, hidden=config.model.hidden,
               lr=config.training.lr, seed=config.training.seed,
               status="not started" if state == "pending" else state, batches=0, train_perplexity=math.nan,
               train_coarse=math.nan, train_fine=math.nan, test_coarse=math.nan, test_fine=math.nan)
    results = run_dir / "results.json"
    if state in ("finished", "pruned") and results.exists():
        r = json.loads(results.read_text())
        row.update(batches=r["batches"], train_perplexity=r["train_perplexity"],
                   **{k: r[k] for k in ("train_coarse", "train_fine", "test_coarse", "test_fine")})
    elif rows := logged_rows(run_dir):  # not done yet: the last values it logged
        row["batches"] = int(rows[-1]["step"])
        for key in ("train_perplexity", "train_coarse", "train_fine", "test_coarse", "test_fine"):
            row[key] = last_logged(rows, key.replace("_", "/", 1))
    return row


def list_runs(where: str | Path, runs_root: Path | None = None) -> pd.DataFrame:
    """Every run of a profile (``where`` a YAML file; runs not started included) or of a folder (every directory
    in it holding a run's config.yaml)."""
    where = Path(where)
    if where.is_file():
        from pipeline.sweep import load_sweep, sweep_root

        sweep = load_sweep(where)
        root = sweep_root(sweep, runs_root)
        rows = [run_row(run, root / run.run_id()) for run in sweep.runs()]
    elif where.is_dir():
        rows = []
        for config_file in sorted(where.glob("*/config.yaml")):
            config = from_dict(RunConfig, yaml.safe_load(config_file.read_text()))
            rows.append(run_row(config, config_file.parent))
    else:
        raise ConfigError(f"{str(where)!r} is neither a profile file nor a folder of runs")
    return pd.DataFrame(rows, columns=COLUMNS)
