"""The one training loop: P ≥ 1 runs trained as one LightningModule by Lightning's Trainer (paper §4.4).

A single run is a population of one. Every run, alone or among others, is a :class:`Member`: its run folder claimed
(:mod:`pipeline.training.runlife`), its weights initialised from its own seed, its batches drawn from its own stream at
its own step, its :class:`~pipeline.training.monitor.TrainingMonitor` (perplexity windows, evaluations, stopping rules,
checkpoints), its loggers, its results written last. :class:`PopulationModule` holds the live members, at most
``width`` of them; each training step of the Trainer steps every live member once:

* **one after another** (a CPU's way: batching members buys an arithmetic-bound CPU nothing and costs their padding):
  each member's own model (fused LSTM, C memory step) and ``torch.optim.RMSprop`` take
  :func:`~pipeline.training.step.take_step`;
* **batched** (a GPU's way): the members stacked as one model (:mod:`pipeline.training.population`), stepped by
  :func:`~pipeline.training.step.update`, captured once as a CUDA graph at static shapes and replayed.

A member that stops (converged, plateau, pruned, its budget) is finished there (its results written) and leaves; the
next waiting run takes its slot (in place, on a captured step), and the Trainer stops when none is left. A member whose
loss turns NaN, or whose monitor fails, fails alone in a population (its ``failed.json`` says why; the others go on)
and raises in a single run. Checkpoints are written by ``Trainer.save_checkpoint``: the module's ``on_save_checkpoint``
hook makes each one the checkpoint of the member being saved (its weights, RMSProp state, monitor and step), which a
single run resumes from, whichever way it was trained. SIGTERM (Lightning's handler), Ctrl-C and SIGHUP stop training
with :class:`RunStopped`; every member resumes from its last checkpoint when run again.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import signal
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DataLoader, IterableDataset

from pipeline.config import RunConfig
from pipeline.data.cache import load_eval_set
from pipeline.data.stream import TrainingBatches
from pipeline.evaluation import TOKEN_ACCURACY_SPLITS, evaluate, token_accuracy
from pipeline.files import atomic_write_text
from pipeline.provenance import current_command, lock_hash, machine, torch_build, workers_sharing
from pipeline.rundir import RESULTS_SCHEMA, RunDir, failure_record
from pipeline.tasks import TASKS
from pipeline.training.metrics_log import ResumableCSVLogger
from pipeline.training.module import TransductionModule
from pipeline.training.monitor import TrainingMonitor
from pipeline.training.population import (
    CapturedStep,
    PopulationRMSprop,
    evaluate_population,
    population_class,
    population_step,
)
from pipeline.training.runlife import read_checkpoint, record_commit
from pipeline.training.step import make_optimizer, take_step
from pipeline.training.stopping import PLATEAU_RULE, PRUNE_RULE

EVAL_SPLITS = ("train", "test", "long")
MONITOR_STATE = "TrainingMonitor"  # the key of a member's monitor state in its checkpoint's "callbacks"


# -- stopping from outside -------------------------------------------------------------------------------------------

class RunStopped(KeyboardInterrupt):
    """Training was stopped from outside (SIGTERM, Ctrl-C, SIGHUP) before the run ended. Nothing is lost: the run
    resumes from its last checkpoint when trained again. ``exit_code`` is the shell's for that signal (143, 130,
    129)."""

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


# -- a member: one run in the loop -----------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)  # a member is itself: found in lists by identity, not by comparing its tensors
class Member:
    """One run being trained, and what its :class:`TrainingMonitor` asks of a trainer: its step (``global_step``),
    its stop flag, its loggers, and its checkpoints."""

    config: RunConfig
    run_dir: Path
    module: TransductionModule
    monitor: TrainingMonitor
    batches: TrainingBatches
    eval_sets: dict
    commits: list[str]
    optimizer: torch.optim.RMSprop  # the run's own optimizer: its state is what the checkpoints hold
    step: int = 0
    index: int = 0  # its place in the caller's list of runs
    loggers: list = dataclasses.field(default_factory=list)
    should_stop: bool = False
    failed: bool = False  # its training failed here (its failed.json says why): it leaves without results
    engine: "PopulationModule | None" = None
    population: "BatchedPopulation | None" = None  # the stacked model it trains in, when batched

    @property
    def global_step(self) -> int:
        return self.step

    @property
    def done(self) -> bool:
        return self.should_stop or self.step >= self.config.training.max_batches

    def save_checkpoint(self, path: Path, weights_only: bool = False) -> None:
        self.engine.save_member_checkpoint(self, Path(path), weights_only)


def open_member(config: RunConfig, run_dir: Path, cache_dir: Path | None, device: torch.device) -> Member:
    """Set up one admitted run (:func:`~pipeline.training.runlife.admit`) at its last checkpoint, or at batch 0."""
    commits = record_commit(run_dir)
    eval_sets = {split: load_eval_set(config.task, split, cache_dir, config.length_distribution)
                 for split in EVAL_SPLITS}
    monitor = TrainingMonitor(run_dir, eval_sets["test"].pairs)
    last = monitor.last_path if monitor.last_path.exists() else None
    L.seed_everything(config.training.seed, workers=True, verbose=False)  # every random choice from the run's seed
    module = TransductionModule.from_config(config).to(device)
    optimizer = make_optimizer(module.parameters(), config.training)
    step = 0
    if last is not None:
        checkpoint = read_checkpoint(last, run_dir)
        module.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_states"][0])
        monitor.load_state_dict(checkpoint["callbacks"][MONITOR_STATE])
        step = checkpoint["global_step"]
    monitor.on_train_start(step)
    t = config.training
    batches = TrainingBatches(module.task, module.vocab, seed=t.seed, batch_size=t.batch_size, pool=t.length_pool,
                              start=step)
    loggers = [ResumableCSVLogger(run_dir, keep_through_step=step if last is not None else None)]
    if config.tracking.wandb != "off":
        from pipeline.training.tracking import wandb_logger

        loggers.append(wandb_logger(config, run_dir))
    member = Member(config, Path(run_dir), module, monitor, batches, eval_sets, commits, optimizer, step,
                    loggers=loggers)
    member.should_stop = monitor.stop_reason is not None  # resumed after it had stopped: nothing left to train
    return member


def finish_member(member: Member, device: torch.device, population: list[str] | None) -> dict:
    """What a run does when its training ends: the last window and an evaluation, ``last.ckpt``, then the selected
    checkpoint evaluated and ``results.json`` written last (naming the population it trained in, if any)."""
    member.monitor.on_train_end(member, member.module)
    results = final_results(member.module, member.monitor, member.step, member.eval_sets, member.run_dir,
                            member.commits, device)
    if population is not None:
        results["population"] = population
    atomic_write_text(RunDir(member.run_dir).results_file, json.dumps(results, indent=2) + "\n")
    if member.config.tracking.wandb != "off":
        from pipeline.training.tracking import log_final_results

        log_final_results(member.loggers, results)
    return results


def final_results(module: TransductionModule, monitor: TrainingMonitor, batches: int, eval_sets: dict,
                  run_dir: Path, commits: list[str], trained_on: torch.device | None = None) -> dict:
    """Evaluate the selected checkpoint on the cached sets and describe the run."""
    if monitor.best_path.exists():
        module.load_state_dict(read_checkpoint(monitor.best_path, run_dir, module.config)["state_dict"])
    started, cpu_started = time.monotonic(), time.process_time()
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
    token_scored = {}
    if TASKS[config.task].token_scored:  # Delétang et al.'s score, on the sets it covers (their test lengths)
        pairs = [pair for split in TOKEN_ACCURACY_SPLITS for pair in eval_sets[split].pairs[:n]]
        token_scored["token_accuracy"] = token_accuracy(module.model, pairs, module.vocab)
    # CPU seconds only where the run trained on the CPU: a GPU's work is not the process's CPU time
    on_cpu = trained_on is None or torch.device(trained_on).type == "cpu"
    cpu_seconds = {"train_cpu_seconds": round(monitor.cpu_elapsed, 1) if on_cpu and monitor.cpu_elapsed is not None
                   else None,
                   "eval_cpu_seconds": round(time.process_time() - cpu_started, 1) if on_cpu else None}
    return {
        "schema": RESULTS_SCHEMA,
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
        "prune_rule": PRUNE_RULE,
        "train_seconds": round(monitor.elapsed, 1),
        "eval_seconds": round(time.monotonic() - started, 1),
        **cpu_seconds,  # the same, in the process's CPU time: the waits for a shared core left out (None: unknown)
        "selected_step": monitor.best["step"] if monitor.best else batches,
        "train_perplexity": monitor.best["train_perplexity"] if monitor.best else monitor.last_perplexity,
        "final_train_perplexity": monitor.last_perplexity,
        **{f"{split}_{metric}": getattr(s, metric) for split, s in scores.items() for metric in ("coarse", "fine")},
        **token_scored,
        "eval_sizes": {split: len(scores[split].correct_prefix) for split in EVAL_SPLITS},
        "commit": " ".join(commits),  # the code that trained the run (more than one if resumed under another)
        "lock": lock_hash(),  # the environment that finished it (requirements.lock)
        "machine": machine(trained_on),  # where its seconds were measured (its GPU, if any), beside how many
        "torch": torch_build(),  # the lock pins everything else; torch is installed apart (its build, its kernels)
        "workers": workers_sharing(),
        "command": current_command(),
        "host_threads": torch.get_num_threads(),
    }


# -- members stacked as one model (a GPU's way) ----------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class BatchedPopulation:
    """The live members, their stacked model and optimizer, and the step (captured as a CUDA graph at static shapes
    on a GPU); ``pull`` copies one member's current weights and RMSProp state back into its own module and optimizer
    (for its evaluations and checkpoints)."""

    members: list[Member]
    model: torch.nn.Module
    optimizer: PopulationRMSprop
    clip: float
    clip_mode: str
    length: int | None = None  # static shapes: every step padded to it
    captured: CapturedStep | None = None  # at static shapes; else population_step pads each step to its longest

    def step(self, batches: list) -> tuple[torch.Tensor, torch.Tensor]:
        if self.captured is not None:
            return self.captured(batches)
        return population_step(self.model, self.optimizer, batches, self.clip, self.clip_mode, self.length)

    @classmethod
    def of(cls, members: list[Member], device: torch.device, length: int | None = None,
           vocab: tuple[int, int] | None = None) -> "BatchedPopulation":
        """``members`` stacked; ``vocab``: the largest (input, output) vocabularies of the runs that may take a slot
        later (their rows padded to it: :class:`~pipeline.training.population.Population`)."""
        models = [m.module.model for m in members]
        kind = population_class(members[0].config.model.name)
        model = kind(models, vocab).to(device)
        t = members[0].config.training
        optimizer = PopulationRMSprop(model.ordered_parameters(), [m.config.training.lr for m in members],
                                      t.rmsprop_alpha, t.rmsprop_eps)
        params = [list(m.module.model.parameters()) for m in members]
        for i, (name, avg) in enumerate(zip(model.names, optimizer.square_avg)):
            for k, m in enumerate(members):
                state = m.optimizer.state.get(params[k][i])
                if state is not None:
                    avg[model.own(k, name)].copy_(state["square_avg"])
        # its own list: the caller's changes as members come and go
        population = cls(list(members), model, optimizer, t.clip, t.clip_mode, length)
        if length is not None:
            population.captured = CapturedStep(model, optimizer, t.clip, t.batch_size, length, t.clip_mode)
        for m in members:
            m.population = population
        return population

    @torch.no_grad()
    def pull(self, member: Member) -> None:
        k = self.members.index(member)
        for i, (name, p) in enumerate(member.module.model.named_parameters()):
            own = self.model.own(k, name)
            p.copy_(self.model.member(name)[own])
            state = member.optimizer.state[p]
            state["square_avg"] = self.optimizer.square_avg[i][own].detach().clone()
            state["step"] = torch.tensor(float(member.step), dtype=_scalar_dtype())

    def release(self) -> None:
        for m in self.members:
            self.pull(m)
            m.population = None

    @torch.no_grad()
    def replace(self, old: Member, new: Member) -> None:
        """``new`` takes ``old``'s slot: its weights, RMSProp state and rate copied into the stacked tensors in place,
        so a captured step goes on without a new capture (``old`` is pulled first by the caller)."""
        k = self.members.index(old)
        params = list(new.module.model.parameters())
        self.model.place(k, new.module.model)  # its vocabulary may be another task's
        for i, name in enumerate(self.model.names):
            state = new.optimizer.state.get(params[i])
            self.model.put(self.optimizer.square_avg[i], k, name,
                           state["square_avg"] if state else torch.zeros_like(params[i]))
        self.optimizer.set_rate(k, new.config.training.lr)
        self.members[k] = new
        old.population, new.population = None, self


def job_vocabulary(configs: list[RunConfig]) -> tuple[int, int] | None:
    """The largest (input, output) vocabulary sizes of ``configs`` where they differ (the synthetic tasks' and the ITG
    tasks' runs of one architecture: their stacked model pads every member's to it); None where all read one."""
    from pipeline.data.encoding import JointVocabulary
    from pipeline.tasks import get_task

    sizes = set()
    for config in configs:
        vocab = JointVocabulary.for_config(get_task(config.task, config.length_distribution), config.model)
        sizes.add((vocab.input_size, vocab.output_size))
    return None if len(sizes) <= 1 else (max(i for i, _ in sizes), max(o for _, o in sizes))


def _scalar_dtype() -> torch.dtype:
    """The dtype torch's RMSprop keeps its step count in."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


# -- the LightningModule ---------------------------------------------------------------------------------------------

class Ticks(IterableDataset):
    """The Trainer's endless stream: one tick per training step. Each member draws its own batch from its own stream
    at its own step (:class:`~pipeline.data.stream.TrainingBatches`), so no batch passes through a DataLoader."""

    def __iter__(self):
        return itertools.count()


class PopulationModule(L.LightningModule):
    """The live members of one population (P ≥ 1), stepped once per training step, as the module docstring says.
    ``waiting``: (index, config, run dir) of the admitted runs not yet opened, taken in order as slots free up.
    ``isolate_failures``: a member that fails is recorded and leaves (a population); otherwise the error is raised (a
    single run). ``population``: the run ids its members' results name (None: not a population)."""

    def __init__(self, waiting: list[tuple[int, RunConfig, Path]], *, device: torch.device,
                 cache_dir: Path | None = None, width: int | None = None, batched: bool = False,
                 length: int | None = None, isolate_failures: bool = True, population: list[str] | None = None,
                 show_progress: bool = False) -> None:
        super().__init__()
        self.automatic_optimization = False  # the step is ours (pipeline.training.step); Lightning runs the loop
        self.waiting, self.where, self.cache_dir, self.width = list(waiting), device, cache_dir, width
        self.batched, self.length, self.isolate_failures = batched, length, isolate_failures
        self.population_ids, self.show_progress = population, show_progress
        self.vocab = job_vocabulary([config for _, config, _ in waiting]) if batched else None
        self.results: dict[int, dict] = {}
        self.live: list[Member] = []
        self.together: BatchedPopulation | None = None
        self._saving: Member | None = None

    # -- members coming and going --

    def fill(self) -> None:
        while (self.width is None or len(self.live) < self.width) and (member := self.newcomer()) is not None:
            self.live.append(member)

    def newcomer(self) -> Member | None:
        """The next waiting run, opened (eval sets, model, checkpoint) only now; one resumed after it had stopped is
        finished at once and the next taken."""
        while self.waiting:
            k, config, run_dir = self.waiting.pop(0)
            member = open_member(config, run_dir, self.cache_dir, self.where)
            member.index, member.engine = k, self
            if not member.done:
                return member
            self.leave(member)
        return None

    def leave(self, member: Member) -> None:
        if not member.failed:
            self.results[member.index] = finish_member(member, self.where, self.population_ids)

    def fail(self, member: Member, error: Exception, where: str = "", trace: str = "") -> None:
        """This member fails, as its single run would (``error`` raised); in a population it is recorded instead
        (``where``: at which batch) and the others go on without it."""
        if not self.isolate_failures:
            raise error
        member.should_stop = member.failed = True
        RunDir(member.run_dir).write_failure(failure_record(f"{type(error).__name__}: {error}{where}", trace))

    def refill(self) -> None:
        """Every member that is done leaves; the next waiting run takes its slot."""
        together = self.together
        for member in [m for m in self.live if m.done]:
            if together is not None:
                together.pull(member)  # its final weights, for its last evaluation
            new = self.newcomer()
            if together is not None and together.captured is not None and new is not None:
                together.replace(member, new)  # into its slot: the captured step goes on, no new capture
                self.live[self.live.index(member)] = new
            else:
                self.live.remove(member)
                self.live.extend([new] if new is not None else [])
                if together is not None:  # rebuilt around the others next step
                    together.release()
                    self.together = together = None
            self.leave(member)

    @property
    def batches_done(self) -> int:
        """The step of the first live member (a single run's batches done), for a progress bar."""
        return self.live[0].step if self.live else 0

    # -- Lightning --

    def on_train_start(self) -> None:
        # opened here, with the Trainer attached: a run resumed after it had stopped is finished at once, and
        # finishing writes its last checkpoint through the Trainer
        self.fill()
        if not self.live:
            self.trainer.should_stop = True

    def train_dataloader(self) -> DataLoader:
        return DataLoader(Ticks(), batch_size=None, num_workers=0)

    def configure_optimizers(self):
        return None  # each member's own (make_optimizer), stepped by take_step or the stacked update

    def training_step(self, tick, tick_index: int) -> None:
        live = self.live
        if self.batched and self.together is None:
            self.together = BatchedPopulation.of(live, self.where, self.length, self.vocab)
        batches = [m.batches.batch(m.step) for m in live]
        if self.together is not None:
            nll, tokens = self.together.step(batches)
        else:
            nll, tokens = self.one_after_another(live, batches)
        nll, tokens = nll.cpu(), tokens.cpu()  # one copy to the host a step, not one per member
        for k, member in enumerate(live):
            member.step += 1
            if not torch.isfinite(nll[k]):
                self.fail(member, FloatingPointError(f"training loss is {nll[k].item()} at batch {member.step}"))
        if self.together is not None:
            self.evaluate_together()
        for k, member in enumerate(live):
            if member.failed:
                continue
            try:
                if self.together is not None and member.step % member.config.training.eval_every == 0:
                    self.together.pull(member)  # its checkpoints and memory probe read the member's own module
                member.monitor.on_train_batch_end(member, member.module, nll[k], tokens[k])
            except (ArithmeticError, ValueError, RuntimeError) as error:  # its window, its evaluation: its failure
                self.fail(member, error, f" (at batch {member.step})", traceback.format_exc())
        if self.show_progress and live:
            for key, value in live[0].monitor.shown.items():
                self.log(key, value, prog_bar=True, logger=False)
        self.refill()
        if not self.live:
            self.trainer.should_stop = True

    def evaluate_together(self) -> None:
        """Where members of the stacked model are due an evaluation, score every member's evaluation sets in one
        stacked pass (:func:`~pipeline.training.population.evaluate_population`) and hand the due members' scores to
        their monitors; members whose sets differ in size are left to evaluate their own modules."""
        members = self.together.members
        if not any(m.step % m.config.training.eval_every == 0 for m in members):
            return
        sets = [m.monitor.evaluation_sets(m.module, m.step) for m in members]
        if len({len(fresh) for fresh, _ in sets}) != 1 or len({len(test) for _, test in sets}) != 1:
            return
        vocabs = [m.module.vocab for m in members]
        train = evaluate_population(self.together.model, [fresh for fresh, _ in sets], vocabs)
        test = evaluate_population(self.together.model, [test for _, test in sets], vocabs)
        for k, member in enumerate(members):
            if member.step % member.config.training.eval_every == 0:
                member.monitor.scored[member.step] = (train[k], test[k])

    def one_after_another(self, live: list[Member], batches: list) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's own step on its own batch (:func:`~pipeline.training.step.take_step`). Returns the summed
        target NLLs and token counts (P,)."""
        nlls, counts = [], []
        for member, batch in zip(live, batches):
            member.module.model.before_batch(member.step)  # a study probe's schedule follows the run's own batches
            nll, tokens = take_step(member.module.model, member.optimizer, batch.to(member.module.device),
                                    member.config.training, backward=self.manual_backward)
            nlls.append(nll)
            counts.append(tokens)
        return torch.stack(nlls), torch.stack(counts)

    # -- checkpoints --

    def save_member_checkpoint(self, member: Member, path: Path, weights_only: bool) -> None:
        """``member``'s checkpoint, written by ``Trainer.save_checkpoint`` and made the member's own by
        :meth:`on_save_checkpoint`."""
        if member.population is not None:
            member.population.pull(member)
        self._saving = member
        try:
            self.trainer.save_checkpoint(path, weights_only=weights_only)
        finally:
            self._saving = None

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The Trainer's checkpoint made the member's: its weights, step and config and, unless weights only, its
        RMSProp state and monitor. The Trainer's loop state is the population's, not the member's: it is left out
        (a member resumes at its own step, from its own stream)."""
        member = self._saving
        checkpoint.pop("loops", None)
        checkpoint.update({"epoch": 0, "global_step": member.step, "state_dict": member.module.state_dict(),
                           "hparams_name": None, "hyper_parameters": member.module.hparams})
        if "optimizer_states" in checkpoint:
            checkpoint.update({"callbacks": {MONITOR_STATE: member.monitor.state_dict()},
                               "optimizer_states": [member.optimizer.state_dict()], "lr_schedulers": []})


# -- running it ------------------------------------------------------------------------------------------------------

class RunProgressBar(ProgressBar):
    """A run's progress over its whole budget, on Lightning's public ``ProgressBar`` interface: "batches 41/60"
    counts from the batch a resumed run starts at (and says so), and its time left is measured on this session's
    batches only."""

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

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if not self._enabled or self._progress is not None:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        start = pl_module.batches_done
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), TextColumn("{task.fields[metrics]}"), console=self._console)
        description = f"batches (resumed at {start:,})" if start else "batches"
        self._task = self._progress.add_task(description, total=self.max_batches, completed=start, metrics="")
        self._progress.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._progress is not None:
            metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
            shown = "  ".join(f"{k} {float(v):.4g}" for k, v in metrics.items())
            self._progress.update(self._task, completed=pl_module.batches_done or self.max_batches, metrics=shown)

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
            for message in (".*IterableDataset.*__len__.*", ".*does not have many workers.*", ".*LeafSpec.*",
                            ".*configure_optimizers.*returned `None`.*"):
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def fit(engine: PopulationModule, device: torch.device, where: Path, max_batches: int | None = None) -> None:
    """Train ``engine``'s members with Lightning's Trainer until none is left. ``max_batches``: a single run's
    budget, for its progress bar (None: no bar). Stopped from outside: :class:`RunStopped`, naming ``where``."""
    if not engine.waiting:
        return
    bar = [RunProgressBar(max_batches)] if max_batches is not None else []

    def stopped(why: str, code: int) -> RunStopped:
        return RunStopped(where, min((m.step for m in engine.live), default=0), why, code)

    with quiet_lightning():
        trainer = L.Trainer(max_epochs=1, max_steps=-1, logger=False, callbacks=bar, enable_checkpointing=False,
                            enable_progress_bar=bool(bar), enable_model_summary=False, limit_val_batches=0,
                            num_sanity_val_steps=0, accelerator=device.type,
                            devices=[device.index or 0] if device.type == "cuda" else 1, default_root_dir=str(where))
        try:
            with ctrl_c_as_exception():
                trainer.fit(engine)
        except SIGTERMException:  # Lightning's: a SystemExit with status 0, which would read as success
            raise stopped("SIGTERM", 128 + signal.SIGTERM) from None
        except Hangup:
            raise stopped("SIGHUP (its terminal closed)", 128 + signal.SIGHUP) from None
        except CtrlC:
            raise stopped("an interrupt (Ctrl-C)", 128 + signal.SIGINT) from None
    if trainer.interrupted:  # stopped from outside (Ctrl-C): the run is unfinished and resumes next time
        raise stopped("an interrupt", 128 + signal.SIGINT)
