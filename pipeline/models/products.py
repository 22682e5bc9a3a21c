"""The fused memory path's matrix products, on oneDNN where that is faster: float32 on a CPU.

Two kinds of product dominate a training batch of :mod:`pipeline.models.fused`:

* **per position**: 10 rows (the batch) times the same recurrent weight, at every position forwards and backwards.
  :class:`PackedWeight` reorders the weight once per call into oneDNN's blocked layout and reuses it at every
  position; the weight changes after every optimizer step, so once per call is as often as it can be reused;
* **once per sequence**: the input projection of all positions, and every weight gradient. :func:`linear` hands
  oneDNN the weight as it is: packing first costs more than a single product gains from it.

Why not ``torch.mm``: on this project's CPUs (AMD EPYC) PyTorch's ``torch.mm`` runs MKL's sgemm, which reaches
about half of oneDNN's speed on these shapes; oneDNN is also what ``torch.nn.LSTM``, the benchmark's yardstick, runs
its recurrence on. Measured with one thread, batch 10, 131 positions, each product in isolation:

=============================================  ==========  ==============
product                                        torch.mm    oneDNN
=============================================  ==========  ==============
``[r; h]`` (10 × 512) · 512 × 1024, per step   25.5 ms     11.4 (packed)
``[r; h]`` (10 × 768) · 768 × 2048, per step   81.6 ms     24.0 (packed)
weight gradient 1024 × 1310 · 1310 × 512       15.5 ms     6.8 + copies
=============================================  ==========  ==============

Anything other than float32 on a CPU with oneDNN (float64 in the equality tests, CUDA) takes ``torch.mm`` /
``torch.addmm``. Both compute the same product up to float rounding: oneDNN sums in a different order, so float32
results differ in the last bits (``tests/test_fused.py`` bounds it against the float64 reference). The operators,
``torch.ops.mkldnn._reorder_linear_weight`` and ``torch.ops.mkldnn._linear_pointwise``, are the ones PyTorch's own
compiler emits for CPU linear layers; they are private, so their presence, with the overloads called, is checked, not
assumed (torch is pinned exactly in ``pyproject.toml``), and ``torch.backends.mkldnn.enabled`` is honoured.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _onednn_ops_present() -> bool:
    """Whether this torch build has both private operators *and* the overloads called below (``.default`` for the
    reorder and the plain linear, ``.binary`` for the linear with an added tensor). Anything missing: torch.mm."""
    ops = getattr(torch.ops, "mkldnn", None)
    if ops is None or not torch.backends.mkldnn.is_available():
        return False
    try:
        reorder, pointwise = ops._reorder_linear_weight, ops._linear_pointwise
        return all(hasattr(op, overload) for op, overload in ((reorder, "default"), (pointwise, "default"),
                                                              (pointwise, "binary")))
    except (AttributeError, RuntimeError):  # torch.ops raises on an unknown operator name
        return False


_ops = getattr(torch.ops, "mkldnn", None)
ONEDNN = _onednn_ops_present()


def on_onednn(t: Tensor) -> bool:
    """Whether products with ``t`` run on oneDNN: the operators exist, oneDNN is enabled
    (``torch.backends.mkldnn.flags(enabled=False)`` turns it off, as for PyTorch's own layers), and ``t`` is
    float32 on a CPU."""
    return ONEDNN and torch.backends.mkldnn.enabled and t.device.type == "cpu" and t.dtype == torch.float32


class PackedWeight:
    """``W`` (out × in) ready for ``x · Wᵀ (+ bias) (+ add)`` with ``x`` of ``rows`` × in, many times over.

    ``rows`` is a hint for the layout; other row counts still give the right product.
    """

    def __init__(self, weight: Tensor, rows: int, bias: Tensor | None = None) -> None:
        self.weight = weight.detach()
        self.bias = None if bias is None else bias.detach()
        self.packed = _ops._reorder_linear_weight(self.weight.contiguous(), rows) if on_onednn(self.weight) else None

    def __call__(self, x: Tensor, add: Tensor | None = None) -> Tensor:
        """``x · Wᵀ + bias + add`` (the last two where given)."""
        if self.packed is None:
            offset = self.bias if add is None else add if self.bias is None else add + self.bias
            return torch.mm(x, self.weight.t()) if offset is None else torch.addmm(offset, x, self.weight.t())
        if add is None:
            return _ops._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return _ops._linear_pointwise.binary(x, add, self.packed, self.bias, "add")


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x · Wᵀ (+ bias)`` once, for one large product (a whole sequence's input projection or weight gradients).

    oneDNN takes the weight as it is here: packing it first costs more than the single product gains from it.
    """
    if not (on_onednn(x) and on_onednn(weight)):
        return torch.mm(x, weight.t()) if bias is None else torch.addmm(bias, x, weight.t())
    return _ops._linear_pointwise(x.contiguous(), weight.contiguous(), bias, "none", [], "")


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a · b`` for one large product, on the faster route."""
    return linear(a, b.t())
