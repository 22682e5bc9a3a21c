"""How fast a population trains (issue 36): ``transduce bench --population`` writes ``reports/bench-population.md`` and
``bench-population.json`` beside it (``bench-population-cuda.*`` on a GPU, as ``bench-cuda.*`` beside ``bench.*``),
one record per measurement: ``model``, ``population``, ``device``, ``mode``, ``member_batches_per_s`` and ``peak_mb``,
and for a batched step ``launches_per_step`` (:func:`launches_per_step`).

For each model (the Stack-, Queue- and DeQue-LSTMs, the 1-, 2-, 4- and 8-layer LSTMs) and population size P (1, 16,
64, 256), one training step of :class:`pipeline.training.population.CapturedStep` over P members, batch 10 each,
131 input positions (the longest training-length joint sequence), hidden 256 (``--hidden 256 --hidden 512``: each
size in turn), is timed after one warm-up step:
member-batches per second = P / seconds per step. A model's larger sizes are skipped once a step takes longer than the
time budget allows, or memory runs out, so the whole bench stays within minutes (the report says which). On a GPU the
step is captured as a CUDA graph once and replayed (the time of the capture is not counted); on a CPU it runs eager.
``--profile`` (:func:`profile_population`) says instead where one step's time goes, model by model.
"""

from __future__ import annotations

import functools
import json
import resource
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pipeline.bench import BATCH, INPUT_SIZE, OUTPUT_SIZE, TrainingStep, random_batch
from pipeline.config import ModelConfig, TrainingConfig
from pipeline.files import atomic_write_text
from pipeline.models import DISPLAY_NAMES, build_model
from pipeline.paths import CONFIG_DIR, REPORTS_DIR
from pipeline.provenance import machine, provenance
from pipeline.runtime import configure_cpu_process, resolve_device
from pipeline.training.population import (
    CapturedStep,
    population_class,
    population_step,
)
from pipeline.training.step import make_optimizer

POPULATION_MODELS = ("stack", "queue", "deque", "lstm1", "lstm2", "lstm4", "lstm8")
SIZES = (1, 16, 64, 256)
UNBATCHED_SIZE = 8  # a population stepped one member after another, on a CPU
STEPS = 131
HIDDEN = 256


def population_of(model: str, size: int, hidden: int, device: torch.device):
    members = [build_model(ModelConfig(name=model, hidden=hidden), INPUT_SIZE, OUTPUT_SIZE) for _ in range(size)]
    population = population_class(model)(members).to(device)
    t = TrainingConfig()  # the default training settings, as bench.TrainingStep's
    return population, make_optimizer(population.ordered_parameters(), t, rates=[t.lr] * size)


class _CountLaunches(TorchDispatchMode):
    """Counts the ATen calls that reach a kernel (every call but a view's), forward and backward alike."""

    def __init__(self) -> None:
        super().__init__()
        self.launches = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.launches += not func.is_view
        return func(*args, **(kwargs or {}))


@functools.cache
def launches_per_step(model: str, steps: int = STEPS) -> int:
    """The ATen calls one training step of a population of ``model`` makes, views aside: on a GPU each is about one
    kernel launch, and a small population's step costs its launches more than its arithmetic (``docs/performance.md``,
    "What bounds the grid"). The count depends on the model and the positions, not on P or the hidden size, so it is
    made eagerly on the CPU at a toy size (P = 2, hidden 8) on any device's report."""
    cpu = torch.device("cpu")
    population, optimizer = population_of(model, 2, 8, cpu)
    t = TrainingConfig()
    step = CapturedStep(population, optimizer, t.clip, BATCH, steps, t.clip_mode)  # eager on a CPU
    batches = [random_batch(steps, k) for k in range(2)]
    step(batches)  # the first step makes what later ones reuse (RMSProp's rates on the device)
    with _CountLaunches() as counted:
        step(batches)
    return counted.launches


def peak_mb(device: torch.device) -> float:
    """Peak memory so far: the GPU's allocator on CUDA, this process's resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(model: str, size: int, device: torch.device, hidden: int = HIDDEN, steps: int = STEPS,
            repeats: int = 2) -> dict:
    """One record: member-batches per second of ``size`` members of ``model`` (median of ``repeats`` timed steps
    after one warm-up step) and the peak memory."""
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    population, optimizer = population_of(model, size, hidden, device)
    t = TrainingConfig()
    step = CapturedStep(population, optimizer, t.clip, BATCH, steps, t.clip_mode)  # captured on a GPU
    batches = [random_batch(steps, k) for k in range(size)]
    timings = []
    for attempt in range(repeats + 1):
        start = time.perf_counter()
        step(batches)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if attempt:  # the first is the warm-up
            timings.append(time.perf_counter() - start)
    seconds = sorted(timings)[len(timings) // 2]
    return dict(model=model, hidden=hidden, population=size, device=str(device), mode="batched",
                member_batches_per_s=size / seconds,
                seconds_per_step=seconds, peak_mb=peak_mb(device), launches_per_step=launches_per_step(model, steps))


def measure_one_after_another(model: str, size: int, device: torch.device, hidden: int = HIDDEN,
                              steps: int = STEPS, repeats: int = 2) -> dict:
    """The same record for a population that steps its members one after another, each with its single run's own
    model (fused LSTM, C memory step) and ``torch.optim.RMSprop`` (:class:`pipeline.bench.TrainingStep`): what
    ``train_population`` does unbatched (a CPU's default). Per member-batch it costs what a single run costs."""
    torch.manual_seed(0)
    steps_of = [TrainingStep(model, hidden, steps, seed=k, device=str(device)) for k in range(size)]
    timings = []
    for attempt in range(repeats + 1):
        start = time.perf_counter()
        for member in steps_of:
            member()
        if attempt:
            timings.append(time.perf_counter() - start)
    seconds = sorted(timings)[len(timings) // 2]
    return dict(model=model, hidden=hidden, population=size, device=str(device), mode="one after another",
                member_batches_per_s=size / seconds, seconds_per_step=seconds, peak_mb=peak_mb(device))


def run_population_benchmark(device: str = "cpu", out_dir: Path | None = None, models=POPULATION_MODELS,
                             sizes=SIZES, hidden: int | tuple[int, ...] = HIDDEN, steps: int = STEPS,
                             budget_s: float = 60.0, echo=print, command: str = "transduce bench --population") -> Path:
    """Measure every (model, size) at each ``hidden`` size within the budget and write the report; returns the
    markdown's path. A model's next size is skipped once a step took more than ``budget_s`` / 8 seconds (the next
    would take several times that), or when memory ran out. The one-after-another comparison (a CPU's) is made at
    the first hidden size."""

    configure_cpu_process()
    where = resolve_device(device)
    hiddens = (hidden,) if isinstance(hidden, int) else tuple(hidden)
    records, skipped = [], []
    for width in hiddens:
        for model in models:
            for size in sizes:
                try:
                    record = measure(model, size, where, width, steps)
                except (torch.cuda.OutOfMemoryError, MemoryError, RuntimeError) as error:
                    skipped.append(f"{model} (hidden {width}) at P={size}: {type(error).__name__}")
                    break
                records.append(record)
                echo(f"{model:6} h{width} P={size:<4} {record['member_batches_per_s']:9.1f} member-batches/s "
                     f"({record['seconds_per_step']:.2f} s a step, peak {record['peak_mb']:.0f} MB)")
                if record["seconds_per_step"] > budget_s / 8 and size != sizes[-1]:
                    skipped.append(f"{model} (hidden {width}) above P={size}: a step took "
                                   f"{record['seconds_per_step']:.1f} s")
                    break
    if where.type == "cpu":  # a CPU's default: members one after another; compared with a single run (P=1)
        for model in models:
            for size in (1, UNBATCHED_SIZE):
                record = measure_one_after_another(model, size, where, hiddens[0], steps)
                records.append(record)
                echo(f"{model:6} P={size:<4} {record['member_batches_per_s']:9.1f} member-batches/s, one after "
                     "another")
    out_dir = Path(out_dir) if out_dir is not None else REPORTS_DIR
    stem = "bench-population" + ("-cuda" if where.type == "cuda" else "")
    atomic_write_text(out_dir / f"{stem}.json", json.dumps(records, indent=2) + "\n")
    lines = ["# Population training: member-batches per second", "",
             provenance(command, dated=True) + f" Machine: {machine(where)}.", "",
             f"One training step (forward, backward, per-member clipping and RMSProp) of P members at once, batch "
             f"{BATCH} each, {steps} input positions, hidden {' and '.join(map(str, hiddens))}, on `{where}`, "
             f"{'captured once as a CUDA graph and replayed' if where.type == 'cuda' else 'eager'} "
             "(the batches copied in each step); "
             "median of 2 timed steps after a warm-up. Member-batches per second = P / seconds per step. Launches: "
             "the ATen calls of one step, views aside (about a kernel launch each on a GPU; whatever P and the "
             "hidden size), counted on the CPU.", "",
             "| model | hidden | launches | " + " | ".join(f"P={size}" for size in sizes) + " |",
             "|---|---|---|" + "---|" * len(sizes)]
    for width in hiddens:
        for model in models:
            mine = [r for r in records if r["model"] == model and r["mode"] == "batched" and r["hidden"] == width]
            cells = {r["population"]: f"{r['member_batches_per_s']:.1f}" for r in mine}
            launches = f"{mine[0]['launches_per_step']:,}" if mine else "—"
            lines.append(f"| {DISPLAY_NAMES.get(model, model)} | {width} | {launches} | "
                         + " | ".join(cells.get(s, "—") for s in sizes) + " |")
    unbatched = [r for r in records if r["mode"] == "one after another"]
    if unbatched:
        lines += ["", f"One after another (a CPU's default in `train_population`: each member its single run's own "
                      f"step, fused LSTM and C memory step): a single run (P=1) against a population of "
                      f"{UNBATCHED_SIZE}, and the batched step at P=16 for comparison.", "",
                  f"| model | single run | P={UNBATCHED_SIZE}, one after another | ratio | batched, P=16 |",
                  "|---|---|---|---|---|"]
        for model in models:
            rate = {r["population"]: r["member_batches_per_s"] for r in unbatched if r["model"] == model}
            batched = next((f"{r['member_batches_per_s']:.1f}" for r in records
                            if r["model"] == model and r["mode"] == "batched" and r["population"] == 16), "—")
            if 1 in rate and UNBATCHED_SIZE in rate:
                lines.append(f"| {DISPLAY_NAMES.get(model, model)} | {rate[1]:.1f} | {rate[UNBATCHED_SIZE]:.1f} | "
                             f"{rate[UNBATCHED_SIZE] / rate[1]:.2f} | {batched} |")
    if skipped:
        lines += ["", "Not measured: " + "; ".join(skipped) + "."]
    lines += projection_lines(records, where)
    readme = out_dir / f"{stem}.md"
    atomic_write_text(readme, "\n".join(lines) + "\n")
    return readme


def profile_population(device: str = "cpu", out_dir: Path | None = None, models=POPULATION_MODELS, size: int = 64,
                       hidden: int = HIDDEN, steps: int = STEPS, rows: int = 10, echo=print,
                       command: str = "transduce bench --population --profile") -> Path:
    """Where one population step's time goes on ``device``: per model, the step's wall time, the time the device
    was busy (the kernels' own time on a GPU; the operators' on a CPU), and the operators that took the most of it,
    from ``torch.profiler`` over one eager (not captured) step after two warm ones. On a GPU the gap between wall
    and busy is the launches' (a captured step replays them faster, not fewer); what fills the busy time says which
    kernels a faster step must change. Writes ``bench-population-profile[-cuda].md``; returns its path."""
    from torch.profiler import ProfilerActivity, profile

    configure_cpu_process()
    where = resolve_device(device)
    cuda = where.type == "cuda"
    t = TrainingConfig()
    lines = ["# Where a population step's time goes", "",
             provenance(command, dated=True) + f" Machine: {machine(where)}.", "",
             "One eager training step (forward, backward, per-member clipping, RMSProp; not captured) of P = "
             f"{size} members, batch {BATCH} each, {steps} input positions, hidden {hidden}, on `{where}`, under "
             "`torch.profiler` after two warm steps. Busy: the sum of the operators' own "
             f"{'GPU kernel' if cuda else 'CPU'} time; on a GPU, wall minus busy is time the device waited for "
             "launches.", ""]
    for model in models:
        torch.manual_seed(0)
        population, optimizer = population_of(model, size, hidden, where)
        batches = [random_batch(steps, k) for k in range(size)]

        def step(population=population, optimizer=optimizer, batches=batches):
            population_step(population, optimizer, batches, t.clip, t.clip_mode)
            if cuda:
                torch.cuda.synchronize(where)

        step(), step()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            start = time.perf_counter()
            step()
            wall_ms = (time.perf_counter() - start) * 1000
        # on a GPU the kernels themselves (an operator's device time is its kernels': counted once, as kernels)
        kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
        own = [(e.key, e.count, (e.self_device_time_total if cuda else e.self_cpu_time_total) / 1000)
               for e in prof.key_averages() if e.device_type == kind]
        own = sorted((o for o in own if o[2] > 0), key=lambda o: -o[2])
        busy = sum(ms for _, _, ms in own)
        echo(f"{model:6} P={size} h{hidden}: wall {wall_ms:.1f} ms, busy {busy:.1f} ms")
        lines += [f"## {DISPLAY_NAMES.get(model, model)}: wall {wall_ms:.1f} ms, busy {busy:.1f} ms "
                  f"({busy / wall_ms:.0%})", "", "| operator | calls | ms | share of busy |", "|---|---|---|---|"]
        lines += [f"| `{name}` | {calls:,} | {ms:.2f} | {ms / busy:.0%} |" for name, calls, ms in own[:rows]]
        lines.append("")
    out_dir = Path(out_dir) if out_dir is not None else REPORTS_DIR
    path = out_dir / f"bench-population-profile{'-cuda' if cuda else ''}.md"
    atomic_write_text(path, "\n".join(lines))
    return path


PAPER_PROFILE = CONFIG_DIR / "paper.yaml"
CPU_RUNS = REPORTS_DIR / "cpu" / "all_runs.csv"


def projection_lines(records: list[dict], device: torch.device, profile: str | Path = PAPER_PROFILE,
                     cpu_runs: str | Path = CPU_RUNS) -> list[str]:
    """The report's projection (:mod:`pipeline.projection`): the wall time of ``profile`` from batch 0 on this
    device, its populations rung by rung, each step priced at the measured step time of its size; stepped the way
    ``train_population`` steps here by default (batched on a GPU, one after another on a CPU)."""
    from pipeline.projection import project, projection_table
    from pipeline.sweep import load_sweep

    try:
        sweep = load_sweep(profile)
    except (OSError, ValueError) as error:  # a checkout without the profile: say so
        return ["", f"No projection of {Path(profile).name}: {type(error).__name__}: {error}."]
    shown = Path(profile).relative_to(CONFIG_DIR.parent) if Path(profile).is_relative_to(CONFIG_DIR.parent) else profile
    mode = "batched" if torch.device(device).type == "cuda" else "one after another"
    if not any(r.get("mode", "batched") == mode for r in records):
        mode = "batched"
    return ["", f"## Projected wall time of `{shown}` on `{device}`", "",
            f"From batch 0, populations stepped {mode}, one at a time on the device; how each figure is counted, and "
            "what is measured and what estimated, is `pipeline/projection.py`'s docstring (`transduce project` prints "
            "this for any profile and device count).", "",
            *projection_table(project(sweep, records, cpu_runs=cpu_runs, mode=mode))]
