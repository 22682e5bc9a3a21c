"""What the training loop must not move (issue 79, item 6), recorded by the loop as it was before its refactor
(commit abc305b): the ``metrics.csv`` of eight tiny CPU runs, and one ``last.ckpt`` that must still resume.

The eight runs (hidden 16, float32, CPU) cover every way the loop trains a run:

* three single runs (``transduce train``'s path): a Queue on copy, extended from its 40-batch checkpoint to 60; a
  DeQue on reversal; a 2-layer LSTM on the ITG task gender;
* three members of one population stepped one after another (a CPU's way), two at a time: Stack-LSTMs on copy,
  reversal (which leaves at 40, its slot taken by the third) and the ITG task SVO->SOV;
* two members of a batched population (a GPU's way, run eagerly on the CPU): 1-layer LSTMs on copy and gender.

Their logs are kept per kind of machine, as tests/engine_cases.py keeps its own (float32 sums differ in their last bits
between AVX2 and AVX-512): ``tests/data/loop_guard/<kind>/<case>.csv``, compared byte for byte on a recorded kind and
within float32 noise on another. ``tests/data/loop_guard/checkpoint_before_refactor.tar.gz`` is a run folder (hidden
8, a Stack on reversal) trained to 40 of its 60 batches by that code; ``<kind>/resumed-checkpoint.csv`` is the log
that code wrote resuming it to 60.

``python tests/loop_guard.py`` writes this machine's set; run it only to re-baseline on purpose, and say why in the
commit.
"""

from __future__ import annotations

from pathlib import Path

from engine_cases import assert_golden_in, golden_dir_in

from pipeline.config import RunConfig, from_dict

GUARD_ROOT = Path(__file__).parent / "data" / "loop_guard"
CHECKPOINT_ARCHIVE = GUARD_ROOT / "checkpoint_before_refactor.tar.gz"


def guard_config(task: str, model: str, seed: int, lr: float, max_batches: int, clip_mode: str = "norm",
                 hidden: int = 16) -> RunConfig:
    training = dict(seed=seed, lr=lr, max_batches=max_batches, clip_mode=clip_mode, clip=0.5, perplexity_every=10,
                    eval_every=20, eval_size=10, test_eval_size=10, final_eval_size=10, checkpoint_every=20,
                    early_stop_patience=0)
    return from_dict(RunConfig, {"task": task, "model": {"name": model, "hidden": hidden, "embedding": 8,
                                                         "memory_width": 8},
                                 "training": training, "tracking": {"wandb": "off"}})


# case -> config; the single runs first, then each population's members in order
SINGLE = {
    "single-queue-copy-value-extended": guard_config("copy", "queue", 1, 5e-3, 60, "value"),
    "single-deque-reversal-norm": guard_config("reversal", "deque", 2, 2e-3, 60),
    "single-lstm2-gender-norm": guard_config("gender", "lstm2", 3, 2e-3, 60),
}
EXTENDED_FROM = 40  # the extended single run trains this far first, then on to its budget
ONE_AFTER_ANOTHER = {
    "member-stack-copy": guard_config("copy", "stack", 4, 1e-3, 60),
    "member-stack-reversal": guard_config("reversal", "stack", 5, 2e-3, 40),
    "member-stack-svo_sov": guard_config("svo_sov", "stack", 6, 1e-3, 60),
}
BATCHED = {
    "batched-lstm1-copy": guard_config("copy", "lstm1", 7, 2e-3, 40),
    "batched-lstm1-gender": guard_config("gender", "lstm1", 8, 1e-3, 40),
}
CHECKPOINT_CONFIG = guard_config("reversal", "stack", 9, 5e-3, 60, hidden=8)


# What trains together: each single run alone, each population's members as one population (its cases, batched or
# not). The suite trains each unit in a test of its own, so that the units spread over its processes.
POPULATIONS = {"one-after-another": (ONE_AFTER_ANOTHER, False), "batched": (BATCHED, True)}
UNITS = (*SINGLE, *POPULATIONS)


def train_unit(unit: str, root: Path) -> dict[str, Path]:
    """Train one unit's runs under ``root``; returns each of its cases' run folders."""
    from pipeline.training.run import train, train_population

    if unit in SINGLE:
        config, folder = SINGLE[unit], root / unit
        if unit.endswith("-extended"):
            short = from_dict(RunConfig, {**_as_dict(config),
                                          "training": {**_as_dict(config)["training"], "max_batches": EXTENDED_FROM}})
            train(short, folder, progress=False)
        train(config, folder, progress=False)
        return {unit: folder}
    population, batched = POPULATIONS[unit]
    dirs = [root / case for case in population]
    train_population(list(population.values()), dirs, width=2, batched=batched, static_shapes=False)
    return dict(zip(population, dirs))


def train_cases(root: Path) -> dict[str, Path]:
    """Train the eight runs under ``root``; returns each case's run folder."""
    return {case: folder for unit in UNITS for case, folder in train_unit(unit, root).items()}


def resume_checkpoint(root: Path) -> Path:
    """The archived 40-batch run folder unpacked under ``root`` and trained on to 60; returns the folder."""
    import tarfile

    from pipeline.training.run import train

    with tarfile.open(CHECKPOINT_ARCHIVE) as archive:
        archive.extractall(root, filter="data")
    train(CHECKPOINT_CONFIG, root / "run", progress=False)
    return root / "run"


def _as_dict(config: RunConfig) -> dict:
    from pipeline.config import to_dict

    return to_dict(config)


def assert_guarded(text: str, case: str) -> None:
    assert_golden_in(GUARD_ROOT, text, case)


if __name__ == "__main__":
    import shutil
    import sys
    import tarfile
    import tempfile

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from engine_cases import machine_kind

    from pipeline.training.run import train

    name = machine_kind().replace("(R)", "").replace(" Processor", "").replace(" @ ", "-").replace(" / ", "-")
    out = golden_dir_in(GUARD_ROOT) or GUARD_ROOT / name.replace(" ", "-").lower()
    out.mkdir(parents=True, exist_ok=True)
    (out / "machine.txt").write_text(machine_kind() + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        for case, folder in train_cases(Path(tmp)).items():
            shutil.copy(folder / "metrics.csv", out / f"{case}.csv")
            print(case, (out / f"{case}.csv").read_text().count("\n"), "lines")
    if not CHECKPOINT_ARCHIVE.exists():  # made once, by the code before the refactor
        with tempfile.TemporaryDirectory() as tmp:
            short = from_dict(RunConfig, {**_as_dict(CHECKPOINT_CONFIG), "training": {
                **_as_dict(CHECKPOINT_CONFIG)["training"], "max_batches": EXTENDED_FROM}})
            train(short, Path(tmp) / "run", progress=False)
            with tarfile.open(CHECKPOINT_ARCHIVE, "w:gz") as archive:
                archive.add(Path(tmp) / "run", arcname="run")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(resume_checkpoint(Path(tmp)) / "metrics.csv", out / "resumed-checkpoint.csv")
