"""The modern baselines beside the paper (docs/models.md): a decoder-only Transformer with four positional encodings and
the Joulin-Mikolov stack with an LSTM controller. One function whether run whole or step by step, causal, trainable;
the randomised positions reproducible; the stack's update against the paper's formulas written out element by
element, and with one-hot actions a classical stack; their settings refused in one line; no archived run's id moved."""

import random
import re

import numpy as np
import pytest
import torch
from torch import Tensor

from pipeline.config import (
    LATER_MODEL_KEYS,
    POSITIONAL_ENCODINGS,
    ConfigError,
    ModelConfig,
    RunConfig,
    TrainingConfig,
    from_dict,
)
from pipeline.data.encoding import JointVocabulary, collate
from pipeline.models import MODELS, PAPER_MODEL_NAMES, build_model, count_parameters
from pipeline.models.jm_stack import ACTIONS, JMStackLSTM, jm_stack_update
from pipeline.models.transformer import ENCODINGS, MAX_POSITIONS, MAX_SOURCE, RANDOM_RANGE
from pipeline.tasks import get_task
from pipeline.training.step import make_optimizer, take_step

INPUTS, OUTPUTS = 11, 7
# Tiny sizes: the Transformer 8 wide (half of hidden 16), 2 blocks of 2 heads; the stack 8 wide, reading 2 rows.
SETTINGS = {**{f"transformer-{e}": dict(name="transformer", positional_encoding=e) for e in ENCODINGS},
            "jm_stack": dict(name="jm_stack", stack_depth=16, stack_read=2)}


def tiny(settings: str, double: bool = True, **changes):
    torch.manual_seed(0)
    config = from_dict(ModelConfig, dict(hidden=16, memory_width=8, embedding=6, layers=2, heads=2,
                                         **SETTINGS[settings], **changes))
    model = build_model(config, INPUTS, OUTPUTS)
    return model.double() if double else model


def random_batch(B=3, L=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randint(1, INPUTS, (B, L), generator=gen)
    lengths = torch.tensor([L, L - 3, L - 5])[:B]
    inputs[torch.arange(L).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    return inputs, lengths


def whole_and_stepped(model, inputs, lengths=None):
    """Logits of one forward pass and of stepping through the same inputs, from the same draws of positions: a
    randomised encoding draws again at each switch to evaluation mode (pipeline.models.transformer)."""
    with torch.no_grad():
        model.eval()
        whole = model(inputs, lengths)
        model.eval()
        state = model.initial_state(inputs.shape[0], capacity=inputs.shape[1])
        steps = []
        for t in range(inputs.shape[1]):
            logits, state = model.step(inputs[:, t], state)
            steps.append(logits)
    return whole, torch.stack(steps, dim=1)


@pytest.mark.parametrize("settings", SETTINGS)
def test_shapes(settings):
    model = tiny(settings)
    inputs, lengths = random_batch()
    assert model(inputs, lengths).shape == (3, 9, OUTPUTS)
    logits, _ = model.step(inputs[:, 0], model.initial_state(3, capacity=9))
    assert logits.shape == (3, OUTPUTS)


@pytest.mark.parametrize("settings", SETTINGS)
def test_stepping_reproduces_the_whole_sequence(settings):
    model = tiny(settings)
    inputs, _ = random_batch(L=11)
    whole, stepped = whole_and_stepped(model, inputs)
    torch.testing.assert_close(whole, stepped, atol=1e-12, rtol=0)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_no_position_sees_a_later_one(encoding):
    model = tiny(f"transformer-{encoding}").eval()  # every forward in evaluation mode draws the same positions
    inputs, _ = random_batch(B=2, L=12)
    with torch.no_grad():
        before = model(inputs)
        for t in (3, 7, 11):
            changed = inputs.clone()
            changed[:, t] = changed[:, t] % (INPUTS - 1) + 1  # another real token
            model.eval()
            after = model(changed)
            torch.testing.assert_close(after[:, :t], before[:, :t], atol=0, rtol=0)
            assert (after[:, t] - before[:, t]).abs().max() > 1e-6  # ... and the changed one does change


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_padding_never_reaches_a_real_position(encoding):
    model = tiny(f"transformer-{encoding}")
    inputs, lengths = random_batch()
    garbage = inputs.clone()
    garbage[garbage == 0] = 5
    with torch.no_grad():
        model.eval()
        clean = model(inputs, lengths)
        model.eval()
        dirty = model(garbage, lengths)
    real = torch.arange(inputs.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    torch.testing.assert_close(dirty[real], clean[real], atol=0, rtol=0)


@pytest.mark.parametrize("settings", SETTINGS)
def test_a_few_training_steps_lower_the_loss(settings):
    """The project's own step (RMSProp, clipping) on one batch of copy, float32 as training runs."""
    task = get_task("copy")
    vocab = JointVocabulary.for_task(task)
    torch.manual_seed(0)
    config = from_dict(ModelConfig, dict(hidden=16, memory_width=8, embedding=6, layers=2, heads=2,
                                         **SETTINGS[settings]))
    model = build_model(config, vocab.input_size, vocab.output_size)
    batch = collate(task.sample_batch(np.random.default_rng(0), "train", 4), vocab)
    training = TrainingConfig(lr=1e-2)
    optimizer = make_optimizer(model.parameters(), training)
    losses = []
    for step in range(20):
        model.before_batch(step)
        nll, tokens = take_step(model, optimizer, batch, training)
        losses.append(float(nll / tokens))
    assert losses[-1] < 0.9 * losses[0], losses


# -- the randomised positional encoding ----------------------------------------------------------------------------


def randomised(seed: int):
    torch.manual_seed(seed)  # what a run's seed does before its model is built
    return build_model(ModelConfig(name="transformer", positional_encoding="randomised", hidden=16, layers=1,
                                   heads=2), INPUTS, OUTPUTS)


def test_randomised_positions_are_ordered_random_subsets_of_the_range_per_sequence():
    model = randomised(0)
    model.before_batch(0)
    lengths = torch.tensor([300, 120, 7])
    positions = model.random_positions(3, 300, lengths)
    for row, n in enumerate(lengths.tolist()):
        real = positions[row, :n]
        assert bool((real[1:] > real[:-1]).all()) and 0 <= int(real[0]) and int(real[-1]) < RANDOM_RANGE
        assert bool((positions[row, n:] >= RANDOM_RANGE).all())  # its padding after every real position
    assert int(positions[0, -1]) > 600  # spread over the range, far past the sequence's own length
    assert not torch.equal(positions[1, :7], positions[2, :7])  # each sequence draws its own


def test_randomised_positions_follow_the_seed_and_the_batch():
    draw = lambda model, batch: (model.before_batch(batch), model.random_positions(2, 50))[1]  # noqa: E731
    a, b, other = randomised(0), randomised(0), randomised(1)
    assert torch.equal(draw(a, 3), draw(b, 3))  # reproducible from the run's seed ...
    assert not torch.equal(draw(a, 3), draw(other, 3))  # ... and another seed draws otherwise
    first, second = draw(a, 4), draw(a, 5)
    assert not torch.equal(first, second)  # different positions across draws
    draw(a, 9)
    assert torch.equal(draw(a, 4), first)  # batch 4 draws the same, whatever came before: a resumed run does too
    # a checkpoint carries the seed: a model built under another seed and loaded draws as the one it was saved from
    other.load_state_dict(a.state_dict())
    assert torch.equal(draw(other, 4), first)


def test_every_evaluation_draws_the_same_positions():
    model = randomised(0)
    inputs, lengths = random_batch()
    model.eval()
    first = model(inputs, lengths)
    model.train()
    model.before_batch(7)
    model(inputs, lengths)  # training draws in between
    model.eval()
    torch.testing.assert_close(model(inputs, lengths), first, atol=0, rtol=0)
    model.train()
    model.before_batch(7)
    assert not torch.allclose(model(inputs, lengths), first)  # training's draws are other positions


def test_positions_reach_every_length_evaluated():
    """Every registered task's longest joint sequence, in its splits and in the far bands, fits the learned table,
    and the randomised range is over twice that."""
    from pipeline.generalisation import FAR_BANDS
    from pipeline.tasks import SPLITS, TASK_NAMES

    far = FAR_BANDS[-1][1]
    assert MAX_SOURCE >= far
    for name in TASK_NAMES:
        task = get_task(name)
        longest = max(far + task.target_length(far) + 3, *(task.longest_joint_sequence(s) for s in SPLITS))
        assert MAX_POSITIONS >= longest, name
    assert RANDOM_RANGE >= 2 * MAX_POSITIONS
    assert ENCODINGS == POSITIONAL_ENCODINGS  # the config allows what the model implements
    model = tiny("transformer-learned")
    model(torch.ones(1, MAX_POSITIONS, dtype=torch.long))
    with pytest.raises(ValueError, match=f"a learned positional encoding has {MAX_POSITIONS} positions"):
        model(torch.ones(1, MAX_POSITIONS + 1, dtype=torch.long))


# -- the Joulin-Mikolov stack ----------------------------------------------------------------------------------------


def literal_update(stack, actions, value):
    """Joulin & Mikolov's update written out element by element:
    s'[0] = a_push v + a_pop s[1] + a_no-op s[0];  s'[i] = a_push s[i-1] + a_pop s[i+1] + a_no-op s[i];
    zeros below the bottom."""
    B, D, m = stack.shape
    out = torch.zeros_like(stack)
    for b in range(B):
        push, pop, noop = (float(actions[b, k]) for k in range(3))
        for i in range(D):
            for j in range(m):
                below = float(stack[b, i + 1, j]) if i + 1 < D else 0.0
                if i == 0:
                    out[b, i, j] = push * float(value[b, j]) + pop * below + noop * float(stack[b, 0, j])
                else:
                    out[b, i, j] = push * float(stack[b, i - 1, j]) + pop * below + noop * float(stack[b, i, j])
    return out


def differentiable_literal_update(stack: Tensor, actions: Tensor, value: Tensor) -> Tensor:
    """The same formulas row by row, in torch ops (so that gradients flow), on the whole depth."""
    depth = stack.shape[1]
    rows = []
    for i in range(depth):
        above = value if i == 0 else stack[:, i - 1]
        below = stack[:, i + 1] if i + 1 < depth else torch.zeros_like(value)
        rows.append(actions[:, 0:1] * above + actions[:, 1:2] * below + actions[:, 2:3] * stack[:, i])
    return torch.stack(rows, dim=1)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_the_stack_update_is_the_papers_formulas(depth):
    gen = torch.Generator().manual_seed(depth)
    for _ in range(5):
        stack = torch.randn(3, depth, 4, generator=gen, dtype=torch.float64)
        actions = torch.softmax(torch.randn(3, 3, generator=gen, dtype=torch.float64), dim=-1)
        value = torch.randn(3, 4, generator=gen, dtype=torch.float64)
        torch.testing.assert_close(jm_stack_update(stack, actions, value), literal_update(stack, actions, value),
                                   atol=1e-15, rtol=0)
        torch.testing.assert_close(differentiable_literal_update(stack, actions, value),
                                   literal_update(stack, actions, value), atol=1e-15, rtol=0)


def test_with_one_hot_actions_it_is_a_classical_stack_of_bounded_depth():
    depth, m, rng = 3, 2, random.Random(0)
    stacks = [[], []]  # one classical stack per sequence, top first
    tensor = torch.zeros(2, depth, m, dtype=torch.float64)
    for t in range(60):
        choice = [rng.choice(range(3)) for _ in stacks]  # push, pop, no-op
        value = torch.randn(2, m, dtype=torch.float64)
        for b, (classical, action) in enumerate(zip(stacks, choice)):
            if action == 0:
                classical.insert(0, value[b])
                del classical[depth:]  # the bottom row falls off
            elif action == 1 and classical:
                classical.pop(0)
        tensor = jm_stack_update(tensor, torch.eye(3, dtype=torch.float64)[choice], value)
        for b, classical in enumerate(stacks):
            expected = torch.zeros(depth, m, dtype=torch.float64)
            if classical:
                expected[: len(classical)] = torch.stack(classical)
            assert torch.equal(tensor[b], expected), (t, b)


@pytest.mark.parametrize("depth, read", [(3, 1), (4, 2), (64, 2), (64, 1)])
def test_the_model_is_the_literal_stack_under_its_controller(depth, read):
    """The model (its stack grown a row a step, and cut to the rows a later read can reach) against the equations run
    literally on the whole depth from the start: the same outputs and the same gradients. Depth 3 and 4 cut the stack
    of an 11-step sequence; at depth 64 the reach of the last reads cuts it from the sixth step on."""
    torch.manual_seed(0)
    model = JMStackLSTM(INPUTS, OUTPUTS, hidden=5, embedding=3, width=2, depth=depth, read=read).double()
    inputs, _ = random_batch(B=2, L=11)
    weights = torch.randn(2, 11, OUTPUTS, dtype=torch.float64)

    def gradients(logits):
        model.zero_grad()
        (weights * logits).sum().backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    x = model.embed(inputs)
    stack = torch.zeros(2, depth, 2, dtype=torch.float64)
    h, c = model.h0.expand(2, -1), model.c0.expand(2, -1)
    outputs = []
    for t in range(inputs.shape[1]):
        h, c = model.controller(torch.cat([x[:, t], stack[:, :read].flatten(1)], dim=-1), (h, c))
        actions = torch.softmax(model.actions(h), dim=-1)
        stack = differentiable_literal_update(stack, actions, torch.tanh(model.value(h)))
        outputs.append(model.readout(h))
    literal = torch.stack(outputs, dim=1)
    literal_gradients = gradients(literal)
    ours = model(inputs)
    torch.testing.assert_close(ours, literal.detach(), atol=1e-12, rtol=0)
    for name, gradient in gradients(ours).items():
        torch.testing.assert_close(gradient, literal_gradients[name], atol=1e-12, rtol=0, msg=name)


def rows_each_step_starts_from(model, inputs, capacity=None, whole=False):
    seen = []
    original = model.advance

    def watching(x, state):
        seen.append(state.stack.shape[1])
        return original(x, state)

    model.advance = watching
    try:
        with torch.no_grad():
            if whole:
                model(inputs)
            else:
                state = model.initial_state(inputs.shape[0], capacity=capacity)
                for t in range(inputs.shape[1]):
                    _, state = model.step(inputs[:, t], state)
    finally:
        del model.advance
    return seen


def test_the_rows_no_later_read_can_reach_are_dropped_where_the_length_is_known():
    """The cut is real (not a no-op that the equality tests would also pass): grown a row a step from k = 2, then cut
    to k + (T - 2 - t) rows after step t where T (forward) or a bound on it (step's capacity) is known; without a
    bound every reached row is kept."""
    torch.manual_seed(0)
    model = JMStackLSTM(INPUTS, OUTPUTS, hidden=5, embedding=3, width=2, depth=64, read=2).double()
    inputs, _ = random_batch(B=2, L=11)
    cut = [2, 3, 4, 5, 6, 7, 6, 5, 4, 3, 2]
    assert rows_each_step_starts_from(model, inputs, whole=True) == cut
    assert rows_each_step_starts_from(model, inputs, capacity=11) == cut
    assert rows_each_step_starts_from(model, inputs, capacity=13) == [2, 3, 4, 5, 6, 7, 8, 7, 6, 5, 4]
    assert rows_each_step_starts_from(model, inputs) == list(range(2, 13))


def stepped_under(model, inputs, capacity):
    """The logits (B, L, V) of stepping through ``inputs`` from a state made for ``capacity`` steps; the last state."""
    state = model.initial_state(inputs.shape[0], capacity=capacity)
    stepped = []
    for t in range(inputs.shape[1]):
        logits, state = model.step(inputs[:, t], state)
        stepped.append(logits)
    return torch.stack(stepped, dim=1), state


def test_stepping_under_a_loose_capacity_or_none_gives_the_forwards_logits():
    """Greedy decoding passes the most steps it may take, not the steps it takes: a looser bound cuts less, never
    wrongly; and a step past the capacity is refused rather than read from a cut stack."""
    torch.manual_seed(0)
    model = JMStackLSTM(INPUTS, OUTPUTS, hidden=5, embedding=3, width=2, depth=64, read=2).double().eval()
    inputs, _ = random_batch(B=2, L=11)
    with torch.no_grad():
        whole = model(inputs)
        for capacity in (None, 11, 12, 40):
            stepped, _ = stepped_under(model, inputs, capacity)
            torch.testing.assert_close(stepped, whole, atol=1e-12, rtol=0, msg=str(capacity))
        state = model.initial_state(2, capacity=3)
        for t in range(3):
            _, state = model.step(inputs[:, t], state)
        with pytest.raises(ValueError, match="step 4 of a JM stack state made for 3 steps"):
            model.step(inputs[:, 3], state)


# -- settings, registry, ids -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("model, message", [
    ({"name": "transformer", "positional_encoding": "rope"},
     "model.positional_encoding must be one of 'sinusoidal', 'learned', 'none', 'randomised'; got 'rope'"),
    ({"name": "transformer", "heads": 3}, "model.heads must divide the Transformer's width (128, half of hidden 256) "
                                          "into heads of equal width, got 3"),
    ({"name": "transformer", "width": 10, "heads": 4}, "model.heads must divide the Transformer's width (10) into "
                                                       "heads of equal width, got 4"),
    ({"name": "transformer", "width": 9, "heads": 3}, "model.width must be even for sinusoidal positional encodings "
                                                      "(sine and cosine in pairs), got 9"),
    ({"name": "transformer", "hidden": 1}, "model.hidden must be at least 2 where width is null"),
    ({"name": "transformer", "layers": 0}, "model.layers must be a whole number in [1, 64], got 0"),
    ({"name": "transformer", "feedforward": 0}, "model.feedforward must be a whole number in [1, 8,192], got 0"),
    ({"name": "jm_stack", "stack_depth": 4, "stack_read": 5}, "model.stack_read must be at most stack_depth "
                                                              "(4), got 5"),
    ({"name": "jm_stack", "stack_depth": 0}, "model.stack_depth must be a whole number in [1, 8,192], got 0"),
])
def test_settings_are_refused_in_one_line_before_any_compute(model, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        from_dict(RunConfig, {"model": model})


def test_a_setting_only_another_model_uses_is_ignored():
    # an odd width, heads that do not divide it: what a Transformer could not be, and the Stack-LSTM never reads
    from_dict(RunConfig, {"model": {"name": "stack", "width": 9, "heads": 4}})
    from_dict(RunConfig, {"model": {"name": "transformer", "width": 9, "heads": 3, "positional_encoding": "none"}})


def test_the_jm_stacks_push_bias_starts_its_push_and_changes_nothing_else():
    plain, pushed = tiny("jm_stack"), tiny("jm_stack", push_bias=1.0)
    push = ACTIONS.index("push")
    for (name, a), (_, b) in zip(plain.state_dict().items(), pushed.state_dict().items()):
        if name == "actions.bias":  # the push entry set, the others the seed's draw as without it
            assert b[push] == 1.0 and a[push] != 1.0
            assert torch.equal(torch.cat([a[:push], a[push + 1:]]), torch.cat([b[:push], b[push + 1:]]))
        else:
            assert torch.equal(a, b), name
    inputs, _ = random_batch()
    with torch.no_grad():
        first = [model.step(inputs[:, 0], model.initial_state(3))[1].actions[:, push] for model in (plain, pushed)]
    assert (first[1] > first[0] + 0.2).all()  # about 0.58 against a third
    # a run with it is another run; the profile's runs (push_bias null, the JM stack's start) keep their ids
    default = from_dict(RunConfig, {"model": {"name": "jm_stack"}})
    assert default.resolved().model.push_bias is None
    assert from_dict(RunConfig, {"model": {"name": "jm_stack", "push_bias": 1.0}}).run_id() != default.run_id()
    assert from_dict(RunConfig, {"model": {"name": "jm_stack", "push_bias": None}}).run_id() == default.run_id()


def test_the_baselines_are_beside_the_paper_and_keep_every_earlier_id():
    assert list(PAPER_MODEL_NAMES) == ["lstm1", "lstm2", "lstm4", "lstm8", "stack", "queue", "deque"]
    for name in ("transformer", "jm_stack"):
        assert not MODELS[name].paper
    # a paper model's identity has none of the new keys at their defaults; set, they make another run
    identity = RunConfig().identity()["model"]
    assert not set(identity) & {"positional_encoding", "layers", "heads", "width", "feedforward", "stack_depth",
                                "stack_read"}
    defaults = ModelConfig()
    assert all(getattr(defaults, key) == value for key, value in LATER_MODEL_KEYS.items() if hasattr(defaults, key))
    changed = from_dict(RunConfig, {"model": {"name": "transformer", "positional_encoding": "learned"}})
    assert changed.run_id() != from_dict(RunConfig, {"model": {"name": "transformer"}}).run_id()


def test_parameter_counts_at_hidden_256_are_the_stack_lstms():
    from pipeline.reports.table2 import parameter_table, table2_markdown

    vocab = JointVocabulary.for_task(get_task("copy"))
    count = lambda name: count_parameters(build_model(ModelConfig(name=name), vocab.input_size,  # noqa: E731
                                                      vocab.output_size))
    stack = count("stack")
    for name in ("transformer", "jm_stack"):
        assert abs(count(name) / stack - 1) < 0.01, (name, count(name), stack)
    table = parameter_table(models=["stack", "transformer"])
    text = table2_markdown(table, "provenance")
    head, beside = text.split("## Beside the paper: modern baselines")
    assert "Transformer" not in head and "| Transformer | 256 | 703,297 | 700,099 | 1.005 |" in beside
    assert "Transformer" not in table2_markdown(parameter_table(models=["stack"]), "provenance")


def test_a_batched_population_of_randomised_transformers_is_refused_before_any_work(tmp_path):
    """population.py stacks every model but the Transformer under randomised positions (drawn on the host for every
    batch): a batched population of it is refused in one line, with no run folder made; one member after another is
    its way (and a GPU's default for it)."""
    from pipeline.training.run import train_population

    configs = [from_dict(RunConfig, {"task": "copy", "model": {"name": "transformer", "hidden": 16, "embedding": 6,
                                                               "layers": 1, "heads": 2,
                                                               "positional_encoding": "randomised"},
                                     "training": {"seed": seed, "max_batches": 2}, "tracking": {"wandb": "off"}})
               for seed in (0, 1)]
    with pytest.raises(ConfigError, match="cannot be stacked as one batched population \\(a randomised positional"):
        train_population(configs, [tmp_path / "a", tmp_path / "b"], batched=True)
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "none"])
def test_the_transformers_cache_grows_past_the_capacity_it_was_made_for(encoding):
    """The keys and values are written into buffers made for ``capacity`` positions; a state stepped past them
    (a loose hint, or none) doubles them and keeps every position read, so its logits stay the forward's."""
    model = tiny(f"transformer-{encoding}").eval()
    inputs, _ = random_batch(B=2, L=11)
    with torch.no_grad():
        whole = model(inputs)
        for capacity in (1, 4, 11, None):
            stepped, state = stepped_under(model, inputs, capacity)
            torch.testing.assert_close(stepped, whole, atol=1e-12, rtol=0, msg=str(capacity))
            assert state.caches[0].length == 11 and state.caches[0].keys.shape[2] >= 11
