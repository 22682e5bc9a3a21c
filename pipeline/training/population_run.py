"""Population training, the runs (issue 36): P runs trained together in one process (as one model on a GPU, one
after another on a CPU), each writing its own run folder exactly as a single run does, so that ``report``, ``runs``,
``dashboard``, ``inspect``, ``archive`` and a later single ``transduce train`` of any member read and resume it
unchanged.

:func:`train_population` takes P run configs that may differ in task, seed and learning rate (and the memory's start
biases) but share an architecture (:func:`population_key`). Each member is set up as :func:`~pipeline.training.run.
train` sets up its run: its folder claimed under its lock, its weights initialised from its own seed, its batches
drawn from its own stream (indexed by its own step), its :class:`~pipeline.training.monitor.TrainingMonitor` (the
same perplexity windows, evaluations, stopping rules and checkpoints), its results written last. Only the step is
shared: batched (:func:`~pipeline.training.population.population_step`), or each member's single-run step in turn
(:func:`one_after_another`). The monitor is driven through :class:`MemberTrainer`,
the few things it asks of a Lightning ``Trainer``; the checkpoints it writes are Lightning checkpoints (loops,
optimizer and monitor state) that a single run resumes from.

A member that stops (converged, plateau, pruned, its budget) is finished there (its results written) and leaves the
population, which goes on with the others and, where more runs wait than its ``width``, with the next of them in its
place. Killed (``kill -9``) and run again, every member resumes from its own ``last.ckpt``; one after another, or
batched with static shapes, the population goes on bit for bit as it would have.

On a GPU the batched step is captured once as a CUDA graph (:class:`~pipeline.training.population.CapturedStep`) and
replayed; a member that stops hands its slot to the next waiting run in place (:meth:`BatchedPopulation.replace`, no
new capture), and only when none waits is the population rebuilt around the others.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import traceback
from contextlib import ExitStack
from pathlib import Path

import lightning as L
import torch

from pipeline.config import INITIAL_VALUES, ConfigError, RunConfig, to_dict
from pipeline.data.cache import load_eval_set
from pipeline.data.stream import TrainingBatches
from pipeline.files import atomic_write_text, written_atomically
from pipeline.models import memory_of
from pipeline.provenance import check_committed
from pipeline.rundir import RunDir, failure_record
from pipeline.runlock import claim_owner, lock_owner, run_lock
from pipeline.runtime import configure_cpu_process, resolve_device
from pipeline.training.metrics_log import ResumableCSVLogger
from pipeline.training.module import TransductionModule
from pipeline.training.monitor import TrainingMonitor
from pipeline.training.population import (
    CapturedStep,
    PopulationLSTM,
    PopulationMemoryLSTM,
    PopulationRMSprop,
    population_step,
)
from pipeline.training.run import (
    EVAL_SPLITS,
    CtrlC,
    RunBusy,
    RunStopped,
    check_continuable,
    claim_run_directory,
    continuation,
    ctrl_c_as_exception,
    final_results,
    lost_its_checkpoint,
    read_checkpoint,
    record_commit,
    refuse_lost_progress,
)

# What every member of one population shares: the architecture (its parameters' shapes) and the step's arithmetic.
# Task, seed, learning rate, budget, schedules and stopping rules are each member's own.
SHARED_TRAINING = ("batch_size", "clip", "clip_mode", "rmsprop_alpha", "rmsprop_eps")


def population_key(config: RunConfig) -> tuple:
    """Runs with equal keys can train as one population: one model (the start biases aside: they are initial values,
    not shapes), one step. Tasks differ in vocabulary only between the synthetic tasks and the ITG tasks: the
    vocabulary's sizes are part of the key."""
    from pipeline.data.encoding import JointVocabulary
    from pipeline.tasks import get_task

    model = {k: v for k, v in to_dict(config.model).items() if k not in INITIAL_VALUES}
    vocab = JointVocabulary.for_config(get_task(config.task, config.length_distribution), config.model)
    training = tuple(getattr(config.training, k) for k in SHARED_TRAINING)
    return tuple(sorted(model.items())), (vocab.input_size, vocab.output_size), training


class MemberTrainer:
    """What :class:`TrainingMonitor` asks of a Lightning ``Trainer``, for one member: its step, its stop flag, its
    loggers, and checkpoints written as Lightning writes them."""

    def __init__(self, member: "Member", loggers: list) -> None:
        self.member, self.loggers, self.should_stop = member, loggers, False

    @property
    def global_step(self) -> int:
        return self.member.step

    def save_checkpoint(self, path: Path, weights_only: bool = False) -> None:
        self.member.write_checkpoint(Path(path), weights_only)


@dataclasses.dataclass(eq=False)  # a member is itself: found in lists by identity, not by comparing its tensors
class Member:
    config: RunConfig
    run_dir: Path
    module: TransductionModule
    monitor: TrainingMonitor
    batches: TrainingBatches
    eval_sets: dict
    commits: list[str]
    optimizer: torch.optim.RMSprop  # the single run's optimizer: its state is what the checkpoints hold
    step: int = 0
    index: int = 0  # its place in the population's list of runs
    trainer: MemberTrainer | None = None
    population: "BatchedPopulation | None" = None

    @property
    def done(self) -> bool:
        return self.trainer.should_stop or self.step >= self.config.training.max_batches

    def write_checkpoint(self, path: Path, weights_only: bool) -> None:
        """A Lightning checkpoint of this member at its step, as a single run's Trainer writes it mid-run."""
        if self.population is not None:
            self.population.pull(self)
        checkpoint = {"epoch": 0, "global_step": self.step, "pytorch-lightning_version": L.__version__,
                      "state_dict": self.module.state_dict(), "loops": fit_loop_state(self.step),
                      "hparams_name": None, "hyper_parameters": dict(self.module.hparams)}
        if not weights_only:
            checkpoint.update(callbacks={type(self.monitor).__name__: self.monitor.state_dict()},
                              optimizer_states=[self.optimizer.state_dict()], lr_schedulers=[])
        with written_atomically(path) as partial:  # a kill or a full disk leaves the old checkpoint or the new one
            torch.save(checkpoint, partial)


@dataclasses.dataclass(eq=False)
class BatchedPopulation:
    """The live members, their stacked model and optimizer, and the step (captured as a CUDA graph at static shapes
    on a GPU); ``pull`` copies one member's current weights and RMSProp state back into its own module and optimizer
    (for its evaluations and checkpoints)."""

    members: list[Member]
    model: torch.nn.Module
    optimizer: PopulationRMSprop
    captured: CapturedStep | None = None  # at static shapes; else population_step pads each step to its longest

    def step(self, batches: list, clip: float, length: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.captured is not None:
            return self.captured(batches)
        return population_step(self.model, self.optimizer, batches, clip, length)

    @classmethod
    def of(cls, members: list[Member], device: torch.device, length: int | None = None) -> "BatchedPopulation":
        models = [m.module.model for m in members]
        model = (PopulationLSTM if memory_of(members[0].config.model.name) is None else PopulationMemoryLSTM)(models)
        model = model.to(device)
        t = members[0].config.training
        optimizer = PopulationRMSprop(model.ordered_parameters(), [m.config.training.lr for m in members],
                                      t.rmsprop_alpha, t.rmsprop_eps)
        params = [list(m.module.model.parameters()) for m in members]
        for i, avg in enumerate(optimizer.square_avg):
            for k, m in enumerate(members):
                state = m.optimizer.state.get(params[k][i])
                if state is not None:
                    avg[k].copy_(state["square_avg"])
        population = cls(list(members), model, optimizer)  # its own list: the caller's changes as members come and go
        if length is not None:
            population.captured = CapturedStep(model, optimizer, t.clip, t.batch_size, length)
        for m in members:
            m.population = population
        return population

    @torch.no_grad()
    def pull(self, member: Member) -> None:
        k = self.members.index(member)
        for i, (name, p) in enumerate(member.module.model.named_parameters()):
            p.copy_(self.model.member(name)[k])
            state = member.optimizer.state[p]
            state["square_avg"] = self.optimizer.square_avg[i][k].detach().clone()
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
        for i, name in enumerate(self.model.names):
            self.model.member(name)[k].copy_(params[i])
            state = new.optimizer.state.get(params[i])
            self.optimizer.square_avg[i][k].copy_(state["square_avg"] if state else torch.zeros_like(params[i]))
        self.optimizer.set_rate(k, new.config.training.lr)
        self.members[k] = new
        old.population, new.population = None, self


def _scalar_dtype() -> torch.dtype:
    """The dtype torch's RMSprop keeps its step count in."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


def fit_loop_state(step: int) -> dict:
    """Lightning's loop state in a checkpoint written from ``on_train_batch_end`` at ``step`` (automatic optimisation,
    one endless epoch): what a single run's checkpoints hold, so that ``trainer.fit(ckpt_path=...)`` resumes a
    member's checkpoint at the batch after ``step``. ``tests/test_population_runs.py`` checks a single run resumes
    from it exactly."""
    def progress(done, extra=("started", "processed")):
        counts = {"ready": done, "completed": done, **{k: done for k in extra}}
        return {"total": dict(counts), "current": dict(counts)}

    batch = progress(step)
    for part in ("total", "current"):
        batch[part]["completed"] = step - 1
    zero = {"total": {"ready": 0, "completed": 0, "started": 0, "processed": 0},
            "current": {"ready": 0, "completed": 0, "started": 0, "processed": 0}}
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": step - 1},
            "epoch_loop.batch_progress": {**batch, "is_last_batch": False},
            "epoch_loop.scheduler_progress": progress(0, ()),
            "epoch_loop.automatic_optimization.state_dict": {},
            "epoch_loop.automatic_optimization.optim_progress": {
                "optimizer": {"step": progress(step, ()), "zero_grad": progress(step, ("started",))}},
            "epoch_loop.manual_optimization.state_dict": {},
            "epoch_loop.manual_optimization.optim_step_progress": progress(0, ()),
            "epoch_loop.val_loop.state_dict": {},
            "epoch_loop.val_loop.batch_progress": {**zero, "is_last_batch": False},
            "epoch_progress": {"total": {"ready": 1, "completed": 0, "started": 1, "processed": 0},
                               "current": {"ready": 1, "completed": 0, "started": 1, "processed": 0}},
        },
        "validate_loop": {"state_dict": {}, "batch_progress": {**zero, "is_last_batch": False}},
        "test_loop": {"state_dict": {}, "batch_progress": {**zero, "is_last_batch": False}},
        "predict_loop": {"state_dict": {}, "batch_progress": zero},
    }


def check_population(configs: list[RunConfig], run_dirs: list[Path]) -> None:
    """One line, before any work, where the runs cannot train as one population."""
    if not configs or len(configs) != len(run_dirs):
        raise ConfigError(f"a population needs one run directory per config, got {len(configs)} configs and "
                          f"{len(run_dirs)} directories")
    for config in configs:
        config.validate()
        if config.training.clip_mode != "norm":  # the population's step clips by each member's norm, always
            raise ConfigError(f"{config.run_id()}: training.clip_mode {config.training.clip_mode!r} is not supported "
                              "by population training, which clips each member's gradient by its norm; train the run "
                              "on its own (transduce train, or a sweep without --population)")
        if config.model.bottom_read_heard_from is not None:  # its mask follows each member's own batch count
            raise ConfigError(f"{config.run_id()}: model.bottom_read_heard_from "
                              f"({config.model.bottom_read_heard_from}) is not supported by population training; "
                              "train the run on its own (transduce train, or a sweep without --population)")
    keys = [population_key(c) for c in configs]
    for config, key in zip(configs, keys):
        if key != keys[0]:
            raise ConfigError(f"{config.run_id()} cannot train in one population with {configs[0].run_id()}: a "
                              "population's runs share the model (name, sizes), the vocabulary's sizes and "
                              f"training's {', '.join(SHARED_TRAINING)}")
    if len({Path(d).resolve() for d in run_dirs}) != len(run_dirs):
        raise ConfigError("a population's runs need a directory each; two members were given the same one")


def admit(config: RunConfig, run_dir: Path) -> bool:
    """Everything that would refuse a member, checked for every member before any trains (the caller holds its
    lock): a folder of another config, results of another config, a run that cannot continue, a lost or unreadable
    ``last.ckpt``. False when the run's results already answer its config (nothing to train)."""
    check_continuable(config, run_dir, False, False)
    claim_run_directory(config, run_dir)
    folder = RunDir(run_dir)
    stored = folder.read_results()
    if stored is not None and continuation(stored, config, False) is None:
        return False
    if folder.last_checkpoint.exists():
        read_checkpoint(folder.last_checkpoint, run_dir, config)  # damaged or another run's: named now
    else:
        refuse_lost_progress(run_dir, config.training.checkpoint_every)
    return True


def open_member(config: RunConfig, run_dir: Path, cache_dir: Path | None, device: torch.device) -> Member:
    """Set up one admitted member (:func:`admit`) as :func:`~pipeline.training.run.train` sets up its run."""
    folder = RunDir(run_dir)
    if folder.read_results() is not None:
        folder.archive_results()  # its budget was raised since: keep what it reported, go on
    commits = record_commit(run_dir)
    eval_sets = {split: load_eval_set(config.task, split, cache_dir, config.length_distribution)
                 for split in EVAL_SPLITS}
    monitor = TrainingMonitor(run_dir, eval_sets["test"].pairs)
    monitor.progress_bar = False
    last = monitor.last_path if monitor.last_path.exists() else None
    L.seed_everything(config.training.seed, workers=True, verbose=False)  # the single run's initialisation
    module = TransductionModule.from_config(config).to(device)
    optimizer = module.configure_optimizers()
    step = 0
    if last is not None:
        checkpoint = read_checkpoint(last, run_dir)
        module.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_states"][0])
        monitor.load_state_dict(checkpoint["callbacks"][type(monitor).__name__])
        step = checkpoint["global_step"]
        monitor.restore_windows(step)
    t = config.training
    batches = TrainingBatches(module.task, module.vocab, seed=t.seed, batch_size=t.batch_size, pool=t.length_pool,
                              start=step)
    member = Member(config, Path(run_dir), module, monitor, batches, eval_sets, commits, optimizer, step)
    loggers = [ResumableCSVLogger(run_dir, keep_through_step=step if last is not None else None)]
    if config.tracking.wandb != "off":
        from pipeline.training.tracking import wandb_logger

        loggers.append(wandb_logger(config, run_dir))
    member.trainer = MemberTrainer(member, loggers)
    if monitor.stop_reason is not None:  # resumed after it had stopped: nothing left to train
        member.trainer.should_stop = True
    return member


def finish_member(member: Member, device: torch.device, population: list[str]) -> dict:
    """What a single run does when its loop ends: the last window and an evaluation, ``last.ckpt``, then the
    selected checkpoint evaluated and ``results.json`` written last (naming the population it trained in)."""
    member.monitor.on_train_end(member.trainer, member.module)
    results = final_results(member.module, member.monitor, member.step, member.eval_sets, member.run_dir,
                            member.commits, device)
    results["population"] = population
    atomic_write_text(RunDir(member.run_dir).results_file, json.dumps(results, indent=2) + "\n")
    if member.config.tracking.wandb != "off":
        from pipeline.training.tracking import log_final_results

        log_final_results(member.trainer.loggers, results)
    return results


def static_length() -> int:
    """The longest joint sequence of training: ``<s> source <|> target </s>`` at the longest training source (every
    task's target is as long as its source)."""
    from pipeline.tasks.base import SPLITS

    return 2 * SPLITS["train"][1] + 3


def train_population(configs: list[RunConfig], run_dirs: list[Path], *, cache_dir: Path | None = None,
                     accelerator: str = "auto", static_shapes: bool | None = None,
                     width: int | None = None, batched: bool | None = None,
                     restart_lost: bool = False) -> list[dict | None]:
    """Train (or resume, or return the results of) the runs ``configs`` in ``run_dirs`` as one population, at most
    ``width`` of them at a time (None: all): when a member stops, it is finished (its results written) and the next
    run waiting takes its place. Returns each run's results, in order (None for a run whose training failed: its
    ``failed.json`` says why; the others go on). Raises :class:`RunBusy` if another process trains one of them,
    :class:`RunStopped` on SIGTERM or Ctrl-C (every member resumes from its last checkpoint when run again).

    ``batched`` (default: on a GPU) steps the members as one model (:func:`~pipeline.training.population.
    population_step`); otherwise each member takes its single run's step in turn, with its own fused modules: on a
    CPU, which is bound by arithmetic, batching members buys nothing and costs their padding (``docs/training.md``).
    ``static_shapes`` (batched only; default: on a GPU) pads every step to :func:`static_length`, the shape a
    captured step needs; then no member's arithmetic depends on the others' batches, so a population killed between
    two members' checkpoints resumes bit for bit. Without it each step is padded to its longest batch only.
    ``restart_lost`` (the sweep's choice) trains a member whose checkpoint is gone again from batch 0
    (:func:`~pipeline.training.run.lost_its_checkpoint`), where it would otherwise be refused."""
    run_dirs = [Path(d) for d in run_dirs]
    configs = [config.resolved() for config in configs]  # as train() does: the models' starts as this code defines
    check_population(configs, run_dirs)
    check_committed()
    if width is not None and width < 1:
        raise ConfigError(f"a population's width must be at least 1, got {width!r}")
    device = resolve_device(accelerator)
    batched = device.type == "cuda" if batched is None else batched
    length = static_length() if (device.type == "cuda" if static_shapes is None else static_shapes) else None
    ids = [c.run_id() for c in configs]
    results: list[dict | None] = [None] * len(configs)
    with ExitStack() as locks:
        for run_dir in run_dirs:  # every run of the population is taken before any trains
            lock = locks.enter_context(run_lock(run_dir))
            if not lock:
                owner = lock_owner(run_dir)
                raise RunBusy(f"{run_dir} is being trained by another process{f' ({owner})' if owner else ''}; "
                              "wait for it to end, or stop it first")
            claim_owner(lock)
        if restart_lost:
            for config, run_dir in zip(configs, run_dirs):
                if lost_its_checkpoint(run_dir, config):
                    RunDir(run_dir).clear()
        configure_cpu_process()
        waiting, live = [], []
        for k, (config, run_dir) in enumerate(zip(configs, run_dirs)):  # every refusal before any training
            if admit(config, run_dir):
                waiting.append(k)
            else:
                results[k] = RunDir(run_dir).read_results()

        def leave(member: Member) -> None:
            if not RunDir(member.run_dir).failed_file.exists():
                results[member.index] = finish_member(member, device, ids)

        def newcomer() -> Member | None:
            """The next waiting run, opened (eval sets, model, checkpoint) only now; one resumed after it had
            stopped is finished at once and the next taken."""
            while waiting:
                k = waiting.pop(0)
                member = open_member(configs[k], run_dirs[k], cache_dir, device)
                member.index = k
                if not member.done:
                    return member
                leave(member)
            return None

        previous = _stop_on_sigterm()
        try:
            with ctrl_c_as_exception():
                while (width is None or len(live) < width) and (member := newcomer()) is not None:
                    live.append(member)
                together = None
                while live:
                    together = _train_until_one_stops(live, device, length, batched, together)
                    for member in [m for m in live if m.done]:
                        if together is not None:
                            together.pull(member)  # its final weights, for its last evaluation
                        new = newcomer()
                        if together is not None and together.captured is not None and new is not None:
                            together.replace(member, new)  # into its slot: the captured step goes on, no new capture
                            live[live.index(member)] = new
                        else:
                            live.remove(member)
                            live.extend([new] if new is not None else [])
                            if together is not None:  # rebuilt around the others next time
                                together.release()
                                together = None
                        leave(member)
        except (CtrlC, _Stopped) as stopped:
            why, code = (("SIGTERM", 128 + signal.SIGTERM) if isinstance(stopped, _Stopped)
                         else ("an interrupt (Ctrl-C)", 128 + signal.SIGINT))
            raise RunStopped(run_dirs[0].parent, min((m.step for m in live), default=0), why, code) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
    return results


class _Stopped(Exception):
    """SIGTERM while a population trains."""


def _stop_on_sigterm():
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise _Stopped()

    return signal.signal(signal.SIGTERM, stop)


def _train_until_one_stops(live: list[Member], device: torch.device, length: int | None, batched: bool,
                           together: BatchedPopulation | None) -> BatchedPopulation | None:
    """Step the live members together until one of them stops: batched, as one model (``together``, built here if
    None, and returned for the caller to refill or release), or one after another."""
    if batched and together is None:
        together = BatchedPopulation.of(live, device, length)
    clip = live[0].config.training.clip
    while not any(m.done for m in live):
        batches = [m.batches.batch(m.step) for m in live]
        if together is not None:
            nll, tokens = together.step(batches, clip, length)
        else:
            nll, tokens = one_after_another(live, batches, clip)
        nll, tokens = nll.cpu(), tokens.cpu()  # one copy to the host a step, not one per member
        for k, member in enumerate(live):
            member.step += 1
            if not torch.isfinite(nll[k]):  # this member fails, as its single run would; the others go on
                _fail(member, f"FloatingPointError: training loss is {nll[k].item()} at batch {member.step}")
                continue
            try:
                if together is not None and member.step % member.config.training.eval_every == 0:
                    together.pull(member)  # the monitor evaluates the member's own module
                member.monitor.on_train_batch_end(member.trainer, member.module,
                                                  {"nll": nll[k], "tokens": tokens[k]}, None, member.step - 1)
            except (ArithmeticError, ValueError, RuntimeError) as error:  # its window, its evaluation: its failure
                _fail(member, f"{type(error).__name__}: {error} (at batch {member.step})", traceback.format_exc())
    return together


def one_after_another(live: list[Member], batches: list, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Each member's single-run step on its own batch (its module's ``training_step``, Lightning's norm clipping,
    its RMSprop): what ``train`` does, without the Trainer. Returns the summed target NLLs and token counts (P,); a
    member whose loss is not finite is not stepped."""
    nlls, counts = [], []
    for member, batch in zip(live, batches):
        nll, tokens = member.module.target_nll(batch.to(member.module.device))
        nlls.append(nll.detach())
        counts.append(tokens)
        if torch.isfinite(nll):
            (nll / tokens).backward()
            torch.nn.utils.clip_grad_norm_(member.module.parameters(), clip)
            member.optimizer.step()
        member.optimizer.zero_grad()
    return torch.stack(nlls), torch.stack(counts)


def _fail(member: Member, error: str, trace: str = "") -> None:
    """This member fails, as its single run would; the population goes on without it."""
    member.trainer.should_stop = True
    RunDir(member.run_dir).write_failure(failure_record(error, trace))
