"""What the three memories share: input validation, value storage, and the value-gradient handle.

Value storage. Eq. 1 and 6 grow the value matrix by one row (two for the DeQue) per step, and rows are never
changed once written. Growing it by concatenation makes autograd keep a copy of the whole matrix for every step's
read, O(T²·m) memory (about 350 MB for 259 steps at B = 10, m = 256). Instead every value row is written once into a
preallocated buffer; each step's backward keeps a *view* of the rows that existed at that step, which stays valid
because later steps only write rows outside it.

Value gradients. Row i collects ``w_t[i] * dL/dr_t`` from every later read t (eq. 15). Each step therefore takes a
"handle" for the rows before it and returns a handle for the rows after it: a zero-cost expanded tensor whose only
job is to carry the rows' gradient backwards from step to step. Each step adds its reads' contribution and peels
off the gradient of the row(s) it wrote, which is the gradient of its ``v``. Because the handle is an ordinary
autograd edge, this stays exact whatever subset of inputs a backward pass asks for.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pipeline.checks import check_integer
from pipeline.memory.steps import SingleEndedStep, value_handle

DEFAULT_CAPACITY = 64  # steps preallocated when no capacity is given; the buffer doubles when full


class ValueRows:
    """The value matrix V_t, stored once. Rows are appended at the top (index n) or, for the DeQue, the bottom
    (index 0) and never modified. The buffer is allocated on the first append, with that row's dtype and device."""

    def __init__(self, batch_size: int, width: int, capacity: int, two_ended: bool) -> None:
        self.batch_size = batch_size
        self.width = width
        self.two_ended = two_ended
        self._capacity = capacity * (2 if two_ended else 1)
        self._data: Tensor | None = None
        self._lo = self._hi = self._capacity // 2 if two_ended else 0  # live rows are _data[:, _lo:_hi]

    def __len__(self) -> int:
        return self._hi - self._lo

    def view(self) -> Tensor:
        """The live rows, (B, n, m), index 0 at the bottom. A view: valid for as long as it is held."""
        assert self._data is not None
        return self._data[:, self._lo : self._hi]

    def append_top(self, row: Tensor) -> None:
        self._reserve(row, bottom=0, top=1)
        self._data[:, self._hi] = row
        self._hi += 1

    def append_bottom(self, row: Tensor) -> None:
        self._reserve(row, bottom=1, top=0)
        self._lo -= 1
        self._data[:, self._lo] = row

    def _reserve(self, row: Tensor, bottom: int, top: int) -> None:
        if self._data is None:
            self._data = row.new_empty(self.batch_size, self._capacity, self.width)
        if self._lo - bottom >= 0 and self._hi + top <= self._data.shape[1]:
            return
        # Full: move the live rows into a buffer twice the size. Views held by earlier steps keep the old buffer.
        n = len(self)
        capacity = 2 * max(self._data.shape[1], n + 2)
        lo = (capacity - n) // 2 if self.two_ended else 0
        data = self._data.new_empty(self.batch_size, capacity, self.width)
        data[:, lo : lo + n] = self.view()
        self._data, self._lo, self._hi = data, lo, lo + n


def check_capacity(capacity: int | None) -> int:
    if capacity is None:
        return DEFAULT_CAPACITY
    return check_integer("capacity", capacity, 1, "the number of steps to preallocate")


def check_sizes(batch_size: int, width: int) -> None:
    check_integer("batch_size", batch_size)
    check_integer("width", width)


class StepInputs:
    """Validates the inputs of one memory step before any compute, with errors that name the argument, what it
    was, and what was expected. Shape, dtype and device checks always run; the value checks (signals in [0, 1], no
    NaN) can be switched off on a hot path whose signals come from a sigmoid."""

    def __init__(self, owner: str, batch_size: int, width: int, check_values: bool) -> None:
        self.owner = owner
        self.batch_size = batch_size
        self.width = width
        self.check_values = check_values

    def __call__(self, values: dict[str, Tensor], signals: dict[str, Tensor], state: Tensor | None) -> None:
        B, m = self.batch_size, self.width
        reference: Tensor | None = None
        for name, x, shape in [(n, x, (B, m)) for n, x in values.items()] + [
            (n, x, (B,)) for n, x in signals.items()
        ]:
            if not isinstance(x, Tensor):
                raise ValueError(f"{self.owner}.step: {name} must be a torch.Tensor of shape {shape}, "
                                 f"got {type(x).__name__}")
            if tuple(x.shape) != shape:
                raise ValueError(
                    f"{self.owner}.step: {name} must have shape {shape} (batch_size={B}"
                    + (f", width={m}" if len(shape) == 2 else "")
                    + f"), got {tuple(x.shape)}"
                )
            if not x.is_floating_point():
                raise ValueError(f"{self.owner}.step: {name} must be a floating-point tensor, got dtype {x.dtype}")
            reference = reference if reference is not None else x
            if x.dtype != reference.dtype or x.device != reference.device:
                raise ValueError(
                    f"{self.owner}.step: all inputs must share one dtype and device; {name} is {x.dtype} on "
                    f"{x.device}, expected {reference.dtype} on {reference.device}"
                )
        if state is not None and state.numel() and (state.dtype != reference.dtype or state.device != reference.device):
            raise ValueError(
                f"{self.owner}.step: inputs are {reference.dtype} on {reference.device}, but this memory already "
                f"holds {state.dtype} on {state.device}; a memory keeps the dtype and device of its first step"
            )
        if not self.check_values:
            return
        for name, x in values.items():
            if torch.isnan(x).any():
                row = int(torch.isnan(x).any(-1).nonzero()[0])
                raise ValueError(f"{self.owner}.step: {name} contains NaN (batch row {row})")
        for name, x in signals.items():
            bad = torch.isnan(x) | (x < 0) | (x > 1)
            if bad.any():
                row = int(bad.nonzero()[0])
                raise ValueError(
                    f"{self.owner}.step: {name} must lie in [0, 1] for every batch row; row {row} is {x[row].item()!r}"
                )



class Memory:
    """State common to the three memories: the value rows, the current strengths, the value-gradient handle and
    the step count. Subclasses define ``step``."""

    two_ended = False

    def __init__(self, batch_size: int, width: int, *, capacity: int | None = None, check_values: bool = True):
        check_sizes(batch_size, width)
        self.batch_size = batch_size
        self.width = width
        self._rows = ValueRows(batch_size, width, check_capacity(capacity), two_ended=self.two_ended)
        self._strengths = torch.zeros(batch_size, 0)
        self._handle = torch.zeros(batch_size, 0, width)
        self._steps = 0
        self._check = StepInputs(type(self).__name__, batch_size, width, check_values)

    @property
    def strengths(self) -> Tensor:
        """The current strength vector s_t; index 0 is the oldest row at the bottom end."""
        return self._strengths

    @property
    def values(self) -> Tensor:
        """The current value matrix V_t, (B, rows, m), detached: for inspection, not for computing with."""
        if not len(self._rows):
            return torch.zeros(self.batch_size, 0, self.width)
        return self._rows.view().detach().clone()

    def __len__(self) -> int:
        """t, the number of steps taken."""
        return self._steps

    def _validate(self, values: dict[str, Tensor], signals: dict[str, Tensor]) -> None:
        """Check a step's inputs; on the first step, adopt their dtype and device for the state."""
        self._check(values, signals, self._strengths if self._steps else None)
        if not self._steps:
            like = next(iter(values.values()))
            self._strengths = like.new_zeros(self.batch_size, 0)
            self._handle = value_handle(like, 0)
        self._steps += 1


class SingleEndedMemory(Memory):
    """The Stack and the Queue: one value, push and pop per step. Which end pops and which reads is the memory's
    ``kind``'s (:class:`pipeline.memory.kinds.SingleEnded`: the one place that says it; a kind may pop at one end and
    read at the other). ``capacity`` preallocates that many steps of value storage (it doubles when exceeded);
    ``check_values=False`` skips the [0, 1] / NaN checks of the inputs (shapes are always checked); dtype and device
    follow the inputs of the first step."""

    def __init__(self, batch_size: int, width: int, *, kind, capacity: int | None = None, check_values: bool = True):
        super().__init__(batch_size, width, capacity=capacity, check_values=check_values)
        self.kind = kind
        self.pop_from_top, self.read_from_top = kind.pop_from_top, kind.read_from_top

    def step(self, v: Tensor, d: Tensor, u: Tensor) -> Tensor:
        """Pop ``u``, push ``v`` with strength ``d``, read. Returns r_t, (B, m)."""
        self._validate({"v": v}, {"d": d, "u": u})
        r, self._strengths, self._handle = SingleEndedStep.apply(
            self._strengths, self._handle, v, d, u, self._rows, self.pop_from_top, self.read_from_top
        )
        return r
