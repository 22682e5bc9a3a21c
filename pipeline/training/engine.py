"""The one training loop: P ≥ 1 runs trained together, a single run being a population of one (paper §4.4).

Why a loop of our own, with Lightning Fabric, rather than Lightning's Trainer: a population's runs come and go (a run
that stops hands its slot to the next one waiting), and each draws its batches from its own seeded stream at its own
step, steps its own optimizer, keeps its own monitor and writes its own checkpoints. Lightning's Trainer is built
around one dataset, one optimizer and one checkpoint per fit; fitting these runs inside it took a dummy dataset, an
object that posed as a trainer, a checkpoint hook that rewrote the Trainer's checkpoint into a run's, and silenced
warnings. Lightning Fabric is Lightning's own tool for a loop written out in plain Python: here it provides the device,
the precision (32-bit, the paper's) of the backward pass, and the checkpoint input/output; the loop itself is
:meth:`Loop.run`, read top to bottom. Each run's model is a LightningModule
(:class:`~pipeline.training.module.TransductionModule`), whose ``configure_optimizers`` gives the run's optimizer.

Every run, alone or among others, is a :class:`Member`: its run folder claimed (:mod:`pipeline.training.runlife`),
its weights initialised from its own seed, its batches drawn from its own stream at its own step, its
:class:`~pipeline.training.monitor.TrainingMonitor` (perplexity windows, evaluations, stopping rules, checkpoints), its
loggers, its results written last. The loop holds the live members, at most ``width`` of them, and steps every live
member once a step:

* **one after another** (a CPU's way: batching members buys an arithmetic-bound CPU nothing and costs their padding):
  each member's own model (fused LSTM, C memory step) and optimizer take
  :func:`~pipeline.training.step.take_step`;
* **batched** (a GPU's way): the members stacked as one model (:mod:`pipeline.training.population`), stepped by
  :func:`~pipeline.training.step.update`, captured once as a CUDA graph at static shapes and replayed.

A member that stops (converged, plateau, pruned, its budget) is finished there (its results written) and leaves; the
next waiting run takes its slot (in place, on a captured step), and the loop ends when none is left. A member whose
loss turns NaN, or whose monitor fails, fails alone in a population (its ``failed.json`` says why; the others go on)
and raises in a single run. A member's checkpoints are written by :meth:`Loop.save_checkpoint`, which its monitor is
handed: :func:`~pipeline.training.runlife.write_checkpoint` through Fabric, read back by
:func:`~pipeline.training.runlife.read_checkpoint`. SIGTERM (between two steps), Ctrl-C and SIGHUP stop training with
:class:`RunStopped`; every member resumes from its last checkpoint when run again.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch
from lightning.fabric import Fabric

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
from pipeline.training.monitor import TrainingMonitor, resume_point
from pipeline.training.population import CapturedStep, evaluate_population, population_class, population_step
from pipeline.training.runlife import MONITOR_STATE, read_checkpoint, record_commit, write_checkpoint
from pipeline.training.step import PopulationRMSprop, make_optimizer, take_step
from pipeline.training.stopping import PLATEAU_RULE, PRUNE_RULE

EVAL_SPLITS = ("train", "test", "long")


# -- the loop --------------------------------------------------------------------------------------------------------

def train_members(waiting: list[tuple[int, RunConfig, Path]], *, device: torch.device, where: Path,
                  cache_dir: Path | None = None, width: int | None = None, batched: bool = False,
                  length: int | None = None, isolate_failures: bool = True, population: list[str] | None = None,
                  progress: bool = False) -> dict[int, dict]:
    """Train the admitted runs ``waiting`` ((index, config, run dir), in order) until none is left; returns each
    one's results by index (a failed member has none). ``where``: named when training is stopped from outside
    (:class:`RunStopped`); ``progress``: show a single run's progress bar. The rest: :class:`Loop`."""
    if not waiting:
        return {}
    loop = Loop(waiting, device=device, cache_dir=cache_dir, width=width, batched=batched, length=length,
                isolate_failures=isolate_failures, population=population)
    bar = ProgressLine(waiting[0][1].training.max_batches) if progress and waiting else None
    with stopped_from_outside(loop, where):
        try:
            loop.run(bar)
        finally:
            if bar is not None:
                bar.stop()
    return loop.results


class Loop:
    """The live members of one population (P ≥ 1), stepped once a step, as the module docstring says.
    ``waiting``: (index, config, run dir) of the admitted runs not yet opened, taken in order as slots free up.
    ``isolate_failures``: a member that fails is recorded and leaves (a population); otherwise the error is raised (a
    single run). ``population``: the run ids its members' results name (None: not a population)."""

    def __init__(self, waiting: list[tuple[int, RunConfig, Path]], *, device: torch.device,
                 cache_dir: Path | None = None, width: int | None = None, batched: bool = False,
                 length: int | None = None, isolate_failures: bool = True,
                 population: list[str] | None = None) -> None:
        self.fabric = Fabric(accelerator=device.type, devices=[device.index or 0] if device.type == "cuda" else 1,
                             precision="32-true")
        self.where = self.fabric.device
        self.waiting, self.cache_dir, self.width = list(waiting), cache_dir, width
        self.batched, self.length, self.isolate_failures = batched, length, isolate_failures
        self.population_ids = population
        self.vocab = job_vocabulary([config for _, config, _ in waiting]) if batched else None
        self.results: dict[int, dict] = {}
        self.live: list[Member] = []
        self.together: BatchedPopulation | None = None
        self.terminated = False  # SIGTERM arrived: the loop stops after the step in progress

    def run(self, bar: "ProgressLine | None" = None) -> None:
        """Open the first members, then step until every member has left."""
        self.fill()
        if bar is not None and self.live:
            bar.start(self.batches_done)
        while self.live:
            first = self.live[0]
            self.step()
            if bar is not None:  # a single run's: its batches and latest numbers, also once it has left
                bar.update(first.step, first.monitor.shown)
            if self.terminated and self.live:
                raise Terminated()

    def step(self) -> None:
        """One step of every live member: its batch, its update, its monitor; then the members done leave."""
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
                member.monitor.after_batch(member.step, member.module, nll[k], tokens[k])
            except (ArithmeticError, ValueError, RuntimeError) as error:  # its window, its evaluation: its failure
                self.fail(member, error, f" (at batch {member.step})", traceback.format_exc())
        self.refill()

    def one_after_another(self, live: list[Member], batches: list) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's own step on its own batch (:func:`~pipeline.training.step.take_step`). Returns the summed
        target NLLs and token counts (P,)."""
        nlls, counts = [], []
        for member, batch in zip(live, batches):
            member.module.model.before_batch(member.step)  # a study probe's schedule follows the run's own batches
            nll, tokens = take_step(member.module.model, member.optimizer, batch.to(member.module.device),
                                    member.config.training, backward=self.fabric.backward)
            nlls.append(nll)
            counts.append(tokens)
        return torch.stack(nlls), torch.stack(counts)

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

    # -- members coming and going --

    def fill(self) -> None:
        while (self.width is None or len(self.live) < self.width) and (member := self.newcomer()) is not None:
            self.live.append(member)

    def newcomer(self) -> Member | None:
        """The next waiting run, opened (eval sets, model, checkpoint) only now; one resumed after it had stopped is
        finished at once and the next taken."""
        while self.waiting:
            k, config, run_dir = self.waiting.pop(0)
            member = open_member(config, run_dir, self.cache_dir, self.where, self.save_checkpoint)
            member.index = k
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
        member.failed = True
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

    # -- checkpoints --

    def save_checkpoint(self, member: Member, path: Path, weights_only: bool) -> None:
        """``member``'s checkpoint at ``path`` (:func:`~pipeline.training.runlife.write_checkpoint`), written by
        Fabric; a batched member's weights and RMSProp state are pulled from the stacked model first."""
        if member.population is not None:
            member.population.pull(member)
        write_checkpoint(path, member.module, member.step, None if weights_only else member.optimizer,
                         member.monitor, save=lambda checkpoint, to: self.fabric.save(to, checkpoint))


# -- a member: one run in the loop -----------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)  # a member is itself: found in lists by identity, not by comparing its tensors
class Member:
    """One run being trained: its config, folder, model and optimizer, monitor, stream and step."""

    config: RunConfig
    run_dir: Path
    module: TransductionModule
    monitor: TrainingMonitor
    batches: TrainingBatches
    eval_sets: dict
    commits: list[str]
    optimizer: torch.optim.Optimizer  # the run's own optimizer: its state is what the checkpoints hold
    step: int = 0
    index: int = 0  # its place in the caller's list of runs
    failed: bool = False  # its training failed here (its failed.json says why): it leaves without results
    population: "BatchedPopulation | None" = None  # the stacked model it trains in, when batched

    @property
    def done(self) -> bool:
        return self.failed or self.monitor.stopped_early or self.step >= self.config.training.max_batches


def open_member(config: RunConfig, run_dir: Path, cache_dir: Path | None, device: torch.device, save) -> Member:
    """Set up one admitted run (:func:`~pipeline.training.runlife.admit`) at its last checkpoint, or at batch 0.
    ``save(member, path, weights_only)`` writes its checkpoints (:meth:`Loop.save_checkpoint`)."""
    commits = record_commit(run_dir)
    eval_sets = {split: load_eval_set(config.task, split, cache_dir, config.length_distribution)
                 for split in EVAL_SPLITS}
    last = RunDir(run_dir).last_checkpoint
    checkpoint = read_checkpoint(last, run_dir) if last.exists() else None
    L.seed_everything(config.training.seed, workers=True, verbose=False)  # every random choice from the run's seed
    module = TransductionModule.from_config(config).to(device)
    optimizer = module.configure_optimizers()
    step = checkpoint["global_step"] if checkpoint is not None else 0
    loggers = [ResumableCSVLogger(run_dir, keep_through_step=step if checkpoint is not None else None,
                                  keep_rows=resume_point(checkpoint, run_dir))]
    if config.tracking.wandb != "off":
        from pipeline.training.tracking import wandb_logger

        loggers.append(wandb_logger(config, run_dir))
    # the monitor writes the member's checkpoints through ``save``; the member is made just below
    monitor = TrainingMonitor(run_dir, eval_sets["test"].pairs, loggers,
                              save=lambda path, weights_only: save(member, path, weights_only))
    if checkpoint is not None:
        module.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_states"][0])
        monitor.load_state_dict(checkpoint["callbacks"][MONITOR_STATE])
    monitor.start(step)
    t = config.training
    batches = TrainingBatches(module.task, module.vocab, seed=t.seed, batch_size=t.batch_size, pool=t.length_pool,
                              start=step)
    member = Member(config, Path(run_dir), module, monitor, batches, eval_sets, commits, optimizer, step)
    return member


def finish_member(member: Member, device: torch.device, population: list[str] | None) -> dict:
    """What a run does when its training ends: the last window and an evaluation, ``last.ckpt``, then the selected
    checkpoint evaluated and ``results.json`` written last (naming the population it trained in, if any)."""
    member.monitor.finish(member.step, member.module)
    results = final_results(member.module, member.monitor, member.step, member.eval_sets, member.run_dir,
                            member.commits, device)
    if population is not None:
        results["population"] = population
    atomic_write_text(RunDir(member.run_dir).results_file, json.dumps(results, indent=2) + "\n")
    if member.config.tracking.wandb != "off":
        from pipeline.training.tracking import log_final_results

        log_final_results(member.monitor.loggers, results)
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
        t = members[0].config.training  # what the members share (run.SHARED_TRAINING); each has its own rate
        optimizer = make_optimizer(model.ordered_parameters(), t, rates=[m.config.training.lr for m in members])
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
    """SIGINT during training, raised in place of KeyboardInterrupt, so that a stopped run says so and exits 130
    (:class:`RunStopped`)."""


class Hangup(CtrlC):
    """SIGHUP during training (the terminal that started it closed): stopped with a line and 129, as Ctrl-C is,
    where the default action ended the process without one."""


class Terminated(CtrlC):
    """SIGTERM during training (``kill``, a cluster's pre-emption, a sweep stopping its workers): raised between two
    steps, after the step in progress, and stopped with a line and 143."""


@contextmanager
def stopped_from_outside(loop: Loop, where: Path):
    """While ``loop`` trains, Ctrl-C and SIGHUP stop it at once and SIGTERM after the step in progress, each as
    :class:`RunStopped` naming ``where`` and the batch it stopped at; the handlers in force before are given back.
    (Outside the main thread, where signals cannot be handled, only the translation applies.)"""
    import threading

    def stopped(why: str, code: int) -> RunStopped:
        return RunStopped(where, min((m.step for m in loop.live), default=0), why, code)

    def interrupt(signum, frame):
        raise CtrlC()

    def hangup(signum, frame):
        raise Hangup()

    def terminate(signum, frame):
        loop.terminated = True

    handlers = {signal.SIGINT: interrupt, signal.SIGHUP: hangup, signal.SIGTERM: terminate}
    main = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()} if main else {}
    try:
        yield
    except Terminated:
        raise stopped("SIGTERM", 128 + signal.SIGTERM) from None
    except Hangup:
        raise stopped("SIGHUP (its terminal closed)", 128 + signal.SIGHUP) from None
    except CtrlC:
        raise stopped("an interrupt (Ctrl-C)", 128 + signal.SIGINT) from None
    except KeyboardInterrupt:  # off the main thread, or a SIGINT before the handler was in place
        raise stopped("an interrupt", 128 + signal.SIGINT) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class ProgressLine:
    """A single run's progress over its whole budget: "batches 41/60" counts from the batch a resumed run starts at
    (and says so), its time left measured on this session's batches only, beside its latest perplexity and
    accuracies."""

    def __init__(self, max_batches: int, console=None) -> None:
        self.max_batches = max_batches
        self._console = console
        self._progress = None
        self._task = None

    def start(self, start: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), TextColumn("{task.fields[metrics]}"), console=self._console)
        description = f"batches (resumed at {start:,})" if start else "batches"
        self._task = self._progress.add_task(description, total=self.max_batches, completed=start, metrics="")
        self._progress.start()

    def update(self, done: int, shown: dict) -> None:
        if self._progress is not None:
            metrics = "  ".join(f"{k} {float(v):.4g}" for k, v in shown.items())
            self._progress.update(self._task, completed=done, metrics=metrics)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
