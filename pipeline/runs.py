"""The runs of a profile or of a folder, one row each: what ``transduce runs`` lists and exports; and a profile's
finished runs archived without their checkpoints, its unfinished ones with them (``transduce archive``), so that a
report can be regenerated, and a sweep resumed, on a machine that never held them."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from pipeline.config import ConfigError, RunConfig
from pipeline.files import atomic_write_bytes, current_umask, staging_folder
from pipeline.rundir import ARCHIVED_FILES, ARCHIVED_GLOBS, DONE, STATES, DamagedRun, RunDir, stop_reason
from pipeline.sweep.status import halved_state, planned_runs, run_state
from pipeline.training.results import TRAIN_PERPLEXITY, last_logged, logged_rows, logged_values

RUN_STATES = STATES  # one vocabulary: what `runs --status` filters on is what `sweep --status` and reports print
COLUMNS = ["id", "task", "model", "hidden", "lr", "seed", "status", "batches", "train_perplexity", "train_coarse",
           "train_fine", "test_coarse", "test_fine"]


def run_row(config: RunConfig, run_dir: Path, halved: bool = False) -> dict:
    """One run's row: settings from its config, state and numbers from its directory (the final results when it
    has them, else the last logged ones). ``halved``: successive halving stopped it at its budget (then finished
    reads as pruned, as in ``sweep --status``)."""
    state = halved_state(run_state(run_dir, config), halved)
    row = dict(id=run_dir.name, path=run_dir, task=config.task, model=config.model.name, hidden=config.model.hidden,
               lr=config.training.lr, seed=config.training.seed,
               status=state, batches=0, train_perplexity=math.nan,
               train_coarse=math.nan, train_fine=math.nan, test_coarse=math.nan, test_fine=math.nan)
    if state == "damaged":
        return row
    if state in DONE:
        r = RunDir(run_dir).read_results()
        row.update(batches=r["batches"], train_perplexity=r["train_perplexity"],
                   **{k: r[k] for k in ("train_coarse", "train_fine", "test_coarse", "test_fine")})
    elif rows := logged_rows(run_dir):  # not done yet: the last values it logged
        row["batches"] = int(rows[-1]["step"])
        for key in ("train_perplexity", "train_coarse", "train_fine", "test_coarse", "test_fine"):
            row[key] = last_logged(rows, key.replace("_", "/", 1))
    return row


def list_runs(where: str | Path, runs_root: Path | None = None, warn=None, tasks: list[str] | None = None,
              models: list[str] | None = None) -> pd.DataFrame:
    """Every run of a profile (``where`` a YAML file; runs not started included) or of a folder (every directory
    in it holding a run's config.yaml). A run whose files are damaged is listed as such and ``warn`` is called with a
    line naming the file; a folder's directory whose config cannot be read is left out, with a warning. ``tasks``,
    ``models``: only those (none: all)."""
    warn = warn or (lambda line: None)
    where = Path(where)
    if where.is_file():
        from pipeline.sweep import load_sweep, sweep_root

        sweep = load_sweep(where)
        root = sweep_root(sweep, runs_root)
        rows = [run_row(run, root / run.run_id(), halved) for run, halved in planned_runs(sweep, runs_root)]
    elif where.is_dir():
        rows = []
        for config_file in sorted(where.glob("*/config.yaml")):
            try:
                config = RunDir(config_file.parent).read_config()
            except ConfigError as error:
                warn(f"left out: {error}")
                continue
            rows.append(run_row(config, config_file.parent))
    else:
        raise ConfigError(f"{str(where)!r} is neither a profile file nor a folder of runs")
    for row in rows:
        if row["status"] == "damaged":
            warn(f"damaged run: {RunDir(row['path']).damage()}")
    table = pd.DataFrame(rows, columns=COLUMNS)
    if tasks:
        table = table[table.task.isin(tasks)]
    if models:
        table = table[table.model.isin(models)]
    return table


# What an archived run keeps: everything the report and the sweep read, except the checkpoints (megabytes each) and
# the W&B folder (the dashboard; the same numbers are in metrics.csv). ``results.<batches>.json`` are the results
# of a run before it was extended; ``traces/`` the memory traces the report draws. A run not finished when its stint
# ends (a session, a job's time limit) is kept apart, in ``unfinished_runs/`` beside ``finished_runs/``, with its two
# checkpoints: restored, it resumes where it stopped, so a run longer than any one machine's stint (the 200,000-batch
# LSTMs of issue 34) still ends. Once it is finished it moves to ``finished_runs/`` and its checkpoints are dropped.
UNFINISHED = "unfinished_runs"
RESUME_FILES = ("checkpoints/last.ckpt", "checkpoints/best.ckpt", "checkpoints/best-before-end.ckpt")
# An unfinished run is kept with its checkpoints (megabytes, committed with the archive) however short its stint: a
# later machine continues it. Lost anyway (trained where nothing was archived), it is trained again from batch 0, which
# gives the same run (one seed, one data stream: the same log) on a machine whose torch dispatches to the same CPU
# kernels (pipeline.sweep.worker); on another kind of CPU (AVX-512 against AVX2) the floats differ from the first batch
# and the retrained run is another draw of the same settings (docs/training.md, "The plateau rule").


def unfinished_folder(finished: Path) -> Path:
    """Where the unfinished runs of the archive ``finished`` go: beside it."""
    return Path(finished).parent / UNFINISHED


def _copy_run(run_dir: Path, dest: Path, extra: tuple[str, ...] = ()) -> None:
    """Copy the archived files of ``run_dir`` (and ``extra``, paths inside it) to ``dest/<run id>/``, replacing an
    older copy atomically: a reader sees the old copy or the new one."""
    files = [run_dir / name for name in ARCHIVED_FILES + extra if (run_dir / name).is_file()]
    files += [f for pattern in ARCHIVED_GLOBS for f in sorted(run_dir.glob(pattern))]
    with staging_folder(dest / run_dir.name) as staging:
        for f in files:
            target = staging / f.relative_to(run_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
        staging.chmod(0o777 & ~current_umask())  # mkdtemp makes it 0700
        _replace(staging, dest / run_dir.name)


def _replace(staging: Path, final: Path) -> None:
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
        final.rename(old / "run")
        staging.rename(final)
        shutil.rmtree(old)
    else:
        staging.rename(final)


def _remove(folder: Path) -> None:
    """Remove an archived copy in one step (renamed away first, so no reader sees half of it)."""
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
    folder.rename(old / "run")
    shutil.rmtree(old)


def batches_held(run_dir: Path) -> int:
    """How far a run (or an archived copy) got: its results' batches, else the last step of its log; 0 for none."""
    folder = RunDir(run_dir)
    results = folder.read_results()
    if results is not None:
        return int(results["batches"])
    return max((int(row["step"]) for row in folder.read_metrics()), default=0)


def kept_over(run_dir: Path, copy: Path) -> str:
    """Why the archived ``copy`` is kept over ``run_dir`` ('' where the run may replace it): the run's files fail
    their checks (:meth:`RunDir.check`), or it holds fewer batches than the copy (another runs folder's older state,
    a rerun still short of where the copy got) and is not a later draw of it (trained again from batch 0 with the
    copy's results kept among its earlier draws: :meth:`RunDir.new_draw`)."""
    try:
        RunDir(run_dir).check()
    except DamagedRun as damage:
        return f"its files fail their checks ({damage})"
    if not copy.is_dir():
        return ""
    try:
        there = batches_held(copy)
    except DamagedRun:  # a damaged archived copy is replaced by a sound run
        return ""
    here = batches_held(run_dir)
    if here >= there or RunDir(copy).read_results() in RunDir(run_dir).read_earlier_draws():
        return ""
    return f"it holds {here:,} batches where the archived copy holds {there:,}"


def reopened_after(run_dir: Path, copy: Path) -> bool:
    """Whether the archived ``copy`` is the finished draw ``run_dir`` was reopened after (the copy's results.json is
    the run's latest ``results.<batches>.json``): a stop an older plateau rule made, being re-earned, or a halving
    rung the run won, before the run has finished again. The copy is then kept: it holds the results the report reads
    and the log the rung was decided on, where the reopened run holds the same log and no results (restored from the
    copy the sweep reopens it again; without a checkpoint either one trains again from batch 0)."""
    latest, finished = RunDir(run_dir).latest_earlier_results_file(), RunDir(copy).results_file
    if latest is None or not finished.is_file():
        return False
    try:
        return json.loads(latest.read_text()) == json.loads(finished.read_text())
    except (OSError, ValueError):  # an unreadable copy is replaced by the sound run
        return False


class ArchiveRefused(ConfigError):
    """An archive that would lose what an archived copy holds; nothing was written for that run."""


def archive_runs(profile: str | Path, dest: Path, runs_root: Path | None = None,
                 force: bool = False) -> list[str]:
    """Copy every finished or pruned run of ``profile`` to ``dest/<run id>/`` without its checkpoints, after
    drawing the test-length trace the report needs from a memory model's checkpoint; and, likewise, every run that was
    reopened past earlier results and has not finished since (a halving rung's winner still training, or stopped):
    its rung standing decides which of its bracket were pruned, so a checkout without it would read the pruned runs
    as finished at their cap; but not over the finished copy it was reopened after (:func:`reopened_after`: the
    results the report reads until the run finishes again), which is kept, with or without ``force``. A run already
    archived is replaced (atomically), unless the copy holds more batches than the run or the run fails its checks
    (:func:`kept_over`): then it is left out, and :class:`ArchiveRefused` names every such run after the others were
    archived; ``force`` replaces all the same. Returns the run ids archived."""
    from pipeline.inspection import run_trace
    from pipeline.models import memory_of
    from pipeline.reports.build import TRACE_INDEX
    from pipeline.sweep import load_sweep, sweep_root

    sweep = load_sweep(profile)
    root = sweep_root(sweep, runs_root)
    done, refused = [], []
    for run, _ in planned_runs(sweep, runs_root):
        run_dir = root / run.run_id()
        state = run_state(run_dir, run)
        reopened = state not in DONE and state != "running" and RunDir(run_dir).latest_earlier_results_file()
        if state not in DONE and not reopened:
            continue
        if reopened and state != "damaged" and reopened_after(run_dir, Path(dest) / run_dir.name):
            continue  # a damaged run is refused below, naming its damage, not passed over in silence
        why = "" if force else kept_over(run_dir, Path(dest) / run_dir.name)
        if why:
            refused.append(f"{run_dir.name}: {why}")
            continue
        if state in DONE and memory_of(run.model.name) is not None:
            run_trace(run_dir, "test", TRACE_INDEX)
        _copy_run(run_dir, Path(dest))  # a reopened run's files as they are: restored, it trains again from batch 0
        done.append(run_dir.name)
    if refused:
        raise ArchiveRefused(f"archived {len(done)} run(s); kept the archived copy of {len(refused)} over the run "
                             f"(--force replaces them): " + "; ".join(refused))
    return done


def archive_unfinished_runs(profile: str | Path, dest: Path, runs_root: Path | None = None) -> tuple[list[str],
                                                                                                      list[str]]:
    """Copy every interrupted run of ``profile`` (it trained, stopped short of its budget, and no process holds it)
    that has a checkpoint to resume from to ``dest/<run id>/`` with its checkpoints, so that it resumes elsewhere;
    likewise every run that successive halving may still extend (:func:`awaits_its_rung`: finished at a rung its
    bracket has not decided, or past a rung it won, short of its cap), and every memory model's run that its cap
    stopped still falling (:func:`capped_still_falling`: a cap to be raised), which would otherwise be trained again
    from batch 0 to go on; all as :func:`worth_its_checkpoints` says (a stint cut short however short it was; a run that
    stands at a rung, waiting or promoted, from :data:`KEEP_WAITING_FROM` batches on); and drop the copy of a run that
    is done since (it is in the finished archive now). A running run is left for its next archive: stop the sweep
    first (its runs checkpoint as they stop). Returns (ids kept, ids dropped)."""
    from pipeline.sweep import load_sweep, sweep_root

    sweep = load_sweep(profile)
    root = sweep_root(sweep, runs_root)
    caps = {run.run_id(): run.training.max_batches for run in sweep.runs()}
    dest = Path(dest)
    kept, dropped = [], []
    for run, halved in planned_runs(sweep, runs_root):
        run_dir, copy = root / run.run_id(), dest / run.run_id()
        state = run_state(run_dir, run)
        folder = RunDir(run_dir)
        resumable = (state == "interrupted" or awaits_its_rung(run_dir, state, halved, caps[run.run_id()])
                     or capped_still_falling(run_dir, state, halved, run))
        if folder.last_checkpoint.is_file() and resumable and worth_its_checkpoints(run_dir):
            draw_standing_trace(run_dir, run)
            _copy_run(run_dir, dest, RESUME_FILES)
            kept.append(run_dir.name)
        elif state in DONE and copy.exists():
            _remove(copy)
            dropped.append(run_dir.name)
    return kept, dropped


def draw_standing_trace(run_dir: Path, run: RunConfig) -> None:
    """Keep the trace the report draws of a memory model's run that stands at results it reported (a rung's winner
    not resumed yet, a run waiting at its rung or at a cap to be raised), while its best checkpoint is still the one
    those results were read at: drawn here, once, the trace travels with the archive, so every checkout's report
    shows the same figure instead of drawing it again on its own CPU. Nothing where the checkpoint has moved on."""
    from pipeline.inspection import run_trace
    from pipeline.models import memory_of
    from pipeline.reports.build import TRACE_INDEX

    results = RunDir(run_dir).standing_results()
    if memory_of(run.model.name) is not None and results is not None and "selected_step" in results:
        run_trace(run_dir, "test", TRACE_INDEX, int(results["selected_step"]))


# A run that stands at a halving rung (finished there and waiting for its bracket, or promoted past it and not
# extended yet) is archived with its checkpoints (megabytes each, committed) only from this many batches on: below
# it, training it again from batch 0 to go on costs minutes, and a search's first rung has many such runs (issue 78's
# brackets: 20 at 2,000 batches, 8.4 MB each for a Stack at hidden 256). A run stopped between two of its own results
# keeps them however short its stint: that is the work a stopped machine would otherwise lose.
KEEP_WAITING_FROM = 5000


def budget_results(run_dir: Path, state: str, halved: bool) -> dict | None:
    """The results of a run its budget ended (finished, not stopped early, not cut by halving): a run that may still
    go on, at a rung (:func:`awaits_its_rung`) or at a cap to be raised (:func:`capped_still_falling`); else None."""
    if state != "finished" or halved:
        return None
    results = RunDir(run_dir).read_results()
    return results if results is not None and stop_reason(results) == "budget" else None


def awaits_its_rung(run_dir: Path, state: str, halved: bool, cap: int) -> bool:
    """Whether a run that is done for now may still be extended by successive halving: finished by its budget (not
    stopped early) at a rung short of its block's cap, and not cut there. Its checkpoints are what it goes on from."""
    results = budget_results(run_dir, state, halved)
    return results is not None and results["batches"] < cap


def capped_still_falling(run_dir: Path, state: str, halved: bool, run: RunConfig) -> bool:
    """Whether a memory model's run finished by its cap (not cut by halving, not stopped early) while its training
    perplexity still fell (:func:`pipeline.training.stopping.still_falling`, the test that makes a capped run
    budget-limited): the memory rows are trained until they learn or are flat, so its cap is raised and the run
    resumed (issue 78), from its checkpoints, not from batch 0 (150,000 batches of a Stack-LSTM are five hours). A
    deep LSTM's run at its cap is budget-limited by design, left for a GPU's populations; its checkpoints (tens of
    megabytes at hidden 256) are not kept."""
    from pipeline.models import memory_of
    from pipeline.training.stopping import still_falling

    if memory_of(run.model.name) is None or (results := budget_results(run_dir, state, halved)) is None:
        return False
    end = results["batches"]
    logged = [(step, p) for step, p in logged_values(logged_rows(run_dir), TRAIN_PERPLEXITY) if step <= end]
    return bool(logged) and still_falling(logged, run.training, end)


def worth_its_checkpoints(run_dir: Path) -> bool:
    """Whether a resumable run's checkpoints go to the unfinished archive: it trained past the last results it wrote
    (its stint was cut short), or it stands at them (a rung it waits at, or won and has not gone on from) with at
    least :data:`KEEP_WAITING_FROM` batches. One rule for a waiting run and a promoted one, whose checkpoints are the
    same: the last step of a rung."""
    folder = RunDir(run_dir)
    try:
        results = folder.standing_results()
        if results is None:
            return True
        rows = folder.read_metrics()
        trained = int(rows[-1]["step"]) if rows else 0
        return trained > results["batches"] or results["batches"] >= KEEP_WAITING_FROM
    except (OSError, ValueError, KeyError, TypeError, DamagedRun):
        return True  # files this cannot read: keep what there is, as before this rule


def restore_runs(profile: str | Path, source: Path, runs_root: Path | None = None, unfinished: bool = False
                 ) -> list[str]:
    """Copy the archived runs of ``profile`` found in ``source`` into its runs folder, where the sweep counts them
    as finished and the report reads them (``unfinished``: ``source`` holds unfinished runs with their checkpoints,
    which the sweep resumes). Never overwrites a run that has begun: a folder that holds only its config (a pending
    run a sweep prepared; the rest of a grid split between machines, say) takes the archived run, under its lock,
    the file that makes it finished (or resumable) last; any other is left alone. Restore the unfinished archive
    before the finished one: a run of successive halving may be in both, and the unfinished copy is the later.
    Returns the run ids restored."""
    from pipeline.sweep import load_sweep, sweep_root

    sweep = load_sweep(profile)
    root = sweep_root(sweep, runs_root)
    restored = []
    for run in sweep.runs():
        archived, target = Path(source) / run.run_id(), root / run.run_id()
        marker = archived / (RESUME_FILES[0] if unfinished else RunDir(archived).results_file.name)
        if not (unfinished or marker.is_file()):  # a run archived past a rung, not finished since
            marker = RunDir(archived).latest_earlier_results_file() or marker
        if not marker.is_file():
            continue
        if target.exists():
            if run_state(target, run) == "pending" and _fill_pending(archived, target, marker):
                restored.append(target.name)
            continue
        with staging_folder(target) as staging:
            shutil.copytree(archived, staging / "run")
            (staging / "run").rename(target)
            staging.rmdir()
        restored.append(target.name)
    return restored


def _fill_pending(archived: Path, target: Path, marker: Path) -> bool:
    """Copy an archived run into the folder of the same run not yet begun (config.yaml alone), holding its lock so no
    worker starts it meanwhile; ``marker`` (results.json, which makes it finished, or the checkpoint that makes it
    resumable) comes last. False if it began after all (logged a batch, or a worker holds it)."""
    from pipeline.runlock import run_lock

    with run_lock(target) as lock:
        if not lock or RunDir(target).metrics_file.exists() or RunDir(target).results_file.exists():
            return False
        shutil.copytree(archived, target, dirs_exist_ok=True, ignore=lambda folder, names:
                        [marker.name] if Path(folder) == marker.parent else [])
        atomic_write_bytes(target / marker.relative_to(archived), marker.read_bytes())
    return True
