"""When a run stops before its budget, and why: the rules a profile states, as pure functions the tests call.

A run ends for one of :data:`STOP_REASONS`:

* ``converged``: training coarse accuracy has been at least ``early_stop_coarse`` (1.0) for ``early_stop_patience``
  evaluations in a row;
* ``plateau``: its training perplexity is flat, by :func:`plateaued`: over the last *window* of batches (the larger
  of ``plateau_patience`` evaluations and ``plateau_window_fraction`` of the batches trained, so a run at 100,000
  batches is judged on 10,000, not on 2,000) its perplexity has not beaten its *reference* by more than
  ``plateau_tolerance`` (the reference moves only when it is so beaten), and the mean of its windows over the last
  window is not more than the tolerance below the mean over the window before. Trained to convergence, whatever its
  accuracy. Only evaluations from :func:`counted_from` on count: where the run has pruning checkpoints, from the last
  of them (before it, a memory model sitting on its initial plateau is the pruning rule's to judge: memory models
  leave that plateau abruptly, after up to a few thousand batches, and the plateau rule would stop them first); with
  ``plateau_after_leaving_start`` (the deep LSTMs, which have no pruning), once the run has left its starting plateau
  (:func:`left_start`): an LSTM sits near the uniform guess for thousands of batches before it learns anything (the
  paper's Fig. 2b), and stopping it there says nothing about where it converges;
* ``pruned``: at one of the batches listed in ``prune_at``, it is still on its initial plateau by
  :func:`should_prune` (version :data:`PRUNE_RULE`): its training perplexity is above its threshold
  (``prune_ratio`` × its first window's) by more than its own recent spread, or above it and no longer falling; so
  the budget goes to runs that are learning, and no noisy window decides. Never a read ablation
  (:func:`pruning_applies`). A pruned run is not failed: ``--retry-pruned`` (sweep) or ``--reopen`` (train)
  continues it;
* ``budget``: it trained ``max_batches``.

Only the training perplexity and training-length accuracy decide (the paper's own criteria, §4.4–5): test-length
numbers never stop, prune or select anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

STOP_REASONS = ("budget", "converged", "plateau", "pruned")
EARLY_REASONS = ("converged", "plateau", "pruned")  # stopped before the budget


# A run whose training perplexity has not yet fallen to this fraction of its first window's is still on the plateau it
# started on (the uniform guess, or on copy and bigram flipping the guess that places </s> right, 112 of 128): the
# deep LSTMs stopped by a plateau rule at 110-121 had learned nothing a reader could call converged. Half the start is
# a fall no noise makes, and every run in the cpu profile that learned anything passed it.
LEFT_START_RATIO = 0.5


def coarse_streak(streak: int, train_coarse: float, training) -> int:
    """The evaluations in a row, this one included, at training coarse accuracy ``early_stop_coarse`` or above."""
    return streak + 1 if train_coarse >= training.early_stop_coarse else 0


def converged(streak: int, training) -> bool:
    """The early stop: a streak (:func:`coarse_streak`) of ``early_stop_patience`` evaluations; never where it is 0."""
    return bool(training.early_stop_patience) and streak >= training.early_stop_patience


def better_checkpoint(train_coarse: float, train_fine: float, best: dict | None) -> bool:
    """Whether an evaluation replaces the run's best checkpoint, the one it reports (``selected_step``): higher
    training coarse accuracy, then fine; of two equal ones the later, which has trained longer."""
    return best is None or (train_coarse, train_fine) >= (best["train_coarse"], best["train_fine"])


def left_start(first_perplexity: float, perplexity: float, ratio: float = LEFT_START_RATIO) -> bool:
    """Whether a run at ``perplexity`` has left the plateau it started on: at most ``ratio`` times its first
    window's. NaN on either side is not a departure."""
    if math.isnan(first_perplexity) or math.isnan(perplexity):
        return False
    return perplexity <= ratio * first_perplexity


# The version of the pruning rule that results.json records (``prune_rule``; absent: 1). Version 1 pruned a run
# whose last 100-batch window was above the threshold, by any margin: the cpu profile's two bigram-flipping Stacks were
# pruned at 116.3 and 116.6 against 115.5 while falling a point a window (reports/cpu/evidence.md). A run pruned by
# version 1 that version 2 would have kept trains on when its sweep runs (pipeline.sweep.rejudge.rejudged_prune).
PRUNE_RULE = 2
# The windows a pruning decision reads: the last 10 (1,000 batches at the usual 100) for the run's recent spread, and
# the 10 before them for its trend.
PRUNE_WINDOWS = 10


def prune_threshold(ratio: float, first_perplexity: float) -> float:
    """The perplexity above which a run may be on its initial plateau: ``ratio`` times its first window's."""
    return ratio * first_perplexity


def pruning_applies(config) -> bool:
    """Whether the pruning rule judges a run (a :class:`~pipeline.config.RunConfig`): where its profile prunes, and
    never a read ablation (``model.probes.read_zeroed``). Pruning spends a search's budget on the runs that learn; an
    ablation is no search's member but evidence, compared with the run it ablates at the same batch, so it trains to
    its cap whatever its start (the copy Stack's, pruned at 2,000 on the plateau its heard run had left, compared
    nothing)."""
    return bool(config.training.prune_at) and not config.model.probes.read_zeroed


def should_prune(step: int, training, windows: Sequence[tuple[int, float]]) -> bool:
    """At a pruning checkpoint (``step`` in ``training.prune_at``), whether the run is still on its initial plateau,
    given its training-perplexity log ``windows`` ((batch, perplexity) of every window closed so far). With ``T`` =
    :func:`prune_threshold`, ``p`` the window ending at ``step``, ``s`` the standard deviation of the last
    :data:`PRUNE_WINDOWS` windows (its own recent spread, trend included) and *falling* = :func:`still_improving` over
    the last ``2 ×`` :data:`PRUNE_WINDOWS` windows at the run's ``plateau_tolerance``, it is pruned when either

    1. ``p - T > s``: above the threshold by more than its spread, so one spread of luck would not have saved it; or
    2. the mean of the last :data:`PRUNE_WINDOWS` windows is above ``T`` and the run is not *falling*: sitting on the
       plateau, whichever side of ``T`` its last window's noise put it.

    A run just above ``T`` and still falling (the bigram-flipping Stacks at 116.3 against 115.5) is kept; a flat one
    just below ``T`` by a lucky window is pruned. NaN windows are left out; a NaN first window or last window never
    prunes (a NaN loss fails the run instead)."""
    if step not in training.prune_at:
        return False
    upto = [(b, p) for b, p in windows if b <= step]
    if not upto or upto[-1][0] != step:
        return False
    first, last = upto[0][1], upto[-1][1]
    if math.isnan(first) or math.isnan(last):
        return False
    threshold = prune_threshold(training.prune_ratio, first)
    values = [p for _, p in upto if not math.isnan(p)]
    recent = values[-PRUNE_WINDOWS:]
    mean = sum(recent) / len(recent)
    spread = math.sqrt(sum((p - mean) ** 2 for p in recent) / (len(recent) - 1)) if len(recent) > 1 else 0.0
    if last - threshold > spread:
        return True
    falling = still_improving(values[-2 * PRUNE_WINDOWS:], window=PRUNE_WINDOWS, tolerance=training.plateau_tolerance)
    return mean > threshold and not falling


def improves(perplexity: float, on: float, tolerance: float) -> bool:
    """Whether ``perplexity`` is more than ``tolerance`` (relative) below ``on``, in perplexity or in cross-entropy
    (its log), whichever falls by the larger fraction.

    Perplexity alone is the right scale on the uniform plateau (~128) but cannot register progress near 1: a run at
    1.005 cannot get 2% lower, though its cross-entropy (0.005 nats a symbol, the rare errors left) may still halve
    every thousand batches. A fall of the cross-entropy by a fraction ``tolerance`` is the smaller one wherever it
    exceeds -ln(1 - tolerance) / tolerance nats (perplexity ~2.75 for 2%), so above that this is the perplexity rule
    exactly."""
    if perplexity < on * (1 - tolerance):
        return True
    return on > 1 and math.log(perplexity) < math.log(on) * (1 - tolerance)


# The version of the plateau rule that results.json records (``plateau_rule``). Version 1, before it was recorded,
# moved its reference to every new low, so a run falling 1.9% at every evaluation "plateaued" after a few of them;
# pipeline.sweep.rejudge keeps it, to replay archived runs. A run stopped by an older version is judged again by this
# one when its sweep runs (pipeline.sweep.rejudge.rejudged_stop).
PLATEAU_RULE = 2


def plateau_window(training, step: int) -> int:
    """The batches over which the plateau rule judges a run at ``step``: ``plateau_patience`` evaluations, or
    ``plateau_window_fraction`` of the batches trained (rounded up to whole perplexity windows), the larger."""
    least = training.plateau_patience * training.eval_every
    every = training.perplexity_every
    grown = math.ceil(training.plateau_window_fraction * step / every - 1e-9) * every
    return max(least, grown)


def trend_window(training, step: int) -> int:
    """The batches over which a run at ``step`` is judged flat or still falling, by the plateau rule and by the
    report alike: :func:`plateau_window` where the run has a plateau rule, else the larger of 20 perplexity windows
    and ``plateau_window_fraction`` of ``step``."""
    if training.plateau_patience:
        return plateau_window(training, step)
    every = training.perplexity_every
    return max(20 * every, math.ceil(training.plateau_window_fraction * step / every - 1e-9) * every)


def still_falling(windows: Sequence[tuple[int, float]], training, step: int) -> bool:
    """Whether a run's training perplexity was still falling at batch ``step``: :func:`still_improving` with the
    run's own tolerance over the last :func:`trend_window` against the one before. What makes a run that hit its
    cap *budget-limited* rather than flat, and the plateau rule's second condition. Its numbers: :func:`trend_at`."""
    judged = trend_at(windows, training, step)
    return judged is not None and judged.improving


def trend_at(windows: Sequence[tuple[int, float]], training, step: int) -> Trend | None:
    """The comparison :func:`still_falling` makes at batch ``step``, with its numbers (:class:`Trend`)."""
    width = trend_window(training, step)
    span = [p for batch, p in windows if step - 2 * width < batch <= step]
    return trend(span, window=width // training.perplexity_every, tolerance=training.plateau_tolerance)


def counted_from(training, left_start_at: int | None) -> int | None:
    """The first batch whose evaluation the plateau rule counts (None: none yet): the last pruning checkpoint, and
    with ``plateau_after_leaving_start`` not before the run has left its starting plateau (``left_start_at``)."""
    start = max(training.prune_at, default=0)
    if training.plateau_after_leaving_start:
        if left_start_at is None:
            return None
        start = max(start, left_start_at)
    return start


def plateaued(windows: Sequence[tuple[int, float]], step: int, training, left_start_at: int | None) -> bool:
    """Whether the plateau rule stops a run at the evaluation at batch ``step``, given its training-perplexity log
    ``windows`` ((batch, perplexity) of every ``perplexity_every`` window closed so far). With ``W`` =
    :func:`plateau_window` and only batches from :func:`counted_from` on:

    1. the reference has stood for at least ``W`` batches: the reference is the perplexity at the first counted
       evaluation, replaced by a later evaluation's only where that one is more than ``plateau_tolerance`` below it
       (so a steady fall moves it every few evaluations, however small the fall per evaluation);
    2. the log covers ``2 W`` counted batches, and the mean of the windows of the last ``W`` is not more than the
       tolerance below the mean of the ``W`` before: ``not`` :func:`still_improving` over them, in perplexity, or
       in cross-entropy beyond its noise.

    Both hold for a flat run, noise and all; neither for a run still falling by more than the tolerance per window.
    The reference is judged in perplexity alone: near perplexity 1 a 100-batch window's cross-entropy is a handful of
    errors, and single windows beat any reference in it by chance (the archived Queue on gender at 1.0000x moved
    its reference at 8 of its last 12 evaluations); there 2, whose cross-entropy test weighs the fall against the
    windows' spread, tells a run still halving its errors from a flat one."""
    if not training.plateau_patience:
        return False
    start = counted_from(training, left_start_at)
    if start is None:
        return False
    width = plateau_window(training, step)
    if step - 2 * width < start:
        return False
    reference, since = math.nan, None
    for batch, perplexity in windows:
        if batch < start or batch > step or batch % training.eval_every or math.isnan(perplexity):
            continue
        if since is None or perplexity < reference * (1 - training.plateau_tolerance):
            reference, since = perplexity, batch
    if since is None or step - since < width:
        return False
    return not still_falling(windows, training, step)


def plateau_stop(windows: Sequence[tuple[int, float]], training, left_start_at: int | None,
                 until: int | None = None) -> int | None:
    """The first evaluation at which :func:`plateaued` stops a run with this log (up to batch ``until``), or None:
    what the monitor decides as the run trains, replayed on a finished run's ``metrics.csv``."""
    for batch, _ in windows:
        if until is not None and batch > until:
            break
        if batch % training.eval_every == 0 and plateaued(windows, batch, training, left_start_at):
            return batch
    return None


# Below this mean cross-entropy (nats a symbol: perplexity 1.001) a fall in cross-entropy is not counted as learning:
# what is left to fall there is the confidence on symbols already right, not errors. The cpu profile's Queue on gender
# sat at 2e-8 nats with every window a little lower than the one before, "improving" by any relative test, with
# nothing left to learn.
CROSS_ENTROPY_FLOOR = 1e-3


def trend_span(windows: int, window: int = 10) -> int:
    """How many windows each half of :func:`still_improving`'s comparison covers, for a log of ``windows``."""
    return min(window, windows // 2)


@dataclass(frozen=True)
class Trend:
    """What :func:`still_improving` weighs, for evidence that quotes the test that decided: the last span of windows
    against the span before, in perplexity and in cross-entropy (nats a symbol, the mean of the windows' logs)."""
    span: int  # windows in each half
    perplexity_fall: float  # relative fall of the mean perplexity (0.05: the last span 5% below the one before)
    cross_entropy_before: float  # mean cross-entropy of the span before
    cross_entropy_fall: float  # the fall of the mean cross-entropy (nats a symbol)
    cross_entropy_bar: float  # twice the standard error of that fall (NaN with one window a span)
    by_perplexity: bool  # the mean perplexity fell by more than the tolerance
    by_cross_entropy: bool  # the mean cross-entropy fell by more than the tolerance, its noise, and not at the floor

    @property
    def improving(self) -> bool:
        return self.by_perplexity or self.by_cross_entropy

    @property
    def decided_by_cross_entropy(self) -> bool:
        """Whether the cross-entropy test is the one that says falling (the perplexity's fall is under the
        tolerance): near perplexity 1, where a run halving its errors barely moves its perplexity."""
        return self.by_cross_entropy and not self.by_perplexity


def trend(perplexities: Sequence[float], window: int = 10, tolerance: float = 0.01) -> Trend | None:
    """The comparison :func:`still_improving` makes, with its numbers (None: no window to compare)."""
    values = [p for p in perplexities if not math.isnan(p)]
    span = trend_span(len(values), window)
    if span == 0:
        return None
    recent, before = values[-span:], values[-2 * span:-span]
    by_perplexity = sum(recent) < sum(before) * (1 - tolerance)
    logs = [[math.log(p) for p in part] for part in (recent, before)]
    means = [sum(part) / span for part in logs]
    fall = means[1] - means[0]
    bar = math.nan
    if span >= 2:
        variances = [sum((x - m) ** 2 for x in part) / (span - 1) for part, m in zip(logs, means)]
        bar = 2 * math.sqrt(sum(variances) / span)
    by_cross_entropy = (means[1] > CROSS_ENTROPY_FLOOR and fall > means[1] * tolerance
                        and (span < 2 or fall > bar))
    return Trend(span=span, perplexity_fall=1 - sum(recent) / sum(before), cross_entropy_before=means[1],
                 cross_entropy_fall=fall, cross_entropy_bar=bar, by_perplexity=by_perplexity,
                 by_cross_entropy=by_cross_entropy)


def still_improving(perplexities: Sequence[float], window: int = 10, tolerance: float = 0.01) -> bool:
    """Whether a run's training perplexity was still falling at its end: the mean of its last ``window`` windows
    more than ``tolerance`` (relative) below the mean of the ``window`` before them (with the paper's 100-batch
    windows: the last 1,000 batches against the 1,000 before), in perplexity or in cross-entropy as in
    :func:`improves` (the means of their logs: the mean cross-entropy). Means, not single windows, so that one noisy
    window decides nothing. Near perplexity 1 a window's cross-entropy is a handful of errors, noisy by tens of
    percent, so a fall in cross-entropy counts only where it is also more than twice its standard error (from the
    spread of the windows): a flat run does not look improving by chance; and only above :data:`CROSS_ENTROPY_FLOOR`.
    A run too short for two full spans compares the halves of its log. What makes a run that hit its cap
    *budget-limited*. Its numbers: :func:`trend`."""
    judged = trend(perplexities, window, tolerance)
    return judged is not None and judged.improving


def describe(training) -> str:
    """The stopping rules of a run's training config, in one sentence (for reports and profiles)."""
    parts = [f"budget {training.max_batches:,} batches"]
    if training.early_stop_patience:
        parts.append(f"converged once training coarse >= {training.early_stop_coarse:g} for "
                     f"{training.early_stop_patience} evaluations")
    if training.plateau_patience:
        after = f" (counted from batch {max(training.prune_at):,})" if training.prune_at else ""
        if training.plateau_after_leaving_start:
            after += (f" (counted once training perplexity has fallen to {LEFT_START_RATIO:g} × its first window's: "
                      "the run has left its starting plateau)")
        least = training.plateau_patience * training.eval_every
        window = f"{training.plateau_patience} evaluations ({least:,} batches)"
        if training.plateau_window_fraction:
            window += f" or {training.plateau_window_fraction:.0%} of the batches trained, the larger"
        tolerance = f"{training.plateau_tolerance:.0%}"
        parts.append(f"plateau once training perplexity has not beaten its reference by {tolerance} for a window of "
                     f"{window}, and its mean over that window is within {tolerance} of the window before's (and its "
                     f"cross-entropy's, beyond the windows' noise){after}")
    if training.prune_at:
        parts.append(f"pruned at batch {', '.join(f'{b:,}' for b in training.prune_at)} if training perplexity is "
                     f"above {training.prune_ratio:g} × its first window's by more than its spread over the last "
                     f"{PRUNE_WINDOWS} windows, or above it and not falling")
    return "; ".join(parts)
