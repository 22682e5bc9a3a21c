"""Every architecture: sizes against Table 2, one function whether run whole or step by step, padding that
cannot leak, and the controller's initialisation."""

import pytest
import torch

from pipeline.config import MODEL_NAMES, ModelConfig
from pipeline.models import build_model, count_parameters
from pipeline.models.memory_lstm import MemoryLSTM
from pipeline.reports.published import table2

# The vocabulary of the synthetic tasks: 3 special inputs + 128 source + 128 target symbols; 128 targets + </s>.
INPUT_SIZE, OUTPUT_SIZE = 3 + 128 + 128, 128 + 1


@pytest.mark.parametrize("row", list(table2().itertuples()), ids=lambda r: f"{r.model}-{r.hidden}")
def test_parameter_counts_match_table2_within_15_percent(row):
    model = build_model(ModelConfig(name=row.model, hidden=row.hidden), INPUT_SIZE, OUTPUT_SIZE)
    ours = count_parameters(model)
    assert abs(ours / row.params - 1) <= 0.15, f"{row.model} h{row.hidden}: {ours} vs the paper's {row.params:.2g}"


def tiny(name, implementation="reference"):
    torch.manual_seed(0)
    return build_model(ModelConfig(name=name, hidden=12, memory_width=6, embedding=5, heads=2,  # the Transformer 6 wide
                                   implementation=implementation), 11, 7).double()


def random_batch(B=3, L=9, vocab=11, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randint(1, vocab, (B, L), generator=gen)
    lengths = torch.tensor([L, L - 3, L - 5])[:B]
    inputs[torch.arange(L).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return inputs, lengths


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_stepping_reproduces_the_whole_sequence(name):
    model = tiny(name)
    inputs, lengths = random_batch()
    with torch.no_grad():
        whole = model(inputs, lengths)
        state = model.initial_state(inputs.shape[0], capacity=inputs.shape[1])
        steps = []
        for t in range(inputs.shape[1]):
            logits, state = model.step(inputs[:, t], state)
            steps.append(logits)
    stepped = torch.stack(steps, dim=1)
    real = torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    torch.testing.assert_close(whole[real], stepped[real], atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_padding_never_reaches_a_real_position(name):
    """A row's logits are the same alone as in a batch with longer rows, whatever the padding holds."""
    model = tiny(name)
    inputs, lengths = random_batch()
    with torch.no_grad():
        batched = model(inputs, lengths)
        for row in range(inputs.shape[0]):
            n = int(lengths[row])
            alone = model(inputs[row : row + 1, :n], lengths[row : row + 1])
            torch.testing.assert_close(batched[row, :n], alone[0], atol=1e-12, rtol=0)
        garbage = inputs.clone()
        garbage[garbage == 0] = 7  # padding positions now hold a real token
        torch.testing.assert_close(model(garbage, lengths)[0], batched[0], atol=0, rtol=0)


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_padding_leaves_the_memory_untouched(name):
    model = tiny(name)
    inputs, lengths = random_batch()
    live = (torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).double()
    with torch.no_grad():
        x = model.embed(inputs)
        state = model.initial_state(3, capacity=inputs.shape[1])
        strengths_at_end = {}
        for t in range(inputs.shape[1]):
            _, state = model.advance(x[:, t], state, live[:, t])
            for row in range(3):
                if t + 1 == lengths[row]:
                    strengths_at_end[row] = state.memory.strengths[row].clone()
    final = state.memory.strengths
    for row in range(3):
        n = strengths_at_end[row].numel()
        # Each padded step still stores a value row (one per end for the DeQue), with strength exactly 0, and pops
        # nothing: the real rows keep their strengths. A DeQue's padded rows sit on both sides of the real ones.
        pad = (final.shape[1] - n) // 2 if name == "deque" else 0
        torch.testing.assert_close(final[row, pad : pad + n], strengths_at_end[row], atol=0, rtol=0)
        outside = torch.cat([final[row, :pad], final[row, pad + n :]])
        assert torch.all(outside == 0)


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_pop_bias_starts_at_minus_one(name):
    # (the DeQue's bottom end has a start of its own, -4: null makes it follow the top's, as here)
    model = build_model(ModelConfig(name=name, hidden=16, memory_width=8, bottom_pop_bias=None), INPUT_SIZE,
                        OUTPUT_SIZE)
    ends = 2 if name == "deque" else 1
    assert torch.all(model.signals.bias[ends : 2 * ends] == -1.0)
    other = build_model(ModelConfig(name=name, hidden=16, memory_width=8, pop_bias=-2.5, bottom_pop_bias=None),
                        INPUT_SIZE, OUTPUT_SIZE)
    assert torch.all(other.signals.bias[ends : 2 * ends] == -2.5)


def test_memory_lstm_refuses_unknown_memory():
    with pytest.raises(ValueError, match=r"memory must be a MemoryKind \(pipeline.memory.kinds\); got 'heap'"):
        MemoryLSTM(11, 7, hidden=4, embedding=3, memory="heap", memory_width=4)
