"""One training run, from config to results, resumable: :func:`train` is what ``transduce train`` calls.

Run directory (``runs/<run id>/`` by default; the id is readable plus a hash of the config)::

    config.yaml               the resolved config (a directory belongs to exactly one config)
    metrics.csv               Lightning's CSV log: perplexity every 100 batches, accuracies every eval_every
    checkpoints/last.ckpt     for resuming; checkpoints/best.ckpt: the weights selected for reporting
    results.json              written last, atomically: the run is finished once it exists
    accuracy_by_length.csv    coarse/fine per source length on the cached train, test and long sets
    wandb/                    the offline dashboard, unless tracking is off

Run the same command again after a crash (even ``kill -9``) and it continues from ``last.ckpt`` with the same
data stream; run it after it finished and it returns the stored results.
"""

from __future__ import annotations

import json
import logging
import signal
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.utilities.exceptions import SIGTERMException

from pipeline.config import ConfigError, RunConfig, stored_run_config
from pipeline.data.cache import load_eval_set
from pipeline.evaluation import coarse_accuracy, evaluate, fine_accuracy, greedy_correct_prefix
from pipeline.files import atomic_write_text
from pipeline.paths import RUNS_DIR
from pipeline.provenance import (
    check_committed,
    current_command,
    git_commit,
    lock_hash,
    machine,
    torch_build,
    workers_sharing,
)
from pipeline.rundir import DamagedRun, RunDir, results_cover, stop_reason
from pipeline.runlock import claim_owner, lock_owner, run_lock
from pipeline.runtime import configure_cpu_process, resolve_device
from pipeline.training.metrics_log import ResumableCSVLogger
from pipeline.training.module import TransductionModule
from pipeline.training.monitor import TrainingMonitor
from pipeline.training.stopping import PLATEAU_RULE

EVAL_SPLITS = ("train", "test", "long")


def run_directory(config: RunConfig, runs_root: Path = RUNS_DIR) -> Path:
    return Path(runs_root) / config.run_id()


def claim_run_directory(config: RunConfig, run_dir: Path) -> str:
    """Create ``run_dir`` for ``config``, or check that it already belongs to this config. A config that differs
    from the stored one only in ``training.max_batches`` (and tracking) is the same run with another budget: the
    stored config is updated. Returns "new", "same" or "budget changed"."""
    folder = RunDir(run_dir)
    if folder.config_file.exists():
        existing = folder.read_config()
        if existing.identity() != config.identity():
            raise ConfigError(f"{run_dir} holds a run of a different config ({existing.run_id()}); "
                              f"use another directory for {config.run_id()}")
        if existing.training.max_batches == config.training.max_batches:
            return "same"
        folder.write_config(config)
        return "budget changed"
    folder.write_config(config)
    return "new"


class RunProgressBar(ProgressBar):
    """A run's progress over its whole budget, on Lightning's public ``ProgressBar`` interface: "batches 41/60"
    counts from the batch a resumed run starts at (and says so), and its time left is measured on this session's
    batches only. (Lightning's own bars count an endless stream's batches per epoch: "41/19" after a resume.)"""

    def __init__(self, max_batches: int, console=None) -> None:
        super().__init__()
        self.max_batches = max_batches
        self._console = console
        self._progress = None
        self._task = None
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer, pl_module) -> None:
        if not self._enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        start = trainer.global_step
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), TextColumn("{task.fields[metrics]}"), console=self._console)
        description = f"batches (resumed at {start:,})" if start else "batches"
        self._task = self._progress.add_task(description, total=self.max_batches, completed=start, metrics="")
        self._progress.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._progress is not None:
            metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
            shown = "  ".join(f"{k} {float(v):.4g}" for k, v in metrics.items())
            self._progress.update(self._task, completed=trainer.global_step, metrics=shown)

    def on_train_end(self, trainer, pl_module) -> None:
        self._stop()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


@contextmanager
def quiet_lightning():
    """Lightning's start-up lines (accelerators available, a "Tip", a dataloader warning about an endless stream)
    say nothing about a run; keep a run's output to what it does."""
    names = ("lightning.pytorch.utilities.rank_zero", "lightning.pytorch.accelerators.cuda",
             "lightning.fabric.utilities.rank_zero")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*IterableDataset.*__len__.*")
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*resuming from a checkpoint that ended before the epoch.*")
            warnings.filterwarnings("ignore", message=".*LeafSpec.*")
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def build_trainer(config: RunConfig, run_dir: Path, monitor: TrainingMonitor, resume_step: int | None,
                  progress: bool, accelerator: str = "auto") -> L.Trainer:
    loggers = [ResumableCSVLogger(run_dir, keep_through_step=resume_step)]
    if config.tracking.wandb != "off":
        from pipeline.training.tracking import wandb_logger

        loggers.append(wandb_logger(config, run_dir))
    t = config.training
    return L.Trainer(
        max_steps=t.max_batches,
        logger=loggers,
        callbacks=[monitor] + ([RunProgressBar(t.max_batches)] if progress else []),
        gradient_clip_val=t.clip,
        gradient_clip_algorithm=t.clip_mode,
        enable_checkpointing=False,  # the monitor writes last.ckpt and best.ckpt itself
        enable_progress_bar=progress,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        log_every_n_steps=t.perplexity_every,
        accelerator=accelerator,
        devices=1,
        default_root_dir=str(run_dir),
    )


def train(config: RunConfig, run_dir: Path | None = None, *, cache_dir: Path | None = None,
          progress: bool = True, restart: bool = False, reopen: bool = False, accelerator: str = "auto",
          locked: bool = False) -> dict:
    """Train (or resume, or extend, or just return the results of) the run described by ``config``.

    A run directory whose results cover ``config`` (it trained ``max_batches``, or stopped early) returns them. One
    whose budget was raised since is extended: its results are kept as ``results.<batches>.json`` and training
    resumes from ``last.ckpt``. A run that stopped early (pruned, converged, plateau) is continued only with
    ``reopen``. A directory that has logged batches but lost ``last.ckpt`` is refused unless ``restart``, which
    trains the run again from batch 0 (its metrics, checkpoints and results are replaced).

    Only one process trains a run directory: this takes its lock (:mod:`pipeline.runlock`) and raises
    :class:`RunBusy` when another process holds it; ``locked`` says the caller (a sweep worker) holds it already."""
    config.validate()
    config = config.resolved()  # the model's start as this code defines it, in the checkpoints and results too
    check_committed()  # the commit a run records is the code that trains it (or says -dirty, when allowed)
    resolve_device(accelerator)  # an unknown accelerator, or cuda where there is none: refused before any work
    run_dir = Path(run_dir) if run_dir is not None else run_directory(config)
    if locked:
        return _train(config, run_dir, cache_dir, progress, restart, reopen, accelerator)
    with run_lock(run_dir) as lock:  # one process trains a run: a second is refused, as sweep workers are
        if not lock:
            owner = lock_owner(run_dir)
            raise RunBusy(f"{run_dir} is being trained by another process{f' ({owner})' if owner else ''}; "
                          "wait for it to end, or stop it first")
        claim_owner(lock)
        return _train(config, run_dir, cache_dir, progress, restart, reopen, accelerator)


class RunStopped(KeyboardInterrupt):
    """Training was stopped from outside (SIGTERM, Ctrl-C) before the run ended. Nothing is lost: the run resumes
    from its last checkpoint when trained again. ``exit_code`` is the shell's for that signal (143, 130)."""

    def __init__(self, run_dir: Path, batch: int, why: str, exit_code: int):
        super().__init__(f"{run_dir}: training was stopped by {why} at batch {batch}, before the run ended; run the "
                         "same command again to resume it from its last checkpoint")
        self.exit_code = exit_code


class CtrlC(Exception):
    """SIGINT during training, raised in place of KeyboardInterrupt: Lightning answers a KeyboardInterrupt with
    ``sys.exit(1)`` and no word, where a stopped run should say so and exit 130 (:class:`RunStopped`)."""


class Hangup(CtrlC):
    """SIGHUP during training (the terminal that started it closed): stopped with a line and 129, as Ctrl-C is,
    where the default action ended the process without one."""


@contextmanager
def ctrl_c_as_exception():
    """While training, Ctrl-C raises :class:`CtrlC` and SIGHUP :class:`Hangup` (outside the main thread, where
    signals cannot be handled, this changes nothing)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise CtrlC()

    def hangup(signum, frame):
        raise Hangup()

    previous = signal.signal(signal.SIGINT, interrupt)
    previous_hangup = signal.signal(signal.SIGHUP, hangup)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGHUP, previous_hangup)


class RunBusy(ConfigError):
    """The run directory's lock is held by another process (a ``transduce train`` or a sweep worker)."""


def continuation(stored: dict, config: RunConfig, reopen: bool) -> str | None:
    """How a finished run with results ``stored`` goes on under ``config``: "reopen" (it stopped early and ``reopen``
    asks it to go on to a larger budget), "extend" (its budget was raised since) or None (its results answer)."""
    if reopen and stop_reason(stored) != "budget" and stored["batches"] < config.training.max_batches:
        return "reopen"
    return None if results_cover(stored, config) else "extend"


def check_continuable(config: RunConfig, run_dir: Path, restart: bool, reopen: bool) -> None:
    """Everything that would refuse to continue a finished run, checked before anything in its folder changes (its
    config's budget, its results' name): stored results that belong to another config (its config.yaml edited
    since), and a run to be extended or reopened that has no readable ``last.ckpt`` (an archived run keeps none).
    Refused with one line; the folder is left exactly as it was."""
    folder = RunDir(run_dir)
    if restart:
        return
    if not folder.results_file.exists():  # an interrupted run resumes from last.ckpt: it must be this run's own
        # (a folder of another config altogether is claim_run_directory's to refuse, naming that config)
        ours = not folder.config_file.exists() or folder.read_config().identity() == config.identity()
        if ours and folder.last_checkpoint.exists():
            read_checkpoint(folder.last_checkpoint, run_dir, config)
        return
    stored = folder.check()  # damaged files, results of another config than config.yaml's: named here
    if stored is None:
        return
    if continuation(stored, config, reopen) is None:
        return
    last = folder.last_checkpoint
    if not last.exists():
        raise ConfigError(f"{run_dir} finished at {stored['batches']:,} batches and has no checkpoints/last.ckpt (an "
                          "archived run keeps none), so it cannot be continued to "
                          f"{config.training.max_batches:,}; nothing was changed. `--restart` trains it again from "
                          "batch 0 to the new budget")
    checkpoint = read_checkpoint(last, run_dir)  # a damaged one is named, before anything changes
    try:
        trained = stored_run_config(checkpoint.get("hyper_parameters") or {}).identity()
    except ConfigError:  # a checkpoint from before a config key existed: nothing to compare with
        return
    if trained != config.identity():
        raise ConfigError(f"{last} was trained with another config than {run_dir}'s config.yaml (edited after it "
                          "trained?); put the config back, or train the new one in another directory")


def _train(config: RunConfig, run_dir: Path, cache_dir: Path | None, progress: bool, restart: bool, reopen: bool,
           accelerator: str) -> dict:
    check_continuable(config, run_dir, restart, reopen)
    claim_run_directory(config, run_dir)  # refuses a directory that holds another config's run, finished or not
    if restart:
        RunDir(run_dir).clear()
    folder = RunDir(run_dir)
    stored = folder.read_results()
    if stored is not None:
        how = continuation(stored, config, reopen)
        if how == "reopen":
            reopen_run(run_dir)
        elif how is None:
            return stored
        else:
            folder.archive_results()  # extended: keep what it reported
    commits = record_commit(run_dir)
    configure_cpu_process()

    eval_sets = {split: load_eval_set(config.task, split, cache_dir, config.length_distribution)
                 for split in EVAL_SPLITS}
    monitor = TrainingMonitor(run_dir, eval_sets["test"].pairs)
    last = monitor.last_path if monitor.last_path.exists() else None
    if last is None:
        refuse_lost_progress(run_dir, config.training.checkpoint_every)
    resume_step = read_checkpoint(last, run_dir)["global_step"] if last else None

    L.seed_everything(config.training.seed, workers=True, verbose=False)
    module = TransductionModule.from_config(config)
    with quiet_lightning():
        trainer = build_trainer(config, run_dir, monitor, resume_step, progress, accelerator)
        try:
            with ctrl_c_as_exception():
                trainer.fit(module, ckpt_path=last)
        except SIGTERMException:  # Lightning's: a SystemExit with status 0, which would read as success
            raise RunStopped(run_dir, trainer.global_step, "SIGTERM", 128 + signal.SIGTERM) from None
        except Hangup:
            raise RunStopped(run_dir, trainer.global_step, "SIGHUP (its terminal closed)",
                             128 + signal.SIGHUP) from None
        except CtrlC:
            raise RunStopped(run_dir, trainer.global_step, "an interrupt (Ctrl-C)", 128 + signal.SIGINT) from None
    if trainer.interrupted:  # stopped from outside (Ctrl-C): the run is unfinished and resumes next time
        raise RunStopped(run_dir, trainer.global_step, "an interrupt", 128 + signal.SIGINT)

    # the device it trained on (Lightning hands the module back on the CPU when fit ends)
    results = final_results(module, monitor, trainer.global_step, eval_sets, run_dir, commits,
                            trainer.strategy.root_device)
    atomic_write_text(RunDir(run_dir).results_file, json.dumps(results, indent=2) + "\n")
    if config.tracking.wandb != "off":
        from pipeline.training.tracking import log_final_results

        log_final_results(trainer.loggers, results)
    return results


def read_checkpoint(path: Path, run_dir: Path, config: RunConfig | None = None) -> dict:
    """A checkpoint's contents; one that does not load (cut short by a kill, overwritten) is a :class:`DamagedRun`
    naming the file, instead of a pickling traceback. With ``config``, one that belongs to another run (another
    architecture, sizes, task, rate or seed: the config it was trained with, which every checkpoint stores) is
    refused too, in one line, before anything reads it into a model or changes the run folder."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(checkpoint, dict) or "global_step" not in checkpoint or "state_dict" not in checkpoint:
            raise ValueError("not a Lightning checkpoint")
    except Exception as error:  # EOFError, UnpicklingError, RuntimeError (zip), ValueError: all mean unusable
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise DamagedRun(f"{path}: not a readable checkpoint ({type(error).__name__}: {first}); "
                         f"`transduce train --restart --run-dir {run_dir}` trains the run again from batch 0") from None
    if config is not None:
        check_checkpoint_run(checkpoint, config, path, run_dir)
    return checkpoint


def check_checkpoint_run(checkpoint: dict, config: RunConfig, path: Path, run_dir: Path) -> None:
    """Refuse a checkpoint trained with another config than ``config`` (:class:`DamagedRun`, one line). A checkpoint
    from before a config key existed is compared on the keys it has."""
    try:
        trained = stored_run_config(checkpoint.get("hyper_parameters") or {})
    except ConfigError:  # a checkpoint from before a config key existed: nothing to compare with
        return
    if trained.identity() != config.resolved().identity():
        raise DamagedRun(f"{path} is a checkpoint of another run ({trained.run_id()}), not of {config.run_id()} "
                         f"whose folder it is in; nothing was changed: remove it to train {run_dir.name} again from "
                         "batch 0 (`transduce train --restart`), or put that run's own checkpoint back")


def reopen_run(run_dir: Path) -> None:
    """Continue a run that stopped early (pruned, converged, plateau) from its last checkpoint: its results are
    archived and its checkpointed stop is lifted when it resumes."""
    atomic_write_text(RunDir(run_dir).reopen_marker, "")
    RunDir(run_dir).archive_results()


def refuse_lost_progress(run_dir: Path, checkpoint_every: int) -> None:
    """A run that logged batches but has no ``last.ckpt`` would silently start over: say so and stop. Unless it
    stopped before its first checkpoint was due: then starting again from batch 0 loses what any interruption between
    two checkpoints loses (a sweep stopped in its first minutes left such runs failed, where they are interrupted),
    or when its first checkpoint could not be written (a full disk: its log reaches that batch, the checkpoint not)."""
    steps = [int(row["step"]) for row in RunDir(run_dir).read_metrics()]
    if steps and max(steps) <= checkpoint_every:
        RunDir(run_dir).clear()
    elif steps:
        raise ConfigError(f"{run_dir} has logged {max(steps)} batches (metrics.csv) but its checkpoint "
                          f"checkpoints/last.ckpt is missing, so it cannot resume; to train it again from batch 0 "
                          f"(replacing its log), pass --restart (train(..., restart=True))")


def lost_its_checkpoint(run_dir: Path, config) -> bool:
    """A run whose results stop short of its budget now (a rung of successive halving, a raised budget), or that was
    reopened past such results and stopped, and whose ``last.ckpt`` is gone (archived without it:
    ``pipeline.runs.UNFINISHED_MIN_SECONDS``; trained on a machine that kept it) is trained again from batch 0: one
    seed and one data stream give the same run, so only the minutes are lost."""
    folder = RunDir(run_dir)
    if folder.last_checkpoint.exists():
        return False
    try:
        results = folder.read_results()
    except Exception:  # damaged: RunDir.check names it when training begins
        return False
    if results is None:  # reopened past earlier results (a rung it won), then stopped where no checkpoint was kept
        earlier = folder.latest_earlier_results_file()
        if earlier is None:
            return False
        where = f"it was reopened after {earlier.name}"
    elif results_cover(results, config):
        return False
    else:
        where = f"its results stop at {results['batches']:,} batches"
    print(f"{run_dir}: {where} and its checkpoint was not kept; training it again from batch 0 to "
          f"{config.training.max_batches:,} (the same seed and data: the same run)", flush=True)
    return True


def record_commit(run_dir: Path) -> list[str]:
    """Append the checked-out commit to ``commits.txt`` when it differs from the last one there (a run resumed under
    other code), and return all of them: the code that trained this run."""
    return RunDir(run_dir).record_commit(git_commit())


def final_results(module: TransductionModule, monitor: TrainingMonitor, batches: int, eval_sets: dict,
                  run_dir: Path, commits: list[str], trained_on: torch.device | None = None) -> dict:
    """Evaluate the selected checkpoint on the cached sets and describe the run."""
    if monitor.best_path.exists():
        module.load_state_dict(read_checkpoint(monitor.best_path, run_dir, module.config)["state_dict"])
    started = time.monotonic()
    n = module.config.training.final_eval_size
    scores = {split: evaluate(module.model, eval_sets[split].pairs[:n], module.vocab) for split in EVAL_SPLITS}
    RunDir(run_dir).write_accuracy_by_length(
        [dict(split=split, **row) for split, s in scores.items() for row in s.by_source_length()])
    RunDir(run_dir).write_first_errors(
        [dict(split=split, **row) for split, s in scores.items() for row in s.first_errors()])
    config = module.config
    if config.training.far_eval_size:  # how far past the test lengths it stays exact (pipeline.generalisation)
        from pipeline.generalisation import far_rows, write_far_lengths

        write_far_lengths(run_dir, far_rows(module, config.training.far_eval_size, batches))
    return {
        "run_id": config.run_id(),
        "task": config.task,
        "model": config.model.name,
        "hidden": config.model.hidden,
        "lr": config.training.lr,
        "seed": config.training.seed,
        "batches": batches,
        "stopped_early": monitor.stopped_early,
        "stop_reason": monitor.stop_reason or "budget",
        "plateau_rule": PLATEAU_RULE,
        "train_seconds": round(monitor.elapsed, 1),
        "eval_seconds": round(time.monotonic() - started, 1),
        "selected_step": monitor.best["step"] if monitor.best else batches,
        "train_perplexity": monitor.best["train_perplexity"] if monitor.best else monitor.last_perplexity,
        "final_train_perplexity": monitor.last_perplexity,
        **{f"{split}_{metric}": getattr(s, metric) for split, s in scores.items() for metric in ("coarse", "fine")},
        "eval_sizes": {split: len(scores[split].correct_prefix) for split in EVAL_SPLITS},
        "commit": " ".join(commits),  # the code that trained the run (more than one if resumed under another)
        "lock": lock_hash(),  # the environment that finished it (requirements.lock)
        "machine": machine(trained_on),  # where its seconds were measured (its GPU, if any), beside how many
        "torch": torch_build(),  # the lock pins everything else; torch is installed apart (its build, its kernels)
        "workers": workers_sharing(),
        "command": current_command(),
        "host_threads": torch.get_num_threads(),
    }


def load_run(run_dir: Path, checkpoint: str = "best", accelerator: str = "cpu") -> TransductionModule:
    """The module of a run directory with the weights of ``checkpoint`` ("best" or "last"), on ``accelerator``'s
    device (see :func:`resolve_device`)."""
    device = resolve_device(accelerator)
    folder = RunDir(run_dir)
    config = folder.read_config()
    path = folder.checkpoint(checkpoint)
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no {checkpoint} checkpoint yet ({path} is missing)")
    module = TransductionModule.from_config(config)
    module.load_state_dict(read_checkpoint(path, run_dir, config)["state_dict"])
    return module.to(device)


def evaluate_run(run_dir: Path, checkpoint: str = "best", splits: tuple[str, ...] = EVAL_SPLITS, *,
                 greedy: bool = False, cache_dir: Path | None = None, accelerator: str = "cpu") -> dict:
    """Re-evaluate a run's checkpoint on the cached sets: {split: {"coarse", "fine", "n"}}. ``greedy`` decodes
    step by step (slow) instead of reading the same numbers off one teacher-forced pass."""
    configure_cpu_process()
    module = load_run(run_dir, checkpoint, accelerator)
    out = {}
    for split in splits:
        pairs = load_eval_set(module.config.task, split, cache_dir, module.config.length_distribution).pairs
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
    ``far_lengths.csv`` into the run directory. Returns the rows."""
    from pipeline.generalisation import FAR_PER_BAND, far_rows, write_far_lengths

    configure_cpu_process()
    results = RunDir(run_dir).read_results() or {}
    module = load_run(run_dir, checkpoint, accelerator)
    rows = far_rows(module, per_band or FAR_PER_BAND, int(results.get("batches", 0)))
    write_far_lengths(run_dir, rows)
    return rows
