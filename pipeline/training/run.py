"""Training runs, from config to results, resumable: :func:`train` (one run, what ``transduce train`` calls) and
:func:`train_population` (P runs of one architecture together, what a sweep's populations call). Both admit their
runs through :mod:`pipeline.training.runlife` and train them in the one loop, :mod:`pipeline.training.engine`: a
single run is a population of one.

Run directory (``runs/<run id>/`` by default; the id is readable plus a hash of the config)::

    config.yaml               the resolved config (a directory belongs to exactly one config)
    metrics.csv               the run's log: perplexity every perplexity_every batches, accuracies every eval_every
    checkpoints/last.ckpt     for resuming; checkpoints/best.ckpt: the weights selected for reporting
    results.json              written last, atomically: the run is finished once it exists
    accuracy_by_length.csv    coarse/fine per source length on the cached train, test and long sets
    wandb/                    the offline dashboard, unless tracking is off

Run the same command again after a crash (even ``kill -9``) and it continues from ``last.ckpt`` with the same
data stream; run it after it finished and it returns the stored results.
"""

from __future__ import annotations

from pathlib import Path

import torch

from pipeline.config import INITIAL_VALUES, ConfigError, RunConfig, model_settings
from pipeline.data.cache import load_eval_set
from pipeline.evaluation import coarse_accuracy, evaluate, fine_accuracy, greedy_correct_prefix
from pipeline.models import unstackable
from pipeline.paths import RUNS_DIR
from pipeline.provenance import check_committed
from pipeline.rundir import RunDir
from pipeline.runtime import configure_cpu_process, resolve_device
from pipeline.training.engine import EVAL_SPLITS, RunStopped, train_members
from pipeline.training.module import TransductionModule
from pipeline.training.runlife import RunBusy, admit, holding, lost_its_checkpoint, read_checkpoint

# what callers import from here: the entry points, and what they catch
__all__ = ["EVAL_SPLITS", "RunBusy", "RunStopped", "evaluate_run", "load_run", "measure_far_lengths",
           "population_key", "run_directory", "train", "train_population"]

# What every member of one population shares: the architecture (its parameters' shapes) and the step's arithmetic.
# Task, seed, learning rate, budget, schedules and stopping rules are each member's own.
SHARED_TRAINING = ("batch_size", "clip", "clip_mode", "optimizer", "rmsprop_alpha", "rmsprop_eps")


def run_directory(config: RunConfig, runs_root: Path = RUNS_DIR) -> Path:
    return Path(runs_root) / config.run_id()


def train(config: RunConfig, run_dir: Path | None = None, *, cache_dir: Path | None = None,
          progress: bool = True, restart: bool = False, reopen: bool = False, accelerator: str = "auto",
          locked: bool = False) -> dict:
    """Train (or resume, or extend, or just return the results of) the run described by ``config``.

    A run directory whose results cover ``config`` (it trained ``max_batches``, or stopped early) returns them. One
    whose budget was raised since is extended: its results are kept as ``results.<batches>.json`` and training
    resumes from ``last.ckpt``. A run that stopped early (pruned, converged, plateau) is continued only with
    ``reopen``. A directory that has logged batches but lost ``last.ckpt`` is refused unless ``restart``, which
    trains the run again from batch 0 (its metrics, checkpoints and results are replaced; the results, or those it
    was reopened after, are kept in ``earlier_draws.json``).

    Only one process trains a run directory: this takes its lock (:mod:`pipeline.runlock`) and raises
    :class:`RunBusy` when another process holds it; ``locked`` says the caller (a sweep worker) holds it already."""
    config.validate()
    config = config.resolved()  # the model's start as this code defines it, in the checkpoints and results too
    check_committed()  # the commit a run records is the code that trains it (or says -dirty, when allowed)
    device = resolve_device(accelerator)  # unknown, or cuda where there is none: refused before any work
    run_dir = Path(run_dir) if run_dir is not None else run_directory(config)
    with holding([run_dir], locked):
        if not admit(config, run_dir, restart, reopen):
            return RunDir(run_dir).read_results()
        configure_cpu_process()
        results = train_members([(0, config, run_dir)], device=device, where=run_dir, cache_dir=cache_dir,
                                isolate_failures=False, progress=progress)
    return results[0]


def population_key(config: RunConfig) -> tuple:
    """Runs with equal keys can train as one population: one model (the start biases aside: they are initial values,
    not shapes), one step. Tasks differ in vocabulary (the synthetic tasks' and each ITG task's), which a stacked
    population pads to its largest (:class:`~pipeline.training.population.Population`): not part of the key."""
    model = {k: v for k, v in model_settings(config.model).items() if k not in INITIAL_VALUES}
    training = tuple(getattr(config.training, k) for k in SHARED_TRAINING)
    return tuple(sorted(model.items())), training


def cannot_batch(config: RunConfig) -> str | None:
    """Why ``config``'s run cannot be a member of a batched population (None where it can): its model's reason
    (:func:`pipeline.models.unstackable`), or an optimizer other than the RMSProp the batched step implements
    (:class:`~pipeline.training.step.PopulationRMSprop`)."""
    from pipeline.training.population import POPULATION_CLASSES

    why = unstackable(config.model)
    if why is None and config.model.name not in POPULATION_CLASSES:
        why = f"model {config.model.name!r} has no batched population"
    if why is None and config.training.optimizer != "rmsprop":
        why = f"training.optimizer is {config.training.optimizer!r}; a batched population steps RMSProp only"
    return why


def check_population(configs: list[RunConfig], run_dirs: list[Path], batched: bool) -> None:
    """One line, before any work, where the runs cannot train as one population."""
    if not configs or len(configs) != len(run_dirs):
        raise ConfigError(f"a population needs one run directory per config, got {len(configs)} configs and "
                          f"{len(run_dirs)} directories")
    for config in configs:
        config.validate()
        why = cannot_batch(config) if batched else None
        if why is not None:
            raise ConfigError(f"{config.run_id()}: cannot be stacked as one batched population ({why}); train its "
                              "runs on their own, or one member after another (batched=False)")
        probes = config.model.probes
        masked = [f"bottom_read_heard_from ({probes.bottom_read_heard_from})"] * (probes.bottom_read_heard_from
                                                                                  is not None)
        masked += ["read_zeroed"] * probes.read_zeroed
        if batched and masked:  # a mask over each member's controller input, which the stacked step does not apply
            raise ConfigError(f"{config.run_id()}: model.probes.{masked[0]} is not supported by a batched "
                              "population; train the run on its own, or one member after another (batched=False)")
    keys = [population_key(c) for c in configs]
    for config, key in zip(configs, keys):
        if key != keys[0]:
            raise ConfigError(f"{config.run_id()} cannot train in one population with {configs[0].run_id()}: a "
                              "population's runs share the model (name, sizes) and "
                              f"training's {', '.join(SHARED_TRAINING)}")
    if len({Path(d).resolve() for d in run_dirs}) != len(run_dirs):
        raise ConfigError("a population's runs need a directory each; two members were given the same one")


def static_length() -> int:
    """The longest joint sequence of training: ``<s> source <|> target </s>`` at the longest training source of any
    registered task (131: the paper's tasks at source 64)."""
    from pipeline.tasks import longest_training_sequence

    return longest_training_sequence()


def train_population(configs: list[RunConfig], run_dirs: list[Path], *, cache_dir: Path | None = None,
                     accelerator: str = "auto", static_shapes: bool | None = None,
                     width: int | None = None, batched: bool | None = None,
                     restart_lost: bool = False) -> list[dict | None]:
    """Train (or resume, or return the results of) the runs ``configs`` in ``run_dirs`` as one population, at most
    ``width`` of them at a time (None: all): when a member stops, it is finished (its results written) and the next
    run waiting takes its place. Returns each run's results, in order (None for a run whose training failed: its
    ``failed.json`` says why; the others go on). Raises :class:`RunBusy` if another process trains one of them,
    :class:`RunStopped` on SIGTERM or Ctrl-C (every member resumes from its last checkpoint when run again).

    ``batched`` (default: on a GPU) steps the members as one model; otherwise each member takes its own step in turn
    (``docs/training.md``). ``static_shapes`` (batched only; default: on a GPU) pads every step to
    :func:`static_length`, the shape a captured step needs; then no member's arithmetic depends on the others'
    batches, so a population killed between two members' checkpoints resumes bit for bit. ``restart_lost`` (the
    sweep's choice) trains a member whose checkpoint is gone again from batch 0
    (:func:`~pipeline.training.runlife.lost_its_checkpoint`), where it would otherwise be refused."""
    run_dirs = [Path(d) for d in run_dirs]
    configs = [config.resolved() for config in configs]  # as train() does: the models' starts as this code defines
    check_committed()
    if width is not None and width < 1:
        raise ConfigError(f"a population's width must be at least 1, got {width!r}")
    device = resolve_device(accelerator)
    if batched is None:  # a GPU's way, where the model can be stacked (else one member after another)
        batched = device.type == "cuda" and all(cannot_batch(c) is None for c in configs)
    check_population(configs, run_dirs, batched)
    length = static_length() if batched and (device.type == "cuda" if static_shapes is None else static_shapes) \
        else None
    with holding(run_dirs):  # every run of the population is taken before any trains
        if restart_lost:
            for config, run_dir in zip(configs, run_dirs):
                if lost_its_checkpoint(run_dir, config):
                    RunDir(run_dir).new_draw()
        configure_cpu_process()
        waiting, answered = [], {}
        for k, (config, run_dir) in enumerate(zip(configs, run_dirs)):  # every refusal before any training
            if admit(config, run_dir):
                waiting.append((k, config, run_dir))
            else:
                answered[k] = RunDir(run_dir).read_results()
        trained = train_members(waiting, device=device, where=run_dirs[0].parent, cache_dir=cache_dir, width=width,
                                batched=batched, length=length, population=[c.run_id() for c in configs])
    done = {**answered, **trained}
    return [done.get(k) for k in range(len(configs))]


def load_run(run_dir: Path, checkpoint: str = "best", accelerator: str = "cpu") -> TransductionModule:
    """The module of a run directory with the weights of ``checkpoint`` ("best" or "last"), on ``accelerator``'s
    device (see :func:`resolve_device`)."""
    return load_run_at(run_dir, checkpoint, accelerator)[0]


def load_run_at(run_dir: Path, checkpoint: str = "best", accelerator: str = "cpu") -> tuple[TransductionModule, int]:
    """:func:`load_run`, and the batch its checkpoint was written at."""
    device = resolve_device(accelerator)
    folder = RunDir(run_dir)
    config = folder.read_config()
    path = folder.checkpoint(checkpoint)
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no {checkpoint} checkpoint yet ({path} is missing)")
    module = TransductionModule.from_config(config)
    stored = read_checkpoint(path, run_dir, config)
    module.load_state_dict(stored["state_dict"])
    return module.to(device), int(stored["global_step"])


def evaluate_run(run_dir: Path, checkpoint: str = "best", splits: tuple[str, ...] = EVAL_SPLITS, *,
                 greedy: bool = False, cache_dir: Path | None = None, accelerator: str = "cpu",
                 size: int | None = None) -> dict:
    """Re-evaluate a run's checkpoint on the cached sets: {split: {"coarse", "fine", "n"}}, on the first ``size``
    sequences of each (None: all; the final evaluation scores the first ``final_eval_size``). ``greedy`` decodes
    step by step (slow) instead of reading the same numbers off one teacher-forced pass."""
    configure_cpu_process()
    module = load_run(run_dir, checkpoint, accelerator)
    out = {}
    for split in splits:
        pairs = load_eval_set(module.config.task, split, cache_dir, module.config.length_distribution).pairs[:size]
        if greedy:
            prefix = greedy_correct_prefix(module.model, pairs, module.vocab)
            lengths = torch.tensor([len(p.target) + 1 for p in pairs])
            coarse, fine = coarse_accuracy(prefix, lengths), fine_accuracy(prefix, lengths)
        else:
            scores = evaluate(module.model, pairs, module.vocab)
            coarse, fine = scores.coarse, scores.fine
        out[split] = {"coarse": coarse, "fine": fine, "n": len(pairs)}
    return out


def measure_far_lengths(run_dir: str | Path, checkpoint: str = "best", per_band: int | None = None,
                        accelerator: str = "cpu") -> list[dict]:
    """Score a finished run's ``checkpoint`` (the one its results report: "best") on every band and write
    ``far_lengths.csv`` into the run directory (another checkpoint's: ``far_lengths-<checkpoint>.csv``, never over the
    reported checkpoint's, which the report reads). Returns the rows."""
    from pipeline.generalisation import FAR_PER_BAND, far_rows, write_far_lengths

    configure_cpu_process()
    results = RunDir(run_dir).read_results() or {}
    module = load_run(run_dir, checkpoint, accelerator)
    rows = far_rows(module, per_band or FAR_PER_BAND, int(results.get("batches", 0)))
    write_far_lengths(run_dir, rows, checkpoint)
    return rows
