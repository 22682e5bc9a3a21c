"""Model registry: the seven architectures of the paper behind one constructor.

``lstm1`` .. ``lstm8`` are deep LSTMs (:mod:`pipeline.models.deep_lstm`); ``stack``, ``queue`` and ``deque`` are
memory-enhanced LSTMs (:mod:`pipeline.models.memory_lstm`). All implement :class:`TransductionModel`.
"""

from __future__ import annotations

from torch import nn

from pipeline.config import MODEL_NAMES, ModelConfig
from pipeline.models.base import TransductionModel
from pipeline.models.deep_lstm import DeepLSTM
from pipeline.models.memory_lstm import MemoryLSTM

LSTM_LAYERS = {"lstm1": 1, "lstm2": 2, "lstm4": 4, "lstm8": 8}
DISPLAY_NAMES = {
    "lstm1": "1-layer LSTM",
    "lstm2": "2-layer LSTM",
    "lstm4": "4-layer LSTM",
    "lstm8": "8-layer LSTM",
    "stack": "Stack-LSTM",
    "queue": "Queue-LSTM",
    "deque": "DeQue-LSTM",
}


def build_model(config: ModelConfig, input_size: int, output_size: int) -> TransductionModel:
    """The architecture ``config.name`` for a task with these input and output vocabulary sizes."""
    if config.name in LSTM_LAYERS:
        return DeepLSTM(input_size, output_size, config.hidden, config.embedding, LSTM_LAYERS[config.name],
                        readout_width=config.readout_width)
    if config.name in ("stack", "queue", "deque"):
        return MemoryLSTM(input_size, output_size, config.hidden, config.embedding, memory=config.name,
                          memory_width=config.memory_width, pop_bias=config.pop_bias,
                          implementation=config.implementation, readout_width=config.readout_width,
                          push_bias=config.push_bias, bottom_push_bias=config.bottom_push_bias,
                          bottom_pop_bias=config.bottom_pop_bias)
    raise ValueError(f"unknown model {config.name!r}; choose one of: {', '.join(MODEL_NAMES)}")


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, as in Table 2."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["MODEL_NAMES", "DISPLAY_NAMES", "TransductionModel", "build_model", "count_parameters"]
