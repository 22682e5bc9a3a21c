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

from pipeline.memory.operations import PopTrace, ReadTrace, pop_backward, pop_forward, read_backward, read_forward


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
        R = ends * m
        from_top = memory != "queue"
        f = dict(dtype=x_gates.dtype, device=x_gates.device)

        hx = torch.empty(L, B, R + H, **f)  # [r_{t-1}; h_{t-1}] for every t: the input of w_rec
        acts = torch.empty(L, B, G, **f)  # gate activations (i, f, g, o)
        cells = torch.empty(L + 1, B, H, **f)  # c_0 .. c_L
        tanh_c = torch.empty(L, B, H, **f)
        hs = torch.empty(L, B, H, **f)  # h_1 .. h_L: the outputs
        sigs = torch.empty(L, B, 2 * ends + R, **f)  # sigmoid(d, u) (before the padding mask) and tanh(v)
        values = torch.empty(B, ends * L, m, **f)  # every value row ever written, stored once
        traces = []

        hx[0, :, :R] = 0.0
        hx[0, :, R:] = h0
        cells[0] = c0
        s = x_gates.new_zeros(B, 0)
        for t in range(L):
            z = torch.addmm(x_gates[t], hx[t], w_rec.t())
            a = acts[t]
            torch.sigmoid(z, out=a)
            a[:, 2 * H : 3 * H].copy_(z[:, 2 * H : 3 * H].tanh_())
            i, fg, g, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
            torch.addcmul(fg * cells[t], i, g, out=cells[t + 1])
            torch.tanh(cells[t + 1], out=tanh_c[t])
            h = torch.mul(o, tanh_c[t], out=hs[t])

            zs = torch.addmm(b_sig, h, w_sig.t())
            sig = sigs[t]
            torch.sigmoid(zs[:, : 2 * ends], out=sig[:, : 2 * ends])
            torch.tanh(zs[:, 2 * ends :], out=sig[:, 2 * ends :])
            du = sig[:, : 2 * ends] if live is None else sig[:, : 2 * ends] * live[t].unsqueeze(-1)
            d, u, v = du[:, :ends], du[:, ends:], sig[:, 2 * ends :]

            if ends == 1:  # Stack (eq. 1-3) or Queue (eq. 1, 4, 5)
                values[:, t] = v
                s_popped, pop_trace = pop_forward(s, u[:, 0], from_top)
                s = torch.cat([s_popped, d], dim=-1)
                r, read_trace = read_forward(s, values[:, : t + 1], from_top)
                traces.append((pop_trace, read_trace))
                if t + 1 < L:
                    hx[t + 1, :, :R] = r
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
                traces.append((top_pop, bottom_pop, top_read, bottom_read))
                if t + 1 < L:
                    hx[t + 1, :, :m] = r_top
                    hx[t + 1, :, m:R] = r_bot
            if t + 1 < L:
                hx[t + 1, :, R:] = h

        ctx.save_for_backward(w_rec, w_sig, hx, acts, cells, tanh_c, hs, sigs, values)
        ctx.live = live
        ctx.traces = traces
        ctx.config = (memory, m, ends, from_top)
        return hs

    @staticmethod
    def backward(ctx, g_hs):
        w_rec, w_sig, hx, acts, cells, tanh_c, hs, sigs, values = ctx.saved_tensors
        memory, m, ends, from_top = ctx.config
        live = ctx.live
        L, B, G = acts.shape
        H = G // 4
        R = ends * m

        g_z_all = torch.empty_like(acts)  # dL/d(gate pre-activations), every t: for w_rec, x_gates
        g_sig_all = torch.empty_like(sigs)  # dL/d(signal pre-activations), every t: for w_sig, b_sig
        g_values = torch.zeros_like(values)  # dL/dV, accumulated from every read (eq. 15)
        g_h = torch.zeros(B, H, dtype=acts.dtype, device=acts.device)  # from step t+1 through the recurrence
        g_c = torch.zeros_like(g_h)
        g_r = torch.zeros(B, R, dtype=acts.dtype, device=acts.device)  # dL/dr_t from step t+1
        g_s = None  # dL/ds_t from step t+1's pop
        w_rec_t = w_rec.t().contiguous()  # g_hx = g_z · w_rec reads this layout several times faster

        for t in range(L - 1, -1, -1):
            sig = sigs[t]
            g_du = torch.empty(B, 2 * ends, dtype=acts.dtype, device=acts.device)
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
            if live is not None:
                g_du *= live[t].unsqueeze(-1)
            g_sig = g_sig_all[t]
            p = sig[:, : 2 * ends]
            torch.mul(g_du, p * (1 - p), out=g_sig[:, : 2 * ends])
            vv = sig[:, 2 * ends :]
            torch.mul(g_v, 1 - vv * vv, out=g_sig[:, 2 * ends :])
            g_h = g_h + g_hs[t]
            g_h.addmm_(g_sig, w_sig)

            # -- LSTM cell, backwards --
            a = acts[t]
            i, fg, g, o = a[:, :H], a[:, H : 2 * H], a[:, 2 * H : 3 * H], a[:, 3 * H :]
            tc = tanh_c[t]
            g_c = g_c + g_h * o * (1 - tc * tc)
            g_z = g_z_all[t]
            torch.mul(g_c * g, i * (1 - i), out=g_z[:, :H])
            torch.mul(g_c * cells[t], fg * (1 - fg), out=g_z[:, H : 2 * H])
            torch.mul(g_c * i, 1 - g * g, out=g_z[:, 2 * H : 3 * H])
            torch.mul(g_h * tc, o * (1 - o), out=g_z[:, 3 * H :])
            g_c = g_c * fg
            g_hx = torch.mm(g_z, w_rec_t.t())
            g_r, g_h = g_hx[:, :R], g_hx[:, R:].contiguous()

        # Weight gradients of all positions at once.
        g_w_rec = torch.mm(g_z_all.view(L * B, G).t(), hx.view(L * B, -1))
        g_w_sig = torch.mm(g_sig_all.view(L * B, -1).t(), hs.view(L * B, H))
        g_b_sig = g_sig_all.sum(dim=(0, 1))
        return g_z_all, g_w_rec, g_w_sig, g_b_sig, g_h, g_c, None, None, None
