"""The neural Stack, Queue and DeQue against the paper: a literal oracle, Figure 1, the tie rule, gradcheck, and
the classical data structures as the limit case."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.memory import NeuralDeQue, NeuralQueue, NeuralStack
from pipeline.memory.reference import ReferenceDeQue, ReferenceQueue, ReferenceStack

F64 = torch.float64
SINGLE_ENDED = [(NeuralStack, ReferenceStack), (NeuralQueue, ReferenceQueue)]


def as_tensor(x, like):
    return x if torch.is_tensor(x) else torch.tensor(float(x), dtype=like.dtype)


# ----------------------------------------------------------------------------------------------------------------
# Oracle: the fast memories equal a literal transcription of eq. 1–11, values and gradients, in float64.


def random_signals(gen, steps, B, m, n_ends):
    """v ~ N(0, 1); d, u ~ U(0, 1), with some pops made large so that the deletion reaches deep rows."""
    v = [torch.randn(n_ends, B, m, generator=gen, dtype=F64).requires_grad_() for _ in range(steps)]
    d = [torch.rand(n_ends, B, generator=gen, dtype=F64).requires_grad_() for _ in range(steps)]
    u = []
    for t in range(steps):
        scale = 2.5 if t % 4 == 3 else 1.0  # u > 1 is out of range; use scale then clamp below 1
        u.append((torch.rand(n_ends, B, generator=gen, dtype=F64) * scale).clamp(max=0.999).requires_grad_())
    return v, d, u


def run_fast_single(cls, v, d, u, capacity):
    mem = cls(batch_size=v[0].shape[1], width=v[0].shape[2], capacity=capacity)
    reads, strengths = [], []
    for vt, dt, ut in zip(v, d, u):
        reads.append(mem.step(vt[0], dt[0], ut[0]))
        strengths.append(mem.strengths)
    return reads, strengths


def run_reference_single(ref_cls, v, d, u):
    B = v[0].shape[1]
    refs = [ref_cls() for _ in range(B)]
    reads, strengths = [], []
    for vt, dt, ut in zip(v, d, u):
        reads.append(torch.stack([refs[b].step(vt[0, b], dt[0, b], ut[0, b]) for b in range(B)]))
        strengths.append(torch.stack([torch.stack([as_tensor(x, vt) for x in refs[b].s[1:]]) for b in range(B)]))
    return reads, strengths


def run_fast_deque(v, d, u, capacity):
    mem = NeuralDeQue(batch_size=v[0].shape[1], width=v[0].shape[2], capacity=capacity)
    reads, strengths = [], []
    for vt, dt, ut in zip(v, d, u):
        reads.append(torch.stack(mem.step(vt[0], vt[1], dt[0], dt[1], ut[0], ut[1])))
        strengths.append(mem.strengths)
    return reads, strengths


def run_reference_deque(v, d, u):
    B = v[0].shape[1]
    refs = [ReferenceDeQue() for _ in range(B)]
    reads, strengths = [], []
    for vt, dt, ut in zip(v, d, u):
        per_row = [refs[b].step(vt[0, b], vt[1, b], dt[0, b], dt[1, b], ut[0, b], ut[1, b]) for b in range(B)]
        reads.append(torch.stack([torch.stack([top for top, _ in per_row]), torch.stack([bot for _, bot in per_row])]))
        strengths.append(torch.stack([torch.stack([as_tensor(x, vt) for x in refs[b].s[1:]]) for b in range(B)]))
    return reads, strengths


def loss_and_grads(reads, strengths, inputs, gen):
    """A random linear functional of every read and every strength vector, and its gradients."""
    loss = sum((torch.randn(r.shape, generator=gen, dtype=F64) * r).sum() for r in reads)
    loss = loss + sum((torch.randn(s.shape, generator=gen, dtype=F64) * s).sum() for s in strengths)
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)  # the oracle's u_1 pops an empty memory: unused
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("capacity", [1, None])  # capacity=1 forces the value buffer to grow repeatedly
@pytest.mark.parametrize("kind", ["stack", "queue", "deque"])
def test_fast_memory_matches_literal_equations(kind, capacity, seed):
    steps, B, m = 12, 3, 4
    gen = torch.Generator().manual_seed(seed)
    n_ends = 2 if kind == "deque" else 1
    v, d, u = random_signals(gen, steps, B, m, n_ends)
    if kind == "deque":
        fast = run_fast_deque(v, d, u, capacity)
        slow = run_reference_deque(v, d, u)
    else:
        cls, ref_cls = dict(stack=SINGLE_ENDED[0], queue=SINGLE_ENDED[1])[kind]
        fast = run_fast_single(cls, v, d, u, capacity)
        slow = run_reference_single(ref_cls, v, d, u)

    for t, (rf, rs) in enumerate(zip(fast[0], slow[0])):
        torch.testing.assert_close(rf, rs, atol=1e-10, rtol=0, msg=f"read at step {t + 1}")
    for t, (sf, ss) in enumerate(zip(fast[1], slow[1])):
        torch.testing.assert_close(sf, ss, atol=1e-10, rtol=0, msg=f"strengths at step {t + 1}")
    # Some strengths were popped to exactly zero and some survived partially: the pops were exercised.
    last = fast[1][-1]
    assert (last == 0).any() and ((last > 0) & (last < 1)).any()

    inputs = v + d + u
    g_fast = loss_and_grads(*fast, inputs, torch.Generator().manual_seed(100 + seed))
    g_slow = loss_and_grads(*slow, inputs, torch.Generator().manual_seed(100 + seed))
    for i, (gf, gs) in enumerate(zip(g_fast, g_slow)):
        name = ["v", "d", "u"][i // steps]
        torch.testing.assert_close(gf, gs, atol=1e-10, rtol=0, msg=f"d loss / d {name}_{i % steps + 1}")


# ----------------------------------------------------------------------------------------------------------------
# The paper's Figure 1 (stack) and its queue analogue.


def figure1_inputs():
    v = torch.eye(3, dtype=F64)  # v_t = e_t, so a read's coordinates are the weights of the rows
    return [(v[t : t + 1], torch.tensor([d], dtype=F64), torch.tensor([u], dtype=F64))
            for t, (d, u) in enumerate([(0.8, 0.0), (0.5, 0.1), (0.9, 0.9)])]


def test_figure1_stack():
    mem = NeuralStack(batch_size=1, width=3)
    expected = [
        ([0.8], [0.8, 0.0, 0.0]),  # push v1 (0.8): r1 = 0.8 v1
        ([0.7, 0.5], [0.5, 0.5, 0.0]),  # pop 0.1, push v2 (0.5): r2 = 0.5 v1 + 0.5 v2
        ([0.3, 0.0, 0.9], [0.1, 0.0, 0.9]),  # pop 0.9 removes v2 and 0.4 of v1: r3 = 0.1 v1 + 0.9 v3
    ]
    for (v, d, u), (s, r) in zip(figure1_inputs(), expected):
        read = mem.step(v, d, u)
        torch.testing.assert_close(mem.strengths[0], torch.tensor(s, dtype=F64), atol=1e-12, rtol=0)
        torch.testing.assert_close(read[0], torch.tensor(r, dtype=F64), atol=1e-12, rtol=0)


def test_figure1_queue_analogue():
    mem = NeuralQueue(batch_size=1, width=3)
    expected = [
        ([0.8], [0.8, 0.0, 0.0]),
        ([0.7, 0.5], [0.7, 0.3, 0.0]),  # read from the front: all of v1 (0.7), then 0.3 of v2
        ([0.0, 0.3, 0.9], [0.0, 0.3, 0.7]),  # pop 0.9 takes v1's 0.7 and 0.2 of v2
    ]
    for (v, d, u), (s, r) in zip(figure1_inputs(), expected):
        read = mem.step(v, d, u)
        torch.testing.assert_close(mem.strengths[0], torch.tensor(s, dtype=F64), atol=1e-12, rtol=0)
        torch.testing.assert_close(read[0], torch.tensor(r, dtype=F64), atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# Footnote 1: at a tie of max/min the derivative is the left argument's.


@pytest.mark.parametrize("cls", [NeuralStack, NeuralQueue])
def test_tie_single_push_of_strength_one(cls):
    """r_1 = min(d_1, max(0, 1 - 0)) v_1 with d_1 = 1: a tie of the min, so dr_1/dd_1 = v_1 (torch.minimum would
    give v_1 / 2)."""
    v = torch.tensor([[0.3, -1.2, 2.0]], dtype=F64)
    d = torch.ones(1, dtype=F64, requires_grad=True)
    r = cls(batch_size=1, width=3).step(v, d, torch.zeros(1, dtype=F64))
    (grads,) = torch.autograd.grad(r[0], d, grad_outputs=torch.eye(3, dtype=F64), is_grads_batched=True)
    torch.testing.assert_close(grads[:, 0], v[0], atol=0, rtol=0)


def test_tie_single_push_of_strength_one_deque():
    v_top = torch.tensor([[0.3, -1.2]], dtype=F64)
    v_bot = torch.tensor([[5.0, 7.0]], dtype=F64)
    d_top = torch.ones(1, dtype=F64, requires_grad=True)
    zero = torch.zeros(1, dtype=F64)
    r_top, _ = NeuralDeQue(batch_size=1, width=2).step(v_top, v_bot, d_top, zero, zero, zero)
    (g,) = torch.autograd.grad(r_top[0, 0], d_top)
    assert g.item() == v_top[0, 0].item()


@pytest.mark.parametrize("kind", ["stack", "queue"])
def test_tie_pop_that_exactly_empties_a_row(kind):
    """Push 0.5 then pop exactly 0.5: s_2[1] = max(0, 0.5 - max(0, 0.5 - 0)) is a tie at 0 of the outer max, whose
    left argument is the constant 0, so no gradient reaches u_2 or d_1 through it. The oracle agrees."""
    cls, ref_cls = dict(stack=SINGLE_ENDED[0], queue=SINGLE_ENDED[1])[kind]
    d = [torch.tensor([0.5], dtype=F64, requires_grad=True), torch.tensor([0.25], dtype=F64, requires_grad=True)]
    u = [torch.tensor([0.0], dtype=F64, requires_grad=True), torch.tensor([0.5], dtype=F64, requires_grad=True)]
    v = [torch.tensor([[1.0, 2.0]], dtype=F64), torch.tensor([[3.0, -1.0]], dtype=F64)]
    mem, ref = cls(batch_size=1, width=2), ref_cls()
    for t in range(2):
        r = mem.step(v[t], d[t], u[t])
        r_ref = ref.step(v[t][0], d[t][0], u[t][0])
    assert mem.strengths[0, 0].item() == 0.0
    g = torch.autograd.grad(mem.strengths[0, 0], [d[0], u[1]], allow_unused=True, retain_graph=True)
    assert all(x is None or x.item() == 0.0 for x in g)
    fast = torch.autograd.grad(r.sum(), d + u)
    slow = torch.autograd.grad(r_ref.sum(), d + u, allow_unused=True)
    for gf, gs in zip(fast, slow):
        torch.testing.assert_close(gf, torch.zeros_like(gf) if gs is None else gs.reshape(gf.shape), atol=0, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# torch.autograd.gradcheck on each memory.


def _gradcheck_inputs(gen, steps, B, m, n_ends):
    v = torch.randn(steps, n_ends, B, m, generator=gen, dtype=F64, requires_grad=True)
    # signals kept away from 0 and 1 so that the finite differences never cross a kink
    d = (0.2 + 0.6 * torch.rand(steps, n_ends, B, generator=gen, dtype=F64)).requires_grad_()
    u = (0.2 + 0.6 * torch.rand(steps, n_ends, B, generator=gen, dtype=F64)).requires_grad_()
    return v, d, u


@pytest.mark.parametrize("cls", [NeuralStack, NeuralQueue])
def test_gradcheck_single_ended(cls):
    v, d, u = _gradcheck_inputs(torch.Generator().manual_seed(3), 6, 2, 3, 1)

    def run(v, d, u):
        mem = cls(batch_size=2, width=3)
        reads = [mem.step(v[t, 0], d[t, 0], u[t, 0]) for t in range(v.shape[0])]
        return torch.stack(reads), mem.strengths

    assert torch.autograd.gradcheck(run, (v, d, u))


def test_gradcheck_deque():
    v, d, u = _gradcheck_inputs(torch.Generator().manual_seed(4), 5, 2, 3, 2)

    def run(v, d, u):
        mem = NeuralDeQue(batch_size=2, width=3)
        reads = [torch.stack(mem.step(v[t, 0], v[t, 1], d[t, 0], d[t, 1], u[t, 0], u[t, 1])) for t in range(v.shape[0])]
        return torch.stack(reads), mem.strengths

    assert torch.autograd.gradcheck(run, (v, d, u))


def test_gradient_for_one_input_ignores_other_backward_passes():
    """Value gradients travel through autograd edges, so asking for a subset of inputs (which prunes part of the
    graph) gives the same numbers as asking for all of them, in any order and any number of times."""
    gen = torch.Generator().manual_seed(5)
    v, d, u = _gradcheck_inputs(gen, 8, 2, 3, 1)
    vs = [v[t, 0].detach().clone().requires_grad_() for t in range(8)]
    mem = NeuralStack(batch_size=2, width=3)
    reads = [mem.step(vs[t], d[t, 0].detach(), u[t, 0].detach()) for t in range(8)]
    loss = sum((r * (t + 1)).sum() for t, r in enumerate(reads))
    all_grads = torch.autograd.grad(loss, vs, retain_graph=True)
    for t in [5, 0, 7, 5]:
        (g,) = torch.autograd.grad(loss, vs[t], retain_graph=True)
        torch.testing.assert_close(g, all_grads[t], atol=0, rtol=0)
    (g,) = torch.autograd.grad(reads[3].sum(), vs[1], retain_graph=True)  # an early read alone
    (g_ref,) = torch.autograd.grad(reads[3].sum(), vs, retain_graph=True, allow_unused=True)[1:2]
    torch.testing.assert_close(g, g_ref, atol=0, rtol=0)


def test_gradients_reach_every_input_of_every_step():
    gen = torch.Generator().manual_seed(6)
    v = torch.randn(6, 2, 2, 3, generator=gen, dtype=F64)
    # Small pushes and smaller pops: every pop is partial and every read spans several whole rows. (A pop that
    # empties the memory, or a row the read caps, correctly passes no gradient back: eq. 17-18.)
    d = 0.1 + 0.2 * torch.rand(6, 2, 2, generator=gen, dtype=F64)
    u = 0.05 + 0.05 * torch.rand(6, 2, 2, generator=gen, dtype=F64)
    for kind in ["stack", "queue", "deque"]:
        leaves = [x.detach().clone().requires_grad_() for x in (v, d, u)]
        if kind == "deque":
            mem = NeuralDeQue(batch_size=2, width=3)
            reads = [torch.cat(mem.step(leaves[0][t, 0], leaves[0][t, 1], leaves[1][t, 0], leaves[1][t, 1],
                                        leaves[2][t, 0], leaves[2][t, 1])) for t in range(6)]
        else:
            mem = (NeuralStack if kind == "stack" else NeuralQueue)(batch_size=2, width=3)
            reads = [mem.step(leaves[0][t, 0], leaves[1][t, 0], leaves[2][t, 0]) for t in range(6)]
        sum(r.pow(2).sum() for r in reads).backward()
        used = slice(None) if kind == "deque" else slice(0, 1)
        for name, leaf in zip("vdu", leaves):
            g = leaf.grad[:, used]
            # u_1 pops an empty memory: its gradient is exactly 0 by eq. 17. Every other input gets some gradient.
            g = g[1:] if name == "u" else g
            per_step = g.abs().flatten(1).sum(-1)
            assert (per_step > 0).all(), f"{kind}: no gradient reaches {name} at step(s) {(per_step == 0).nonzero()}"


# ----------------------------------------------------------------------------------------------------------------
# Limit case: with d, u in {0, 1} each memory is exactly the classical data structure.

bits = st.integers(min_value=0, max_value=1)


def _vectors(n, m, seed):
    return torch.randn(n, 2, 1, m, generator=torch.Generator().manual_seed(seed), dtype=F64)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(bits, bits), min_size=1, max_size=24), seed=st.integers(0, 2**16))
def test_stack_with_binary_signals_is_a_stack(ops, seed):
    values = _vectors(len(ops), 3, seed)
    mem, stack = NeuralStack(batch_size=1, width=3), []
    for t, (push, pop) in enumerate(ops):
        r = mem.step(values[t, 0], torch.tensor([float(push)], dtype=F64), torch.tensor([float(pop)], dtype=F64))
        if pop and stack:
            stack.pop()
        if push:
            stack.append(values[t, 0])
        expected = stack[-1] if stack else torch.zeros(1, 3, dtype=F64)
        torch.testing.assert_close(r, expected, atol=1e-12, rtol=0)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(bits, bits), min_size=1, max_size=24), seed=st.integers(0, 2**16))
def test_queue_with_binary_signals_is_a_queue(ops, seed):
    values = _vectors(len(ops), 3, seed)
    mem, queue = NeuralQueue(batch_size=1, width=3), []
    for t, (push, pop) in enumerate(ops):
        r = mem.step(values[t, 0], torch.tensor([float(push)], dtype=F64), torch.tensor([float(pop)], dtype=F64))
        if pop and queue:
            queue.pop(0)
        if push:
            queue.append(values[t, 0])
        expected = queue[0] if queue else torch.zeros(1, 3, dtype=F64)
        torch.testing.assert_close(r, expected, atol=1e-12, rtol=0)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(bits, bits, bits, bits), min_size=1, max_size=24), seed=st.integers(0, 2**16))
def test_deque_with_binary_signals_is_a_deque(ops, seed):
    values = _vectors(len(ops), 3, seed)
    mem, deque = NeuralDeQue(batch_size=1, width=3), []  # deque[0] is the bottom
    for t, (push_top, push_bot, pop_top, pop_bot) in enumerate(ops):
        sig = [torch.tensor([float(x)], dtype=F64) for x in (push_top, push_bot, pop_top, pop_bot)]
        r_top, r_bot = mem.step(values[t, 0], values[t, 1], *sig)
        if pop_top and deque:  # pop the top, then the bottom, then push both ends (§3.3)
            deque.pop()
        if pop_bot and deque:
            deque.pop(0)
        if push_bot:
            deque.insert(0, values[t, 1])
        if push_top:
            deque.append(values[t, 0])
        zero = torch.zeros(1, 3, dtype=F64)
        torch.testing.assert_close(r_top, deque[-1] if deque else zero, atol=1e-12, rtol=0)
        torch.testing.assert_close(r_bot, deque[0] if deque else zero, atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------------------------------------------
# dtype, device, shapes, and bad input.


def _devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_follow_the_inputs(dtype, device):
    B, m = 2, 5
    x = lambda *shape: torch.rand(*shape, dtype=dtype, device=device)  # noqa: E731
    for mem in (NeuralStack(batch_size=B, width=m), NeuralQueue(batch_size=B, width=m)):
        for _ in range(3):
            r = mem.step(x(B, m), x(B), x(B))
        assert r.dtype == dtype and r.device.type == device and r.shape == (B, m)
        assert mem.strengths.dtype == dtype and mem.strengths.shape == (B, 3)
    dq = NeuralDeQue(batch_size=B, width=m)
    for _ in range(3):
        r_top, r_bot = dq.step(x(B, m), x(B, m), x(B), x(B), x(B), x(B))
    assert r_top.dtype == r_bot.dtype == dtype and r_top.device.type == device
    assert dq.strengths.shape == (B, 6)


def test_empty_memory_state():
    mem = NeuralStack(batch_size=4, width=2)
    assert mem.strengths.shape == (4, 0) and len(mem) == 0 and mem.values.shape == (4, 0, 2)
    assert NeuralDeQue(batch_size=4, width=2).strengths.shape == (4, 0)


def _step_kwargs(B=2, m=3, **override):
    args = dict(v=torch.rand(B, m), d=torch.rand(B), u=torch.rand(B))
    args.update(override)
    return args


@pytest.mark.parametrize(
    "override, message",
    [
        (dict(v=torch.rand(2, 4)), r"v must have shape \(2, 3\).*got \(2, 4\)"),
        (dict(v=torch.rand(3, 3)), r"v must have shape \(2, 3\).*got \(3, 3\)"),
        (dict(d=torch.rand(3)), r"d must have shape \(2,\).*got \(3,\)"),
        (dict(u=torch.rand(2, 1)), r"u must have shape \(2,\).*got \(2, 1\)"),
        (dict(d=torch.tensor([0.5, 1.5])), r"d must lie in \[0, 1\].*row 1 is 1.5"),
        (dict(u=torch.tensor([-0.1, 0.5])), r"u must lie in \[0, 1\].*row 0 is -0.1"),
        (dict(u=torch.tensor([0.5, float("nan")])), r"u must lie in \[0, 1\].*row 1 is nan"),
        (dict(v=torch.tensor([[0.0, 1.0, 2.0], [float("nan"), 0.0, 0.0]])), r"v contains NaN \(batch row 1\)"),
        (dict(d=torch.rand(2, dtype=F64)), r"one dtype and device; d is torch.float64"),
        (dict(v=[[0.0] * 3] * 2), r"v must be a torch.Tensor"),
        (dict(d=torch.tensor([0, 1])), r"d must be a floating-point tensor"),
    ],
)
def test_bad_step_input_is_refused_before_any_compute(override, message):
    mem = NeuralStack(batch_size=2, width=3)
    with pytest.raises(ValueError, match=message):
        mem.step(**_step_kwargs(**override))
    assert len(mem) == 0 and mem.strengths.shape == (2, 0)


def test_value_checks_can_be_switched_off_but_shape_checks_cannot():
    mem = NeuralStack(batch_size=2, width=3, check_values=False)
    mem.step(**_step_kwargs(d=torch.tensor([0.5, 1.5])))
    with pytest.raises(ValueError, match="v must have shape"):
        mem.step(**_step_kwargs(v=torch.rand(2, 4)))


def test_later_step_in_another_dtype_is_refused():
    mem = NeuralQueue(batch_size=2, width=3)
    mem.step(**_step_kwargs())
    with pytest.raises(ValueError, match="already holds torch.float32"):
        mem.step(v=torch.rand(2, 3, dtype=F64), d=torch.rand(2, dtype=F64), u=torch.rand(2, dtype=F64))


def test_deque_names_its_arguments():
    dq = NeuralDeQue(batch_size=2, width=3)
    ok = dict(v_top=torch.rand(2, 3), v_bot=torch.rand(2, 3), d_top=torch.rand(2), d_bot=torch.rand(2),
              u_top=torch.rand(2), u_bot=torch.rand(2))
    with pytest.raises(ValueError, match=r"v_bot must have shape \(2, 3\)"):
        dq.step(**{**ok, "v_bot": torch.rand(2, 2)})
    with pytest.raises(ValueError, match=r"u_bot must lie in \[0, 1\]"):
        dq.step(**{**ok, "u_bot": torch.tensor([2.0, 0.0])})


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0, width=3), "batch_size must be an integer >= 1, got 0"),
    (dict(batch_size=2, width=2.5), "width must be an integer >= 1, got 2.5"),
    (dict(batch_size=2, width=3, capacity=0), "capacity .the number of steps to preallocate. must be an integer >= 1"),
])
def test_bad_construction_is_refused(kwargs, message):
    for cls in (NeuralStack, NeuralQueue, NeuralDeQue):
        with pytest.raises(ValueError, match=message):
            cls(**kwargs)


# ----------------------------------------------------------------------------------------------------------------
# Cost: the values are stored once.

_MEMORY_PROBE = r"""
import json, sys, torch
from pipeline.memory import NeuralStack

def status_kb(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

torch.set_num_threads(1)
B, m, T = 10, 256, 259
v = torch.randn(T, B, m, requires_grad=True)
d = torch.rand(T, B, requires_grad=True)
u = torch.rand(T, B, requires_grad=True)
peaks = {}
for capacity in map(int, sys.argv[1:]):  # one process for every capacity: the reset makes each peak its own
    with open("/proc/self/clear_refs", "w") as f:  # reset the high-water mark to the current resident set
        f.write("5")
    before = status_kb("VmRSS")
    mem = NeuralStack(batch_size=B, width=m, capacity=capacity)
    loss = sum(mem.step(v[t], torch.sigmoid(d[t]), torch.sigmoid(u[t])).square().sum() for t in range(T))
    loss.backward()
    peaks[capacity] = (status_kb("VmHWM") - before) / 1024
    del mem, loss
    v.grad = d.grad = u.grad = None
print(json.dumps(peaks))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc to read the peak")
def test_259_step_stack_memory_stays_far_below_a_copy_per_step():
    """Keeping a grown copy of the value matrix for every step costs ~350 MB here (B=10, m=256, T=259); storing the
    rows once costs a few MB of values plus O(T²·B) bytes of strengths and masks. The peak is read from VmHWM
    after a reset, in a fresh process: getrusage's ru_maxrss is carried over from the parent through fork and exec,
    so it could pass without measuring anything. Both capacities, preallocated for every step and grown from 16, in
    one process: the mark is reset before each. The second reuses pages the first freed, so it reads lower (about 12
    MB against about 40 alone): the copy per step's ~350 MB is far past the bound either way."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, "259", "16"], capture_output=True, text=True,
                         check=True)
    peaks = json.loads(out.stdout)
    assert sorted(peaks) == ["16", "259"]
    for capacity, peak_mb in peaks.items():
        assert peak_mb < 100, f"capacity {capacity}: peak memory grew by {peak_mb:.0f} MB"
        assert peak_mb > 2, f"capacity {capacity}: the probe measured {peak_mb:.1f} MB: less than the 2.6 MB of " \
                            "value rows it must hold"
