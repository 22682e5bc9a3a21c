"""When a run stops before its budget, and why: the rules a profile states, as pure functions the tests call.

A run ends for one of :data:`STOP_REASONS`:

* ``converged``: training coarse accuracy has been at least ``early_stop_coarse`` (1.0) for ``early_stop_patience``
  evaluations in a row;
* ``plateau``: its training perplexity has not improved on its best by more than ``plateau_tolerance`` (relative),
  in perplexity or in cross-entropy (see :func:`improves`), for ``plateau_patience`` evaluations in a row: trained
  to convergence, whatever its accuracy. Where the run has pruning checkpoints, only evaluations from the last of
  them on count: before it, a memory model sitting on its initial plateau is the pruning rule's to judge (memory
  models leave that plateau abruptly, after up to a few thousand batches, and the plateau rule would stop them
  first). With ``plateau_after_leaving_start`` (the deep LSTMs, which have no pruning), only evaluations after the run
  has left its starting plateau (:func:`left_start`) count: an LSTM sits near the uniform guess for thousands of
  batches before it learns anything (the paper's Fig. 2b), and stopping it there says nothing about where it
  converges;
* ``pruned``: at one of the batches listed in ``prune_at``, its training perplexity was still above
  ``prune_ratio`` × its first window's: still on the initial plateau, so the budget goes to runs that are learning.
  A pruned run is not failed: ``--retry-pruned`` (sweep) or ``--reopen`` (train) continues it;
* ``budget``: it trained ``max_batches``.

Only the training perplexity and training-length accuracy decide (the paper's own criteria, §4.4–5): test-length
numbers never stop, prune or select anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

STOP_REASONS = ("budget", "converged", "plateau", "pruned")
EARLY_REASONS = ("converged", "plateau", "pruned")  # stopped before the budget


# A run whose training perplexity has not yet fallen to this fraction of its first window's is still on the plateau it
# started on (the uniform guess, or on copy and bigram flipping the guess that places </s> right, 112 of 128): the
# deep LSTMs stopped by a plateau rule at 110-121 had learned nothing a reader could call converged. Half the start is
# a fall no noise makes, and every run in the cpu profile that learned anything passed it.
LEFT_START_RATIO = 0.5


def left_start(first_perplexity: float, perplexity: float, ratio: float = LEFT_START_RATIO) -> bool:
    """Whether a run at ``perplexity`` has left the plateau it started on: at most ``ratio`` times its first
    window's. NaN on either side is not a departure."""
    if math.isnan(first_perplexity) or math.isnan(perplexity):
        return False
    return perplexity <= ratio * first_perplexity


def should_prune(step: int, prune_at: Sequence[int], ratio: float, first_perplexity: float,
                 perplexity: float) -> bool:
    """At a pruning checkpoint, whether the run is still on its initial plateau: perplexity above ``ratio`` times
    its first window's. A NaN perplexity is never pruned here (a NaN loss fails the run instead)."""
    if step not in prune_at or math.isnan(first_perplexity) or math.isnan(perplexity):
        return False
    return perplexity > ratio * first_perplexity


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


def plateau_stall(best: float, stall: int, perplexity: float, tolerance: float) -> tuple[float, int]:
    """Update (best perplexity so far, evaluations without an improvement of more than ``tolerance``: see
    :func:`improves`) with a new perplexity."""
    if math.isnan(perplexity):
        return best, stall + 1
    if math.isnan(best) or improves(perplexity, best, tolerance):
        return perplexity, 0
    return min(best, perplexity), stall + 1


def counts_toward_plateau(step: int, prune_at: Sequence[int], after_leaving_start: bool = False,
                          has_left_start: bool = False) -> bool:
    """Whether the evaluation at ``step`` counts for the plateau rule: from the last pruning checkpoint on, and, with
    ``after_leaving_start``, only once the run has left its starting plateau (``has_left_start``)."""
    if after_leaving_start and not has_left_start:
        return False
    return step >= max(prune_at, default=0)


def trend_span(windows: int, window: int = 10) -> int:
    """How many windows each half of :func:`still_improving`'s comparison covers, for a log of ``windows``."""
    return min(window, windows // 2)


def still_improving(perplexities: Sequence[float], window: int = 10, tolerance: float = 0.01) -> bool:
    """Whether a run's training perplexity was still falling at its end: the mean of its last ``window`` windows
    more than ``tolerance`` (relative) below the mean of the ``window`` before them (with the paper's 100-batch
    windows: the last 1,000 batches against the 1,000 before), in perplexity or in cross-entropy as in
    :func:`improves` (the means of their logs: the mean cross-entropy). Means, not single windows, so that one noisy
    window decides nothing. Near perplexity 1 a window's cross-entropy is a handful of errors, noisy by tens of
    percent, so a fall in cross-entropy counts only where it is also more than twice its standard error (from the
    spread of the windows): a flat run does not look improving by chance. A run too short for two full spans
    compares the halves of its log. What makes a run that hit its cap *budget-limited*."""
    values = [p for p in perplexities if not math.isnan(p)]
    span = trend_span(len(values), window)
    if span == 0:
        return False
    recent, before = values[-span:], values[-2 * span:-span]
    if sum(recent) < sum(before) * (1 - tolerance):
        return True
    logs = [[math.log(p) for p in part] for part in (recent, before)]
    means = [sum(part) / span for part in logs]
    fall = means[1] - means[0]
    if means[1] <= 0 or fall <= means[1] * tolerance:
        return False
    if span < 2:
        return True
    variances = [sum((x - m) ** 2 for x in part) / (span - 1) for part, m in zip(logs, means)]
    return fall > 2 * math.sqrt(sum(variances) / span)


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
        parts.append(f"plateau once training perplexity has not improved by {training.plateau_tolerance:.0%} (nor "
                     f"its log, the cross-entropy) for {training.plateau_patience} evaluations{after}")
    if training.prune_at:
        parts.append(f"pruned at batch {', '.join(f'{b:,}' for b in training.prune_at)} if training perplexity "
                     f"> {training.prune_ratio:g} × its first window's")
    return "; ".join(parts)
