"""The fused sequence-level path of the memory models equals the readable reference path: outputs and the
gradient of every parameter, in float64, with and without padding, for the Stack, Queue and DeQue."""

import pytest
import torch

from pipeline.config import ModelConfig, ProbeConfig
from pipeline.models import build_model, products


def pair_of_models(name, hidden=12, width=6):
    # "deque, bottom read unheard": the DeQue whose bottom read's input columns are masked (bottom_read_heard_from);
    # "..., read zeroed": the ablation whose every read is masked (read_zeroed)
    name, _, probe = name.partition(", ")
    extra = {"bottom read unheard": dict(probes=ProbeConfig(bottom_read_heard_from=100)),
             "read zeroed": dict(probes=ProbeConfig(read_zeroed=True)), "": {}}[probe]
    torch.manual_seed(1)
    ref = build_model(ModelConfig(name=name, hidden=hidden, memory_width=width, embedding=5,
                                  implementation="reference", **extra), 11, 7).double()
    fused = build_model(ModelConfig(name=name, hidden=hidden, memory_width=width, embedding=5,
                                    implementation="fused", **extra), 11, 7).double()
    fused.load_state_dict(ref.state_dict())
    return ref, fused


# On CUDA the fused path runs the Python memory steps (native.c is CPU-only): the same equivalence, marked `cuda`.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]  # skipped without a GPU (conftest.py)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("name", ["stack", "queue", "deque", "deque, bottom read unheard"])
def test_fused_equals_reference_outputs_and_every_parameter_gradient(name, padded, device):
    ref, fused = (model.to(device) for model in pair_of_models(name))
    gen = torch.Generator().manual_seed(2)
    inputs = torch.randint(1, 11, (4, 13), generator=gen)
    lengths = torch.tensor([13, 9, 5, 13]) if padded else None
    if padded:
        inputs[torch.arange(13).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
        lengths = lengths.to(device)
    inputs = inputs.to(device)
    weights = torch.randn(4, 13, 7, generator=gen, dtype=torch.float64).to(device)
    results = []
    for model in (ref, fused):
        model.zero_grad()
        out = model(inputs, lengths)
        (out * weights).sum().backward()
        results.append((out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (out_ref, grads_ref), (out_fused, grads_fused) = results
    torch.testing.assert_close(out_fused, out_ref, atol=1e-12, rtol=0)
    assert grads_ref.keys() == grads_fused.keys()
    for name_, g in grads_ref.items():
        assert g.abs().sum() > 0, f"{name_} got no gradient: the comparison would be vacuous"
        torch.testing.assert_close(grads_fused[name_], g, atol=1e-11, rtol=0, msg=name_)


def test_fused_runs_in_float32_and_without_grad():
    ref, fused = pair_of_models("stack", hidden=16, width=8)
    ref, fused = ref.float(), fused.float()
    inputs = torch.randint(1, 11, (3, 20))
    with torch.no_grad():
        torch.testing.assert_close(fused(inputs), ref(inputs), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_fused_float32_on_the_packed_route_matches_float64_reference(name):
    """Training runs in float32, where the recurrent products take the packed oneDNN route (a different summation
    order): outputs and every gradient stay within float32 rounding of the float64 reference."""
    ref, fused = pair_of_models(name, hidden=32, width=8)
    fused = fused.float()
    assert products.on_onednn(fused.controller.weight_hh) == products.ONEDNN
    gen = torch.Generator().manual_seed(3)
    inputs = torch.randint(1, 11, (5, 30), generator=gen)
    weights = torch.randn(5, 30, 7, generator=gen, dtype=torch.float64)
    results = []
    for model in (ref, fused):
        out = model(inputs)
        (out.double() * weights).sum().backward()
        results.append((out.detach().double(), {n: p.grad.double() for n, p in model.named_parameters()}))
    (out_ref, grads_ref), (out_32, grads_32) = results
    torch.testing.assert_close(out_32, out_ref, atol=1e-5, rtol=1e-4)
    for name_, g in grads_ref.items():
        scale = g.abs().max().item()
        torch.testing.assert_close(grads_32[name_], g, atol=1e-4 * scale, rtol=1e-3, msg=name_)


@pytest.mark.skipif(not products.ONEDNN, reason="this torch has no oneDNN linear operators")
@pytest.mark.parametrize("rows", [10, 7, 1])
def test_packed_weight_equals_the_plain_product(rows):
    """The packed route gives x·Wᵀ (+ bias) (+ add) for the row count it was packed for and for others."""
    gen = torch.Generator().manual_seed(4)
    w, b = torch.randn(48, 40, generator=gen), torch.randn(48, generator=gen)
    x, add = torch.randn(rows, 40, generator=gen), torch.randn(rows, 48, generator=gen)
    assert products.on_onednn(w)
    exact = x.double() @ w.double().t()
    torch.testing.assert_close(products.PackedWeight(w, 10)(x).double(), exact, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(products.PackedWeight(w, 10, b)(x, add=add).double(),
                               exact + b.double() + add.double(), atol=1e-5, rtol=1e-5)
    a, c = torch.randn(40, 90, generator=gen), torch.randn(90, 33, generator=gen)
    torch.testing.assert_close(products.matmul(a, c).double(), a.double() @ c.double(), atol=1e-4, rtol=1e-5)
    c_stored_transposed = c.t().contiguous().t()
    torch.testing.assert_close(products.matmul(a, c_stored_transposed).double(), a.double() @ c.double(), atol=1e-4,
                               rtol=1e-5)


def _float32_run(name, inputs, weights):
    _, fused = pair_of_models(name, hidden=32, width=8)
    fused = fused.float()
    out = fused(inputs)
    (out.double() * weights).sum().backward()
    return out.detach().double(), {n: p.grad.double() for n, p in fused.named_parameters()}


@pytest.mark.parametrize("force", ["operators missing", "mkldnn disabled"])
def test_the_plain_product_fallback_gives_the_same_training_step(monkeypatch, force):
    """Where the oneDNN operators (or the overloads called) are missing, or oneDNN is disabled, the products fall
    back to torch.mm and compute the same function."""
    gen = torch.Generator().manual_seed(5)
    inputs = torch.randint(1, 11, (4, 25), generator=gen)
    weights = torch.randn(4, 25, 7, generator=gen, dtype=torch.float64)
    out_default, grads_default = _float32_run("deque", inputs, weights)
    w = torch.randn(8, 8)
    if force == "operators missing":
        monkeypatch.setattr(products, "ONEDNN", False)
        assert not products.on_onednn(w)
        out, grads = _float32_run("deque", inputs, weights)
    else:
        with torch.backends.mkldnn.flags(enabled=False):
            assert not products.on_onednn(w)
            out, grads = _float32_run("deque", inputs, weights)
    torch.testing.assert_close(out, out_default, atol=1e-5, rtol=1e-4)
    for name_, g in grads_default.items():
        torch.testing.assert_close(grads[name_], g, atol=1e-4 * g.abs().max().item(), rtol=1e-3, msg=name_)


def test_a_missing_overload_is_detected(monkeypatch):
    class Without:  # an operator packet without the .binary overload the fused path calls
        default = object()

    class Ops:
        _reorder_linear_weight = Without()
        _linear_pointwise = Without()

    monkeypatch.setattr(torch.ops, "mkldnn", Ops(), raising=False)
    assert products._onednn_ops_present() is False


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_fused_float32_equals_reference_at_the_real_sizes(name):
    """Hidden 256, memory 256, 131 positions (a training-length joint sequence at its longest), float32 both."""
    torch.manual_seed(6)
    ref = build_model(ModelConfig(name=name, hidden=256, implementation="reference"), 259, 129)
    fused = build_model(ModelConfig(name=name, hidden=256), 259, 129)
    fused.load_state_dict(ref.state_dict())
    gen = torch.Generator().manual_seed(7)
    inputs = torch.randint(1, 259, (2, 131), generator=gen)
    weights = torch.randn(2, 131, 129, generator=gen)
    results = []
    for model in (ref, fused):
        out = model(inputs)
        (out * weights).sum().backward()
        results.append((out.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (out_ref, grads_ref), (out_fused, grads_fused) = results
    torch.testing.assert_close(out_fused, out_ref, atol=1e-4, rtol=1e-4)
    for name_, g in grads_ref.items():
        torch.testing.assert_close(grads_fused[name_], g, atol=2e-4 * g.abs().max().item(), rtol=1e-3, msg=name_)


def test_second_order_gradients_are_refused_not_wrong():
    """The hand-written backwards are first-order only (once_differentiable): a gradient of a gradient through a
    memory step fails loudly, and the fused path's parameter gradients carry autograd's error node."""
    from pipeline.memory import NeuralStack

    v = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    d = torch.full((2,), 0.7, dtype=torch.float64, requires_grad=True)
    out = NeuralStack(batch_size=2, width=6).step(v, d, torch.zeros(2, dtype=torch.float64)).sum()
    (g_v,) = torch.autograd.grad(out, (v,), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        torch.autograd.grad(g_v.sum(), (v,))
    _, fused = pair_of_models("stack")
    out = fused(torch.randint(1, 11, (2, 6))).sum()
    grads = torch.autograd.grad(out, (fused.signals.weight, fused.controller.bias_ih), create_graph=True)
    assert all(type(g.grad_fn).__name__ == "Error" for g in grads)


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_a_zeroed_read_is_never_heard(name):
    """The ablation of issue 78: with probes.read_zeroed the outputs do not depend on what the memory holds (the
    value head changed, the outputs the same), no gradient reaches the read's input weights or the memory's signal
    head, and the outputs are those of the same model whose read input weights are zero."""
    ref, fused = pair_of_models(f"{name}, read zeroed")
    plain = build_model(ModelConfig(name=name, hidden=12, memory_width=6, embedding=5), 11, 7).double()
    plain.load_state_dict({k: v for k, v in fused.state_dict().items() if k != "input_mask"})
    reads = fused.memory.reads * 6
    with torch.no_grad():
        plain.controller.weight_ih[:, -reads:] = 0
    inputs = torch.randint(1, 11, (3, 9), generator=torch.Generator().manual_seed(3))
    out = fused(inputs)
    torch.testing.assert_close(out, plain(inputs))
    torch.testing.assert_close(ref(inputs), out)  # the reference path masks alike
    out.square().sum().backward()
    assert fused.controller.weight_ih.grad[:, -reads:].abs().max() == 0
    assert fused.signals.weight.grad.abs().max() == 0  # push, pop and values change nothing the loss sees
    with torch.no_grad():
        fused.signals.weight.normal_()
    torch.testing.assert_close(fused(inputs), out.detach())
