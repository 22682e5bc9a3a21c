"""The settings: frozen dataclasses that mirror the YAML files under ``configs/`` (a run: :class:`RunConfig`; a
profile: :class:`SweepConfig`), each validated before any compute starts, and what makes a run's id."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pipeline.config.plain import _merge, _merged, config_hash, from_dict, to_dict
from pipeline.config.values import (
    ConfigError,
    _at_most,
    _choice,
    _describe,
    _join,
    _positive,
    check_population_size,
)
from pipeline.registry import LazyField, LazyNames  # no torch here: the model registry is imported when first read

# The registered architectures (pipeline.models.MODELS), read live: a model registered later is valid too.
MODEL_NAMES = LazyNames("pipeline.models", "MODELS")


MODEL_STARTS = LazyField("pipeline.models", "MODELS", "start")  # each one's start (ModelConfig.resolved)


MODEL_CHECKS = LazyField("pipeline.models", "MODELS", "check")  # each one's checks of its settings (validate)


# Bounds checked before anything is created: a width past this (the paper's largest is 512) would ask for gigabytes
# before the first batch (--hidden 1000000000 raised MemoryError); a seed past 2**32 - 1 is one Lightning would
# silently replace by a random one.
MAX_WIDTH = 8_192  # 16x the paper's largest; an 8-layer LSTM that wide is already ~8 GB of weights and state


MAX_SEED = 2**32 - 1


# A start bias (ModelConfig.push_bias and the DeQue's bottom biases) left at this takes its model's own start.
MODEL_START = "default"


START_BIASES = ("push_bias", "bottom_push_bias", "bottom_pop_bias")


# The model keys that set initial values, not shapes: runs that differ only in them can train as one population,
# each member starting from its own (pipeline.training.run.population_key)
INITIAL_VALUES = ("pop_bias", "forget_bias", *START_BIASES)


MAX_BIAS = 20.0  # a sigmoid's bias past this fixes its gate at 0 or 1 to float32 precision: no start, a constant


POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "none", "randomised")  # ModelConfig.positional_encoding


MAX_LAYERS = 64  # Transformer blocks: far past any baseline's; bounds the weights asked for before the first batch


MAX_STACK_DEPTH = 8_192  # Joulin-Mikolov stack rows: 8 times the longest joint sequence evaluated


@dataclass(frozen=True)
class ProbeConfig:
    """Probes of the memory's start that the recipe study asked questions with (reports/recipe/study-log.md §7):
    how loudly the controller first hears the DeQue's bottom read, and how loud the memory's values start. They
    answer a study's question; no profile's result sets one, none is on by default, and models with one read ignore
    the bottom-read ones. In YAML they sit apart from what a user sets: ``model: {probes: {value_gain: 4.0}}``."""

    # The DeQue's bottom read as the controller first hears it: its input weights start scaled by this (0: unheard
    # until training makes the controller listen). null keeps nn.LSTMCell's initialisation; models with one read
    # ignore it. It asked whether the bottom read pulls the DeQue off reversal's turn. With bottom_read_heard_from,
    # the scale the held weights wait at (there null means 0).
    bottom_read_gain: float | None = None
    # The values as the memory first receives them: the value head's initial weights and bias (v = tanh(W_v o' +
    # b_v), §3.4) scaled by this. At nn.Linear's initialisation v starts at ~0.06 rms, so the reads move the
    # controller's gates about a tenth as much as the input embedding does. null keeps nn.Linear's initialisation.
    # It asked whether a memory heard from the start turns the DeQue on reversal.
    value_gain: float | None = None
    # The DeQue's bottom read unheard for the first batches: masked out of the controller's input, its input
    # weights waiting (no gradient reaches them) until this many batches have trained, then trained as any weight.
    # They wait at bottom_read_gain times nn.LSTMCell's initialisation, null meaning 0 here (grown from 0 after the
    # release). This key at null: heard from the start, the paper's model. With the bottom read unheard the
    # quiet-bottom DeQue's top turned on reversal where with it heard the same seeds did not; copy needs that read
    # early. Models with one read ignore it.
    bottom_read_heard_from: int | None = None
    # The ablation that tells a memory used from one unused (issue 78): every read the controller would hear is
    # replaced by zeros (its input columns masked, so no gradient reaches their weights either), the memory otherwise
    # as it is. Trained from the same seed to the same batch as a run, a curve that matches that run's says its
    # memory was unused. Not stacked in a batched population.
    read_zeroed: bool = False

    def validate(self, path: str) -> None:
        if not isinstance(self.read_zeroed, bool):
            raise ConfigError(f"{path}.read_zeroed must be true or false, got {self.read_zeroed!r}")
        if self.bottom_read_gain is not None and not 0 <= self.bottom_read_gain <= 1:
            raise ConfigError(f"{path}.bottom_read_gain must lie in [0, 1] (a scale of the initial weights) or be "
                              f"null, got {self.bottom_read_gain!r}")
        if self.bottom_read_heard_from is not None:
            if isinstance(self.bottom_read_heard_from, bool) or not isinstance(self.bottom_read_heard_from, int) \
                    or self.bottom_read_heard_from < 0:
                raise ConfigError(f"{path}.bottom_read_heard_from must be a batch count >= 0 or null, got "
                                  f"{self.bottom_read_heard_from!r}")
        if self.value_gain is not None and not (math.isfinite(self.value_gain) and self.value_gain > 0):
            raise ConfigError(f"{path}.value_gain must be a positive finite number (a scale of the initial weights) "
                              f"or null, got {self.value_gain!r}")


@dataclass(frozen=True)
class ModelConfig:
    """One architecture (paper §3.4, §4.4). ``name`` is a key of :data:`MODEL_NAMES`."""

    name: str = "stack"
    hidden: int = 256  # LSTM hidden size: 256 or 512 in the paper (a Transformer's width: half of it, model.width)
    memory_width: int = 256  # m, the width of the memory's value rows
    embedding: int = 64  # input and output embedding size (§4)
    pop_bias: float = -1.0  # initial bias of every pop signal (appendix B)
    implementation: Literal["fused", "reference"] = "fused"  # memory models: same maths, fused is faster
    # How target symbols are read back after the separator. "separate": their own input ids, the paper's
    # "separate word-to-index mappings ... for source and target vocabularies" (§4). "shared": through the source
    # symbol's id when the task's source and target alphabets are the same (the synthetic tasks); tasks whose
    # alphabets differ (the ITG tasks) keep separate ids. docs/recipe.md measures what it changes.
    target_inputs: Literal["separate", "shared"] = "separate"
    # The order the source is read in: "forward", the paper's; "reversed", Sutskever et al. (2014)'s trick for
    # sequence-to-sequence LSTMs (short dependencies between a source's start and its target's start). A baseline
    # screen's option (reports/cpu/study-log.md): it changes what a task asks (reversal read reversed is copy), so
    # never a default.
    source_order: Literal["forward", "reversed"] = "forward"
    # The initial bias of every LSTM forget gate (each layer of a deep LSTM, a memory model's controller): null keeps
    # PyTorch's initialisation (about 0); 1 is Jozefowicz et al. (2015)'s remedy for gradients that vanish early.
    forget_bias: float | None = None
    # Width of o = tanh(W_o h + b_o) before the output embedding; None: the embedding size (§3.4, Table 2).
    readout_width: int | None = None
    # The memory's start: the initial biases of its push signals (and, for the DeQue, of its bottom end's pop) that
    # decide what the controller first does with the memory (appendix B's failure mode: a controller that starts by
    # popping more than it pushes uses the memory as an extra recurrent layer). The paper states none. "default"
    # takes the model's own start (its registry entry's ``start``, pipeline/models/__init__.py), measured on 16 seeds
    # nobody tuned on (reports/recipe/study-log.md §7): the Stack and the Queue push at +1 (d starts near 0.73,
    # against the pop's ~0.27); the DeQue's top end keeps nn.Linear's initialisation and its bottom end starts all but
    # still (push and pop at -4), a documented deviation. A number sets the bias; null keeps nn.Linear's
    # initialisation (about 0, so d starts near 0.5), the Stack's and Queue's start before the study measured theirs,
    # which the cpu and recipe profiles pin so that their archived runs keep their ids. The bottom biases are the
    # DeQue's bottom end's (null: as the top's); models without a bottom end ignore them. "default" is resolved where
    # a run becomes concrete (:meth:`resolved`): its id, its stored config.yaml and the model built, so a stored run
    # never changes meaning with a later default.
    push_bias: float | None | Literal["default"] = MODEL_START
    bottom_push_bias: float | None | Literal["default"] = MODEL_START
    bottom_pop_bias: float | None | Literal["default"] = MODEL_START
    # The modern baselines beside the paper (docs/models.md); every other model ignores these keys. The Transformer's
    # positions (POSITIONAL_ENCODINGS): "sinusoidal" (Vaswani et al. 2017), "learned" (an absolute table as long as
    # the longest joint sequence evaluated), "none" (causal masking alone) or "randomised" (Ruoss et al. 2023: an
    # ordered random subset of a range far longer than any sequence, drawn per sequence).
    positional_encoding: Literal[POSITIONAL_ENCODINGS] = "sinusoidal"
    layers: int = 4  # the Transformer's blocks (pre-LayerNorm)
    heads: int = 4  # its attention heads; they divide its width
    # Its model width; null: half of hidden, so a grid's hidden axis scales it as it scales the LSTMs, and at hidden
    # 256 (width 128, 4 blocks, feed-forward 384) it has 703,297 parameters, the Stack-LSTM 700,099 (Table 2).
    width: int | None = None
    feedforward: int | None = None  # its feed-forward layer's width; null: 3 times its width
    # The Joulin-Mikolov stack's depth (rows below it fall off; zeros below the bottom) and how many of its top rows
    # the controller reads; its rows are memory_width wide. 1024: deeper than any source evaluated (512), so the
    # bound never cuts a stack that holds the source, as the neural Stack has none.
    stack_depth: int = 1024
    stack_read: int = 1
    # Study-only probes of the memory's start (ProbeConfig): none is set by any result the reports give.
    probes: ProbeConfig = field(default_factory=lambda: ProbeConfig())

    def resolved(self) -> ModelConfig:
        """This config with every start bias left at "default" set to its model's own start."""
        start = MODEL_STARTS.get(self.name)
        if start is None:  # validation names the unknown model; nothing to resolve it against
            return self
        changes = {key: start[key] for key in START_BIASES if getattr(self, key) == MODEL_START}
        return dataclasses.replace(self, **changes) if changes else self

    def validate(self, path: str) -> None:
        _choice(f"{path}.name", self.name, MODEL_NAMES)
        for key in ("hidden", "memory_width", "embedding"):
            _positive(f"{path}.{key}", getattr(self, key))
            _at_most(f"{path}.{key}", getattr(self, key), MAX_WIDTH)
        for key in ("pop_bias", *START_BIASES):  # a gate's initial bias: NaN or inf would train as NaN from batch 1
            value = getattr(self, key)
            if value is None or value == MODEL_START:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or abs(value) > MAX_BIAS:
                meaning = "" if key == "pop_bias" else "; null: nn.Linear's, default: the model's"
                raise ConfigError(f"{path}.{key} must be a finite number in [-{MAX_BIAS:g}, {MAX_BIAS:g}] (a signal's "
                                  f"initial bias{meaning}), got {value!r}")
        _choice(f"{path}.source_order", self.source_order, ("forward", "reversed"))
        if self.forget_bias is not None and (isinstance(self.forget_bias, bool) or not isinstance(
                self.forget_bias, (int, float)) or not math.isfinite(self.forget_bias) or abs(self.forget_bias) > 10):
            raise ConfigError(f"{path}.forget_bias must be a finite number in [-10, 10] (the forget gates' initial "
                              f"bias) or null, got {self.forget_bias!r}")
        self.probes.validate(f"{path}.probes")
        if self.readout_width is not None:
            _positive(f"{path}.readout_width", self.readout_width)
            _at_most(f"{path}.readout_width", self.readout_width, MAX_WIDTH)
        _choice(f"{path}.positional_encoding", self.positional_encoding, POSITIONAL_ENCODINGS)
        sizes = {"layers": MAX_LAYERS, "heads": MAX_WIDTH, "width": MAX_WIDTH, "feedforward": MAX_WIDTH,
                 "stack_depth": MAX_STACK_DEPTH, "stack_read": MAX_STACK_DEPTH}  # the modern baselines' sizes
        for key, limit in sizes.items():
            value = getattr(self, key)
            if value is None and key in ("width", "feedforward"):  # null: from hidden (models.transformer_sizes)
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise ConfigError(f"{path}.{key} must be a whole number in [1, {limit:,}], got {value!r}")
        check = MODEL_CHECKS.get(self.name)  # what its architecture asks of these together (its registry entry)
        problem = check(self) if check is not None else None
        if problem:
            raise ConfigError(f"{path}.{problem}")


PROBE_KEYS = tuple(f.name for f in dataclasses.fields(ProbeConfig))


def model_settings(model: ModelConfig) -> dict:
    """A model config as one flat mapping, its probes beside the other keys: the layout run ids are hashed over
    (the probes' own section came later; ids made before it keep their value) and populations are grouped by."""
    settings = to_dict(model)
    settings.update(settings.pop("probes"))
    return settings


@dataclass(frozen=True)
class TrainingConfig:
    """Optimisation and the training schedule (paper §4.4)."""

    lr: float = 1e-3
    batch_size: int = 10
    max_batches: int = 20_000
    seed: int = 0
    clip: float = 1.0  # gradients clipped at 1 (§4.4) ...
    clip_mode: Literal["norm", "value"] = "norm"  # ... "clipping all gradients above 1" allows either reading
    # The paper's optimiser, RMSProp (§4.4), for every model by default; "adam" (torch.optim.Adam at its defaults:
    # betas 0.9 / 0.999, eps 1e-8) for the modern baselines' usual recipe (docs/training.md). A single run's, or a
    # population stepped one member after another: a batched population steps RMSProp only.
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    # RMSProp as in Tieleman & Hinton's lecture (the paper's [18]): a 0.9 running average of squared gradients.
    # (PyTorch's default, 0.99, left the Stack-LSTM on reversal in the non-stack basin on 3 of 3 seeds that learn
    # with 0.9: docs/training.md.)
    rmsprop_alpha: float = 0.9
    rmsprop_eps: float = 1e-8
    length_pool: int = 10  # batches drawn together and regrouped by length to cut padding (1 = off)
    perplexity_every: int = 100  # average training perplexity window (§4.4)
    eval_every: int = 1000  # coarse/fine accuracy every N batches (§4.4)
    eval_size: int = 1000  # fresh training-length sequences per evaluation
    test_eval_size: int = 1000  # cached test-length sequences per evaluation (at most the cached 1000)
    final_eval_size: int = 1000  # cached sequences per split in the final evaluation (1000: the paper's)
    # Sequences per band of source length out to 512 (pipeline.generalisation) the final evaluation also scores,
    # into far_lengths.csv; 0: not measured. A measurement only: not part of the run's identity.
    far_eval_size: int = 0
    checkpoint_every: int = 500  # "last" checkpoint for resuming after a crash
    early_stop_patience: int = 3  # stop once training coarse accuracy has been 1.0 for this many evaluations (0: off)
    early_stop_coarse: float = 1.0  # ... or at least this (a study that only asks "when did it learn" uses 0.99)
    # Trained to convergence: stop once training perplexity is flat (stopping.plateaued): over a window of
    # plateau_patience evaluations or plateau_window_fraction of the batches trained, the larger, it has not beaten its
    # reference by more than plateau_tolerance (relative, in perplexity) and its mean is within the tolerance of the
    # window before's, in perplexity and in cross-entropy beyond its noise (0: off); with prune_at, counted from its
    # last batch on.
    plateau_patience: int = 0
    plateau_window_fraction: float = 0.1
    plateau_tolerance: float = 0.01
    # ... counted only once the run has left its starting plateau (stopping.left_start): for the deep LSTMs, which sit
    # near the uniform guess for thousands of batches before they learn (Fig. 2b) and have no pruning to judge that.
    plateau_after_leaving_start: bool = False
    # Pruning: at each batch listed, stop the run (as "pruned", not failed) if its training perplexity is still above
    # prune_ratio × its first window's. pipeline/training/stopping.py states the rules.
    prune_at: tuple[int, ...] = ()
    prune_ratio: float = 0.5

    def validate(self, path: str) -> None:
        _positive(f"{path}.lr", self.lr)
        for key in ("batch_size", "max_batches", "length_pool", "perplexity_every", "eval_every", "eval_size",
                    "checkpoint_every"):
            _positive(f"{path}.{key}", getattr(self, key))
        _positive(f"{path}.clip", self.clip)
        if self.eval_every < self.perplexity_every:  # else the first checkpoints have no perplexity to select by
            raise ConfigError(f"{path}.eval_every must be at least perplexity_every ({self.perplexity_every}): an "
                              f"evaluation before the first perplexity window leaves the checkpoint it may select "
                              f"without a training perplexity; got {self.eval_every!r}")
        if not 0 < self.rmsprop_alpha < 1:
            raise ConfigError(f"{path}.rmsprop_alpha must lie in (0, 1), got {self.rmsprop_alpha!r}")
        _positive(f"{path}.rmsprop_eps", self.rmsprop_eps)
        if not 0 <= self.far_eval_size <= 1000:
            raise ConfigError(f"{path}.far_eval_size must lie in [0, 1000] (0: not measured; else sequences per "
                              f"band), got {self.far_eval_size!r}")
        for key in ("test_eval_size", "final_eval_size"):
            if not 1 <= getattr(self, key) <= 1000:
                raise ConfigError(f"{path}.{key} must lie in [1, 1000] (the cached sets' size), got "
                                  f"{getattr(self, key)!r}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"{path}.seed must lie in [0, {MAX_SEED}] (what seeds torch, numpy and Lightning alike), "
                              f"got {self.seed!r}")
        for key in ("plateau_patience",):
            if getattr(self, key) < 0:
                raise ConfigError(f"{path}.{key} must be >= 0 (0 turns it off), got {getattr(self, key)!r}")
        fraction = self.plateau_window_fraction
        if not (math.isfinite(fraction) and 0 <= fraction < 0.5):
            raise ConfigError(f"{path}.plateau_window_fraction must lie in [0, 0.5) (the share of the batches trained "
                              "that the plateau rule judges a run on; 0: plateau_patience evaluations alone; from 0.5 "
                              f"two windows never fit in the batches trained), got {fraction!r}")
        for key in ("plateau_tolerance", "prune_ratio"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"{path}.{key} must lie in (0, 1), got {getattr(self, key)!r}")
        # A checkpoint at or past the budget never fires; a run's folder may hold one (a run cut at a rung of
        # successive halving trains to the rung with its block's checkpoints), what a user writes may not
        # (check_prune_checkpoints, where a profile or a command's config is read).
        for i, batch in enumerate(self.prune_at):
            if batch <= 0 or batch % self.perplexity_every:
                raise ConfigError(f"{path}.prune_at[{i}] must be a positive multiple of perplexity_every "
                                  f"({self.perplexity_every}), got {batch!r}")

        if not 0 < self.early_stop_coarse <= 1:
            raise ConfigError(f"{path}.early_stop_coarse must lie in (0, 1], got {self.early_stop_coarse!r}")
        if self.early_stop_patience < 0:
            raise ConfigError(f"{path}.early_stop_patience must be >= 0 (0 turns early stopping off), got "
                              f"{self.early_stop_patience!r}")

    def check_prune_checkpoints(self, path: str) -> None:
        """Refuse a pruning checkpoint that the budget never reaches (a typo, or a budget cut below it)."""
        for i, batch in enumerate(self.prune_at):
            if batch >= self.max_batches:
                raise ConfigError(f"{path}.prune_at[{i}] must lie below max_batches ({self.max_batches}): a run never "
                                  f"reaches it; got {batch!r}")


@dataclass(frozen=True)
class TrackingConfig:
    """Where metrics go besides the CSV log, which is always written (it is what reports are made from)."""

    wandb: Literal["offline", "online", "off"] = "offline"
    project: str = "transduce"

    def validate(self, path: str) -> None:
        _choice(f"{path}.wandb", self.wandb, ("offline", "online", "off"))
        # W&B's own limit on a project's name (longer ones fail inside wandb.init, after the run folder is made)
        if not isinstance(self.project, str) or not 1 <= len(self.project) <= MAX_PROJECT \
                or any(c in self.project for c in "/\\#?%:"):
            shown = repr(self.project) if len(str(self.project)) <= 60 else f"one of {len(self.project)} characters"
            raise ConfigError(f"{path}.project must be 1 to {MAX_PROJECT} characters without / \\ # ? % or :, got "
                              f"{shown}")


MAX_PROJECT = 128  # characters in a W&B project name


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run."""

    task: str = "reversal"
    # How the ITG tasks' source lengths are distributed in every split (pipeline.tasks.LENGTH_DISTRIBUTIONS):
    # "uniform", §4.2's "relatively uniform distribution" of lengths; "grammar", the grammars' own skewed lengths.
    # The synthetic tasks' lengths are uniform whatever this says. docs/tasks.md gives both readings.
    length_distribution: Literal["uniform", "grammar"] = "uniform"
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    def validate(self, path: str = "") -> None:
        from pipeline.tasks import TASK_NAMES

        _choice(_join(path, "task"), self.task, TASK_NAMES)
        self.model.validate(_join(path, "model"))
        self.training.validate(_join(path, "training"))
        self.tracking.validate(_join(path, "tracking"))

    def identity(self) -> dict:
        """Everything that changes the result, except the budget: a run trained longer is the same run extended
        (``max_batches`` raised later resumes it). Tracking settings change nothing either. Two configs with one
        identity are one run.

        ``length_distribution`` is part of it only where it changes the data, and not at "grammar", the lengths
        every run made before the setting existed was trained on: so those runs keep their ids; likewise the
        training and model keys of :data:`LATER_TRAINING_KEYS` and :data:`LATER_MODEL_KEYS` at their earlier value."""
        from pipeline.tasks import has_length_choice

        training = _without_later_keys(to_dict(self.training), LATER_TRAINING_KEYS)
        for key in ("max_batches", *MEASUREMENT_KEYS):
            del training[key]
        model = _without_later_keys(model_settings(self.model.resolved()), LATER_MODEL_KEYS)
        identity = {"task": self.task, "model": model, "training": training}
        if self.length_distribution != LEGACY_LENGTH_DISTRIBUTION and has_length_choice(self.task):
            identity["length_distribution"] = self.length_distribution
        return identity

    def resolved(self) -> RunConfig:
        """This config with its model's start biases resolved (:meth:`ModelConfig.resolved`): what a run stores."""
        model = self.model.resolved()
        return self if model is self.model else dataclasses.replace(self, model=model)

    def run_id(self) -> str:
        """A readable id plus a hash of :meth:`identity`."""
        m, t = self.model, self.training
        return f"{self.task}-{m.name}-h{m.hidden}-lr{t.lr:g}-s{t.seed}-{config_hash(self.identity())}"


# Training and model keys added after runs were archived, with the value every earlier run had: a run at that value
# keeps the id it had before the key existed (so archived runs and the profiles that list them still match).
# plateau_window_fraction came with version 2 of the plateau rule (stopping.PLATEAU_RULE): the runs stopped by
# version 1 keep their ids and are judged again by version 2 (the same run, trained on: pipeline.sweep.grid).
LATER_TRAINING_KEYS = {"plateau_after_leaving_start": False, "plateau_window_fraction": 0.1, "optimizer": "rmsprop"}


# Training keys that add a measurement to a run's outputs and change nothing it trains or reports in Table 3: never
# part of its identity (the runs of a profile that starts measuring keep their ids, and go on).
MEASUREMENT_KEYS = ("far_eval_size",)


LATER_MODEL_KEYS = {"bottom_read_gain": None, "value_gain": None, "bottom_read_heard_from": None, "read_zeroed": False,
                    "source_order": "forward", "forget_bias": None,
                    # the Transformer's and the Joulin-Mikolov stack's, which came with them (docs/models.md)
                    "positional_encoding": "sinusoidal", "layers": 4, "heads": 4, "width": None, "feedforward": None,
                    "stack_depth": 1024, "stack_read": 1}


def _without_later_keys(section: dict, later: dict) -> dict:
    """``section`` less the keys of ``later`` that hold their earlier value (see :data:`LATER_TRAINING_KEYS`)."""
    return {k: v for k, v in section.items() if not (k in later and v == later[k])}


# What a stored run config without ``length_distribution`` was trained on: the key came with the uniform reading.
LEGACY_LENGTH_DISTRIBUTION = "grammar"


# Where each grid axis, and each `transduce train` option, sits in a run config: one table for both.
GRID_AXES = {"task": ("task",), "model": ("model", "name"), "hidden": ("model", "hidden"), "lr": ("training", "lr"),
             "seed": ("training", "seed")}


@dataclass(frozen=True)
class Halving:
    """Successive halving over a grid block's learning rates (the paper grid-searched five, §4.4) and its memory
    starts (``starts``): the runs of the block that differ only in ``lr`` and start (one bracket per task, model,
    hidden size and seed; with ``seeds_together``, per task, model and hidden size) all train to ``at[0]`` batches;
    the ``keep[0]`` settings with the lowest training perplexity there go on to ``at[1]``, and so on; those left
    after the last rung train to the block's ``max_batches``. The others stop where they were cut (state *pruned*).
    Only training perplexity decides, as in the paper's selection (§5). ``pipeline/sweep/halving.py`` plans it."""

    at: tuple[int, ...]  # the rungs, in batches, increasing
    keep: tuple[int, ...]  # how many settings of a bracket go on past each rung, decreasing, at least 1
    # One bracket for all the block's seeds: a setting's seeds go on or stop together, ranked by the mean of their
    # standings, so that one seed's luck does not pick the setting and the survivor has every seed of the block.
    # False: a bracket per seed.
    seeds_together: bool = False

    def validate(self, path: str, settings: int) -> None:
        if not self.at or len(self.at) != len(self.keep):
            raise ConfigError(f"{path}.at and {path}.keep must list one value per rung, as many of each; got "
                              f"{list(self.at)} and {list(self.keep)}")
        if any(b <= a for a, b in zip(self.at, self.at[1:])) or self.at[0] <= 0:
            raise ConfigError(f"{path}.at must be positive and increasing, got {list(self.at)}")
        if any(b >= a for a, b in zip(self.keep, self.keep[1:])) or self.keep[-1] < 1 or self.keep[0] >= settings:
            raise ConfigError(f"{path}.keep must decrease from below the block's {settings} setting(s) (learning rates "
                              f"x starts) to at least 1, got {list(self.keep)}")


# The model keys a grid block's ``starts`` may set: the initial biases of the memory's signals.
START_KEYS = ("pop_bias", *START_BIASES)


@dataclass(frozen=True)
class GridBlock:
    """A Cartesian product of runs: every task × model × hidden × lr × start × seed, with ``overrides`` (any subset
    of a run config) applied on top of the sweep's ``defaults``, and each of ``starts`` (the memory's initial biases,
    :data:`START_KEYS`; none: the overrides' alone) on top of those."""

    tasks: tuple[str, ...]
    models: tuple[str, ...]
    hidden: tuple[int, ...] = (256,)
    lr: tuple[float, ...] = (1e-3,)
    seeds: tuple[int, ...] = (0,)
    overrides: dict = field(default_factory=dict)
    label: str = ""  # a name for what the block varies ("shared ids"), shown by studies and reports
    halving: Halving | None = None  # successive halving over the block's learning rates and starts (Halving)
    # The memory starts searched: each a mapping of START_KEYS to a bias (null: nn.Linear's initialisation; "default":
    # the model's own start), e.g. [{push_bias: null}, {push_bias: 1.0}]. Empty: one start, the overrides'.
    starts: tuple[dict, ...] = ()

    def settings(self) -> list[tuple[float, dict]]:
        """(lr, start) of every setting the block tries for each task, model, hidden size and seed, in grid order."""
        return [(lr, start) for lr in self.lr for start in (self.starts or ({},))]

    def validate(self, path: str, defaults: dict | None = None) -> None:
        from pipeline.tasks import TASK_NAMES

        for key in ("tasks", "models", "hidden", "lr", "seeds"):
            if not getattr(self, key):
                raise ConfigError(f"{path}.{key} must list at least one value")
        for i, task in enumerate(self.tasks):
            _choice(f"{path}.tasks[{i}]", task, TASK_NAMES)
        for i, model in enumerate(self.models):
            _choice(f"{path}.models[{i}]", model, MODEL_NAMES)
        for i, value in enumerate(self.hidden):
            _positive(f"{path}.hidden[{i}]", value)
        for i, value in enumerate(self.lr):
            _positive(f"{path}.lr[{i}]", value)
        for i, value in enumerate(self.seeds):
            if value < 0:
                raise ConfigError(f"{path}.seeds[{i}] must be >= 0, got {value!r}")
        for i, start in enumerate(self.starts):
            if not isinstance(start, dict) or not start or set(start) - set(START_KEYS):
                raise ConfigError(f"{path}.starts[{i}] must map some of {', '.join(START_KEYS)} to a bias, got "
                                  f"{_describe(start)}")
        if len({tuple(sorted(start.items())) for start in self.starts}) < len(self.starts):
            raise ConfigError(f"{path}.starts lists a start twice: {list(self.starts)}")
        # the overrides on top of the profile's defaults: a value checked against another key (eval_every against
        # perplexity_every) is checked against the one the block's runs will have, not the built-in default
        _check_partial_run_config(_merged(defaults or {}, self.overrides), f"{path}.overrides")
        if self.halving is not None:
            self.halving.validate(f"{path}.halving", len(self.settings()))


@dataclass(frozen=True)
class SlurmConfig:
    """Resources of one SLURM array task (one run per task; one CPU is what a run uses)."""

    partition: str = ""  # empty: the cluster's default partition
    time_min: int = 720  # a run cut off by this limit is requeued and resumes from its checkpoint
    array_parallelism: int = 64
    cpus_per_task: int = 1
    mem_gb: int = 8
    gpus_per_task: int = 0  # GPUs each array task asks for (submitit's gpus_per_node); 0: a CPU task

    def validate(self, path: str) -> None:
        for key in ("time_min", "array_parallelism", "cpus_per_task", "mem_gb"):
            _positive(f"{path}.{key}", getattr(self, key))
        if not (isinstance(self.gpus_per_task, int) and 0 <= self.gpus_per_task <= 16):
            raise ConfigError(f"{path}.gpus_per_task must be an integer in [0, 16] (0: no GPU), got "
                              f"{self.gpus_per_task!r}")


@dataclass(frozen=True)
class SweepConfig:
    """A profile (``configs/<name>.yaml``): the grid of runs and how to execute it. Reports go to
    ``reports/<name>/`` (or the folder under ``reports/`` that ``reports`` names) and runs to ``runs/<name>/``."""

    name: str
    grid: tuple[GridBlock, ...]
    description: str = ""
    defaults: dict = field(default_factory=dict)  # any subset of a run config, for every run
    workers: int | None = None  # local pool size; None: one per CPU core
    # Runs trained together as one model (pipeline.training.engine), up to this many per worker or SLURM
    # job, packed from the pending runs that can share one (same model and sizes); None: one run per worker
    population: int | None = None
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    reports: str = ""  # its reports' folder under reports/, e.g. "recipe/itg" for a part of a study; "": the name

    def reports_dir(self) -> Path:
        """Where this profile's reports (and its archive of finished runs) go by default."""
        from pipeline.paths import REPORTS_DIR

        return REPORTS_DIR / (self.reports or self.name)

    def validate(self, path: str = "") -> None:
        if not _folder_name(self.name):
            raise ConfigError(f"name must be a non-empty [A-Za-z0-9_-] string (it names folders), got {self.name!r}")
        if self.reports and not all(_folder_name(part) for part in self.reports.split("/")):
            raise ConfigError(f"reports must be a folder under reports/ made of [A-Za-z0-9_-] names joined by '/', "
                              f"got {self.reports!r}")
        if not self.grid:
            raise ConfigError("grid must list at least one block")
        if self.workers is not None:
            _positive(_join(path, "workers"), self.workers)
        if self.population is not None:
            check_population_size(self.population, _join(path, "population"))
        self.slurm.validate(_join(path, "slurm"))  # checked here, not when a job is first submitted
        _check_partial_run_config(self.defaults, _join(path, "defaults"))
        for i, block in enumerate(self.grid):
            block.validate(_join(path, f"grid[{i}]"), self.defaults)
        seen: dict[str, str] = {}
        for index, where, run in self.runs_by_block():
            halving = self.grid[index].halving
            if halving is not None and (halving.at[-1] >= run.training.max_batches
                                        or any(at % run.training.perplexity_every for at in halving.at)):
                raise ConfigError(f"{where}: halving.at {list(halving.at)} must be multiples of perplexity_every "
                                  f"({run.training.perplexity_every}) below max_batches "
                                  f"({run.training.max_batches})")
            run.training.check_prune_checkpoints(f"{where}: training")
            if run.run_id() in seen:
                raise ConfigError(f"{where} repeats run {run.run_id()} already listed by {seen[run.run_id()]}")
            seen[run.run_id()] = where

    def runs_with_origin(self) -> list[tuple[str, RunConfig]]:
        """(where, run) for every run of the grid, in grid order; ``where`` names its block and grid point."""
        return [(where, run) for _, where, run in self.runs_by_block()]

    def runs_by_block(self) -> list[tuple[int, str, RunConfig]]:
        """(index of its grid block, where, run) for every run of the grid, in grid order. Built once per profile
        object (every config here is frozen): validation, the sweep's plan, halving and the report each ask for it,
        and the paper's grid is 800 runs."""
        built = self.__dict__.get("_runs_by_block")
        if built is None:
            built = tuple(self._build_runs())
            object.__setattr__(self, "_runs_by_block", built)  # a cache, not a field: equality and replace ignore it
        return list(built)

    def _build_runs(self) -> list[tuple[int, str, RunConfig]]:
        out = []
        for i, block in enumerate(self.grid):
            for task in block.tasks:
                for model in block.models:
                    for hidden in block.hidden:
                        for lr, start in block.settings():
                            for seed in block.seeds:
                                data = to_dict(RunConfig())
                                _merge(data, self.defaults)
                                _merge(data, block.overrides)
                                _merge(data, {"model": start})
                                point = dict(task=task, model=model, hidden=hidden, lr=lr, seed=seed)
                                for axis, value in point.items():
                                    *parents, leaf = GRID_AXES[axis]
                                    node = data
                                    for parent in parents:
                                        node = node[parent]
                                    node[leaf] = value
                                started = "".join(f", {key} {value}" for key, value in start.items())
                                where = f"grid[{i}] ({task}, {model}, hidden {hidden}, lr {lr:g}{started}, seed {seed})"
                                out.append((i, where, from_dict(RunConfig, data, where)))
        return out

    def runs(self) -> list[RunConfig]:
        """Every run of the grid, in grid order."""
        return [run for _, run in self.runs_with_origin()]


def _folder_name(text: str) -> bool:
    """A non-empty name of [A-Za-z0-9_-] only: safe as one folder's name (no '.', '..' or separators)."""
    return bool(text) and all(c.isalnum() or c in "-_" for c in text)


def _check_partial_run_config(data: dict, path: str) -> None:
    """A subset of a run config: known keys, right types, valid values; grid axes may not be set here."""
    from_dict(RunConfig, data, path)
    for axis, keys in GRID_AXES.items():
        node = data
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            raise ConfigError(f"{path}.{'.'.join(keys)} is a grid axis; list it in the grid block's "
                              f"'{axis if axis != 'seed' else 'seeds'}' instead")
