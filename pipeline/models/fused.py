"""The Stack/Queue/DeQue-LSTM's controller and memory over a whole sequence, as one autograd node.

Same function as :meth:`MemoryLSTM.reference_controller_outputs` (tests check outputs and the gradient of every
parameter against it), computed faster. On a CPU with one thread a training batch of short sequences is dominated by
per-operation overhead and by the matrix products, not by the memory's arithmetic:

* the reference path records ~40 autograd nodes per position and, in backward, computes every step's weight
  gradient as its own skinny (B-row) matrix product, accumulated into the full weight matrices each time;
* here the forward loop records nothing and the backward loop (BPTT, written out below) touches only activations:
  the input projection ``W_ie x_t + b`` of all positions is one product before the loop, the weight gradients of
  all positions one product after it, and every local derivative that depends only on the forward pass (σ', tanh')
  is computed for all positions at once before the backward loop;
* every matrix product goes through :mod:`pipeline.models.products` (oneDNN, on CPU float32);
* the memory is the very step the readable memories take, forwards and backwards
  (:mod:`pipeline.memory.steps`: ``single_ended_step``, ``deque_step`` and their adjoints, eq. 1–18), on one value
  buffer preallocated for the whole sequence; the value rows' gradients are accumulated in a buffer of the same
  shape, which is safe here because this node owns the entire sequence. On a CPU the same step runs in C, one call
  per step (:mod:`pipeline.memory.native`; tests compare it with the Python step, ties included);
* ``tanh`` is computed as ``2 sigmoid(2z) - 1`` from weights whose g-gate and v rows are doubled, so that one
  sigmoid serves each layer (ATen's float32 ``tanh`` costs about three sigmoids on these CPUs);
* the per-position views of every buffer are made once, before the loops (``unbind``), not by indexing at every
  step; and the loops are written with as few calls per position as the equations allow, since at batch 10 most
  of a call's cost (1–3 µs) is the call itself (``docs/performance.md`` has the breakdown).

Notation: L positions, batch B, input embedding E, hidden H, memory width m, ``ends`` = 1 (Stack, Queue) or 2
(DeQue) signal triples, R = reads·m read features, D = 2·ends push/pop signals; the signal head's output is laid out
[d (ends), u (ends), v (ends·m)], ends ordered (top, bottom). The LSTM gates are PyTorch's order (i, f, g, o). What
differs between memories (how many ends, where rows go, which step) is the model's
:class:`~pipeline.memory.kinds.MemoryKind`, asked at every position.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from pipeline.models.products import PackedWeight, linear, matmul


def fused_controller_outputs(model, x: Tensor, live: Tensor | None) -> Tensor:
    """o'_1 .. o'_L (B, L, H) of ``model`` (a MemoryLSTM) for input embeddings ``x`` (B, L, E)."""
    cell = model.controller
    B = x.shape[0]
    # The controller's input is [x_t; r_{t-1}] and its state h_{t-1}: one weight [W_ie | W_ir | W_hh] over all three.
    w_all = torch.cat([model.controller_input_weight(), cell.weight_hh], dim=1)
    live_t = None if live is None else live.transpose(0, 1).contiguous()
    outputs = FusedMemoryLSTM.apply(x, w_all, cell.bias_ih + cell.bias_hh, model.signals.weight, model.signals.bias,
                                    model.h0.expand(B, -1), model.c0.expand(B, -1), live_t,
                                    model.memory, model.memory_width)
    return outputs.transpose(0, 1)


class FusedMemoryLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_all, bias, w_sig, b_sig, h0, c0, live, memory, m: int):
        B, L, E = x.shape
        G = w_all.shape[0]
        H = G // 4
        ends = memory.ends
        R, D = memory.reads * m, 2 * ends
        like = dict(dtype=x.dtype, device=x.device)  # new buffers: the input's dtype and device

        # hx[t] = [x_t; r_{t-1}; h_{t-1}]: the controller's whole input at step t. Step t writes r_t and h_t straight
        # into hx[t + 1], so hx[1:, :, E + R:] is the output h_1 .. h_L (and hx[L]'s x and r are never used).
        hx = torch.empty(L + 1, B, E + R + H, **like)
        hx[:L, :, :E] = x.transpose(0, 1)
        hx[0, :, E:-H] = 0.0
        hx[0, :, -H:] = h0
        # tanh(z) = 2 sigmoid(2z) - 1, and ATen's float32 tanh costs ~3 sigmoids here: the forward products use the
        # weights with the rows of the g gate and of v doubled, so one sigmoid serves all four gates, and one d, u
        # and v; g and v are then 2 sigmoid - 1 in place. Backward uses the weights as they are.
        w_gates, b_gates, w_signals, b_signals = w_all.clone(), bias.clone(), w_sig.clone(), b_sig.clone()
        for weight in (w_gates[2 * H : 3 * H], b_gates[2 * H : 3 * H], w_signals[D:], b_signals[D:]):
            weight.mul_(2)
        two, one = torch.full((), 2.0, **like), torch.ones((), **like)  # tensor operands: no scalar wrapped per call
        x_gates = linear(hx[:L, :, :E].reshape(L * B, E), w_gates[:, :E], b_gates).view(L, B, G)
        recurrent = PackedWeight(w_gates[:, E:], B)  # [r_{t-1}; h_{t-1}] -> the rest of the gate pre-activations
        signal_head = PackedWeight(w_signals, B, b_signals)  # h_t -> (d, u, v) pre-activations
        acts = torch.empty(L, B, G, **like)  # gate activations (i, f, g, o)
        cells = torch.empty(L + 1, B, H, **like)  # c_0 .. c_L
        cells[0] = c0
        tanh_c = torch.empty(L, B, H, **like)
        sigs = torch.empty(L, B, D + R, **like)  # sigmoid(d, u) (before the padding mask) and tanh(v)
        values = torch.empty(B, ends * L, m, **like)  # every value row ever written, stored once
        traces = []

        # Per-position views, made once.
        rec_in, reads, outs = hx[:, :, E:].unbind(0), hx[:, :, E : E + R].unbind(0), hx[:, :, E + R :].unbind(0)
        gates = acts.view(L, B, 4, H)
        in_gate, forget_gate, cell_in, out_gate = (gates[:, :, k].unbind(0) for k in range(4))  # per position
        x_gates, acts_, cells_, tanh_c_ = x_gates.unbind(0), acts.unbind(0), cells.unbind(0), tanh_c.unbind(0)
        sigs_, du_, v_ = sigs.unbind(0), sigs[:, :, :D].unbind(0), sigs[:, :, D:].unbind(0)
        live_ = [None] * L if live is None else live.unsqueeze(-1).unbind(0)

        # The memory's C step where it serves (pipeline.memory.native), else its Python step (pipeline.memory.steps).
        native = memory.native_sequence(sigs, live, values, hx[1:, :, E : E + R])
        s = x.new_zeros(B, 0)
        for t in range(L):
            # -- LSTM cell (PyTorch's LSTMCell, gates i, f, g, o) --
            z = recurrent(rec_in[t], add=x_gates[t])
            torch.sigmoid(z, out=acts_[t])
            cell_in[t].mul_(two).sub_(one)  # tanh of the g gate's own pre-activation
            c = torch.mul(forget_gate[t], cells_[t], out=cells_[t + 1])
            c.addcmul_(in_gate[t], cell_in[t])
            h = torch.mul(out_gate[t], torch.tanh(c, out=tanh_c_[t]), out=outs[t + 1])

            # -- signal heads: d, u = sigmoid(.) (times the padding mask), v = tanh(.) --
            torch.sigmoid(signal_head(h), out=sigs_[t])
            du, v = du_[t], v_[t].mul_(two).sub_(one)  # v = tanh of its own pre-activation
            if native is not None:  # reads d, u, v from sigs[t] and writes r_t into hx[t + 1]
                native.forward(t)
                continue
            if live_[t] is not None:
                du = du * live_[t]
            d, u = du[:, :ends], du[:, ends:]

            # -- memory: the same step as the readable memories (pipeline.memory.steps), writing r_t in place --
            s, trace = memory.fused_step(s, d, u, v, values, t, L, reads[t + 1])
            traces.append(trace)

        ctx.save_for_backward(w_all, w_sig, hx, acts, cells, tanh_c, sigs, values)
        ctx.live = live
        ctx.traces = traces
        ctx.native = native
        ctx.config = (memory, m)
        return hx[1:, :, E + R :]

    @staticmethod
    @once_differentiable  # written out for first derivatives only: a second-order backward raises, not lies
    def backward(ctx, g_hs):
        w_all, w_sig, hx, acts, cells, tanh_c, sigs, values = ctx.saved_tensors
        memory, m = ctx.config
        live = ctx.live
        L, B, G = acts.shape
        H = G // 4
        R, D = memory.reads * m, 2 * memory.ends
        E = hx.shape[-1] - R - H
        like = dict(dtype=acts.dtype, device=acts.device)

        # The local derivatives of every position depend on the forward pass only: all positions at once, so the
        # loop below is a handful of operations per position.
        i, forget, cell_in, o = acts.view(L, B, 4, H).unbind(2)  # gate activations (i, f, g, o)
        gate_coef = torch.empty(L, B, 4, H, **like)  # ∂c_t/∂z for the i, f, g gates; ∂h_t/∂z for the o gate
        torch.mul(cell_in, i * (1 - i), out=gate_coef[:, :, 0])
        torch.mul(cells[:-1], forget * (1 - forget), out=gate_coef[:, :, 1])
        torch.mul(i, 1 - cell_in * cell_in, out=gate_coef[:, :, 2])
        torch.mul(tanh_c, o * (1 - o), out=gate_coef[:, :, 3])
        cell_coef = o * (1 - tanh_c * tanh_c)  # ∂h_t/∂c_t, from h_t = o tanh(c_t)
        native = ctx.native  # the C step applies the signals' local derivatives itself
        if native is None:
            sig_coef = torch.empty_like(sigs)  # d(signal)/d(pre-activation), with the padding mask on d and u
            p, vv = sigs[..., :D], sigs[..., D:]
            torch.mul(p, 1 - p, out=sig_coef[..., :D])
            if live is not None:
                sig_coef[..., :D] *= live.unsqueeze(-1)
            torch.mul(vv, vv, out=sig_coef[..., D:]).neg_().add_(1)
            sig_du_, sig_v_ = sig_coef[..., :D].unbind(0), sig_coef[..., D:].unbind(0)

        # The transposed products of backward: g_[r; h] = g_z · [W_ir | W_hh], g_h += g_sig · W_sig.
        recurrent_t = PackedWeight(w_all[:, E:].t(), B)
        signal_head_t = PackedWeight(w_sig.t(), B)

        g_z_all = torch.empty_like(acts)  # dL/d(gate pre-activations), every t: for w_all, bias, x
        g_sig_all = torch.empty_like(sigs)  # dL/d(signal pre-activations), every t: for w_sig, b_sig
        g_values = torch.zeros_like(values)  # dL/dV, accumulated from every read (eq. 15)
        g_h = torch.zeros(B, H, **like)  # from step t+1 through the recurrence
        g_c = torch.zeros(B, H, **like)
        g_r = torch.zeros(B, R, **like)  # dL/dr_t from step t+1
        g_s = None  # dL/ds_t from step t+1's pop
        if native is not None:
            native.start_backward(g_values, g_sig_all)

        # Per-position views, made once.
        g_z_, gate_coef_ = g_z_all.unbind(0), gate_coef.view(L, B, G).unbind(0)
        g_sig_, g_du_, g_dv_ = g_sig_all.unbind(0), g_sig_all[..., :D].unbind(0), g_sig_all[..., D:].unbind(0)
        cell_coef_, forget_, g_hs_ = cell_coef.unbind(0), forget.unbind(0), g_hs.unbind(0)

        for t in range(L - 1, -1, -1):
            # -- memory step t, backwards (appendix A): the same adjoint as the readable memories' --
            if native is not None:  # also writes g_sig[t]: the signal heads' gradients, local derivatives included
                native.backward(t, g_r)
            else:
                g_s, g_du, g_v = memory.fused_step_backward(g_r, g_s, ctx.traces[t], values, g_values, t, L)
                torch.mul(g_du, sig_du_[t], out=g_du_[t])  # -- signal heads --
                torch.mul(g_v, sig_v_[t], out=g_dv_[t])
            g_h = signal_head_t(g_sig_[t], add=g_h + g_hs_[t])

            # -- LSTM cell, backwards --
            g_c.addcmul_(g_h, cell_coef_[t])
            torch.mul(torch.cat([g_c, g_c, g_c, g_h], dim=1), gate_coef_[t], out=g_z_[t])
            g_c.mul_(forget_[t])
            g_rh = recurrent_t(g_z_[t])
            g_r, g_h = g_rh[:, :R], g_rh[:, R:]

        # The input projection's and all weight gradients, every position at once.
        g_z_flat = g_z_all.view(L * B, G)
        g_x = matmul(g_z_flat, w_all[:, :E]).view(L, B, E).transpose(0, 1)
        g_w_all = matmul(g_z_flat.t(), hx[:L].view(L * B, -1))
        g_w_sig = matmul(g_sig_all.view(L * B, -1).t(), hx[1:, :, E + R :].reshape(L * B, H))
        return (g_x, g_w_all, g_z_all.sum(dim=(0, 1)), g_w_sig, g_sig_all.sum(dim=(0, 1)), g_h, g_c,
                None, None, None)
