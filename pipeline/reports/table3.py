"""Table 3 from a profile's runs: the §5-selected run per cell, the seeds behind it, and a verdict per cell.

* **Every run** (:func:`all_runs`): one row per run of the grid, finished or not, with its settings, state, why it
  stopped, its numbers and whether its training perplexity was still falling when it ended.
* **Selection** (:func:`select_models`, paper §5): per (task, model), among runs that are done (finished or pruned)
  and runs training on past results they reported (a rung's winner, a raised cap: they stand at those results), the
  one with the lowest average training perplexity. Runs without a finite perplexity are never selected, nor runs
  successive halving discarded. A run training on is budget-limited unless its numbers reproduce or beat the paper's.
* **Per cell** (:func:`table3`): the selected run's four accuracies beside the paper's; runs tried / done / learned
  (training coarse >= 0.99) / pruned; mean ± standard deviation of test coarse over the reported seeds of the selected
  run's setting (everything but the seed: learning rate, hidden size and any other choice); the median batches at
  which runs converged; and a **verdict** (:func:`verdict`). A selected run that hit its cap still improving is
  *budget-limited*, unless it was continued outside the profile (a documented experiment under
  ``reports/experiments/`` holding the same run, its cap raised): the verdict is then judged where the continuation
  ended, the row's four values (and that seed's in the spread over seeds) are the continuation's, and the evidence
  gives both. So is a selected run that falls short of the paper where a rule stopped it (the
  plateau rule, say) and whose continuation, reopened past that stop, went further: the windows after a stop judge it
  better than the one evaluation that made it. A cell short of the paper whose successive halving cut a run now
  standing lower than the selected one (:func:`cut_lower`) is budget-limited too, continued or not: its search, not
  its memory, decided it.

Only training numbers choose anything here. Test-length numbers are reported, never used to select or stop.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from pipeline.config import SweepConfig, TrainingConfig, config_hash
from pipeline.files import save_figure
from pipeline.models import DISPLAY_NAMES, PAPER_MODEL_NAMES, memory_of
from pipeline.provenance import machine_label, provenance_flags
from pipeline.reports.published import table3 as published_table3
from pipeline.rundir import TO_GO, DamagedRun, RunDir, stop_reason
from pipeline.sweep import DONE, sweep_status
from pipeline.sweep.rejudge import last_window_fall, rejudged_stop
from pipeline.sweep.status import planned_runs
from pipeline.tasks import PAPER_TASK_NAMES as TASK_NAMES  # the paper's Table 3: its five tasks
from pipeline.training.results import LEARNED_COARSE, TRAIN_PERPLEXITY, logged_rows, logged_values
from pipeline.training.stopping import LEFT_START_RATIO, left_start, trend_at, trend_window

METRICS = ("train_coarse", "train_fine", "test_coarse", "test_fine")
TOLERANCE = 0.05  # a value within this of the paper's agrees with it


def within_tolerance(difference: float) -> bool:
    """Two values agree: they differ by at most :data:`TOLERANCE` (and a rounding's worth: 0.95 against 1.00 agrees)."""
    return abs(difference) <= TOLERANCE + 1e-9


VERDICTS = ("reproduced", "better", "budget-limited", "stopped on its starting plateau", "disagrees at convergence")
# One short mark per verdict, in tables and on the Table 3 figure (glyphs the figures' DejaVu Sans has)
VERDICT_MARKS = {"reproduced": "✓", "better": "↑", "budget-limited": "…", "stopped on its starting plateau": "○",
                 "disagrees at convergence": "✗"}

# The kinds of evidence a cell's verdict rests on: a short label in the tables, defined once in evidence.md
EVIDENCE_KINDS = {
    "converged": ("converged", "Training coarse accuracy held at 1.0 (on fresh training-length sequences) for the "
                  "profile's number of evaluations in a row: the converged stop."),
    "plateau": ("plateau", "Stopped by the plateau rule (docs/training.md, \"The plateau rule\"): over its last window "
                "the training perplexity had not beaten its reference by the tolerance and its mean was within the "
                "tolerance of the window before's."),
    "plateau-falling": ("plateau, falling", "Stopped by the plateau rule, although the report's trend check (the "
                        "mean of the last window against the window before's) still sees it falling: a slow fall "
                        "under the rule's tolerance."),
    "v1-stop": ("v1 stop", "Stopped by version 1 of the plateau rule (its reference moved on every evaluation), "
                "which version 2 does not confirm at that batch: the numbers are where the run was cut short, not "
                "where it converges; the sweep trains it on when it runs again. Budget-limited whatever its numbers, "
                "unless they already reproduce or beat the paper's."),
    "cap-falling": ("cap, falling", "Hit its batch cap with its training perplexity still falling (the last "
                    "window's mean below the window before's by more than the tolerance, in perplexity or in "
                    "cross-entropy beyond its noise): more batches might have moved it further."),
    "cap-flat": ("cap, flat", "Hit its batch cap with its training perplexity flat over its last window; no rule "
                 "judged it converged before the cap."),
    "training-on": ("training on", "The selected run is training on past results it reported (a halving rung it "
                    "won, a raised cap, a stop lifted by a revised rule): its numbers are those results, read at its "
                    "checkpoint then; budget-limited until it is done, unless they already reproduce or beat the "
                    "paper's."),
    "rung": ("halving rung", "Stopped short of its cap by successive halving (the learning-rate search): cut at a "
             "rung, or waiting at or past a rung's budget for the rung to be decided."),
    "pruned": ("pruned", "Pruned: still near the uniform perplexity at a pruning checkpoint."),
    "too-short": ("too short", "Fewer than two perplexity windows: no trend can be judged."),
    "never-left-start": ("never left start", "Its training perplexity never fell to half its first window's: it "
                         "stopped before it left its starting plateau, so its numbers say nothing of where training "
                         "converges."),
    "runs-pruned": ("pruned runs", "Runs of the cell stopped early (k of n): pruned near the uniform perplexity, or "
                    "cut at a rung of a learning-rate search by successive halving."),
    "unfinished": ("runs not done", "Some of the cell's runs were still to train when the report was made: the "
                   "cell so far, selected among the runs with results."),
    "continued": ("continued", "The selected run was continued outside the profile (the same run, its cap raised or "
                  "reopened past the stop that ended it; `reports/experiments/`): the verdict is judged where the "
                  "continuation ended, and the row's numbers are the continuation's."),
    "cut-lower": ("cut run lower", "A run the cell's successive halving cut stands at a lower training perplexity "
                  "than the selected run (trained past its rung by an earlier grid, say): the search has not settled "
                  "the cell, which is budget-limited unless it already reproduces or beats the paper's."),
}
RUN_COLUMNS = ["task", "model", "hidden", "lr", "seed", "setting", "max_batches", "cap", "state", "batches",
               "training_on", "batches_now", "perplexity_now", "stop_reason", "train_perplexity", "selected_step",
               "end_perplexity",
               *METRICS, "learned", "still_improving", "trend_batches", "trend_tolerance", "trend_fall",
               "trend_cross_entropy_fall", "test_coarse_by_length",
               "start_perplexity", "left_start_at", "start", "provenance", "machine", "earlier_draws",
               "unconfirmed_plateau", "halved", "ablation_of", "run_id", "commit"]
TABLE3_COLUMNS = (
    ["task", "model", "in_profile", "hidden", "lr", "seed", "batches", "selected_step", "stop_reason",
     "train_perplexity", *METRICS]
    + [f"paper_{m}" for m in METRICS] + [f"diff_{m}" for m in METRICS]
    + ["runs", "done", "learned", "pruned", "seeds_at_selected", "test_coarse_mean", "test_coarse_std",
       "median_batches_to_converge", "verdict", "notes", "note_kinds", "evidence", "continued_batches",
       "continued_in", "start", "left_start", "provenance", "machine", "run_id", "commit"]
)


def setting_of(run) -> str:
    """A short hash of everything about a run but its seed and budget: runs with one setting are seeds of it."""
    identity = run.identity()
    identity["training"] = {k: v for k, v in identity["training"].items() if k != "seed"}
    return config_hash(identity, length=6)


def trend_span(training: TrainingConfig, end: int) -> int:
    """The batches each half of a run's trend check covers at its end: the plateau rule's window
    (:func:`~pipeline.training.stopping.trend_window`), at most half the run."""
    every = training.perplexity_every
    return min(trend_window(training, end), end // 2 // every * every)


def all_runs(sweep: SweepConfig, runs_root: Path | None = None) -> pd.DataFrame:
    """Every run of the grid (see :data:`RUN_COLUMNS`); numbers are NaN for runs that are not done."""
    rows = []
    halved = {run.run_id() for run, cut in planned_runs(sweep, runs_root) if cut}
    # max_batches is the budget the run trains to now (a halving rung's, in a bracket); its cap, the config's own
    caps = {run.run_id(): run.training.max_batches for run in sweep.runs()}
    for status in sweep_status(sweep, runs_root):
        run = status.config
        logged = logged_values(logged_rows(status.run_dir), TRAIN_PERPLEXITY)
        # where its whole log stands now (a run training on has logged past the results it stands at): the mean of
        # its last windows, as the read ablation's levels are read
        now = recent_windows(logged)
        results = RunDir(status.run_dir).read_results() if status.state in DONE else None
        # reopened past results it reported (a rung it won, a raised cap, a lifted stop) and not done again: it
        # stands at those results while it trains on, so that a cell does not lose its best run for the hours it
        # trains (never a run the search discarded, nor a failed or damaged one)
        training_on = False
        if results is None and status.state in ("running", *TO_GO) and run.run_id() not in halved:
            results = RunDir(status.run_dir).standing_results()
            training_on = results is not None
        end = results["batches"] if results else status.batches_done
        logged = [(step, p) for step, p in logged if step <= end]  # a reopened run's log may run past its results
        perplexities = [p for _, p in logged]
        span = trend_span(run.training, end)
        judged = trend_at(logged, run.training, end)
        row = dict(task=run.task, model=run.model.name, hidden=run.model.hidden, lr=run.training.lr,
                   seed=run.training.seed, setting=setting_of(run), max_batches=run.training.max_batches,
                   cap=caps.get(run.run_id(), run.training.max_batches), state=status.state,
                   batches=status.batches_done, training_on=training_on, batches_now=status.batches_done,
                   perplexity_now=sum(now) / len(now) if now else math.nan,
                   stop_reason=None, train_perplexity=math.nan,
                   # the checkpoint its four values and train_perplexity are read at, and its last window's perplexity
                   selected_step=math.nan, end_perplexity=perplexities[-1] if perplexities else math.nan,
                   **{m: math.nan for m in METRICS}, learned=False,
                   # the plateau rule's own trend check over its own window (stopping.still_falling): the report says
                   # the batches each half covers and the tolerance
                   still_improving=judged is not None and judged.improving,
                   trend_batches=span,
                   trend_tolerance=run.training.plateau_tolerance,
                   # how far it fell over that span: the figure the evidence gives beside "flat" or "still falling"
                   trend_fall=last_window_fall(logged, span),
                   # where the cross-entropy test alone says "still falling" (near perplexity 1), its relative fall:
                   # the figure that decided, which the evidence quotes beside the perplexity's
                   trend_cross_entropy_fall=cross_entropy_fall(judged),
                   test_coarse_by_length="", run_id=run.run_id(), commit="", start=start_of(run.model),
                   provenance="", machine="", earlier_draws=0, unconfirmed_plateau=False,
                   # stopped at a rung by successive halving: the learning-rate search discarded it, so it is never a
                   # cell's selected run (the paper selects among its search's survivors)
                   halved=run.run_id() in halved,
                   # a read ablation (probes.read_zeroed): the run it ablates, the same config with its memory heard
                   # (budgets apart, one run id); never a cell's attempt, so never selected nor counted among its runs
                   ablation_of=ablated_run(run),
                   # its first window's training perplexity: near the uniform guess over the output symbols
                   start_perplexity=perplexities[0] if perplexities else math.nan,
                   # the first batch whose window fell to half the first's: it left its starting plateau there
                   left_start_at=next((step for step, p in logged if left_start(perplexities[0], p)), None))
        if results is not None:
            row.update(batches=results["batches"], stop_reason=stop_reason(results),
                       train_perplexity=results["train_perplexity"], commit=results.get("commit", ""),
                       selected_step=results.get("selected_step", math.nan),
                       provenance=provenance_flags(results), machine=machine_label(results),
                       # trained again from batch 0 (on another machine kind, another draw): the draws it replaced
                       earlier_draws=len(RunDir(status.run_dir).read_earlier_draws()),
                       # stopped by version 1 of the plateau rule where version 2 would not have stopped it: it
                       # trains on when its sweep runs again (pipeline.sweep.rejudge), and no verdict rests on it
                       unconfirmed_plateau=rejudged_stop(status.run_dir),
                       **{m: results[m] for m in METRICS})
            row["learned"] = results["train_coarse"] >= LEARNED_COARSE
            row["test_coarse_by_length"] = length_ends(RunDir(status.run_dir).read_accuracy_by_length("test"))
        rows.append(row)
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def ablated_run(run) -> str:
    """The run id a read ablation ablates (its config with ``read_zeroed`` off), or '' for any other run."""
    if not run.model.probes.read_zeroed:
        return ""
    heard = dataclasses.replace(run.model.probes, read_zeroed=False)
    return dataclasses.replace(run, model=dataclasses.replace(run.model, probes=heard)).run_id()


def is_ablation(runs: pd.DataFrame) -> pd.Series:
    """Per run (all_runs' rows), whether it is a read ablation (:func:`ablated_run`): its ``ablation_of`` is a run id
    (a table read back from CSV has NaN where it is empty)."""
    if "ablation_of" not in runs:
        return pd.Series(False, index=runs.index)
    return runs.ablation_of.notna() & (runs.ablation_of.astype(str) != "")


def attempts(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that are attempts at their cell: all but read ablations."""
    return runs[~is_ablation(runs)]


# The windows a read ablation and the run it ablates are compared over: the pruning rule's (stopping.PRUNE_WINDOWS).
ABLATION_WINDOWS = 10


def recent_windows(log: list[tuple[int, float]], upto: float = math.inf) -> list[float]:
    """The last :data:`ABLATION_WINDOWS` logged perplexities of a (batch, perplexity) ``log`` up to batch ``upto``,
    NaN windows left out: where a curve stands there (a read ablation's level, a run training on's now)."""
    return [p for b, p in log if b <= upto and not math.isnan(p)][-ABLATION_WINDOWS:]


def ablation_standing(heard: list[tuple[int, float]], zeroed: list[tuple[int, float]], step: int
                      ) -> tuple[bool, float, float, float] | None:
    """Whether a read ablation's training-perplexity curve ``zeroed`` matches that of the run it ablates, ``heard``
    (each a (batch, perplexity) log), at ``step``, the ablation's end. Each curve's level is the mean of its last
    :data:`ABLATION_WINDOWS` windows up to ``step`` and its noise their standard deviation; the curves match when
    the levels differ by no more than the two noises together: no difference the runs' own noise could not make, so
    the memory's reads changed nothing measurable. Returns (match, level heard, level zeroed, the two noises), or
    None when either curve has fewer than 2 windows by ``step`` (NaN windows left out)."""

    def level(log):
        values = recent_windows(log, step)
        if len(values) < 2:
            return None
        mean = sum(values) / len(values)
        return mean, math.sqrt(sum((p - mean) ** 2 for p in values) / (len(values) - 1))

    a, b = level(heard), level(zeroed)
    if a is None or b is None:
        return None
    noise = a[1] + b[1]
    return abs(a[0] - b[0]) <= noise, a[0], b[0], noise


def start_of(model) -> str:
    """A model's start and recipe as Table 3 shows them: a memory model's initial push and pop biases ("init":
    nn.Linear's initialisation, about 0), both ends for the DeQue, and any study probe set; for every model, the
    baseline options that depart from the paper (the source fed reversed, a forget-gate bias); '' where none."""
    options = ([f"source {model.source_order}"] if model.source_order != "forward" else []) + (
        [f"forget bias {model.forget_bias:g}"] if model.forget_bias is not None else [])
    kind = memory_of(model.name)
    if kind is None:
        return "; ".join(options)
    model = model.resolved()  # "default" is the model's own start: say it in numbers
    value = lambda x: "init" if x is None else f"{x:+g}"  # noqa: E731
    if kind.ends == 2:
        bottom_push = value(model.push_bias if model.bottom_push_bias is None else model.bottom_push_bias)
        bottom_pop = value(model.pop_bias if model.bottom_pop_bias is None else model.bottom_pop_bias)
        text = (f"top push {value(model.push_bias)} pop {value(model.pop_bias)}, "
                f"bottom push {bottom_push} pop {bottom_pop}")
    else:
        text = f"push {value(model.push_bias)} pop {value(model.pop_bias)}"
    probes = [key if value is True else f"{key} {value}" for key, value in dataclasses.asdict(model.probes).items()
              if value is not None and value is not False]  # a probe at its default (null, off) is not set
    return "; ".join([text, *probes, *options])


def reported(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with numbers to report: the done ones, and those training on from results they reported
    (``training_on``: :func:`all_runs`)."""
    if "state" not in runs:
        return runs
    standing = runs.training_on.fillna(False).astype(bool) if "training_on" in runs else False
    return runs[runs.state.isin(DONE) | standing]


def select_models(runs: pd.DataFrame, cell: tuple[str, ...] = ("task", "model")) -> pd.DataFrame:
    """§5: per cell (by default (task, model); the baselines' report tells the Transformer's positional encodings
    apart), the run with the lowest average training perplexity (NaN never selected) among the done runs and those
    training on from results they reported (at those results: a rung's winner stands at its rung)."""
    runs = attempts(runs)
    if runs.empty:
        return runs
    done = reported(runs)
    if "halved" in done:  # discarded by a learning-rate search: never a cell's result
        done = done[done.halved != True]  # noqa: E712 (a column of objects)
    perplexity = pd.to_numeric(done.train_perplexity, errors="coerce")
    finite = done[perplexity.abs() < math.inf]  # NaN and ±inf never selected
    ranked = finite.sort_values(["train_perplexity", "run_id"])
    return ranked.groupby(list(cell), as_index=False, sort=False).first()


def verdict(ours: dict, paper: dict, stop: str | None, improving: bool, left: bool = True) -> str:
    """One of :data:`VERDICTS` for a cell's selected run:

    * **reproduced**: all four values within :data:`TOLERANCE` of the paper's;
    * **better**: none more than the tolerance below the paper's, at least one more than it above;
    * **budget-limited**: otherwise, if the run hit its batch cap (still falling or flat: the evidence says which;
      a run its cap stopped was not judged converged by any rule);
    * **stopped on its starting plateau**: otherwise, if the run never ``left`` the plateau it started on (its
      training perplexity never fell to :data:`LEFT_START_RATIO` of its first window's): a plateau stop, a pruning or
      a flat cap there shows where training had not yet begun, not where it converges;
    * **disagrees at convergence**: otherwise: the run converged, or plateaued after leaving its start, and its
      numbers differ from the paper's.
    """
    diffs = [ours[m] - paper[m] for m in METRICS]
    if all(within_tolerance(d) for d in diffs):
        return "reproduced"
    if all(d >= -TOLERANCE - 1e-9 for d in diffs):
        return "better"
    if stop == "budget":
        return "budget-limited"
    if not left:
        return "stopped on its starting plateau"
    return "disagrees at convergence"


# A run a plateau rule stopped while the report's trend check (training.stopping.still_falling, the rule's own window
# and tolerance) still sees it falling. Only version 1 of the rule could stop such a run: it moved its reference to
# every new low, so a run falling under 2% per evaluation stopped however long it went on falling; version 2 checks
# this very trend before it stops (docs/training.md, "The plateau rule"). The evidence says so beside the stop.
def still_falling_after_plateau(span: str, fall: float = math.nan, cross_entropy: float = math.nan) -> str:
    if cross_entropy is not None and math.isfinite(cross_entropy):  # the cross-entropy test decided: quote it
        return f"though by the trend check it was still falling ({fall_phrase(span, fall, cross_entropy)})"
    return (f"though its last {span} batches were still {measured_fall(fall) or 'below'} the {span} before (a slow "
            "fall, under the plateau rule's tolerance)")


def cross_entropy_fall(judged) -> float:
    """The relative fall of the mean cross-entropy (:class:`~pipeline.training.stopping.Trend`) where that test alone
    says a run is still falling, else NaN: what :func:`fall_phrase` quotes."""
    if judged is None or not judged.decided_by_cross_entropy:
        return math.nan
    return judged.cross_entropy_fall / judged.cross_entropy_before


def fall_phrase(span: str, fall: float, cross_entropy: float = math.nan) -> str:
    """"last 2,000 batches 5.90% below the 2,000 before": the trend check's figure in words; where the cross-entropy
    test decided (``cross_entropy``, :func:`cross_entropy_fall`; near perplexity 1, where a run halving its errors
    barely moves its perplexity) that fall, with the perplexity's beside it. '' where no fall was measured."""
    if cross_entropy is not None and math.isfinite(cross_entropy):
        beside = f"; perplexity {measured_fall(fall)}" if measured_fall(fall) else ""
        return (f"last {span} batches' mean cross-entropy {cross_entropy:.1%} below the {span} before's, beyond its "
                f"noise{beside}")
    return f"last {span} batches {measured_fall(fall)} the {span} before" if measured_fall(fall) else ""


def measured_fall(fall: float) -> str:
    """``trend_fall`` (the mean perplexity's relative fall over the last trend window against the one before) in
    words: "1.58% below", "0.40% above" (a rise); "" where none was measured."""
    if fall is None or not math.isfinite(fall):
        return ""
    return f"{fall:.2%} below" if fall >= 0 else f"{-fall:.2%} above"


def length_ends(rows: list[tuple[int, int, float]], width: int = 8) -> str:
    """Coarse accuracy over the shortest and the longest ``width`` source lengths of a split, e.g.
    "0.96 at 65-72, 0.78 at 121-128": whether a run's accuracy holds as sentences grow ('' without the rows)."""
    if not rows:
        return ""
    lo, hi = rows[0][0], rows[-1][0]

    def mean(first: int, last: int) -> str:
        inside = [(n, c) for length, n, c in rows if first <= length <= last]
        total = sum(n for n, _ in inside)
        return f"{sum(n * c for n, c in inside) / total:.2f} at {first}–{last}" if total else ""

    return f"{mean(lo, lo + width - 1)}, {mean(hi - width + 1, hi)}"


def has_left_start(run: pd.Series) -> bool:
    """Whether a run's logged training perplexity ever fell to half its first window's (``left_start_at``)."""
    return pd.notna(run.get("left_start_at"))


def short_of_cap(selected: pd.Series) -> bool:
    """A run that stopped before its config's cap: a halving bracket's run, cut at a rung or waiting at or past a
    rung's budget (``max_batches`` is that budget; ``cap``, NaN in an older table, the config's own)."""
    return bool(selected.batches < selected.get("cap", math.nan))


def training_on(selected: pd.Series) -> bool:
    """Whether a run stands at results it reported before it was reopened to train on (:func:`all_runs`)."""
    value = selected.get("training_on", False)
    return bool(pd.notna(value) and value)


def training_on_text(selected: pd.Series) -> str:
    """Where a run training on stands (:func:`training_on`), for the evidence."""
    batches, now = int(selected.batches), selected.get("batches_now", math.nan)
    further = ""
    if pd.notna(now) and now > batches:
        level = selected.get("perplexity_now", math.nan)
        further = f" (at {int(now):,} now" + (
            f", training perplexity {level:.3g} over its last {ABLATION_WINDOWS} windows" if pd.notna(level) else ""
        ) + ")"
    return (f"stands at the results it reported at {batches:,} batches while it trains on toward its cap of "
            f"{int(selected.cap):,}{further}: its numbers are those at {batches:,}, not where it ends")


def evidence(selected: pd.Series, cell: pd.DataFrame) -> str:
    """Why the selected run ended where it did, in a few words: what a verdict rests on. The trend is judged over
    the run's own log as the plateau rule judges it (``trend_batches`` each side, the rule's window at the run's end:
    the larger of ``plateau_patience`` evaluations and 10% of the run, in the cpu profile 2,000 batches, or 10,000
    for its 1-layer LSTMs, until 10% is more; ``trend_tolerance``, the profile's plateau tolerance)."""
    pruned = int((cell.state == "pruned").sum())
    stop = selected.stop_reason
    ppl = f"training perplexity {selected.train_perplexity:.4g}"
    step, end = selected.get("selected_step", math.nan), selected.get("end_perplexity", math.nan)
    if pd.notna(step) and int(step) < int(selected.batches):  # read before its end: say where, and where it ended
        ended = f"at {int(selected.batches):,}" if training_on(selected) else "at its end"
        ppl += (f" at its selected checkpoint (batch {int(step):,}, the best training accuracy)"
                + (f", {end:.4g} {ended}" if pd.notna(end) else ""))
    span = f"{int(selected.trend_batches):,}"
    fall = selected.get("trend_fall", math.nan)
    falling = fall_phrase(span, fall, selected.get("trend_cross_entropy_fall", math.nan))
    if training_on(selected) and stop != "budget":  # a lifted stop: where it stood, not why it trains on
        text = f"{training_on_text(selected)}, {ppl}, where it had stopped ({stop})"
    elif stop == "pruned":
        text = f"pruned on its plateau at batch {int(selected.batches):,} ({ppl})"
    elif stop == "converged":
        text = f"converged (training coarse held) at batch {int(selected.batches):,}, {ppl}"
    elif stop == "plateau":
        text = f"perplexity plateaued: stopped at batch {int(selected.batches):,}, {ppl}"
        if selected.still_improving:
            text += f", {still_falling_after_plateau(span, fall, selected.get('trend_cross_entropy_fall', math.nan))}"
        elif measured_fall(fall):
            text += f" (mean perplexity of its last {span} batches {measured_fall(fall)} the {span} before)"
    else:
        tolerance = f"{selected.get('trend_tolerance', 0.01):.0%}"
        if selected.still_improving:
            trend = (f"still falling ({falling or f'last {span} batches below the {span} before'}: > {tolerance} in "
                     "perplexity, or in cross-entropy beyond its noise)")
        elif measured_fall(fall):
            trend = (f"flat (last {span} batches {measured_fall(fall)} the {span} before: not by {tolerance} in "
                     "perplexity, nor in cross-entropy beyond its noise)")
        else:
            trend = (f"flat (last {span} batches not below the {span} before by {tolerance} in perplexity, nor in "
                     "cross-entropy beyond its noise)")
        if not selected.trend_batches:
            trend = "too short to judge a trend (fewer than two perplexity windows)"
        # a bracket's loser, stopped by successive halving at a rung, reached that rung's budget, not the run's cap;
        # a survivor waiting at its rung (or chosen there while its bracket decides) has its cap still ahead
        batches = int(selected.batches)
        if selected.state == "pruned":
            where = f"stopped at its halving rung of {batches:,} batches"
        elif training_on(selected):
            where = training_on_text(selected)
        elif short_of_cap(selected):
            where = (f"stands at {batches:,} batches, short of its cap of {int(selected.cap):,} (successive "
                     "halving: at or past its rung, waiting for the rung to be decided)")
        else:
            where = f"hit its cap of {batches:,} batches"
        text = f"{where}, {ppl}, {trend}"
    start = selected.get("start_perplexity", math.nan)
    if stop in ("plateau", "budget") and not has_left_start(selected):
        text += f" — never below {LEFT_START_RATIO:g} × its first window's {start:.4g}: " + (
            "it had not left the starting plateau by those results, and trains on from there" if training_on(selected)
            else "it did not leave the starting plateau, so it stopped before it had begun to learn the task, not at "
                 "a solution")
    if pruned:
        text += f"; {pruned} of {len(cell)} runs pruned"
    unfinished = int(cell.state.isin(("running", *TO_GO)).sum())  # not a failed or damaged one
    if unfinished:  # a halving's survivors still training: the cell so far, not where its grid ends
        text += (f"; {unfinished} of {len(cell)} runs not done yet (selected among the runs with results: the cell "
                 "so far, not its result)")
    by_length = selected.get("test_coarse_by_length")
    if isinstance(by_length, str) and by_length:
        text += f"; test coarse by source length {by_length}"
    return text


@dataclasses.dataclass(frozen=True)
class CutRun:
    """A run a cell's search cut, where it stands: its own results, or (``elsewhere``, an experiment's name) those of
    the same run trained to its cap outside the profile."""
    run_id: str
    train_perplexity: float
    batches: int
    elsewhere: str | None = None


def cut_lower(selected: pd.Series, cell: pd.DataFrame, elsewhere: dict[str, dict] | None = None) -> CutRun | None:
    """The run of ``cell`` that successive halving cut (never a cell's run: :func:`select_models`) with the lowest
    training perplexity, if that is below the selected run's; else None. A cut run stops at its rung, above the
    runs its rung kept, which then train on, so such a run is rare: one an earlier grid had trained past the rung
    (the cpu profile's copy Stack: lr 5e-4 push init seed 0, cut at 8,000 at 96.3 where it had gone on to 3.18 by
    40,000), a survivor that ended worse than its rung's losers stood, or a cut run trained to the block's cap outside
    the profile (``elsewhere``: run id -> :func:`continuation` of an experiment holding that run, its own log or
    another draw of it; the cpu profile's 1-layer LSTM on gender at lr 1e-3). Either way the search, not the model,
    decided the cell."""
    if "halved" not in cell or cell.empty:
        return None
    found = []
    for r in cell[cell.halved == True].itertuples():  # noqa: E712 (a column of objects)
        perplexity = pd.to_numeric(r.train_perplexity, errors="coerce")
        if perplexity < selected.train_perplexity:  # NaN (no results: failed, damaged) is never below
            found.append(CutRun(r.run_id, float(perplexity), int(r.batches)))
        later = (elsewhere or {}).get(r.run_id)
        if later is not None and later["train_perplexity"] < selected.train_perplexity:
            found.append(CutRun(r.run_id, float(later["train_perplexity"]), int(later["batches"]), later["name"]))
    return min(found, key=lambda c: (c.train_perplexity, c.run_id)) if found else None


def notes(selected: pd.Series, cell: pd.DataFrame) -> list[tuple[str, str]]:
    """The short form of :func:`evidence`: (kind of :data:`EVIDENCE_KINDS`, what this cell adds, a few words)."""
    stop, batches = selected.stop_reason, f"{int(selected.batches):,}"
    if training_on(selected):
        now = selected.get("batches_now", math.nan)
        further = pd.notna(now) and now > selected.batches
        out = [("training-on", f"from {batches}" + (f", at {int(now):,} now" if further else ""))]
    elif stop == "pruned":
        out = [("pruned", f"at {batches}")]
    elif stop == "converged":
        out = [("converged", f"at {batches}")]
    elif stop == "plateau":
        out = [("plateau-falling" if selected.still_improving else "plateau", f"at {batches}")]
    elif not selected.trend_batches:
        out = [("too-short", f"{batches} batches")]
    elif selected.state == "pruned" or short_of_cap(selected):
        out = [("rung", f"at {batches}")]
    else:
        out = [("cap-falling" if selected.still_improving else "cap-flat", batches)]
    if stop in ("plateau", "budget") and not has_left_start(selected):
        out.append(("never-left-start", f"ppl {selected.train_perplexity:.3g} of {selected.start_perplexity:.3g}"))
    pruned = int((cell.state == "pruned").sum())
    if pruned:
        out.append(("runs-pruned", f"{pruned}/{len(cell)}"))
    unfinished = int(cell.state.isin(("running", *TO_GO)).sum())
    if unfinished:
        out.append(("unfinished", f"{unfinished}/{len(cell)}"))
    return out


def notes_text(pairs) -> str:
    """A cell's notes as "label detail · label detail" (the labels of :data:`EVIDENCE_KINDS`)."""
    return " · ".join(f"{EVIDENCE_KINDS[kind][0]} {detail}".strip() for kind, detail in pairs)


def continuation(folder: Path) -> dict:
    """A run kept outside the profile (``reports/experiments/<name>/``: its ``results.json`` and ``metrics.csv``),
    read for :func:`table3`'s ``continuations``: its four values, batches, stop reason, training perplexity and
    whether that perplexity was still falling at its end."""
    results = RunDir(folder).read_results()
    if results is None:
        raise DamagedRun(f"{RunDir(folder).results_file}: missing")
    logged = logged_values(logged_rows(folder), TRAIN_PERPLEXITY)
    perplexities = [p for _, p in logged]
    training = RunDir(folder).read_config().training if RunDir(folder).config_file.is_file() else TrainingConfig()
    batches = int(results["batches"])
    window = trend_window(training, batches)
    judged = trend_at(logged, training, batches)
    return dict(run_id=results["run_id"], name=Path(folder).name, batches=batches,
                stop_reason=stop_reason(results), train_perplexity=results["train_perplexity"],
                still_improving=judged is not None and judged.improving, trend_batches=window,
                trend_fall=last_window_fall(logged, window), trend_cross_entropy_fall=cross_entropy_fall(judged),
                left_start=any(left_start(perplexities[0], p) for p in perplexities),
                **{m: results[m] for m in METRICS})


def _judged_at_continuation(later: dict, paper: dict, stopped: str | None, batches: int) -> tuple[str, str]:
    """A selected run's verdict and evidence, judged where its continuation ended; ``stopped``, ``batches``: how and
    where the profile's run ended (a stop short of its cap: the continuation reopened it past that stop)."""
    values = {m: later[m] for m in METRICS}
    judged = verdict(values, paper, later["stop_reason"], later["still_improving"], later["left_start"])
    fall = fall_phrase(f"{later['trend_batches']:,}", later.get("trend_fall", math.nan),
                       later.get("trend_cross_entropy_fall", math.nan))
    trend = ("still falling" if later["still_improving"] else "flat") + (f" ({fall})" if fall else "")
    plateau = ("perplexity plateaued, " + still_falling_after_plateau(f"{later['trend_batches']:,}",
                                                                       later.get("trend_fall", math.nan),
                                                                       later.get("trend_cross_entropy_fall", math.nan))
               if later["still_improving"]
               else "perplexity plateaued")
    rule = {"plateau": "plateau rule's", "converged": "convergence", "pruned": "pruning"}.get(stopped)
    how_on = f"reopened past its {rule} stop at {batches:,} batches" if rule else "cap raised"
    how = {"budget": f"hit its {'' if rule else 'raised '}cap, perplexity {trend}", "plateau": plateau,
           "converged": "converged (training coarse held)", "pruned": "pruned on its plateau"}[later["stop_reason"]]
    text = (f"continued outside the profile (`{later['name']}`, same run, {how_on}) to {later['batches']:,} "
            f"batches: {how}, training perplexity {later['train_perplexity']:.4g}; there training "
            f"{values['train_coarse']:.2f} / {values['train_fine']:.2f}, test {values['test_coarse']:.2f} / "
            f"{values['test_fine']:.2f} (coarse / fine): the verdict is judged there")
    return judged, text


def _show_values(row: dict, values: dict, seeds: pd.DataFrame, run_id: str) -> None:
    """Put in a Table 3 ``row`` the four values its verdict is judged on, their differences from the paper's, and
    the spread of test coarse over the selected setting's ``seeds``, the selected run (``run_id``) read at
    ``values``: its results, or its continuation's where the verdict is judged there."""
    row.update(values, **{f"diff_{m}": values[m] - row[f"paper_{m}"] for m in METRICS})
    spread = seeds.test_coarse.where(seeds.run_id != run_id, values["test_coarse"])
    row.update(test_coarse_mean=spread.mean(), test_coarse_std=spread.std(ddof=1) if len(spread) > 1 else math.nan)


def table3(runs: pd.DataFrame, sweep: SweepConfig, continuations: dict[str, dict] | None = None,
           elsewhere: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per cell of the paper's Table 3 (all 35), in the paper's order; cells outside the profile say so.

    ``continuations`` (run id -> :func:`continuation`): runs of the profile trained further outside it. A selected
    run that is budget-limited or short of the paper (:data:`SHORT_OF_THE_PAPER`: stopped by a rule) and has a
    continuation that went further is judged at the continuation's end; a cut run lower keeps it budget-limited.
    ``elsewhere`` (run id -> :func:`continuation`): the profile's runs trained outside it, their own logs continued or
    trained again (another draw), which :func:`cut_lower` weighs for the runs a search cut."""
    paper = published_table3().set_index(["task", "model"])
    runs = attempts(runs)
    selected = select_models(runs)
    chosen = selected.set_index(["task", "model"]) if not selected.empty else None
    cells = {(run.task, run.model.name) for run in sweep.runs()}
    rows = []
    for task in TASK_NAMES:
        for model in PAPER_MODEL_NAMES:
            row: dict = {"task": task, "model": model, "in_profile": (task, model) in cells}
            for m in METRICS:  # a registered architecture or task the paper did not run has no paper values
                row[f"paper_{m}"] = paper.loc[(task, model), m] if (task, model) in paper.index else math.nan
            cell = runs[(runs.task == task) & (runs.model == model)] if not runs.empty else runs
            if row["in_profile"]:
                done = cell[cell.state.isin(DONE)]
                converged = done[done.stop_reason.isin(("converged", "plateau"))]
                row.update(runs=len(cell), done=len(done), learned=int(done.learned.sum()),
                           pruned=int((cell.state == "pruned").sum()),
                           median_batches_to_converge=float(converged.batches.median()) if len(converged) else None)
            if chosen is not None and (task, model) in chosen.index:
                r = chosen.loc[(task, model)]
                row.update({k: r[k] for k in ("hidden", "lr", "seed", "batches", "selected_step", "stop_reason",
                                               "train_perplexity", "start", "provenance", "machine", "run_id",
                                               "commit")})
                row["left_start"] = has_left_start(r)
                seeds = reported(cell)
                seeds = seeds[seeds.setting == r.setting]
                values = {m: r[m] for m in METRICS}
                _show_values(row, values, seeds, r.run_id)
                row.update(seeds_at_selected=len(seeds),
                           verdict=verdict(values, {m: row[f"paper_{m}"] for m in METRICS},
                                           r.stop_reason, bool(r.still_improving), has_left_start(r)),
                           evidence=evidence(r, cell))
                cell_notes = notes(r, cell)
                if r.unconfirmed_plateau:
                    cell_notes[0] = ("v1-stop", cell_notes[0][1])
                if training_on(r) and row["verdict"] not in ("reproduced", "better"):
                    row["verdict"] = "budget-limited"  # it trains on: not where it converges, nor stopped
                if r.unconfirmed_plateau and row["verdict"] not in ("reproduced", "better"):
                    row.update(verdict="budget-limited", evidence=(
                        f"stopped at batch {int(r.batches):,} by version 1 of the plateau rule, which the rule in "
                        "force does not confirm there (it trains on when its sweep runs again): its numbers are where "
                        "it was cut short, not where it converges; " + row["evidence"]))
                below = cut_lower(r, cell, elsewhere)
                if below is not None:  # the search cut a run that went lower: verdict below, after any continuation
                    where = (f"which, trained to {below.batches:,} batches outside the profile (`{below.elsewhere}`), "
                             "stands" if below.elsewhere else f"whose results at {below.batches:,} batches stand")
                    row["evidence"] += (
                        f"; its search cut `{below.run_id}` (successive halving), {where} at training perplexity "
                        f"{below.train_perplexity:.4g}, below this run's: the cell is not settled until that setting "
                        "has had the same cap in the profile")
                    cell_notes.append(("cut-lower", f"{below.train_perplexity:.3g}"))
                later = (continuations or {}).get(r.run_id)
                judgeable = ("budget-limited", *SHORT_OF_THE_PAPER)  # not a cell that reproduces or beats the paper
                if row["verdict"] in judgeable and later is not None and later["batches"] > r.batches:
                    judged, text = _judged_at_continuation(later, {m: row[f"paper_{m}"] for m in METRICS},
                                                           r.stop_reason, int(r.batches))
                    stood = (f"training {r.train_coarse:.2f} / {r.train_fine:.2f}, test {r.test_coarse:.2f} / "
                             f"{r.test_fine:.2f}")
                    row.update(verdict=judged, continued_batches=later["batches"], continued_in=later["name"],
                               evidence=f"{row['evidence']}; {text}, and the row's numbers are read there (the "
                                        f"profile's run stood at {stood} where it ended)")
                    # the numbers beside a verdict are the ones it was judged on: the continuation's
                    row["train_perplexity"] = later["train_perplexity"]
                    _show_values(row, {m: later[m] for m in METRICS}, seeds, r.run_id)
                    cell_notes.append(("continued", f"to {later['batches']:,} ({later['name']})"))
                if below is not None and row["verdict"] in SHORT_OF_THE_PAPER:
                    row["verdict"] = "budget-limited"  # continued or not, its search cut a run that went lower
                row.update(notes=notes_text(cell_notes), note_kinds=" ".join(kind for kind, _ in cell_notes))
            rows.append(row)
    out = pd.DataFrame(rows, columns=list(TABLE3_COLUMNS))
    for column in ("hidden", "seed", "batches", "selected_step", "runs", "done", "learned", "pruned",
                   "seeds_at_selected", "continued_batches"):
        out[column] = out[column].astype("Int64")  # counts stay integers beside the cells that have none
    return out


# The verdicts that say a cell falls short of the paper: judged while runs of the cell still train, they are the
# cell so far (:func:`judged_so_far`), and the headline and the Table 3 figure say so.
SHORT_OF_THE_PAPER = ("stopped on its starting plateau", "disagrees at convergence")


def judged_so_far(row) -> bool:
    """Whether a Table 3 row falls short of the paper (:data:`SHORT_OF_THE_PAPER`) while its cell has runs not done
    yet (note kind "unfinished": running or to go). Such a survivor, once done, may be selected (§5: lowest training
    perplexity) and turn the verdict."""
    return row.verdict in SHORT_OF_THE_PAPER and "unfinished" in str(row.note_kinds).split()


def so_far(table: pd.DataFrame, verdict: str) -> str:
    """" (1 so far: its cell still has runs to train)" where cells with ``verdict`` are :func:`judged_so_far`, else
    "": the headline says so beside the count, as each cell's evidence does."""
    provisional = sum(judged_so_far(r) for r in table[table.verdict == verdict].itertuples())
    if not provisional:
        return ""
    one = provisional == 1
    return (f" ({provisional} so far: {'its cell still has' if one else 'their cells still have'} runs to "
            "train)")


def summary_line(table: pd.DataFrame) -> str:
    """'N of 35 cells reproduced, M better, K budget-limited, J stopped on their starting plateau, I disagree at
    convergence' (+ :func:`so_far` beside the last two, and what is missing)."""
    counts = {v: int((table.verdict == v).sum()) for v in VERDICTS}
    start, disagree = "stopped on its starting plateau", "disagrees at convergence"
    line = (f"{counts['reproduced']} of {len(table)} cells reproduced, {counts['better']} better, "
            f"{counts['budget-limited']} budget-limited, {counts[start]} stopped on "
            f"{'its' if counts[start] == 1 else 'their'} starting plateau{so_far(table, start)}, "
            f"{counts[disagree]} {'disagrees' if counts[disagree] == 1 else 'disagree'} at convergence"
            f"{so_far(table, disagree)}")
    never_left = table[table.run_id.notna() & (table.left_start == False)]  # noqa: E712 (a column of objects)
    if len(never_left) > counts[start]:
        kinds = never_left.verdict.value_counts()
        many = len(never_left) != 1
        line += (f"; {len(never_left)} selected run{'s' if many else ''} never left {'their' if many else 'its'} "
                 "starting plateau ("
                 + ", ".join(f"{n} {verdict}" for verdict, n in kinds.items()) + ")")
    outside = int((~table.in_profile).sum())
    without = int((table.in_profile & table.run_id.isna()).sum())
    extras = ([f"{outside} not in this profile"] if outside else []) + (
        [f"{without} without a finished run"] if without else [])
    return line + ("; " + ", ".join(extras) if extras else "") + "."


def _value(x: float, digits: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def anchor(heading: str) -> str:
    """The anchor GitHub and most Markdown viewers give a heading: lower case, punctuation dropped, spaces to '-'."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -").replace(" ", "-")


def legend(link: str = "evidence.md") -> list[str]:
    """The verdict marks and the note labels, each label linked to its definition in ``link``."""
    marks = " · ".join(f"{VERDICT_MARKS[v]} {v}" for v in VERDICTS)
    labels = ", ".join(f"[{label}]({link}#{anchor(label)})" for label, _ in EVIDENCE_KINDS.values())
    return [f"Verdicts: {marks}; — no finished run, or not in this profile.",
            f"Notes (each kind defined once in [{link}]({link})): {labels}."]


def _ours_paper(ours: float, paper: float) -> str:
    """"0.17 (0.62) −0.45": ours, the paper's in brackets, the difference; bold where it exceeds the tolerance."""
    if pd.isna(paper):
        return "—" if pd.isna(ours) else f"{ours:.2f} (—)"
    if pd.isna(ours):
        return f"— ({paper:.2f})"
    diff = round(ours - paper, 2) + 0.0  # no "−0.00"
    shown = f"{diff:+.2f}".replace("-", "−")
    return f"{ours:.2f} ({paper:.2f}) " + (shown if within_tolerance(diff) else f"**{shown}**")


def table3_markdown(table: pd.DataFrame, header: str, eval_sizes: str, titles: dict[str, str]) -> str:
    """Table 3 laid out as the paper's (training and test, coarse and fine), each value as ours (paper) and the
    difference, a verdict mark and short notes; then the selected run behind each cell."""
    lines = [
        "# Table 3: training and test accuracy of the selected models",
        "",
        header,
        "",
        f"**{summary_line(table)}**",
        "",
        "Size: the selected run's hidden size (the paper trained 256 and 512 and selected across both, §4.4, §5).",
        "",
        f"Each value: ours (paper) and the difference, **bold** beyond {TOLERANCE}. Training = {eval_sizes} "
        "training-length sequences (source 8–64), testing = as many test-length ones (source 65–128), from the fixed "
        "cached sets. The selected run of a cell: its lowest average training perplexity (§5).",
        "",
        *legend(),
        "",
        "| Task | Model | Size | Training coarse | Training fine | Testing coarse | Testing fine | | Notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task in TASK_NAMES:
        for k, r in enumerate(table[table.task == task].itertuples()):
            cells = [_ours_paper(getattr(r, m), getattr(r, f"paper_{m}")) for m in METRICS]
            mark = VERDICT_MARKS.get(r.verdict, "—") if isinstance(r.verdict, str) else "—"
            note = ("not in this profile" if not r.in_profile else "no finished run" if pd.isna(r.run_id)
                    else r.notes if isinstance(r.notes, str) else "")
            size = "—" if pd.isna(r.run_id) else f"h{int(r.hidden)}"  # the selected run's hidden size (§4.4)
            lines.append(f"| {titles.get(task, task) if k == 0 else ''} | {DISPLAY_NAMES[r.model]} | {size} | "
                         + " | ".join(cells) + f" | {mark} | {note} |")
    lines += ["", "## The selected runs", "",
              "*Seeds*: test coarse mean ± standard deviation over the runs with results of the selected run's "
              f"setting (all but the seed; n). *Runs*: tried / learned (training coarse ≥ {LEARNED_COARSE}) / pruned. "
              "*Converged at*: median batches of the runs that converged or plateaued. *Start*: the initial biases of "
              "a memory model's push and pop signals (init: nn.Linear's, about 0; the DeQue's two ends), and any "
              "probe set. *Trained with*: a modified checkout or a torch other than the pinned one, where that was so. "
              "*Machine*: the CPU (and GPU) it trained on, with torch's CPU kernels where the run recorded them; the "
              "same run trained on two kinds is two draws (their float sums differ from the first rounding on).",
              "",
              "| Task | Model | run | batches | seeds: test coarse | runs | converged at | start | trained with | "
              "machine |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table[table.run_id.notna()].itertuples():
        spread = f"{r.test_coarse_mean:.2f} ± {_value(r.test_coarse_std)} (n={int(r.seeds_at_selected)})"
        converged = "—" if pd.isna(r.median_batches_to_converge) else f"{r.median_batches_to_converge:,.0f}"
        lines.append(f"| {titles.get(r.task, r.task)} | {DISPLAY_NAMES[r.model]} | h{int(r.hidden)}, lr {r.lr:g}, "
                     f"seed {int(r.seed)} | {int(r.batches):,} | {spread} | {r.runs} / {r.learned} / {r.pruned} | "
                     f"{converged} | {r.start if isinstance(r.start, str) else ''} | "
                     f"{r.provenance if isinstance(r.provenance, str) else ''} | "
                     f"{r.machine if isinstance(r.machine, str) else ''} |")
    return "\n".join(lines) + "\n"


def evidence_markdown(table: pd.DataFrame, header: str, titles: dict[str, str]) -> str:
    """``evidence.md``: each kind of evidence defined once, with the cells whose notes begin with it and, for each,
    the evidence in full (what ``table3.csv``'s evidence column holds)."""
    lines = ["# The evidence behind Table 3's notes", "", header, "",
             "Each kind is defined once; under it, the cells whose first note it is, with their evidence in full.", ""]
    first = {}
    for r in table[table.run_id.notna()].itertuples():
        first.setdefault(str(r.note_kinds).split()[0], []).append(r)
    for kind, (label, definition) in EVIDENCE_KINDS.items():
        lines += [f"## {label}", "", definition, ""]
        for r in first.get(kind, []):
            lines.append(f"- **{titles.get(r.task, r.task)}, {DISPLAY_NAMES[r.model]}** "
                         f"({VERDICT_MARKS.get(r.verdict, '')} {r.verdict}): {r.evidence}")
        if first.get(kind):
            lines.append("")
    return "\n".join(lines + itg_requirement_lines(table, titles)) + "\n"


LSTM_ROWS = ("lstm1", "lstm2", "lstm4", "lstm8")
ITG_TASKS = ("svo_sov", "gender")


def _span(values: pd.Series) -> str:
    """'0.00–0.01' (or one value) over the finite values; '—' when there are none."""
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "—"
    low, high = f"{values.min():.2f}", f"{values.max():.2f}"
    return low if low == high else f"{low}–{high}"


def itg_requirement_lines(table: pd.DataFrame, titles: dict[str, str]) -> list[str]:
    """What the paper's ITG test numbers would require of an LSTM (the argument of the cpu study log, with the
    numbers read off this table): a 65–128-word ITG target keeps the source's word order (gender word for word,
    SVO→SOV but for the main verb), so an LSTM, or a Stack-LSTM whose stack hands rows back last in first out, that
    scores on it at test lengths copies 65–128 words in order, which the same paper's LSTMs fail on the copy task.
    Empty when the table holds no copy row, or no ITG LSTM row with a number of ours (a profile that trained none)."""
    lstm = table[table.model.isin(LSTM_ROWS)]
    copy, itg = lstm[lstm.task == "copy"], lstm[lstm.task.isin(ITG_TASKS)]
    stack = table[(table.model == "stack") & table.task.isin(ITG_TASKS)]
    if copy.empty or itg.empty or not itg.test_coarse.notna().any():
        return []
    import textwrap

    names = " and ".join(titles.get(task, task) for task in ITG_TASKS)
    return ["## What the paper's ITG numbers would require", "", *textwrap.wrap(
        f"An ITG target ({names}) is emitted after the whole source has been read (§4), and it keeps the source's "
        "word order: gender conjugation word for word, SVO→SOV but for the main verb, which moves behind its object "
        "(docs/tasks.md). At test lengths that is a near-copy of 65–128 words in order. The paper's deep LSTMs score "
        f"{_span(itg.paper_test_coarse)} test coarse on these tasks yet {_span(copy.paper_test_coarse)} on copying "
        f"strings of the same lengths; ours score {_span(itg.test_coarse)} on the ITG tasks and "
        f"{_span(copy.test_coarse)} on copy. A stack returns its rows last in, first out: read from the top it hands "
        "the source back reversed, so to emit the target in the source's order a Stack-LSTM's controller carries that "
        "order itself, and the stack helps only locally (holding the verb while the object is emitted). The paper's "
        f"Stack-LSTM scores {_span(stack.paper_test_coarse)} there, ours {_span(stack.test_coarse)}. Such numbers "
        "need an LSTM that copies 65–128-word sentences almost without error, which no LSTM row of this table "
        "approaches on copy, or a use of the memory that this format does not offer (targets emitted while the source "
        "is read, or in reverse order). A queue and a deque fit (first in, first out, the verb delayed by the "
        "controller): what the memory traces of the learned Queue and DeQue runs show.", 120), ""]


# The verdict panel's short words under each mark (the full verdicts in its key)
VERDICT_WORDS = {"reproduced": "reproduced", "better": "better", "budget-limited": "budget-limited",
                 "stopped on its starting plateau": "on its start", "disagrees at convergence": "disagrees"}
VERDICT_COLOURS = {"reproduced": "#1a7f37", "better": "#1f5fbf", "budget-limited": "#6e6e6e",
                   "stopped on its starting plateau": "#8a5a00", "disagrees at convergence": "#c0392b"}


def table3_figure(table: pd.DataFrame, out: Path, titles: dict[str, str]) -> bool:
    """Table 3 at a glance, tasks × architectures in three panels: test and training coarse accuracy, each cell
    ours over the paper's, coloured by that panel's difference alone (red: ours below, blue: above, white: within
    the tolerance); and each cell's verdict, which judges all four values (training and test, coarse and fine), as
    a large mark in a panel of its own, so that no mark sits on a colour it does not judge. False (and no file)
    when no cell has a finished run."""
    if table.run_id.isna().all():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    fig, grid = plt.subplots(2, 2, figsize=(16, 10))
    fig.subplots_adjust(left=0.105, right=0.995, top=0.93, bottom=0.075, hspace=0.36, wspace=0.04)
    norm, cmap = TwoSlopeNorm(vcenter=0.0, vmin=-1.0, vmax=1.0), plt.get_cmap("RdBu")

    def cell(task: str, model: str):
        rows = table[(table.task == task) & (table.model == model)]
        return None if rows.empty else rows.iloc[0]

    def frame(ax, title: str, tasks: bool = True) -> None:
        ax.set_xlim(0, len(PAPER_MODEL_NAMES))
        ax.set_ylim(len(TASK_NAMES), 0)
        ax.set_xticks([j + 0.5 for j in range(len(PAPER_MODEL_NAMES))], [DISPLAY_NAMES[m] for m in PAPER_MODEL_NAMES],
                      rotation=20, fontsize=11)
        ax.set_yticks([i + 0.5 for i in range(len(TASK_NAMES))],
                      [titles.get(t, t) for t in TASK_NAMES] if tasks else [], fontsize=11)
        ax.tick_params(length=0)
        ax.set_title(title, fontsize=12)
        for side in ax.spines.values():
            side.set_visible(False)

    for ax, metric, name in zip(grid[0], ("test_coarse", "train_coarse"), ("Test", "Training")):
        for i, task in enumerate(TASK_NAMES):
            for j, model in enumerate(PAPER_MODEL_NAMES):
                r = cell(task, model)
                if r is None:
                    continue
                ours, paper = r[metric], r[f"paper_{metric}"]
                diff = ours - paper if pd.notna(ours) and pd.notna(paper) else math.nan
                shade = "#eeeeee" if math.isnan(diff) else (
                    "#ffffff" if within_tolerance(diff) else cmap(norm(diff)))
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=shade, edgecolor="#999999", lw=0.6))
                dark = not math.isnan(diff) and abs(diff) > 0.6
                ax.text(j + 0.5, i + 0.42, "—" if pd.isna(ours) else f"{ours:.2f}", ha="center", va="center",
                        fontsize=13, weight="bold", color="white" if dark else "black")
                ax.text(j + 0.5, i + 0.76, "paper " + ("—" if pd.isna(paper) else f"{paper:.2f}"), ha="center",
                        va="center", fontsize=9, color="white" if dark else "#444444")
        frame(ax, f"{name} coarse accuracy: ours (bold), the paper's below;\ncolour: ours − paper on this value",
              tasks=name == "Test")

    ax = grid[1][0]
    for i, task in enumerate(TASK_NAMES):
        for j, model in enumerate(PAPER_MODEL_NAMES):
            r = cell(task, model)
            if r is None:
                continue
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="#ffffff", edgecolor="#999999", lw=0.6))
            if not isinstance(r.verdict, str):
                ax.text(j + 0.5, i + 0.5, "—", ha="center", va="center", fontsize=13, color="#999999")
                continue
            colour = VERDICT_COLOURS.get(r.verdict, "black")
            ax.text(j + 0.5, i + 0.4, VERDICT_MARKS[r.verdict], ha="center", va="center", fontsize=24,
                    weight="bold", color=colour)
            provisional = judged_so_far(r)  # runs of the cell still train: the cell so far
            ax.text(j + 0.5, i + 0.82, VERDICT_WORDS.get(r.verdict, r.verdict) + (", so far" if provisional else ""),
                    ha="center", va="center", fontsize=7 if provisional else 9.5, color=colour)
    frame(ax, "Verdict: judged on all four values,\ntraining and test, coarse and fine (table3.md)")

    key = grid[1][1]
    key.axis("off")
    key.set_xlim(0, 1)
    key.set_ylim(len(VERDICTS) + 4.2, 0)
    key.text(0.03, 0.2, "Verdict (bottom left)", fontsize=12, weight="bold", va="center")
    for k, verdict in enumerate(VERDICTS):
        colour = VERDICT_COLOURS.get(verdict, "black")
        key.text(0.06, k + 1.2, VERDICT_MARKS[verdict], fontsize=22, weight="bold", color=colour, ha="center",
                 va="center")
        key.text(0.12, k + 1.2, verdict, fontsize=13, color=colour, va="center")
    if any(judged_so_far(r) for r in table.itertuples()):
        key.text(0.12, len(VERDICTS) + 0.7, "“…, so far”: runs of the cell still train, and one may turn it",
                 fontsize=10.5, color="#444444", va="center")
    key.text(0.03, len(VERDICTS) + 1.5, "Colour (top panels)", fontsize=12, weight="bold", va="center")
    key.text(0.03, len(VERDICTS) + 2.7,
             f"ours − the paper's on that panel's value alone: red, ours below; blue, above;\nwhite, within "
             f"{TOLERANCE} (agrees); grey, no run. A white cell can hold a verdict other\nthan ✓ when another of "
             "the four values differs.", fontsize=11.5, va="center", color="#333333")
    save_figure(fig, out)
    return True
