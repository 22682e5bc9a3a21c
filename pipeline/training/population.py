"""P runs of one architecture stacked as one model, for a GPU: the models, their RMSProp, and the step captured once.

On a GPU one run of these models is bound by kernel launches, not arithmetic; P runs whose parameters are stacked on
a leading *population* dimension do P times the work with the same launches (``docs/training.md``, "Population
training").

* :class:`PopulationLSTM` and :class:`PopulationMemoryLSTM`: the parameters of P members of one architecture,
  stacked as ``[P, ...]`` tensors, copied from the members as they were initialised. Members may read different
  vocabularies (the synthetic tasks' and each ITG task's): the vocabulary's rows are padded to the largest, the
  padding's logits masked out of the softmax, so each member computes what it computes alone and its padding rows
  never receive a gradient. ``nn.LSTM`` has no
  batched-over-members form (cuDNN has no vmap rule), so each layer is an explicit cell whose gate products are
  batched matrix products (``torch.baddbmm``), in ``nn.LSTM``'s gate order (i, f, g, o); a deep LSTM's layers step
  together on anti-diagonals (:class:`WavefrontLSTM`).
* :class:`PopulationJMStack` and :class:`PopulationTransformer`: the two baselines beside the paper
  (``docs/models.md``), stacked alike; a Transformer with randomised positions is not (its positions are drawn on the
  host for every batch, which a captured step cannot replay).
* :func:`population_step` and :class:`CapturedStep`: the stacked form of the training step
  (:func:`pipeline.training.step.update`), eager or replayed as a CUDA graph. Members may differ in seed, learning rate
  and task (vocabularies padded, as above); each member's batches are its own stream's, padded to the longest.

``tests/test_population.py`` checks in float64 that every member after 50 steps equals the same run trained alone
(loss, every parameter, RMSProp's state, to 1e-9), in both clip modes. ``pipeline.training.engine`` trains with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline.data.encoding import IGNORE_INDEX, Batch
from pipeline.models.deep_lstm import DeepLSTM
from pipeline.models.jm_stack import JMStackLSTM, step_stack
from pipeline.models.memory_lstm import MemoryLSTM
from pipeline.models.transformer import Transformer, sinusoids
from pipeline.training.step import PopulationRMSprop, update

# The parameters whose first dimension is a vocabulary: the input ids' embedding, the output ids' logits.
INPUT_ROWS = ("embed.weight",)
OUTPUT_ROWS = ("readout.output_embedding.weight", "readout.output_embedding.bias")


class Population(nn.Module):
    """The parameters of P members of one architecture, stacked as ``[P, ...]`` tensors copied from the members as
    they were initialised; the embedding and the readout every model shares (``models.base``). A subclass runs the
    recurrent core. ``vocab``: the (input, output) sizes to pad every member's vocabulary to (None: the largest
    member's), so that a member of another task can take a slot later (:meth:`place`)."""

    def __init__(self, members: list[nn.Module], vocab: tuple[int, int] | None = None) -> None:
        super().__init__()
        if not members:
            raise ValueError("a population needs at least one member")
        vocabularies = INPUT_ROWS + OUTPUT_ROWS
        shapes = {tuple((name, p.shape[1:] if name in vocabularies else p.shape) for name, p in m.named_parameters())
                  for m in members}
        if len(shapes) != 1:
            raise ValueError("every member of a population must have the same architecture (vocabularies aside)")
        self.size = len(members)
        self.names = [name for name, _ in members[0].named_parameters()]
        largest = (max(m.input_size for m in members), max(m.output_size for m in members))
        self.vocab = vocab or largest
        if self.vocab[0] < largest[0] or self.vocab[1] < largest[1]:
            raise ValueError(f"a population padded to vocabularies {self.vocab} cannot hold a member of {largest}")
        # padded to the population's vocabularies only where some member's differ: else the step is the plain one
        self.padded = vocab is not None or len({(m.input_size, m.output_size) for m in members}) > 1
        self.own_vocab = [(m.input_size, m.output_size) for m in members]
        stacked = {name: torch.stack([self.padding(dict(m.named_parameters())[name].detach(), name) for m in members])
                   for name in self.names}
        # "layers.0.weight_ih_l0" -> "layers_0_weight_ih_l0": ParameterDict keys may not hold dots
        self.weights = nn.ParameterDict({self.key(n): nn.Parameter(t.clone()) for n, t in stacked.items()})
        # each member's own output ids: the softmax of a padded member sees no other logit
        self.register_buffer("output_live", torch.arange(self.vocab[1]) < torch.tensor(
            [out for _, out in self.own_vocab]).unsqueeze(1))

    def padding(self, tensor: Tensor, name: str) -> Tensor:
        """A member's ``name`` padded with zeros to the population's vocabulary (unchanged if not a vocabulary's)."""
        rows = self.vocab[0] if name in INPUT_ROWS else self.vocab[1] if name in OUTPUT_ROWS else tensor.shape[0]
        return F.pad(tensor, (*[0, 0] * (tensor.dim() - 1), 0, rows - tensor.shape[0])) if self.padded else tensor

    def own(self, k: int, name: str) -> tuple:
        """The index of member ``k``'s own part of a stacked ``[P, ...]`` tensor of ``name`` (its parameter or its
        RMSProp state): its vocabulary's rows, where that is padded."""
        if not self.padded or name not in INPUT_ROWS + OUTPUT_ROWS:
            return (k,)
        return (k, slice(0, self.own_vocab[k][0] if name in INPUT_ROWS else self.own_vocab[k][1]))

    @torch.no_grad()
    def place(self, k: int, member: nn.Module) -> None:
        """``member``'s parameters into slot ``k`` (its padding zeroed), its vocabulary's logits live."""
        if member.input_size > self.vocab[0] or member.output_size > self.vocab[1]:
            raise ValueError(f"a member of vocabularies {(member.input_size, member.output_size)} does not fit a "
                             f"population padded to {self.vocab}")
        self.own_vocab[k] = (member.input_size, member.output_size)
        for name, p in member.named_parameters():
            self.put(self.member(name), k, name, p)
        self.output_live[k] = torch.arange(self.vocab[1], device=self.output_live.device) < member.output_size

    @torch.no_grad()
    def put(self, stacked: Tensor, k: int, name: str, value: Tensor) -> None:
        """``value`` (member ``k``'s tensor of ``name``: a parameter or its RMSProp state) into slot ``k`` of a
        stacked ``[P, ...]`` tensor, the rest of the slot (another vocabulary's rows) zeroed."""
        stacked[k].zero_()
        stacked[self.own(k, name)].copy_(value)

    @staticmethod
    def key(name: str) -> str:
        return name.replace(".", "_")

    def member(self, name: str) -> Tensor:
        """The stacked ``[P, ...]`` tensor of one of the members' parameters, by its name in a member."""
        return self.weights[self.key(name)]

    def ordered_parameters(self) -> list[nn.Parameter]:
        """The stacked parameters in the members' own order (``names``; a ParameterDict lists its keys sorted)."""
        return [self.member(name) for name in self.names]

    def member_state_dict(self, k: int) -> dict[str, Tensor]:
        """Member ``k``'s parameters under the member's names: what its own run's checkpoint holds."""
        return {name: self.member(name)[self.own(k, name)].detach().clone() for name in self.names}

    def linear(self, x: Tensor, name: str) -> Tensor:
        """``x @ W^T + b`` per member for the members' ``nn.Linear`` called ``name``: x (P, N, in) -> (P, N, out)."""
        weight, bias = self.member(f"{name}.weight"), self.member(f"{name}.bias")
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    def embed(self, inputs: Tensor) -> Tensor:
        """Input embeddings (P, B, L, E) of ids (P, B, L)."""
        P, B, L = inputs.shape
        embedding = self.member("embed.weight")  # (P, V_in, E)
        x = torch.gather(embedding, 1, inputs.reshape(P, B * L, 1).expand(-1, -1, embedding.shape[-1]))
        return x.reshape(P, B, L, -1)

    def readout(self, top: Tensor) -> Tensor:
        """Logits (P, B, L, V_out) of the core's outputs (P, B, L, H): o = tanh(W_o h + b_o), then E_out o + b."""
        P, B, L, _ = top.shape
        o = torch.tanh(self.linear(top.reshape(P, B * L, -1), "readout.project"))
        logits = self.linear(o, "readout.output_embedding").reshape(P, B, L, -1)
        if self.padded:  # another member's output ids: never predicted, no gradient (exp of the lowest float is 0)
            logits = logits.masked_fill(~self.output_live[:, None, None, :], torch.finfo(logits.dtype).min)
        return logits

    def controller(self, batch: int):
        """The members' ``nn.LSTMCell`` called ``controller`` (the memory models' and the JM stack's), batched: its
        start (h_0, c_0), each (P, batch, H), and its step ``(input, h, c) -> (h, c)``, the weights read once."""
        w_ih = self.member("controller.weight_ih").transpose(1, 2)
        w_hh = self.member("controller.weight_hh").transpose(1, 2)
        bias = (self.member("controller.bias_ih") + self.member("controller.bias_hh")).unsqueeze(1)

        def step(controller_in: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
            return self.cell(torch.baddbmm(torch.baddbmm(bias, controller_in, w_ih), h, w_hh), c)

        h0, c0 = (self.member(name).unsqueeze(1).expand(self.size, batch, -1) for name in ("h0", "c0"))
        return h0, c0, step

    @staticmethod
    def cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """An LSTM cell's update from its pre-activation gates, in nn.LSTM's order (i, f, g, o)."""
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class PopulationLSTM(Population):
    """P :class:`~pipeline.models.deep_lstm.DeepLSTM` members: each layer an explicit cell with the input skip, the
    layers stepped as a wavefront (:class:`WavefrontLSTM`); the input embedding's products, every layer's at every
    position, made first in one product."""

    def __init__(self, members: list[DeepLSTM], vocab: tuple[int, int] | None = None) -> None:
        super().__init__(members, vocab)
        self.layers = len(members[0].layers)

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (P, B, L, V_out) for input ids (P, B, L). Right padding needs no mask: it comes
        after every real position of its row, and a left-to-right LSTM never lets it reach one."""
        P, B, L = inputs.shape
        n, x = self.layers, self.embed(inputs)  # (P, B, L, E)
        E = x.shape[-1]
        w_ih = [self.member(f"layers.{layer}.weight_ih_l0") for layer in range(n)]  # (P, 4H, E [+ H])
        w_hh = torch.stack([self.member(f"layers.{layer}.weight_hh_l0") for layer in range(n)], 1)  # (P, n, 4H, H)
        bias = torch.stack([self.member(f"layers.{layer}.bias_ih_l0") + self.member(f"layers.{layer}.bias_hh_l0")
                            for layer in range(n)], 1)  # (P, n, 4H)
        G = w_hh.shape[-2]
        # every layer's product with the input embedding (the input skip), every position at once
        w_x = torch.stack([w[..., :E] for w in w_ih], 1)  # (P, n, 4H, E)
        from_x = (x.reshape(P, 1, B * L, E) @ w_x.transpose(-1, -2) + bias.unsqueeze(2)).reshape(P, n, B, L, G)
        # skewed onto the anti-diagonals: on diagonal d, layer l reads position d - l (zeros off the sequence); each
        # layer padded on its own, as indexing the layer of one padded tensor would cost each its whole size backward
        skewed = torch.stack([F.pad(layer_x, (0, 0, layer, n - 1 - layer))
                              for layer, layer_x in enumerate(from_x.unbind(1))], 1)
        skewed = skewed.permute(3, 0, 1, 2, 4).contiguous()  # (D, P, n, B, 4H), D = L + n - 1
        # the recurrent weight beside the weight on the layer below's state (layer 0 has none: zeros)
        if n > 1:
            w_below = torch.stack([torch.zeros_like(w_hh[:, 0]), *(w[..., E:] for w in w_ih[1:])], 1)
            w_hh = torch.cat([w_hh, w_below], -1)  # (P, n, 4H, 2H)
        top = WavefrontLSTM.apply(skewed, w_hh, self.member("h0"), self.member("c0"))  # (P, B, L, H)
        return self.readout(top)


class WavefrontLSTM(torch.autograd.Function):
    """The recurrence of P stacked deep LSTMs of n layers (the input skip's products already made), stepped on
    anti-diagonals, with its backward written out.

    Layer l at position t needs layer l - 1 at t and itself at t - 1, so the (layer, position) pairs on one
    anti-diagonal d = l + t are independent: L + n - 1 steps, each one batched product and one cell for every layer
    at once (over P · n), instead of n · L steps of one layer each (cuDNN runs its layers so too). On diagonal d,
    layer l's gates are ``skewed[d, :, l] + [h_l(t-1), h_(l-1)(t)] @ W_l^T`` (``W_l`` = [W_hh | W_ih's columns on the
    layer below], zeros in layer 0's second half). A layer not yet started (d < l) or past the end (d - l ≥ L)
    computes something nobody reads; layer d is put back to its initial state when it starts, so it never reads it.

    On a GPU a step is bound by its kernel count, not its arithmetic (``docs/performance.md``, "What bounds the
    grid"); ``transduce bench --population`` counts them (a training step of the 8-layer LSTM at 131 positions:
    28,838 layer by layer under autograd, 4,324 so). The backward is written out so that the weights' gradient is
    one product over every diagonal at the end, as cuDNN's is, not a product and a sum on each. The arithmetic is the
    members' own, summed in another order: ``tests/test_population.py`` checks every depth against the run alone
    (``nn.LSTM``) in float64, and ``gradcheck`` checks this backward against finite differences.

    Shapes: ``skewed`` (D, P, n, B, 4H), ``weight`` (P, n, 4H, K) with K = H for one layer, 2H for more, ``h0`` and
    ``c0`` (P, n, H); returns the top layer's states (P, B, L, H), L = D - n + 1."""

    @staticmethod
    def forward(ctx, skewed: Tensor, weight: Tensor, h0: Tensor, c0: Tensor) -> Tensor:
        D, P, n, B, G = skewed.shape
        H, K = G // 4, weight.shape[-1]
        N = P * n
        # what enters diagonal d: [h_l(t-1) | h_(l-1)(t)] (hb) and c_l(t-1) (c); one slot more for the last's out
        hb = skewed.new_empty(D + 1, P, n, B, K)
        c = skewed.new_empty(D + 1, P, n, B, H)
        act = skewed.new_empty(D, P, n, B, G)  # sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
        tanh_c = skewed.new_empty(D, P, n, B, H)
        hb[0, ..., :H] = h0.unsqueeze(2)
        if K > H:
            hb[0, ..., H:] = 0
            hb[1:, :, 0, :, H:] = 0  # layer 0 has no layer below (its weights there are zeros: keep 0 · x finite)
        c[0] = c0.unsqueeze(2)
        weight_t = weight.reshape(N, G, K).transpose(1, 2)
        for d in range(D):
            if 0 < d < n:  # layer d starts now, from its initial state
                hb[d, :, d, :, :H] = h0[:, d].unsqueeze(1)
                c[d, :, d] = c0[:, d].unsqueeze(1)
            gates = torch.baddbmm(skewed[d].view(N, B, G), hb[d].view(N, B, K), weight_t)
            a = act[d]
            torch.sigmoid(gates.view(P, n, B, G), out=a)
            torch.tanh(gates.view(P, n, B, G)[..., 2 * H : 3 * H], out=a[..., 2 * H : 3 * H])
            i, f, g, o = a.chunk(4, dim=-1)
            torch.mul(f, c[d], out=c[d + 1])
            c[d + 1].addcmul_(i, g)
            torch.tanh(c[d + 1], out=tanh_c[d])
            torch.mul(o, tanh_c[d], out=hb[d + 1, ..., :H])
            if K > H:  # each layer's new state is the next diagonal's input from below for the layer above
                hb[d + 1, :, 1:, :, H:] = hb[d + 1, :, :-1, :, :H]
        ctx.save_for_backward(weight, hb, c, act, tanh_c)
        # the top layer's state at positions 0..L-1 (diagonals n-1..D-1)
        return hb[n:, :, n - 1, :, :H].permute(1, 2, 0, 3).contiguous()

    @staticmethod
    def backward(ctx, grad_top: Tensor):
        weight, hb, c, act, tanh_c = ctx.saved_tensors
        D, P, n, B, G = act.shape
        H, K = G // 4, weight.shape[-1]
        N = P * n
        grad_top = grad_top.permute(2, 0, 1, 3)  # (L, P, B, H)
        grad_gates = act.new_empty(D, P, n, B, G)
        grad_h = act.new_zeros(P, n, B, H)  # of the states diagonal d puts out, from every later diagonal
        grad_c = act.new_zeros(P, n, B, H)
        grad_h0, grad_c0 = act.new_zeros(P, n, H), act.new_zeros(P, n, H)
        weight = weight.reshape(N, G, K)
        for d in reversed(range(D)):
            if d >= n - 1:
                grad_h[:, n - 1] += grad_top[d - n + 1]
            i, f, g, o = act[d].chunk(4, dim=-1)
            grad_c = torch.ops.aten.tanh_backward(grad_h * o, tanh_c[d]).add_(grad_c)
            torch.cat([torch.ops.aten.sigmoid_backward(grad_c * g, i),
                       torch.ops.aten.sigmoid_backward(grad_c * c[d], f),
                       torch.ops.aten.tanh_backward(grad_c * i, g),
                       torch.ops.aten.sigmoid_backward(grad_h * tanh_c[d], o)], dim=-1, out=grad_gates[d])
            grad_c = grad_c * f
            grad_hb = torch.bmm(grad_gates[d].view(N, B, G), weight).view(P, n, B, K)
            grad_h = grad_hb[..., :H].clone()
            if K > H:  # layer l's state went to layer l + 1 as its input from below
                grad_h[:, :-1] += grad_hb[:, 1:, :, H:]
            if d < n:  # layer d started here from its initial state (at d = 0, every layer did)
                started = slice(None) if d == 0 else slice(d, d + 1)
                grad_h0[:, started] += grad_hb[:, started, :, :H].sum(2)
                grad_c0[:, started] += grad_c[:, started].sum(2)
                grad_h[:, started] = 0
                grad_c[:, started] = 0
        # every diagonal's share of the weights' gradient in one product: sum over d, b of grad_gates ⊗ hb
        grad_weight = torch.einsum("dpnbg,dpnbk->pngk", grad_gates, hb[:D])
        return grad_gates, grad_weight, grad_h0, grad_c0


class PopulationMemoryLSTM(Population):
    """P :class:`~pipeline.models.memory_lstm.MemoryLSTM` members (one memory kind): the controller cell and the
    signal head per member, batched; the memory, which has no weights, is one memory of P·B rows, stepped by its
    kind's reference step (the equations of ``pipeline.memory``). Padding never pushes or pops (d, u forced to 0 past
    a row's length), as in the single model."""

    def __init__(self, members: list[MemoryLSTM], vocab: tuple[int, int] | None = None) -> None:
        super().__init__(members, vocab)
        kinds = {type(m.memory) for m in members}
        if len(kinds) != 1:
            raise ValueError("every member of a population must have the same memory")
        self.memory, self.memory_width, self.ends = members[0].memory, members[0].memory_width, members[0].ends

    def forward(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """Teacher-forced logits (P, B, L, V_out) for input ids (P, B, L) with each row's length (P, B)."""
        P, B, L = inputs.shape
        x = self.embed(inputs)
        live = (torch.arange(L, device=lengths.device) < lengths.unsqueeze(-1)).to(x.dtype)  # (P, B, L)
        h, c, controller = self.controller(B)
        memory = self.memory.new_memory(P * B, self.memory_width, capacity=L)
        reads = x.new_zeros(P, B, self.memory.reads * self.memory_width)
        e = self.ends
        outputs = []
        inputs_at, alive_at = x.unbind(2), live.unbind(2)  # one view per position (see PopulationLSTM.forward)
        for t in range(L):
            h, c = controller(torch.cat([inputs_at[t], reads], dim=-1), h, c)
            z = self.linear(h, "signals")  # [d (ends), u (ends), v (ends · m)]
            alive = alive_at[t].unsqueeze(-1)
            d, u = torch.sigmoid(z[..., :e]) * alive, torch.sigmoid(z[..., e : 2 * e]) * alive
            v = torch.tanh(z[..., 2 * e :])
            reads = self.memory.reference_step(memory, v.reshape(P * B, -1), d.reshape(P * B, -1),
                                               u.reshape(P * B, -1)).reshape(P, B, -1)
            outputs.append(h)
        return self.readout(torch.stack(outputs, dim=2))


class PopulationJMStack(Population):
    """P :class:`~pipeline.models.jm_stack.JMStackLSTM` members: the controller cell and the action and value heads
    per member, batched; the stack, which has no weights, one stack of P·B rows stepped by
    :func:`~pipeline.models.jm_stack.step_stack`, its rows kept as the single model keeps them (only those a step
    can have reached and a later read can still reach, which leaves every kept row's value as it is)."""

    def __init__(self, members: list[JMStackLSTM], vocab: tuple[int, int] | None = None) -> None:
        super().__init__(members, vocab)
        if len({m.depth for m in members}) != 1:  # the depth is no parameter's shape: checked here
            raise ValueError("every member of a population must have the same stack depth")
        self.width, self.depth, self.read = members[0].width, members[0].depth, members[0].read

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (P, B, L, V_out) for input ids (P, B, L). Right padding needs no mask: it comes
        after every real position of its row, and the model reads left to right (as the single model)."""
        P, B, L = inputs.shape
        x = self.embed(inputs)
        h, c, controller = self.controller(B)
        stack = x.new_zeros(P * B, self.read, self.width)  # empty: the rows the first step reads
        outputs = []
        for t, x_t in enumerate(x.unbind(2)):
            h, c = controller(torch.cat([x_t, stack[:, : self.read].reshape(P, B, -1)], dim=-1), h, c)
            actions = torch.softmax(self.linear(h, "actions"), dim=-1)
            value = torch.tanh(self.linear(h, "value"))
            stack = step_stack(stack, actions.reshape(P * B, -1), value.reshape(P * B, -1), self.depth,
                               keep=max(self.read, self.read + L - 2 - t))  # the rows a later read can reach
            outputs.append(h)
        return self.readout(torch.stack(outputs, dim=2))


class PopulationTransformer(Population):
    """P :class:`~pipeline.models.transformer.Transformer` members (one positional encoding; not ``randomised``,
    whose positions each member draws on the host at every batch: ``pipeline.models.unstackable``): every linear
    layer a batched product, each LayerNorm's scale and shift per member, and the attention of the P·B sequences in
    one causal call."""

    def __init__(self, members: list[Transformer], vocab: tuple[int, int] | None = None) -> None:
        super().__init__(members, vocab)
        first = members[0]
        if {(m.positional_encoding, len(m.blocks), m.blocks[0].heads) for m in members} != \
                {(first.positional_encoding, len(first.blocks), first.blocks[0].heads)}:
            raise ValueError("every member of a population must have the same positional encoding and heads")
        if first.randomised:
            raise ValueError("a randomised positional encoding cannot be stacked: each member draws its positions "
                             "on the host at every batch")
        self.encoding, self.layers, self.heads, self.width = (first.positional_encoding, len(first.blocks),
                                                              first.blocks[0].heads, first.width)

    def norm(self, x: Tensor, name: str) -> Tensor:
        """``nn.LayerNorm`` ``name`` per member: x (P, N, d)."""
        x = F.layer_norm(x, (x.shape[-1],))
        return x * self.member(f"{name}.weight").unsqueeze(1) + self.member(f"{name}.bias").unsqueeze(1)

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (P, B, L, V_out) for input ids (P, B, L). Causality is the only mask, as in the
        single model: right padding comes after every real position of its row."""
        P, B, L = inputs.shape
        d, heads = self.width, self.heads
        x = self.linear(self.embed(inputs).reshape(P, B * L, -1), "project").reshape(P, B, L, d)
        if self.encoding == "sinusoidal":
            x = x + sinusoids(torch.arange(L, device=x.device), d, x.dtype)
        elif self.encoding == "learned":
            x = x + self.member("position_table.weight")[:, :L].unsqueeze(1)
        x = x.reshape(P, B * L, d)
        for i in range(self.layers):
            block = f"blocks.{i}"
            q, k, v = (z.reshape(P * B, L, heads, -1).transpose(1, 2)
                       for z in self.linear(self.norm(x, f"{block}.attention_norm"), f"{block}.qkv").chunk(3, dim=-1))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (P·B, heads, L, d / heads)
            x = x + self.linear(attended.transpose(1, 2).reshape(P, B * L, d), f"{block}.out")
            hidden = torch.relu(self.linear(self.norm(x, f"{block}.feedforward_norm"), f"{block}.feedforward.0"))
            x = x + self.linear(hidden, f"{block}.feedforward.2")
        return self.readout(self.norm(x, "norm").reshape(P, B, L, d))


# Which stacked model holds P runs of each architecture: training's own table (the model registry names no training
# class). An architecture missing here trains alone, or in a population one member after another.
POPULATION_CLASSES: dict[str, type[Population]] = {
    **{f"lstm{layers}": PopulationLSTM for layers in (1, 2, 4, 8)},
    **{memory: PopulationMemoryLSTM for memory in ("stack", "queue", "deque")},
    "transformer": PopulationTransformer,
    "jm_stack": PopulationJMStack,
}


def population_class(name: str) -> type[Population]:
    """The :class:`Population` that stacks runs of architecture ``name``."""
    if name not in POPULATION_CLASSES:
        raise ValueError(f"model {name!r} cannot be stacked as one batched population")
    return POPULATION_CLASSES[name]


def stack_batches(batches: list[Batch], length: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """One batch per member, right-padded to the longest (or to ``length``, a static shape: then a member's
    arithmetic never depends on the other members' batches): inputs and targets (P, B, L) and lengths (P, B).
    Padding is input 0 (any id: it comes after every real position) and target IGNORE_INDEX (never scored)."""
    if len({b.inputs.shape[0] for b in batches}) != 1:
        raise ValueError("every member of a population trains on batches of one size")
    L = max(b.inputs.shape[1] for b in batches)
    if length is not None:
        if L > length:
            raise ValueError(f"a batch of {L} positions does not fit the population's static length {length}")
        L = length
    inputs = torch.stack([F.pad(b.inputs, (0, L - b.inputs.shape[1]), value=0) for b in batches])
    targets = torch.stack([F.pad(b.targets, (0, L - b.targets.shape[1]), value=IGNORE_INDEX) for b in batches])
    return inputs, targets, torch.stack([b.lengths for b in batches])


@torch.no_grad()
def evaluate_population(model: Population, member_pairs: list[list], vocabs: list) -> list:
    """Each member's :class:`~pipeline.evaluation.Scores` on its own ``member_pairs`` (as many for every member), in
    one stacked teacher-forced pass per chunk of :data:`~pipeline.evaluation.EVAL_BATCH_SIZE`: what
    :func:`~pipeline.evaluation.evaluate` gives each member's own model, with one launch sequence for all of them.
    Each member's pairs are chunked in its own order of length, as ``evaluate`` chunks them."""
    from pipeline.data.encoding import collate
    from pipeline.evaluation import EVAL_BATCH_SIZE, Scores, correct_prefix_from_logits

    sizes = {len(pairs) for pairs in member_pairs}
    if len(sizes) != 1 or len(member_pairs) != model.size:
        raise ValueError(f"a population of {model.size} is scored on as many pairs per member, got sizes {sizes}")
    n = sizes.pop()
    device = next(model.parameters()).device
    orders = [sorted(range(n), key=lambda i: len(pairs[i].source) + len(pairs[i].target)) for pairs in member_pairs]
    prefixes = [torch.empty(n, dtype=torch.long) for _ in member_pairs]
    for start in range(0, n, EVAL_BATCH_SIZE):
        chunks = [order[start : start + EVAL_BATCH_SIZE] for order in orders]
        batches = [collate([pairs[i] for i in chunk], vocab)
                   for pairs, chunk, vocab in zip(member_pairs, chunks, vocabs)]
        inputs, _, lengths = stack_batches(batches)
        logits = model(inputs.to(device), lengths.to(device))  # (P, B, L, V): each member's rows right-padded
        for k, (batch, chunk) in enumerate(zip(batches, chunks)):
            own = logits[k, :, : batch.inputs.shape[1], : vocabs[k].output_size]
            prefixes[k][chunk] = correct_prefix_from_logits(own, batch.to(device)).cpu()
    return [Scores(correct_prefix=prefix, target_lengths=torch.tensor([len(p.target) + 1 for p in pairs]),
                   source_lengths=torch.tensor([len(p.source) for p in pairs]))
            for prefix, pairs in zip(prefixes, member_pairs)]


def population_step(model: Population, optimizer: PopulationRMSprop, batches: list[Batch], clip: float,
                    clip_mode: str = "norm", length: int | None = None) -> tuple[Tensor, Tensor]:
    """One training step of every member on its own batch (:func:`~pipeline.training.step.update`). Returns each
    member's summed negative log-likelihood of its target tokens and their number, both (P,): nll / tokens is its
    loss, and the two are what the run's perplexity window adds up (``TrainingMonitor``). ``length``: pad every step
    to it (static shapes, see :func:`stack_batches`)."""
    device = optimizer.params[0].device
    inputs, targets, lengths = (x.to(device) for x in stack_batches(batches, length))
    tokens = torch.stack([b.target_lengths.sum() for b in batches]).to(device)
    optimizer.zero_grad()
    return update(model, optimizer, inputs, targets, lengths, tokens, clip, clip_mode), tokens


class CapturedStep:
    """:func:`population_step` at static shapes, captured once as a CUDA graph and replayed: PyTorch's "whole-network
    capture" (CUDA semantics notes). A step is then one launch instead of thousands, which is what makes a population
    pay on a GPU (~8x at P=1 in a prototype, ``docs/training.md``).

    The batches are copied into static input tensors; the graph's forward, backward, per-member clipping and RMSProp
    read those and write the parameters, the RMSProp state and the per-member NLLs in place. No value comes to the
    host inside the step. Warm-up steps on a side stream run on all-padding batches (no target token: zero loss and
    gradients), and every parameter and RMSProp state is put back after them. On a CPU nothing is captured: the same
    static tensors are stepped eagerly, which is how this bookkeeping is tested off a GPU."""

    WARMUP_STEPS = 3

    def __init__(self, model: Population, optimizer: PopulationRMSprop, clip: float, batch_size: int,
                 length: int, clip_mode: str = "norm") -> None:
        self.model, self.optimizer, self.clip, self.clip_mode, self.length = model, optimizer, clip, clip_mode, length
        device = optimizer.params[0].device
        P = len(optimizer.lr)
        self.inputs = torch.zeros(P, batch_size, length, dtype=torch.long, device=device)
        self.targets = torch.full((P, batch_size, length), IGNORE_INDEX, dtype=torch.long, device=device)
        self.lengths = torch.ones(P, batch_size, dtype=torch.long, device=device)
        self.tokens = torch.ones(P, dtype=torch.long, device=device)
        self.graph = None
        if device.type != "cuda":
            return
        state = [*optimizer.params, *optimizer.square_avg]
        saved = [t.detach().clone() for t in state]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(self.WARMUP_STEPS):
                optimizer.zero_grad()
                self._update()
        torch.cuda.current_stream(device).wait_stream(side)
        optimizer.zero_grad()  # the captured backward allocates the gradients in the graph's own memory
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.nll = self._update()
        with torch.no_grad():
            for t, value in zip(state, saved):
                t.copy_(value)

    def _update(self) -> Tensor:
        return update(self.model, self.optimizer, self.inputs, self.targets, self.lengths, self.tokens, self.clip,
                      self.clip_mode)

    def __call__(self, batches: list[Batch]) -> tuple[Tensor, Tensor]:
        """One step of every member on its own batch: what :func:`population_step` returns."""
        inputs, targets, lengths = stack_batches(batches, self.length)
        self.inputs.copy_(inputs)
        self.targets.copy_(targets)
        self.lengths.copy_(lengths)
        self.tokens.copy_(torch.stack([b.target_lengths.sum() for b in batches]))
        if self.graph is not None:
            self.graph.replay()
            nll = self.nll
        else:
            self.optimizer.zero_grad()
            nll = self._update()
        return nll.clone(), self.tokens.clone()
