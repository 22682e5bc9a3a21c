"""``x · Wᵀ`` for one weight ``W`` applied at every position of a sequence, with the weight laid out once per batch.

The fused memory path (:mod:`pipeline.models.fused`) multiplies a batch of 10 rows by the same recurrent weight at
every position, forwards and backwards. For such skinny products ``torch.mm`` on this machine's CPU (MKL's sgemm on
an AMD EPYC) reaches about half of what oneDNN reaches on a weight it has reordered into its blocked layout
beforehand; oneDNN is also what ``torch.nn.LSTM``, the benchmark's yardstick, runs its recurrence on. Measured with
one thread, 131 positions, batch 10 (``make bench`` has the end-to-end figures):

=========================================  ==========  =============
product per position                       torch.mm    packed oneDNN
=========================================  ==========  =============
``[r; h]`` (10 × 512) · 512 × 1024         25.5 ms     11.4 ms
``[r; h]`` (10 × 768) · 768 × 2048         81.6 ms     24.0 ms
=========================================  ==========  =============

The weight changes after every optimizer step, so it is packed once per forward call (a copy of the weight: well
under a millisecond) and used at every position of that call.

Only float32 on a CPU with oneDNN takes this route; anything else (float64 in the equality tests, CUDA) uses
``torch.addmm``, which computes the same product. Both routes are exact products up to float rounding: the oneDNN
one sums in a different order, so float32 results differ in the last bits (``tests/test_fused.py`` bounds it).
The two operators used, ``torch.ops.mkldnn._reorder_linear_weight`` and ``torch.ops.mkldnn._linear_pointwise``, are
the ones PyTorch's own compiler emits for CPU linear layers; they are private, so their presence is checked rather
than assumed (torch is pinned exactly in ``pyproject.toml``).
"""

from __future__ import annotations

import torch
from torch import Tensor

_ops = getattr(torch.ops, "mkldnn", None)
ONEDNN = bool(
    torch.backends.mkldnn.is_available()
    and _ops is not None
    and hasattr(_ops, "_reorder_linear_weight")
    and hasattr(_ops, "_linear_pointwise")
)

# Set to False to force the plain route everywhere (tests compare the two).
enabled = True


def packs(t: Tensor) -> bool:
    """Whether products with ``t`` take the packed oneDNN route."""
    return enabled and ONEDNN and t.device.type == "cpu" and t.dtype == torch.float32


class PackedWeight:
    """``W`` (out × in) ready for ``x · Wᵀ (+ bias) (+ add)`` with ``x`` of ``rows`` × in, many times over.

    ``rows`` is a hint for the layout; other row counts still give the right product.
    """

    def __init__(self, weight: Tensor, rows: int, bias: Tensor | None = None) -> None:
        self.weight = weight.detach()
        self.bias = None if bias is None else bias.detach()
        self.packed = _ops._reorder_linear_weight(self.weight.contiguous(), rows) if packs(self.weight) else None

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
    if not (packs(x) and packs(weight)):
        return torch.mm(x, weight.t()) if bias is None else torch.addmm(bias, x, weight.t())
    return _ops._linear_pointwise(x.contiguous(), weight.contiguous(), bias, "none", [], "")


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a · b`` for one large product, on the faster route."""
    return linear(a, b.t())
