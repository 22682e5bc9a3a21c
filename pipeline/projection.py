"""How long a profile's sweep takes on a device, from what the sweep will really run and measured step times.

``transduce project PROFILE --records BENCH.json`` prints it; ``transduce bench --population`` writes it into its
report for ``configs/paper.yaml``. The model has three parts, each taken from the code or from a measurement, and
what is estimated rather than measured is said where it is used:

1. **The populations** (:func:`plan`), as the sweep packs them (``pipeline.sweep.grid.pack``): the runs that share
   a model (``population_key``: one architecture and size, one vocabulary, one step) are one job, trained
   ``population`` at a time, a stopped member's place taken by the next. A block with successive halving trains
   every rate of every bracket to the first rung, the kept ones to the next, and the survivor to its cap (the whole
   budget: an upper bound, as a plateau stops earlier), each rung a population of its own. Any other run is
   expected to train as many batches as the cpu profile's runs of that model did on average, at most its cap; the
   population steps until its longest member stops, counted as its cap (an upper bound: with tens of members, one
   reaches it, as the cpu profile's memory runs did).
2. **One step of P members** (:class:`StepTime`): ``launch + per_member × P`` seconds, fitted to ``bench
   --population``'s records for that model (member-batches per second at P = 1, 16, 64, 256; on a GPU the fit is
   within a few per cent at every P). ``launch`` is what a step costs whatever its size (on a GPU, the kernels' launch:
   a few thousand of them at a few microseconds each); ``per_member`` is each member's share of the arithmetic.
   A hidden size the records lack (hidden 512: the bench measures 256) is scaled from the nearest one measured,
   ``per_member`` by the square of their ratio (the products are hidden × hidden), ``launch`` kept: an estimate,
   likely high for a larger size (only the products grow so, and a GPU runs larger ones more efficiently). Beside it
   the projection gives a floor, that size priced at the measured size's step unscaled (a larger model is not faster).
3. **Evaluation**: every ``eval_every`` batches each member scores ``eval_size`` fresh and ``test_eval_size`` cached
   sequences in batches of ``EVAL_BATCH_SIZE``, the members due together in one stacked pass; at its end each scores
   ``final_eval_size`` per split alone. A forward pass is priced at a third of a training step of the same rows (a
   step is a forward and a backward of about twice its cost), scaled by the split's mean joint length against the
   bench's 131 positions: an estimate.

Populations run one at a time on a device (several side by side overlap a little: the second GPU stint's three
ran 8% faster together than this model's sum); on ``devices`` GPUs the jobs are placed longest first on the least
loaded. ``tests/test_projection.py`` checks the model against the ``gpu-lstm`` profile's recorded GPU stints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import RunConfig, SweepConfig

# The hidden size the bench measures at (pipeline.bench_population.HIDDEN) and what a step's arithmetic scales by at
# another size where no record has it: the products are hidden x hidden.
BENCH_HIDDEN = 256
FORWARD_SHARE = 1 / 3  # a forward pass against a training step (forward + backward) of the same rows


@dataclass(frozen=True)
class StepTime:
    """Seconds per training step of a population of ``members``: ``launch + per_member × members``."""

    launch: float
    per_member: float

    def __call__(self, members: float) -> float:
        return self.launch + self.per_member * members

    @classmethod
    def fit(cls, points: Iterable[tuple[int, float]]) -> StepTime:
        """The least-squares fit in relative error to (population, member-batches per second) measurements (one
        point: all of it per member). Neither part is negative."""
        pts = [(float(p), p / rate) for p, rate in points if rate > 0]
        if not pts:
            raise ValueError("no measurement to fit a step time to")
        if len({p for p, _ in pts}) == 1:
            p, t = pts[0]
            return cls(0.0, t / p)
        # minimise sum(((launch + per_member p) / t - 1)^2): linear least squares in (1/t, p/t) against 1
        s11 = sum(1 / t**2 for _, t in pts)
        s12 = sum(p / t**2 for p, t in pts)
        s22 = sum(p * p / t**2 for p, t in pts)
        r1 = sum(1 / t for _, t in pts)
        r2 = sum(p / t for p, t in pts)
        det = s11 * s22 - s12 * s12
        launch, per_member = (r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det
        if launch < 0:  # no fixed cost measurable: all of it per member
            return cls(0.0, r2 / s22)
        if per_member < 0:
            return cls(r1 / s11, 0.0)
        return cls(launch, per_member)

    def at_hidden(self, hidden: int, measured: int = BENCH_HIDDEN) -> StepTime:
        """The step at another hidden size, its arithmetic scaled by the products' size (an estimate)."""
        return StepTime(self.launch, self.per_member * (hidden / measured) ** 2)


def step_times(records: Sequence[dict], mode: str | None = None) -> dict[tuple[str, int], StepTime]:
    """A :class:`StepTime` per (model, hidden) measured in ``records`` (``bench --population``'s JSON; records
    without ``hidden`` are at the bench's 256), of one ``mode`` (None: each model's batched records, else its only
    ones)."""
    groups: dict[tuple[str, int, str], list[tuple[int, float]]] = {}
    for r in records:
        key = (r["model"], int(r.get("hidden", BENCH_HIDDEN)), r.get("mode", "batched"))
        groups.setdefault(key, []).append((int(r["population"]), float(r["member_batches_per_s"])))
    out = {}
    for (model, hidden, how), points in groups.items():
        if (mode or "batched") == how or (mode is None and not any(
                k[:2] == (model, hidden) and k[2] == "batched" for k in groups)):
            out[model, hidden] = StepTime.fit(points)
    return out


@dataclass(frozen=True)
class Phase:
    """A stretch of one job: ``runs`` runs of ``model`` at ``hidden`` training ``member_batches`` batches between them,
    at most ``width`` at once, in ``steps`` steps of the population (its longest member's batches, or the work spread
    over ``width`` where more runs wait than fit)."""

    job: str
    model: str
    hidden: int
    runs: int
    width: int
    member_batches: float
    steps: float
    eval_every: int
    eval_rows: tuple[tuple[int, float], ...]  # per evaluation: (sequences, mean joint length / the bench's)
    final_rows: tuple[tuple[int, float], ...]  # a run's final evaluation, the same way
    finals: int  # runs that end in this phase (their final evaluation counted here)


def length_ratios(task_name: str) -> dict[str, float]:
    """Each split's mean joint length (``<s> source <|> target </s>``, source lengths uniform over the split) for
    task ``task_name``, over the training step's static length (the longest training sequence)."""
    from pipeline.tasks import SPLITS, get_task
    from pipeline.training.run import static_length

    task = get_task(task_name)

    def mean(split: str) -> float:
        lo, hi = task.lengths(split)
        return (lo + hi) / 2 + (task.target_length(lo) + task.target_length(hi)) / 2 + 3

    return {split: mean(split) / static_length() for split in SPLITS}


def evaluation_rows(run: RunConfig) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
    """(one evaluation's, the final evaluation's) (sequences, length ratio) per split a run scores."""
    from pipeline.training.engine import EVAL_SPLITS

    ratio = length_ratios(run.task)
    t = run.training
    during = ((t.eval_size, ratio["train"]), (t.test_eval_size, ratio["test"]))
    final = tuple((t.final_eval_size, ratio[split]) for split in EVAL_SPLITS)
    return during, final


def expected_batches(cpu_runs: str | Path | None) -> dict[str, float]:
    """The mean batches the cpu profile's runs of each model trained (``reports/cpu/all_runs.csv``)."""
    import pandas as pd

    if cpu_runs is None or not Path(cpu_runs).is_file():
        return {}
    return pd.read_csv(cpu_runs).groupby("model")["batches"].mean().to_dict()


def plan(sweep: SweepConfig, cpu_runs: str | Path | None = None) -> list[Phase]:
    """The phases the sweep of ``sweep`` will run, job by job (see the module's docstring), every run from batch 0."""
    from pipeline.models import DISPLAY_NAMES
    from pipeline.training.run import population_key

    width = sweep.population or 1
    measured = expected_batches(cpu_runs)
    jobs: dict[tuple, list[tuple[int, RunConfig]]] = {}
    for index, _, run in sweep.runs_by_block():
        halving = sweep.grid[index].halving
        # a halving block's brackets move through their rungs together; each block apart (its own caps)
        key = (index if halving is not None else None, population_key(run))
        jobs.setdefault(key, []).append((index, run))
    phases = []
    for (index, _), members in jobs.items():
        runs = [run for _, run in members]
        first = runs[0]
        tasks = sorted({run.task for run in runs})
        name = (f"{DISPLAY_NAMES.get(first.model.name, first.model.name)} h{first.model.hidden} "
                f"({', '.join(tasks)})")
        during, final = evaluation_rows(first)
        common = dict(model=first.model.name, hidden=first.model.hidden, eval_every=first.training.eval_every,
                      eval_rows=during, final_rows=final)
        if index is not None:  # successive halving: every bracket's rates to each rung, the kept ones on
            halving = sweep.grid[index].halving
            rates = len(sweep.grid[index].lr)
            brackets = len(runs) // rates
            rungs = [0, *halving.at, first.training.max_batches]
            alive = [rates, *halving.keep]
            for i, (start, end) in enumerate(zip(rungs, rungs[1:])):
                n = brackets * alive[i]
                on = brackets * alive[i + 1] if i + 1 < len(alive) else 0
                phases.append(Phase(job=f"{name}, rung {i + 1}", runs=n, width=min(n, width),
                                    member_batches=n * (end - start), steps=(end - start) * math.ceil(n / width),
                                    finals=n - on, **common))
            continue
        cap = max(run.training.max_batches for run in runs)
        each = min(measured.get(first.model.name, cap), cap)
        total = len(runs) * each
        phases.append(Phase(job=name, runs=len(runs), width=min(len(runs), width), member_batches=total,
                            steps=max(cap, total / width), finals=len(runs), **common))
    return phases


def phase_seconds(phase: Phase, step: StepTime, batch_size: int = 10) -> tuple[float, float]:
    """(training, evaluation) seconds of ``phase`` with ``step`` (the model's at the phase's hidden size)."""
    from pipeline.evaluation import EVAL_BATCH_SIZE

    train = step.launch * phase.steps + step.per_member * phase.member_batches
    rows = EVAL_BATCH_SIZE / batch_size  # an evaluation batch against a training batch, per member

    def forwards(splits, members: float) -> float:  # one pass over ``splits`` by ``members`` at once
        return sum(math.ceil(n / EVAL_BATCH_SIZE) * ratio * FORWARD_SHARE * (step.launch + step.per_member * members
                                                                            * rows) for n, ratio in splits)

    rounds = phase.steps / phase.eval_every  # the members due together are scored in one stacked pass
    during = rounds * forwards(phase.eval_rows, phase.member_batches / phase.steps)
    final = phase.finals * forwards(phase.final_rows, 1)
    return train, during + final


@dataclass(frozen=True)
class Row:
    """One architecture at one hidden size in a projection."""

    model: str
    hidden: int
    runs: int
    widths: tuple[str, ...]  # each job's population sizes, rung by rung ("15→6→3")
    member_batches: float
    train_s: float
    eval_s: float
    estimated: bool  # its step time scaled from another hidden size


@dataclass(frozen=True)
class Projection:
    rows: list[Row]
    unmeasured: list[str]  # models without records
    hours_one_device: float
    hours: float  # on ``devices``
    devices: int
    longest: tuple[str, float]  # the longest job and its hours: what more devices cannot shorten
    # the same with every estimated size priced at the step of the size measured, unscaled: a floor (a larger model
    # does not step faster) beside the scaled estimate, likely high (only the products grow as the hidden size squared)
    floor_hours_one_device: float = math.nan
    floor_hours: float = math.nan


def project(sweep: SweepConfig, records: Sequence[dict], devices: int = 1, cpu_runs: str | Path | None = None,
            mode: str | None = None) -> Projection:
    """The wall time of ``sweep`` from batch 0 on ``devices`` devices like the one ``records`` were measured on."""
    times = step_times(records, mode)
    by_row: dict[tuple[str, int], list] = {}
    jobs: dict[str, float] = {}  # a job's seconds (its rungs run one after another)
    floors: dict[str, float] = {}  # the same with estimated sizes priced unscaled
    widths: dict[str, list[int]] = {}
    unmeasured = set()
    for phase in plan(sweep, cpu_runs):
        step = times.get((phase.model, phase.hidden))
        estimated = step is None
        if step is None:  # scaled from the nearest size measured
            sizes = sorted((abs(h - phase.hidden), h) for m, h in times if m == phase.model)
            if not sizes:
                unmeasured.add(phase.model)
                continue
            measured = times[phase.model, sizes[0][1]]
            step = measured.at_hidden(phase.hidden, sizes[0][1])
        train, evaluation = phase_seconds(phase, step)
        job = phase.job.split(", rung")[0]
        # the floor: the cheaper of the scaled step and the measured size's (a larger model is not faster; a smaller
        # one, scaled down by the products alone, is not slower than that)
        floors[job] = floors.get(job, 0.0) + (min(train + evaluation, sum(phase_seconds(phase, measured)))
                                              if estimated else train + evaluation)
        entry = by_row.setdefault((phase.model, phase.hidden), [0, [], 0.0, 0.0, 0.0, estimated])
        entry[0] += phase.finals
        if job not in entry[1]:
            entry[1].append(job)
        entry[2] += phase.member_batches
        entry[3] += train
        entry[4] += evaluation
        jobs[job] = jobs.get(job, 0.0) + train + evaluation
        widths.setdefault(job, []).append(phase.width)
    rows = [Row(model, hidden, runs, tuple("→".join(map(str, widths[job])) for job in row_jobs), batches, train,
                evaluation, estimated)
            for (model, hidden), (runs, row_jobs, batches, train, evaluation, estimated) in by_row.items()]
    longest = max(jobs.items(), key=lambda item: item[1], default=("", 0.0))
    return Projection(rows, sorted(unmeasured), sum(jobs.values()) / 3600, spread(jobs.values(), devices) / 3600,
                      max(1, devices), (longest[0], longest[1] / 3600), sum(floors.values()) / 3600,
                      spread(floors.values(), devices) / 3600)


def spread(seconds: Iterable[float], devices: int) -> float:
    """The wall time of jobs of ``seconds`` placed longest first on the least loaded of ``devices``."""
    loads = [0.0] * max(1, devices)
    for each in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += each
    return max(loads)


def hours(value: float) -> str:
    """Hours to a tenth, or to a hundredth below one (a small profile's minutes still show)."""
    return f"{value:,.1f}" if value >= 1 else f"{value:.2f}"


def projection_table(projection: Projection) -> list[str]:
    """Markdown: a row per architecture and size, and the totals."""
    from pipeline.models import DISPLAY_NAMES

    lines = ["| model | hidden | runs | populations (per job, rung by rung) | member-batches | training h | "
             "evaluation h |",
             "|---|---|---|---|---|---|---|"]
    for r in projection.rows:
        mark = " *" if r.estimated else ""
        lines.append(f"| {DISPLAY_NAMES.get(r.model, r.model)} | {r.hidden}{mark} | {r.runs} | "
                     f"{', '.join(r.widths)} | {r.member_batches:,.0f} | {hours(r.train_s / 3600)} | "
                     f"{hours(r.eval_s / 3600)} |")
    lines += ["", f"Total: **{hours(projection.hours_one_device)} hours** on one device"
              + (f", **{hours(projection.hours)} hours** on {projection.devices}" if projection.devices > 1 else "")
              + f". The longest job, {projection.longest[0]}, takes {hours(projection.longest[1])} hours on one "
              "device whatever their number."]
    if any(r.estimated for r in projection.rows):
        lines.append("* step time scaled from the nearest hidden size measured by the square of their ratio (the "
                     "products'): an estimate, not measured, and likely high for a larger size (the rest of a step "
                     "grows less, and a GPU runs larger products more efficiently). Priced instead at the size "
                     "measured (a floor: a larger model is not faster): "
                     f"**{hours(projection.floor_hours_one_device)} hours** on one device"
                     + (f", {hours(projection.floor_hours)} on {projection.devices}" if projection.devices > 1 else "")
                     + ".")
    if projection.unmeasured:
        lines.append(f"Not projected (no step time measured): {', '.join(projection.unmeasured)}.")
    return lines
