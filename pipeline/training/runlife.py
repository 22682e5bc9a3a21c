"""A run's life, decided in one place: claimed, locked, admitted (fresh, resumed, extended, reopened, restarted or
already answered), and refused in one line, before anything in its folder changes, when it cannot go on.

The folder itself (its files, their names, their damage) is :class:`pipeline.rundir.RunDir`'s; training it is
:mod:`pipeline.training.engine`'s. A run's checkpoints are written by :func:`write_checkpoint` and read by
:func:`read_checkpoint`, here. A single run and every member of a population pass through :func:`admit`.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch

from pipeline.config import MEASUREMENT_KEYS, ConfigError, RunConfig, stored_run_config
from pipeline.files import atomic_write_text
from pipeline.provenance import command_line, git_commit
from pipeline.rundir import DamagedRun, RunDir, results_cover, stop_reason
from pipeline.runlock import LOCK_FILE, claim_owner, lock_owner, run_lock


class RunBusy(ConfigError):
    """The run directory's lock is held by another process (a ``transduce train`` or a sweep worker)."""


@contextmanager
def holding(run_dirs: list[Path], locked: bool = False):
    """Hold every run's lock (:mod:`pipeline.runlock`) for the duration, all taken before any trains; raises
    :class:`RunBusy` when another process holds one. ``locked``: the caller (a sweep worker) holds them already."""
    with ExitStack() as locks:
        if not locked:
            for run_dir in run_dirs:
                # a folder refused (another config's, a foreign one) is left as it was: without the lock file this
                # process made in it, and not there at all when this process made it and left nothing in it
                locks.callback(_unmade, Path(run_dir), Path(run_dir).exists(), (Path(run_dir) / LOCK_FILE).exists())
                lock = locks.enter_context(run_lock(run_dir))
                if not lock:
                    owner = lock_owner(run_dir)
                    raise RunBusy(f"{run_dir} is being trained by another process{f' ({owner})' if owner else ''}; "
                                  "wait for it to end, or stop it first")
                claim_owner(lock)
        yield


def _unmade(run_dir: Path, existed: bool, had_lock: bool) -> None:
    """After the locks are released (:func:`holding`): where the run was refused before anything of it was written
    (no config.yaml of ours), remove the lock file this process made, and the folder if it made that, left empty."""
    if had_lock or (run_dir / "config.yaml").exists():
        return
    (run_dir / LOCK_FILE).unlink(missing_ok=True)
    if not existed:
        try:
            run_dir.rmdir()
        except OSError:  # something else was written there: left
            pass


def claim_run_directory(config: RunConfig, run_dir: Path) -> str:
    """Create ``run_dir`` for ``config``, or check that it already belongs to this config. A config that differs
    from the stored one only in ``training.max_batches``, in what it measures (``MEASUREMENT_KEYS``: a profile that
    began measuring far lengths after the run was made) or in tracking is the same run: the stored config is updated,
    so that what the run does from now on is the profile's. Returns "new", "same", "budget changed" or "measurements
    changed"."""
    folder = RunDir(run_dir)
    if folder.config_file.exists():
        existing = folder.read_config()
        if existing.identity() != config.identity():
            raise ConfigError(f"{run_dir} holds a run of a different config ({existing.run_id()}); "
                              f"use another directory for {config.run_id()}")
        budget = existing.training.max_batches != config.training.max_batches
        measured = any(getattr(existing.training, key) != getattr(config.training, key) for key in MEASUREMENT_KEYS)
        if not budget and not measured:
            return "same"
        folder.write_config(config)
        return "budget changed" if budget else "measurements changed"
    folder.write_config(config)
    return "new"


def continuation(stored: dict, config: RunConfig, reopen: bool) -> str | None:
    """How a finished run with results ``stored`` goes on under ``config``: "reopen" (it stopped early and ``reopen``
    asks it to go on to a larger budget), "extend" (its budget was raised since) or None (its results answer)."""
    if reopen and stop_reason(stored) != "budget" and stored["batches"] < config.training.max_batches:
        return "reopen"
    return None if results_cover(stored, config) else "extend"


def check_continuable(config: RunConfig, run_dir: Path, restart: bool, reopen: bool) -> bool:
    """Everything that would refuse to continue a finished run, checked before anything in its folder changes (its
    config's budget, its results' name): stored results that belong to another config (its config.yaml edited
    since), and a run to be extended or reopened that has no readable ``last.ckpt`` (an archived run keeps none).
    Refused with one line; the folder is left exactly as it was. True when it read ``last.ckpt`` and found it this
    run's (a checkpoint is megabytes: :func:`admit` does not read it twice)."""
    folder = RunDir(run_dir)
    if restart:
        return False
    if not folder.results_file.exists():  # an interrupted run resumes from last.ckpt: it must be this run's own
        # (a folder of another config altogether is claim_run_directory's to refuse, naming that config)
        ours = not folder.config_file.exists() or folder.read_config().identity() == config.identity()
        if ours and folder.last_checkpoint.exists():
            check_log_covers(read_checkpoint(folder.last_checkpoint, run_dir, config), run_dir)
            return True
        return False
    stored = folder.check()  # damaged files, results of another config than config.yaml's: named here
    if stored is None or continuation(stored, config, reopen) is None:
        return False
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
        return True
    if trained != config.identity():
        raise ConfigError(f"{last} was trained with another config than {run_dir}'s config.yaml (edited after it "
                          "trained?); put the config back, or train the new one in another directory")
    check_checkpoint_run(checkpoint, config, last, run_dir)  # what admit checks of a checkpoint it has not read
    check_log_covers(checkpoint, run_dir)
    return True


def admit(config: RunConfig, run_dir: Path, restart: bool = False, reopen: bool = False) -> bool:
    """Make ``run_dir`` ready to train ``config`` (the caller holds its lock), or refuse in one line with the folder
    left as it was: a folder of another config, results of another config, a run that cannot continue, a lost or
    unreadable ``last.ckpt``. ``restart`` clears the folder first (training again from batch 0; what the run had
    reported is kept as an earlier draw); ``reopen`` continues a run that stopped early. A finished run whose budget
    was raised keeps its results as ``results.<batches>.json``. False when the run's results already answer its
    config (nothing to train)."""
    checked = check_continuable(config, run_dir, restart, reopen)
    folder = RunDir(run_dir)
    if not restart and not folder.config_file.exists():
        folder.read_metrics()  # a folder no run of ours made (a log without a step column) is refused before it is
        # claimed: nothing of ours is written into it
    claim_run_directory(config, run_dir)  # refuses a directory that holds another config's run, finished or not
    folder = RunDir(run_dir)
    if restart:  # trained again from batch 0: the draw it replaces is kept in earlier_draws.json (RunDir.new_draw)
        folder.new_draw()
    stored = folder.read_results()
    if stored is not None:
        how = continuation(stored, config, reopen)
        if how is None:
            return False
        if how == "reopen":
            reopen_run(run_dir)
        else:
            folder.archive_results()  # extended: keep what it reported
    if folder.last_checkpoint.exists():
        if not checked:  # damaged, another run's, or its log holed: named now
            check_log_covers(read_checkpoint(folder.last_checkpoint, run_dir, config), run_dir)
    else:
        refuse_lost_progress(run_dir, config.training.checkpoint_every)
    return True


# A checkpoint's layout, the one Lightning's Trainer wrote before the loop was ours (so that every checkpoint of a run,
# whichever code wrote it, reads the same way): the run's step, its weights and config, and unless weights only its
# optimizer's state and its monitor's (under "callbacks").
MONITOR_STATE = "TrainingMonitor"  # the key of a run's monitor state in its checkpoint's "callbacks"


def write_checkpoint(path: Path, module, step: int, optimizer=None, monitor=None, save=torch.save) -> None:
    """Write a run's checkpoint to ``path``: ``module``'s weights and config at batch ``step`` and, where an
    ``optimizer`` is given (``last.ckpt``), its state and ``monitor``'s, from which the run resumes; without one, the
    weights only (``best.ckpt``). ``save``: what writes the dict (Lightning Fabric's ``save``, or ``torch.save``).
    :func:`read_checkpoint` reads it."""
    import lightning

    checkpoint = {"epoch": 0, "global_step": step, "pytorch-lightning_version": lightning.__version__,
                  "state_dict": module.state_dict(), "hparams_name": None, "hyper_parameters": module.hparams}
    if optimizer is not None:
        checkpoint.update({"callbacks": {MONITOR_STATE: monitor.state_dict()},
                           "optimizer_states": [optimizer.state_dict()], "lr_schedulers": []})
    save(checkpoint, path)


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
                         f"`{command_line('transduce', 'train', '--restart', '--run-dir', run_dir)}` trains the run "
                         "again from batch 0") from None
    if config is not None:
        check_checkpoint_run(checkpoint, config, path, run_dir)
    return checkpoint


def check_log_covers(checkpoint: dict, run_dir: Path) -> None:
    """Refuse (:class:`DamagedRun`, one line) to resume from ``checkpoint`` a run whose ``metrics.csv`` lacks a
    training-perplexity row the checkpoint's monitor logged (its ``windows``, up to the checkpoint's step): resumed,
    its log would keep the hole and the run read as finished with rows missing. The rows cannot be rebuilt (the
    checkpoint keeps the perplexities, not the evaluations logged beside them), so the run is trained again instead.
    A checkpoint from before the monitor kept its windows is not checked."""
    from pipeline.training.results import TRAIN_PERPLEXITY, logged_values

    state = (checkpoint.get("callbacks") or {}).get(MONITOR_STATE) or {}
    step = checkpoint.get("global_step", 0)
    expected = [batch for batch, _ in state.get("windows") or [] if batch <= step]
    if not expected:
        return
    logged = {batch for batch, _ in logged_values(RunDir(run_dir).read_metrics(), TRAIN_PERPLEXITY)}
    missing = [batch for batch in expected if batch not in logged]
    if missing:
        shown = ", ".join(f"{b:,}" for b in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        restart = command_line("transduce", "train", "--restart", "--run-dir", run_dir)
        raise DamagedRun(f"{RunDir(run_dir).metrics_file}: lacks the training-perplexity rows of step {shown}, which "
                         f"its checkpoint at step {step:,} logged, so resuming would leave a hole in its log; nothing "
                         f"was changed: `{restart}` trains it again from batch 0")


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
    reopened past such results and stopped, and whose ``last.ckpt`` is gone (trained on a machine whose folder was not
    archived, or archived before unfinished runs kept their checkpoints) is trained again from batch 0: one seed and
    one data stream give the same run, so only the minutes are lost."""
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
