"""Tiny runs and profiles for the fault and probe tests: seconds, not minutes (hidden 8, memory width 4)."""

from pathlib import Path

import yaml

from pipeline.config import RunConfig, from_dict

TRAINING = dict(perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10, final_eval_size=10,
                checkpoint_every=10, early_stop_patience=0)


def tiny(max_batches=20, seed=0, **training) -> RunConfig:
    """A Stack-LSTM on reversal, hidden 8: trains 20 batches in a few seconds."""
    settings = dict(TRAINING, max_batches=max_batches, seed=seed, **training)
    return from_dict(RunConfig, {"task": "reversal", "model": {"name": "stack", "hidden": 8, "memory_width": 4,
                                                               "embedding": 4},
                                 "training": settings, "tracking": {"wandb": "off"}})


def tiny_profile(folder: Path, name: str = "tiny", workers: int = 1, **training) -> Path:
    """A profile of a 1-layer LSTM and a Stack-LSTM on reversal, hidden 8, written to ``folder/<name>.yaml``."""
    data = {"name": name, "workers": workers,
            "defaults": {"model": {"memory_width": 4, "embedding": 4},
                         "training": {**TRAINING, "max_batches": 20, **training}, "tracking": {"wandb": "off"}},
            "grid": [{"tasks": ["reversal"], "models": ["lstm1", "stack"], "hidden": [8]}]}
    path = Path(folder) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
