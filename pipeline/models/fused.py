"""The Stack/Queue/DeQue-LSTM's controller and memory over a whole sequence, as one autograd node.

Same function as :meth:`MemoryLSTM.reference_controller_outputs` (tests check outputs and the gradient of every
parameter against it), computed faster. On a CPU with one thread a training batch of short sequences is dominated by
per-operation overhead and by the weight gradients, not by arithmetic:

* the reference path records ~40 autograd nodes per position and, in backward, computes every step's weight
  gradient as its own skinny (B-row) matrix product, accumulated into the full weight matrices each time;
* here the forward loop records nothing, the backward loop (BPTT, written out below) touches only activations, and
  the weight gradients of all positions are collected and computed at the end as one large matrix product each;
* the input half of the controller's gate pre-activations (W_ie x_t + b) is computed for all positions at once,
  outside this node, by ordinary autograd;
* the memory is the same pop/read traversals (:mod:`pipeline.memory.operations`, eq. 2–11) with their hand-written
  adjoints, on one value buffer preallocated for the whole sequence; the value rows' gradients are accumulated
  in a buffer of the same shape, which is safe here because this node owns the entire sequence.

Notation: L positions, batch B, hidden H, memory width m, ``ends`` = 1 (Stack, Queue) or 2 (DeQue), R = ends·m
read features, S = ends·(2 + m) signal features laid out [d (ends), u (ends), v (ends·m)], ends ordered (top,
bottom). The LSTM gates are PyTorch's order (i, f, g, o).
"""

from __future__ import annotations

import torch
from torch import Tensor

from pipeline.memory.operations import pop_backward, pop_forward, read_backward, read_forward
from pipeline.models.packed import PackedWeight, matmul


def fused_controller_outputs(model, x: Tensor, live: Tensor | None) -> Tensor:
    """o'_1 .. o'_L (B, L, H) of ``model`` (a MemoryLSTM) for input embeddings ``x`` (B, L, E)."""
    cell = model.controller
    E = x.shape[-1]
    # The input half of the gates for every position in one product (W_ih = [W_ie | W_ir]); the rest is per step.
    x_gates = torch.addmm(cell.bias_ih + cell.bias_hh, x.transpose(0, 1).reshape(-1, E), cell.weight_ih[:, :E].t())
    x_gates = x_gates.view(x.shape[1], x.shape[0], -1)
    w_rec = torch.cat([cell.weight_ih[:, E:], cell.weight_hh], dim=1)  # acts on [r_{t-1}; h_{t-1}]
    B = x.shape[0]
    live_t = None if live is None else live.transpose(0, 1).contiguous()
    outputs = FusedMemoryLSTM.apply(x_gates, w_rec, model.signals.weight, model.signals.bias,
                                    model.h0.expand(B, -1), model.c0.expand(B, -1), live_t,
                                    model.memory, model.memory_width)
    return outputs.transpose(0, 1)


class FusedMemoryLSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_gates, w_rec, w_sig, b_sig, h0, c0, live, memory: str, m: int):
        L, B, G = x_gates.shape
        H = G // 4
        ends = 2 if memory == "deque" else 1
        R, D = ends * m, 2 * ends  # read features; (d, u) signals
        from_top = memory != "queue"
        f = dict(dtype=x_gates.dtype, device=x_gates.device)
        recurrent = PackedWeight(w_rec, B)  # [r_{t-1}; h_{t-1}] -> gate pre-activations
        signal_head = PackedWeight(w_sig, B, b_sig)  # h_t -> (d, u, v) pre-activations
        live = None if live is None else live.unsqueeze(-1)  # (L, B, 1)

        # hx[t] = [r_{t-1}; h_{t-1}], the input of w_rec at step t; step t writes its r_t and h_t into hx[t + 1]
        # directly, so hx[1:, :, R:] is the output h_1 .. h_L (hx[L]'s read is never used).
        hx = torch.empty(L + 1, B, R + H, **f)
        acts = torch.empty(L, B, G, **f)  # gate activations (i, f, g, o)
        cells = torch.empty(L + 1, B, H, **f)  # c_0 .. c_L
        tanh_c = torch.empty(L, B, H, **f)
        sigs = torch.empty(L, B, D + R, **f)  # sigmoid(d, u) (before the padding mask) and tanh(v)
        values = torch.empty(B, ends * L, m, **f)  # every value row ever written, stored once
        traces = []

        hx[0, :, :R] = 0.0
        hx[0, :, R:] = h0
        cells[0] = c0
        s = x_gates.new_zeros(B, 0)
        for t in range(L):
            z = recurrent(hx[t], add=x_gates[t])
            a = acts[t]
            torch.sigmoid(z, out=a)
            torch.tanh(z[:, 2 * H : 3 * H], out=a[:, 2 * H : 3 * H])
            c = torch.mul(a[:, H : 2 * H], cells[t], out=cells[t + 1])
            c.addcmul_(a[:, :H], a[:, 2 * H : 3 * H])
            h = torch.mul(a[:, 3 * H :], torch.tanh(c, out=tanh_c[t]), out=hx[t + 1, :, R:])

            zs = signal_head(h)
            sig = sigs[t]
            torch.sigmoid(zs[:, :D], out=sig[:, :D])
            torch.tanh(zs[:, D:], out=sig[:, D:])
            du = sig[:, :D] if live is None else sig[:, :D] * live[t]
            d, u, v = du[:, :ends], du[:, ends:], sig[:, D:]
            r = hx[t + 1, :, :R]

            if ends == 1:  # Stack (eq. 1-3) or Queue (eq. 1, 4, 5)
                values[:, t] = v
                s_popped, pop_trace = pop_forward(s, u[:, 0], from_top)
                s = torch.cat([s_popped, d], dim=-1)
                r_t, read_trace = read_forward(s, values[:, : t + 1], from_top)
                r.copy_(r_t)
                traces.append((pop_trace, read_trace))
            else:  # DeQue (eq. 6-11); rows lo..hi-1 are live, bottom rows grow downwards from the middle
                lo, hi = L - 1 - t, L + t + 1
                values[:, lo] = v[:, m:]
                values[:, hi - 1] = v[:, :m]
                s_top, top_pop = pop_forward(s, u[:, 0], from_top=True)
                s_both, bottom_pop = pop_forward(s_top, u[:, 1], from_top=False)
                s = torch.cat([d[:, 1:], s_both, d[:, :1]], dim=-1)
                rows = values[:, lo:hi]
                r_top, top_read = read_forward(s, rows, from_top=True)
                r_bot, bottom_read = read_forward(s, rows, from_top=False)
                r[:, :m] = r_top
                r[:, m:] = r_bot
                traces.append((top_pop, bottom_pop, top_read, bottom_read))

        ctx.save_for_backward(w_rec, w_sig, hx, acts, cells, tanh_c, sigs, values)
        ctx.live = live
        ctx.traces = traces
        ctx.config = (memory, m, ends, from_top)
        return hx[1:, :, R:]

    @staticmethod
    def backward(ctx, g_hs):
        w_rec, w_sig, hx, acts, cells, tanh_c, sigs, values = ctx.saved_tensors
        memory, m, ends, from_top = ctx.config
        live = ctx.live
        L, B, G = acts.shape
        H = G // 4
        R, D = ends * m, 2 * ends
        f = dict(dtype=acts.dtype, device=acts.device)

        # The local derivatives of every position depend on the forward pass only: all positions at once, so the
        # loop below is a handful of operations per position.
        i, fg, g, o = acts.view(L, B, 4, H).unbind(2)
        gate_coef = torch.empty(L, B, 4, H, **f)  # dz/dc for the i, f, g gates; dz/dh for the o gate
        torch.mul(g, i * (1 - i), out=gate_coef[:, :, 0])
        torch.mul(cells[:-1], fg * (1 - fg), out=gate_coef[:, :, 1])
        torch.mul(i, 1 - g * g, out=gate_coef[:, :, 2])
        torch.mul(tanh_c, o * (1 - o), out=gate_coef[:, :, 3])
        cell_coef = o * (1 - tanh_c * tanh_c)  # dc_t/dh_t through h_t = o tanh(c_t)
        sig_coef = torch.empty_like(sigs)  # d(signal)/d(pre-activation), with the padding mask on d and u
        p, vv = sigs[..., :D], sigs[..., D:]
        torch.mul(p, 1 - p, out=sig_coef[..., :D])
        if live is not None:
            sig_coef[..., :D] *= live
        torch.mul(vv, vv, out=sig_coef[..., D:]).neg_().add_(1)

        # The transposed products of backward: g_hx = g_z · w_rec, g_h += g_sig · w_sig.
        recurrent_t = PackedWeight(w_rec.t().contiguous(), B)
        signal_head_t = PackedWeight(w_sig.t().contiguous(), B)

        g_z_all = torch.empty_like(acts)  # dL/d(gate pre-activations), every t: for w_rec, x_gates
        g_sig_all = torch.empty_like(sigs)  # dL/d(signal pre-activations), every t: for w_sig, b_sig
        g_values = torch.zeros_like(values)  # dL/dV, accumulated from every read (eq. 15)
        g_h = torch.zeros(B, H, **f)  # from step t+1 through the recurrence
        g_c = torch.zeros(B, H, **f)
        g_r = torch.zeros(B, R, **f)  # dL/dr_t from step t+1
        g_s = None  # dL/ds_t from step t+1's pop

        for t in range(L - 1, -1, -1):
            g_du = torch.empty(B, D, **f)
            # -- memory step t, backwards (appendix A) --
            if ends == 1:
                pop_trace, read_trace = ctx.traces[t]
                rows = values[:, : t + 1]
                g_s_t = read_backward(g_r, read_trace, rows, from_top)
                if g_s is not None:
                    g_s_t += g_s
                g_rows = g_values[:, : t + 1]
                g_rows.addcmul_(read_trace.weights.unsqueeze(-1), g_r.unsqueeze(1))
                g_v = g_rows[:, t]
                g_du[:, 0] = g_s_t[:, -1]  # d
                g_s, g_du[:, 1] = pop_backward(g_s_t[:, :-1], pop_trace, from_top)  # u
            else:
                top_pop, bottom_pop, top_read, bottom_read = ctx.traces[t]
                lo, hi = L - 1 - t, L + t + 1
                rows = values[:, lo:hi]
                g_r_top, g_r_bot = g_r[:, :m], g_r[:, m:]
                g_s_t = read_backward(g_r_top, top_read, rows, True) + read_backward(g_r_bot, bottom_read, rows, False)
                if g_s is not None:
                    g_s_t += g_s
                g_rows = g_values[:, lo:hi]
                g_rows.addcmul_(top_read.weights.unsqueeze(-1), g_r_top.unsqueeze(1))
                g_rows.addcmul_(bottom_read.weights.unsqueeze(-1), g_r_bot.unsqueeze(1))
                g_v = torch.cat([g_rows[:, -1], g_rows[:, 0]], dim=-1)  # (top, bottom)
                g_du[:, 0], g_du[:, 1] = g_s_t[:, -1], g_s_t[:, 0]  # d_top, d_bot
                g_s_top, g_du[:, 3] = pop_backward(g_s_t[:, 1:-1], bottom_pop, from_top=False)  # u_bot
                g_s, g_du[:, 2] = pop_backward(g_s_top, top_pop, from_top=True)  # u_top

            # -- signal heads: d, u = sigmoid(.) * live, v = tanh(.) --
            g_sig = g_sig_all[t]
            torch.mul(g_du, sig_coef[t, :, :D], out=g_sig[:, :D])
            torch.mul(g_v, sig_coef[t, :, D:], out=g_sig[:, D:])
            g_h = signal_head_t(g_sig, add=g_h + g_hs[t])

            # -- LSTM cell, backwards --
            g_c.addcmul_(g_h, cell_coef[t])
            g_z = g_z_all[t]
            torch.mul(g_c.unsqueeze(1), gate_coef[t, :, :3], out=g_z.view(B, 4, H)[:, :3])
            torch.mul(g_h, gate_coef[t, :, 3], out=g_z[:, 3 * H :])
            g_c.mul_(fg[t])
            g_hx = recurrent_t(g_z)
            g_r, g_h = g_hx[:, :R], g_hx[:, R:]

        # Weight gradients of all positions at once.
        g_w_rec = matmul(g_z_all.view(L * B, G).t(), hx[:L].reshape(L * B, -1))
        g_w_sig = matmul(g_sig_all.view(L * B, -1).t(), hx[1:, :, R:].reshape(L * B, H))
        g_b_sig = g_sig_all.sum(dim=(0, 1))
        return g_z_all, g_w_rec, g_w_sig, g_b_sig, g_h, g_c, None, None, None
