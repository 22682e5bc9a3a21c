"""The training step, written once (paper §4.4): loss, gradient clipping and RMSProp, for one run or P stacked.

A run's loss is the mean cross-entropy of its target positions (from the separator on, the final ``</s>`` included;
padding carries ``IGNORE_INDEX`` and never counts): :func:`target_nll` / its token count. One step is that loss's
gradient, clipped by the run's ``training.clip_mode`` —

* ``norm``: every gradient scaled by min(1, clip / (‖g‖ + 1e-6)), ‖g‖ the 2-norm over all of the run's gradients
  (``torch.nn.utils.clip_grad_norm_``),
* ``value``: every gradient entry clamped to [-clip, clip] (``torch.nn.utils.clip_grad_value_``),

then RMSProp with the run's rate (``torch.optim.RMSprop``: no momentum, not centred, no weight decay), or Adam at
torch's defaults where the run's ``training.optimizer`` says so (a single run's, or one member after another's only).

Two forms of that arithmetic and no third: :func:`take_step` on one run's own model (a single run, and a population
stepped one member after another, which a CPU does), and :func:`update` on P members stacked as ``[P, ...]`` tensors
(a population batched as one model, which a GPU does), whose clipping (:func:`clip_members`) and RMSProp
(:class:`PopulationRMSprop`) act on each member's slices alone.
``tests/test_population.py`` checks in float64 that the second equals the first, member by member, in both clip modes;
``tests/test_engine.py`` that a single run's ``metrics.csv`` is the one this code wrote before it was one engine, byte
for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.data.encoding import IGNORE_INDEX, Batch

CLIP_MODES = ("norm", "value")


def target_nll(model: nn.Module, batch: Batch) -> tuple[Tensor, Tensor]:
    """Summed negative log-likelihood of ``batch``'s target positions under ``model``, and how many there are."""
    logits = model(batch.inputs, batch.lengths)
    nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    return nll, batch.target_lengths.sum()


def make_optimizer(parameters: Iterable[Tensor], training, rates: list[float] | None = None):
    """The one optimizer constructor, for single runs, populations and both benches. ``training``: the run's
    :class:`~pipeline.config.TrainingConfig`; its ``lr`` is the rate. A run's own optimizer is RMSProp, the paper's
    (``torch.optim.RMSprop``), or Adam at torch's defaults where ``training.optimizer`` asks for it. With ``rates``
    (one per member) it is the RMSProp of P members stacked as one model (:class:`PopulationRMSprop`, ``parameters``
    stacked ``[P, ...]``), each member at its own rate and the shared ``training``'s alpha and eps."""
    if rates is not None:
        return PopulationRMSprop(list(parameters), rates, training.rmsprop_alpha, training.rmsprop_eps)
    if training.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=training.lr)
    return torch.optim.RMSprop(parameters, lr=training.lr, alpha=training.rmsprop_alpha, eps=training.rmsprop_eps)


def clip_gradients(parameters: Iterable[Tensor], clip: float, mode: str) -> None:
    """One run's gradients clipped in place by ``mode`` (see the module's docstring)."""
    if mode == "norm":
        torch.nn.utils.clip_grad_norm_(parameters, clip)
    elif mode == "value":
        torch.nn.utils.clip_grad_value_(parameters, clip)
    else:
        raise ValueError(f"clip mode {mode!r} is not one of {', '.join(CLIP_MODES)}")


def take_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, training,
              backward: Callable[[Tensor], None] = Tensor.backward,
              phase: Callable[[str], ContextManager] = lambda name: nullcontext()) -> tuple[Tensor, Tensor]:
    """One training step of one run on ``batch``: forward, backward, clipping, RMSProp. Returns the summed target NLL
    (detached) and the token count, what the run's perplexity window adds up. A loss that is not finite is returned
    without a step: the caller fails the run. ``backward``: the trainer's (Lightning's ``manual_backward``);
    ``phase``: a context around each of the four phases, by name (the bench's profiler labels them)."""
    optimizer.zero_grad()
    with phase("forward"):
        nll, tokens = target_nll(model, batch)
    if torch.isfinite(nll):
        with phase("backward"):
            backward(nll / tokens)
        with phase("clipping"):
            clip_gradients(model.parameters(), training.clip, training.clip_mode)
        with phase("optimiser"):
            optimizer.step()
    optimizer.zero_grad()
    return nll.detach(), tokens


@torch.no_grad()
def clip_members(params: list[Tensor], clip: float, mode: str) -> None:
    """:func:`clip_gradients` applied to each of P members on its own, on parameters stacked ``[P, ...]``: by value
    entry by entry; by norm with each member's 2-norm over its own slices of every gradient, never across members."""
    grads = [p.grad for p in params if p.grad is not None]
    if mode == "value":
        for g in grads:
            g.clamp_(-clip, clip)
        return
    if mode != "norm":
        raise ValueError(f"clip mode {mode!r} is not one of {', '.join(CLIP_MODES)}")
    norms = torch.stack([g.reshape(g.shape[0], -1).norm(dim=1) for g in grads]).norm(dim=0)  # (P,)
    scale = torch.clamp(clip / (norms + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype).reshape(-1, *([1] * (g.dim() - 1))))


def update(model: nn.Module, optimizer, inputs: Tensor, targets: Tensor, lengths: Tensor, tokens: Tensor,
           clip: float, mode: str) -> Tensor:
    """One step of P stacked members (a :class:`~pipeline.training.population.Population` and its
    :class:`PopulationRMSprop`) on their stacked batches, each with its target-token
    count ``tokens`` (P,); the gradients must be cleared. Returns the summed NLLs (P,)."""
    logits = model(inputs, lengths)
    nll = F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="none")
    nll = nll.reshape(targets.shape).sum(dim=(1, 2))  # (P,)
    losses = nll / tokens.to(nll.dtype)
    losses.sum().backward()  # a sum over members: no member's gradient is scaled by another's
    clip_members(optimizer.params, clip, mode)
    optimizer.step()
    return nll.detach()


class PopulationRMSprop:
    """``torch.optim.RMSprop`` (no momentum, not centred, no weight decay: the single run's) with a learning rate per
    member, ``lr`` (P,): square_avg = alpha·square_avg + (1 - alpha)·g², then p -= lr · g / (sqrt(square_avg) + eps)."""

    def __init__(self, params: list[Tensor], lr, alpha: float, eps: float) -> None:
        # the rates as exact as the single runs' Python floats (a float32 tensor would round 1e-3 to 1.00000005e-3)
        self.params, self.lr, self.alpha, self.eps = params, torch.as_tensor(lr, dtype=torch.float64), alpha, eps
        self.square_avg = [torch.zeros_like(p) for p in params]
        self._rates: dict[tuple, Tensor] = {}  # lr on each parameter's device and dtype, made once (outside a capture)

    def rate(self, p: Tensor) -> Tensor:
        """The rates (P, 1, ...) for parameter ``p``, on its device in its dtype: made on first use, so that a captured
        step copies nothing from the host."""
        key = (p.device, p.dtype, p.dim())
        if key not in self._rates:
            self._rates[key] = self.lr.to(device=p.device, dtype=p.dtype).reshape(-1, *([1] * (p.dim() - 1)))
        return self._rates[key]

    @torch.no_grad()
    def set_rate(self, k: int, lr: float) -> None:
        """Member ``k``'s learning rate is now ``lr`` (a new run in its slot), in place: a captured step reads it."""
        self.lr[k] = lr
        for rates in self._rates.values():
            rates[k] = lr

    @torch.no_grad()
    def step(self) -> None:
        for p, avg in zip(self.params, self.square_avg):
            if p.grad is None:
                continue
            avg.mul_(self.alpha).addcmul_(p.grad, p.grad, value=1 - self.alpha)
            p.sub_(self.rate(p) * p.grad / (avg.sqrt() + self.eps))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
