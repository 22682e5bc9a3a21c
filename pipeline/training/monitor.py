"""Everything a run does on a schedule (paper §4.4), in one object per run whose state goes into every checkpoint:

* every ``perplexity_every`` batches: the average training perplexity of the window (the paper's model-selection
  criterion);
* every ``eval_every`` batches: coarse and fine accuracy on fresh training-length sequences and on the cached
  test-length set, and for memory models the mean push and pop on the source and target halves (a stack used as a
  stack pushes on the source and pops on the target; one used as an extra recurrent layer does not); the
  checkpoint with the best training-length accuracy is kept as ``best.ckpt`` (training accuracy can collapse
  after converging, so the last checkpoint is not necessarily the one to report);
* the stopping rules of :mod:`pipeline.training.stopping`: converged (training coarse held), plateau (training
  perplexity no longer improving), pruned (still on the initial plateau at a pruning checkpoint);
* at the end of the run: the last (partial) perplexity window and an evaluation, if the last batch had none;
* every ``checkpoint_every`` batches, at each evaluation and at the end: ``last.ckpt``, for resuming after a crash,
  and ``timings.csv`` (the wall-clock seconds at every logged step, kept out of ``metrics.csv``).
  The logs are flushed first, so everything logged up to a checkpoint is on disk when it is written.

The training loop (:mod:`pipeline.training.engine`) hands it what it needs when it opens the run: the run's loggers
and a function that writes the run's checkpoint to a path (weights only, or all to resume from). It then calls
:meth:`~TrainingMonitor.start`, :meth:`~TrainingMonitor.after_batch` after each of the run's batches and
:meth:`~TrainingMonitor.finish` at its end; a stop decided here is :attr:`~TrainingMonitor.stop_reason`, which the loop
reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pipeline.data.encoding import JointVocabulary
from pipeline.evaluation import evaluate, memory_usage
from pipeline.files import written_atomically
from pipeline.rundir import RunDir
from pipeline.tasks import Pair, Task
from pipeline.training.metrics_log import ResumableCSVLogger
from pipeline.training.results import TEST_COARSE, TEST_FINE, TRAIN_COARSE, TRAIN_FINE, TRAIN_PERPLEXITY, logged_values
from pipeline.training.runlife import MONITOR_STATE
from pipeline.training.stopping import (
    better_checkpoint,
    coarse_streak,
    converged,
    left_start,
    plateaued,
    pruning_applies,
    should_prune,
)

FRESH_EVAL_TAG = 0x5EED_E7A1  # the fresh training-length evaluation sequences come from their own generator
MEMORY_PROBE_SIZE = 20  # sequences on which the memory models' push/pop means are measured


def fresh_training_pairs(task: Task, seed: int, step: int, n: int) -> list[Pair]:
    """``n`` new training-length sequences for the evaluation at ``step``, fixed by (seed, step)."""
    return task.sample_batch(np.random.default_rng([seed, FRESH_EVAL_TAG, step]), "train", n)


class TrainingMonitor:
    """One run's schedule (the module docstring). ``loggers``: where its rows go (``metrics.csv`` first);
    ``save(path, weights_only)``: writes the run's checkpoint to ``path``."""

    def __init__(self, run_dir: Path, test_pairs: list[Pair], loggers: Sequence = (),
                 save: Callable[[Path, bool], None] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.test_pairs = test_pairs
        self.loggers = list(loggers)
        self.save = save
        # state saved with every checkpoint
        self.window_nll = 0.0
        self.window_tokens = 0
        self.last_perplexity = math.nan
        self.best: dict | None = None  # {"step", "train_coarse", "train_fine", "train_perplexity"}
        self.perfect_streak = 0
        self.elapsed = 0.0  # wall seconds of training, summed over restarts
        # The process's CPU seconds of training, summed over restarts: what a run cost where others shared its cores
        # (wall time counts the waits too). None once unknown: resumed from a checkpoint that did not keep it.
        self.cpu_elapsed: float | None = 0.0
        self.stop_reason: str | None = None  # "converged", "plateau" or "pruned" once stopped early (stopping.py)
        self.first_perplexity = math.nan  # the first window's: what pruning compares with
        # (batch, training perplexity) of every window closed: what the plateau rule judges (stopping.plateaued)
        self.windows: list[tuple[int, float]] | None = []
        self.left_start_at: int | None = None  # the batch whose window first fell to half the first's (stopping.py)
        self.last_eval_step = -1
        self.timings: list[tuple[int, float]] = []  # (step, wall seconds of training) at every logged row
        self.shown: dict[str, float] = {}  # the latest perplexity and accuracies, for a progress bar to show
        self.scored: dict = {}  # step -> (train, test) Scores of its evaluation, when the loop scored them already
        # The state before the run's end closed its last window and evaluated off the schedule (finish), with the
        # metrics.csv rows logged until then: what a run extended later resumes from. None when the end added nothing.
        self.before_finish: dict | None = None
        self._start_clocks()

    @property
    def last_path(self) -> Path:
        return RunDir(self.run_dir).last_checkpoint

    @property
    def best_path(self) -> Path:
        return RunDir(self.run_dir).best_checkpoint

    # -- checkpointed state -----------------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        self._tick()
        return dict(window_nll=self.window_nll, window_tokens=self.window_tokens,
                    last_perplexity=self.last_perplexity, best=self.best, perfect_streak=self.perfect_streak,
                    elapsed=self.elapsed, cpu_elapsed=self.cpu_elapsed, stop_reason=self.stop_reason,
                    first_perplexity=self.first_perplexity,
                    windows=list(self.windows or []),
                    left_start_at=self.left_start_at, last_eval_step=self.last_eval_step, timings=list(self.timings),
                    **({"before_finish": self.before_finish} if self.before_finish is not None else {}))

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        for key in ("best_perplexity", "plateau_stall"):  # version 1 of the plateau rule's state
            state.pop(key, None)
        state.setdefault("windows", None)  # a checkpoint from before the log was kept: read back from metrics.csv
        state.setdefault("cpu_elapsed", None)  # a checkpoint from before CPU time was kept: the run's is unknown
        if state.pop("stopped_early", False) and not state.get("stop_reason"):  # checkpoints before stop reasons
            state["stop_reason"] = "converged"
        before = state.pop("before_finish", None)
        if before is not None:  # written at a run's end off the schedule: go on from before that end (finish)
            state = {key: value for key, value in before.items() if key != "rows"}
        for key, value in state.items():
            setattr(self, key, value)
        reopen = RunDir(self.run_dir).reopen_marker
        if reopen.exists():  # a pruned or converged run continued on purpose: its stop no longer holds
            self.stop_reason, self.perfect_streak = None, 0
            reopen.unlink()
        self._start_clocks()

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason is not None

    def _start_clocks(self) -> None:
        """The wall and CPU clocks of training run from now (what :meth:`_tick` adds to ``elapsed`` and
        ``cpu_elapsed``)."""
        self._since, self._cpu_since = time.monotonic(), time.process_time()

    def _tick(self) -> None:
        now, cpu = time.monotonic(), time.process_time()
        self.elapsed += now - self._since
        if self.cpu_elapsed is not None:
            self.cpu_elapsed += cpu - self._cpu_since
        self._since, self._cpu_since = now, cpu

    # -- what the loop calls --------------------------------------------------------------------------------------

    def start(self, step: int) -> None:
        """Training (re)starts at batch ``step``: the clocks run from now."""
        self._start_clocks()
        self.restore_windows(step)

    def after_batch(self, step: int, module, nll, tokens) -> None:
        """After batch ``step`` (counted from 1): its summed target NLL and token count."""
        t = module.config.training
        self.window_nll += float(nll)
        self.window_tokens += int(tokens)
        metrics = {}
        if step % t.perplexity_every == 0:
            metrics.update(self._close_window(module, step))
            if pruning_applies(module.config) and should_prune(step, t, self.windows or []):
                self._stop("pruned")
        if step % t.eval_every == 0:
            metrics.update(self._evaluate(module, step))
        self._log(metrics, step)
        if step % t.checkpoint_every == 0 or step % t.eval_every == 0 or self.stopped_early:
            self.save_last()

    def finish(self, step: int, module) -> None:
        """The run's training ended at batch ``step``. Every run ends evaluated, whatever its budget: a budget that is
        not a multiple of eval_every (or below it) still gets its last batches' perplexity and an evaluation, hence a
        best checkpoint to report. Such an end is off the run's schedule: its state before it (and ``best.ckpt``, and
        the count of ``metrics.csv`` rows) is kept in ``last.ckpt``, so that the run extended later resumes from
        there and writes the log of its twin trained straight to the longer budget (:func:`resume_point`)."""
        if self.before_finish is None and (self.window_tokens or (step and self.last_eval_step != step)):
            self.before_finish = {**self.state_dict(), "rows": len(RunDir(self.run_dir).read_metrics())}
            if self.best_path.exists():
                with written_atomically(RunDir(self.run_dir).best_before_end) as partial:
                    partial.write_bytes(self.best_path.read_bytes())
        metrics = {}
        if self.window_tokens:
            metrics.update(self._close_window(module, step))
        if step and self.last_eval_step != step:
            metrics.update(self._evaluate(module, step))
        self._log(metrics, step)
        self.save_last()

    # -- pieces -----------------------------------------------------------------------------------------------------

    def _close_window(self, module, step: int) -> dict:
        """The average training perplexity of the batches since the last window closed."""
        mean = self.window_nll / self.window_tokens
        # a diverging run's mean loss can pass exp's range (~709 nats): its perplexity is then infinite, not an error
        self.last_perplexity = math.inf if mean > 709.0 else math.exp(mean)  # NaN stays NaN
        self.window_nll, self.window_tokens = 0.0, 0
        self.windows.append((step, self.last_perplexity))
        if math.isnan(self.first_perplexity):
            self.first_perplexity = self.last_perplexity
        if self.left_start_at is None and left_start(self.first_perplexity, self.last_perplexity):
            self.left_start_at = step
        self.shown["ppl"] = self.last_perplexity
        return {TRAIN_PERPLEXITY: self.last_perplexity}

    def restore_windows(self, step: int) -> None:
        """Resumed at batch ``step`` from a checkpoint written before the monitor kept the plateau rule's log: read
        it back from ``metrics.csv`` (its rows up to ``step``, which the resumed log keeps)."""
        if self.windows is None:
            logged = logged_values(RunDir(self.run_dir).read_metrics(), TRAIN_PERPLEXITY)
            self.windows = [(batch, perplexity) for batch, perplexity in logged if batch <= step]

    def _log(self, metrics: dict, step: int) -> None:
        """``metrics`` to every logger; the wall-clock time to the dashboard and ``timings.csv`` only, so that two
        runs of one config write the same ``metrics.csv``, byte for byte."""
        if not metrics:
            return
        self._tick()
        self.timings.append((step, round(self.elapsed, 3)))
        for logger in self.loggers:
            extra = {} if isinstance(logger, ResumableCSVLogger) else {"time/elapsed_s": self.elapsed}
            logger.log_metrics({**metrics, **extra}, step=step)
            logger.save()

    def evaluation_sets(self, module, step: int) -> tuple[list[Pair], list[Pair]]:
        """The sequences the evaluation at ``step`` scores: fresh training-length ones, and the cached test set's
        first ``test_eval_size``."""
        t = module.config.training
        return fresh_training_pairs(module.task, t.seed, step, t.eval_size), self.test_pairs[: t.test_eval_size]

    def _evaluate(self, module, step: int) -> dict:
        t = module.config.training
        vocab: JointVocabulary = module.vocab
        fresh, test_pairs = self.evaluation_sets(module, step)
        scored = self.scored.pop(step, None)  # scored already, with the other members of a batched population
        train, test = scored or (evaluate(module.model, fresh, vocab), evaluate(module.model, test_pairs, vocab))
        metrics = {TRAIN_COARSE: train.coarse, TRAIN_FINE: train.fine, TEST_COARSE: test.coarse,
                   TEST_FINE: test.fine, **memory_usage(module.model, fresh[:MEMORY_PROBE_SIZE], vocab)}
        self.shown.update(train_coarse=train.coarse, test_coarse=test.coarse)

        self.last_eval_step = step
        if better_checkpoint(train.coarse, train.fine, self.best):
            self.best = dict(step=step, train_coarse=train.coarse, train_fine=train.fine,
                             train_perplexity=self.last_perplexity)
            with written_atomically(self.best_path) as partial:  # a full disk leaves the old one whole
                self.save(partial, True)

        self.perfect_streak = coarse_streak(self.perfect_streak, train.coarse, t)
        if converged(self.perfect_streak, t):
            self._stop("converged")
        elif plateaued(self.windows, step, t, self.left_start_at):
            self._stop("plateau")
        return metrics

    def _stop(self, reason: str) -> None:
        """The run stops early, for the first reason given."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def save_last(self) -> None:
        for logger in self.loggers:
            logger.save()
        RunDir(self.run_dir).write_timings(self.timings)
        with written_atomically(self.last_path) as partial:
            self.save(partial, False)


def resume_point(checkpoint: dict | None, run_dir: Path) -> int | None:
    """How many rows of ``metrics.csv`` a run resumed from ``checkpoint`` keeps, when that checkpoint was written at
    the run's end off its schedule (:meth:`TrainingMonitor.finish`: the rows before that end; its ``best.ckpt`` is
    put back as it was then); None otherwise (the rows up to the checkpoint's step are kept)."""
    state = ((checkpoint or {}).get("callbacks") or {}).get(MONITOR_STATE) or {}
    before = state.get("before_finish")
    if before is None:
        return None
    folder = RunDir(run_dir)
    if folder.best_before_end.exists():
        folder.best_before_end.replace(folder.best_checkpoint)
    elif before.get("best") is None:
        folder.best_checkpoint.unlink(missing_ok=True)  # no evaluation had made one before the end's
    return before["rows"]
