"""Model registry: the seven architectures of the paper and two modern baselines beside them, one
:class:`ModelEntry` each.

An entry carries everything about an architecture: how to build it from a :class:`ModelConfig`, the paper's row
name for it (Tables 2 and 3), its look in figures, and which memory it has. :func:`register_model` adds one; configs,
the CLI, tables and figures read :data:`MODELS`, the paper's Tables 2 and 3 :data:`PAPER_MODEL_NAMES`. ``lstm1`` ..
``lstm8`` are deep LSTMs (:mod:`pipeline.models.deep_lstm`); ``stack``, ``queue`` and ``deque`` are memory-enhanced
LSTMs (:mod:`pipeline.models.memory_lstm`); ``transformer`` (:mod:`pipeline.models.transformer`) and ``jm_stack``
(:mod:`pipeline.models.jm_stack`) are not the paper's. All implement :class:`TransductionModel`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.registry import Field, Names, register

if TYPE_CHECKING:  # the registry itself imports no torch (`transduce --help` lists its names without it) and no
    # config (pipeline.config reads this registry, lazily: MODEL_NAMES)
    from torch import nn

    from pipeline.config import ModelConfig
    from pipeline.memory.kinds import MemoryKind
    from pipeline.models.base import TransductionModel


@dataclass(frozen=True)
class ModelEntry:
    """Everything about an architecture, in one place."""

    name: str  # what configs and commands call it
    display: str  # the paper's row name (Tables 2 and 3), used in every report
    build: Callable[[ModelConfig, int, int], TransductionModel]  # (config, input ids, output ids) -> model
    style: dict = field(default_factory=dict)  # its look in figures: color, ls, marker (matplotlib)
    # A memory model's memory (pipeline.memory.kinds), all that differs between them: a MemoryKind, or a function
    # that makes one when first asked (the kinds import torch)
    memory_source: MemoryKind | Callable[[], MemoryKind] | None = None
    # Its start: what a ModelConfig's start biases left at "default" become (ModelConfig.resolved). Deep LSTMs have
    # no memory signals, so theirs changes nothing but keeps their run ids as they were.
    start: dict = field(default_factory=lambda: dict(PUSH_START))
    # One of the paper's architectures: a row of Tables 2 and 3 (the 35 cells) and their figures. False: a baseline
    # beside them, reported only where a profile trains it (and by `transduce params`, in a section of its own).
    paper: bool = True
    # Where only some of its settings can be stacked as one batched population (a GPU's way; which stacked model holds
    # them is training's table, pipeline.training.population.POPULATION_CLASSES): the reason a config's cannot, or
    # None (read by unstackable())
    cannot_stack: Callable[[ModelConfig], str | None] | None = None
    # What the architecture asks of its settings together (ModelConfig.validate raises it before any compute): the
    # text of the first problem, starting with the key it names, or None. Written beside the entry, not in the model's
    # module, so that validation imports no torch.
    check: Callable[[ModelConfig], str | None] | None = None

    @functools.cached_property
    def memory(self) -> MemoryKind | None:
        """The memory this architecture has (None for a deep LSTM)."""
        source = self.memory_source
        return source() if callable(source) else source


# The start measured on 16 fresh seeds (reports/recipe/study-log.md §7): every push at +1 (d starts near 0.73, the pop
# near 0.27), so that the controller does not start by popping more than it pushes (appendix B's failure mode). The
# Stack then learned reversal on 16 of 16 seeds (8 of 16 at nn.Linear's initialisation), the Queue copy on 16 of 16.
PUSH_START = {"push_bias": 1.0, "bottom_push_bias": None, "bottom_pop_bias": None}
# The DeQue's: its top end at nn.Linear's initialisation (push near 0.5) and its bottom end all but still, push and
# pop at -4 (~0.018 each), so that the bottom read starts as the Queue's. With both ends at +1 the two ends push
# alike and copy never leaves its starting plateau (0 of 16, reversal 16 of 16). This start learned copy on 15 of 16
# fresh seeds and reversal on 9 of 16, short of the 12 of 16 the study aimed at on reversal. With its values at 4 times
# nn.Linear's scale (model.value_gain) reversal learned on 11 of 16, but more slowly, and copy on 11 of 16; with the
# top's push at +0.5 as well, reversal on 5 of 10. Not adopted: the quiet-bottom starts re-deal which seeds learn
# reversal rather than raise the share (reports/recipe/study-log.md §7 measures every start tried).
DEQUE_START = {"push_bias": None, "bottom_push_bias": -4.0, "bottom_pop_bias": -4.0}


MODELS: dict[str, ModelEntry] = {}


def register_model(entry: ModelEntry) -> ModelEntry:
    """Add an architecture: the one call that makes it known to configs, the CLI, the tables and the figures."""
    return register(MODELS, entry, "model", unique=("display",))


def _deep_lstm(layers: int):
    def build(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
        from pipeline.models.deep_lstm import DeepLSTM

        return DeepLSTM(input_size, output_size, config.hidden, config.embedding, layers,
                        readout_width=config.readout_width)

    return build


def _memory_lstm(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
    """An LSTM controller with the memory of ``config.name``'s registry entry."""
    from pipeline.models.memory_lstm import MemoryLSTM

    return MemoryLSTM(input_size, output_size, config.hidden, config.embedding, memory=MODELS[config.name].memory,
                      memory_width=config.memory_width, pop_bias=config.pop_bias,
                      implementation=config.implementation, readout_width=config.readout_width,
                      push_bias=config.push_bias, bottom_push_bias=config.bottom_push_bias,
                      bottom_pop_bias=config.bottom_pop_bias, **dataclasses.asdict(config.probes))


def _kind(name: str) -> Callable[[], MemoryKind]:
    """The memory kind ``pipeline.memory.kinds.<name>``, made when first asked for."""
    return lambda: getattr(importlib.import_module("pipeline.memory.kinds"), name)()


# Deep LSTMs in shades of blue, dotted to dashed; memory models in red, green and orange.
for layers, color, dashes, marker in ((1, "#9ecae1", (0, (1, 1)), "v"), (2, "#6baed6", (0, (3, 1, 1, 1)), "^"),
                                      (4, "#3182bd", (0, (5, 2)), "<"), (8, "#08519c", (0, (8, 2, 1, 2)), ">")):
    register_model(ModelEntry(f"lstm{layers}", f"{layers}-layer LSTM", _deep_lstm(layers),
                              dict(color=color, ls=dashes, marker=marker)))


def memory_model(name: str, display: str, memory: MemoryKind | Callable[[], MemoryKind], style: dict | None = None,
                 start: dict | None = None) -> ModelEntry:
    """The registry entry of an LSTM controller with ``memory`` (§3.4; a kind, or a function that makes one),
    starting at ``start`` (default :data:`PUSH_START`)."""
    return ModelEntry(name, display, _memory_lstm, style or {}, memory_source=memory,
                      start={**PUSH_START, **(start or {})})


register_model(memory_model("stack", "Stack-LSTM", _kind("Stack"), dict(color="#d62728", ls="-", marker="o")))
register_model(memory_model("queue", "Queue-LSTM", _kind("Queue"), dict(color="#2ca02c", ls=(0, (6, 3)), marker="s")))
register_model(memory_model("deque", "DeQue-LSTM", _kind("DeQue"), dict(color="#ff7f0e", ls=(0, (2, 2)), marker="D"),
                            start=DEQUE_START))


# -- modern baselines beside the paper (docs/models.md): not in its Tables 2 and 3 --------------------------------

# Neither has the paper's push and pop signals: their starts leave every start bias at null (nn.Linear's), so that a
# stored config says nothing they do not have. The Transformer ignores the start biases; the JM stack reads push_bias
# alone, as its push action's initial bias (pipeline/models/jm_stack.py), and ignores the bottom biases.
NO_START = dict.fromkeys(PUSH_START)


def transformer_sizes(config: ModelConfig) -> tuple[int, int]:
    """The Transformer's model width and feed-forward width: ``model.width`` and ``model.feedforward``, by default
    half of ``model.hidden`` and three times the width (at hidden 256 the Stack-LSTM's parameter count)."""
    width = config.width if config.width is not None else config.hidden // 2
    return width, config.feedforward if config.feedforward is not None else 3 * width


def _transformer(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
    from pipeline.models.transformer import Transformer

    width, feedforward = transformer_sizes(config)
    return Transformer(input_size, output_size, config.embedding, width=width, layers=config.layers,
                       heads=config.heads, feedforward=feedforward, positional_encoding=config.positional_encoding,
                       readout_width=config.readout_width)


def _check_transformer(config: ModelConfig) -> str | None:
    width, _ = transformer_sizes(config)
    if width < 1:  # only a default width can be: half of hidden 1
        return f"hidden must be at least 2 where width is null (the width is half of it), got {config.hidden}"
    said = f"{width}" if config.width is not None else f"{width}, half of hidden {config.hidden}"
    if width % config.heads:
        return f"heads must divide the Transformer's width ({said}) into heads of equal width, got {config.heads}"
    if width % 2 and config.positional_encoding in ("sinusoidal", "randomised"):  # sin and cos in pairs
        return (f"width must be even for {config.positional_encoding} positional encodings (sine and cosine in "
                f"pairs), got {said}")
    return None


def _unstackable_transformer(config: ModelConfig) -> str | None:
    if config.positional_encoding == "randomised":  # drawn on the host for every batch: a captured step cannot
        return ("a randomised positional encoding draws each member's positions on the host for every batch, which "
                "a captured step cannot replay")
    return None


def _jm_stack(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
    from pipeline.models.jm_stack import JMStackLSTM

    return JMStackLSTM(input_size, output_size, config.hidden, config.embedding, width=config.memory_width,
                       depth=config.stack_depth, read=config.stack_read, readout_width=config.readout_width,
                       push_bias=config.push_bias)


def _check_jm_stack(config: ModelConfig) -> str | None:
    if config.stack_read > config.stack_depth:
        return f"stack_read must be at most stack_depth ({config.stack_depth}), got {config.stack_read}"
    return None


register_model(ModelEntry("transformer", "Transformer", _transformer, dict(color="#9467bd", ls=(0, (4, 1, 1, 1)),
                                                                          marker="P"),
                          start=NO_START, paper=False, check=_check_transformer,
                          cannot_stack=_unstackable_transformer))
register_model(ModelEntry("jm_stack", "JM Stack-LSTM", _jm_stack, dict(color="#8c564b", ls=(0, (1, 2)), marker="X"),
                          start=NO_START, paper=False, check=_check_jm_stack))

MODEL_NAMES = Names(MODELS)  # live views: a model registered later is listed too
PAPER_MODEL_NAMES = Names(MODELS, keep=lambda entry: entry.paper)  # the paper's Tables 2 and 3, in its order
DISPLAY_NAMES = Field(MODELS, "display")


def unstackable(config: ModelConfig) -> str | None:
    """Why runs of ``config``'s settings cannot be stacked as one batched population, or None where its
    architecture's can (whether it has a stacked model at all is training's to say:
    ``pipeline.training.run.cannot_batch``)."""
    entry = MODELS[config.name]
    return entry.cannot_stack(config) if entry.cannot_stack is not None else None


def memory_of(name: str) -> MemoryKind | None:
    """The memory of model ``name`` (None for a deep LSTM, or a name nobody registered)."""
    entry = MODELS.get(name)
    return entry.memory if entry is not None else None


def build_model(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
    """The architecture ``config.name`` for a task with these input and output vocabulary sizes."""
    if config.name not in MODELS:
        raise ValueError(f"unknown model {config.name!r}; choose one of: {', '.join(MODELS)}")
    model = MODELS[config.name].build(config.resolved(), input_size, output_size)
    if config.forget_bias is not None:
        set_forget_bias(model, config.forget_bias)
    return model


def set_forget_bias(model: nn.Module, value: float) -> None:
    """Start every LSTM forget gate of ``model`` at bias ``value`` (``model.forget_bias``): the input-side bias of
    the forget slice (PyTorch's gate order i, f, g, o) set to it and the hidden-side one to 0, so their sum, what the
    gate sees, is ``value``. Draws nothing from the random generator: the rest of the initialisation is unchanged."""
    import torch
    from torch import nn

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LSTM):
                pairs = [(getattr(module, f"bias_ih_l{k}"), getattr(module, f"bias_hh_l{k}"))
                         for k in range(module.num_layers)]
            elif isinstance(module, nn.LSTMCell):
                pairs = [(module.bias_ih, module.bias_hh)]
            else:
                continue
            for ih, hh in pairs:
                hidden = ih.shape[0] // 4
                ih[hidden:2 * hidden] = value
                hh[hidden:2 * hidden] = 0.0


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, as in Table 2."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def __getattr__(name: str):
    if name == "TransductionModel":  # the interface every model implements (pipeline.models.base): torch, so lazily
        from pipeline.models.base import TransductionModel

        return TransductionModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DISPLAY_NAMES", "MODELS", "MODEL_NAMES", "PAPER_MODEL_NAMES", "ModelEntry", "TransductionModel",
           "build_model", "count_parameters", "memory_model", "memory_of", "register_model", "transformer_sizes",
           "unstackable"]
