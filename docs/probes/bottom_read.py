"""Diagnostic probes of the quiet-bottom DeQue's bottom read (reports/recipe/study-log.md §7; not part of the
pipeline).

Why the DeQue whose top starts as the Stack's (push +1, pop -1) and whose bottom end is all but still (push and pop
biases -4) misses reversal's turn, where the Stack learns it on every seed. Each mode changes one thing about the
bottom read r_bot, the read at the bottom end (eq. 11), which with a still bottom shows the source's oldest symbol
from the first step. The read unheard altogether needs no probe: ``model.bottom_read_heard_from`` set at or past the
cap does it in the pipeline (its runs give the first probe's perplexities to every digit). The modes here:

* ``bottom_heads_frozen``: the read heard, but the bottom end's own heads (its d, u and v rows of the signal head)
  held at their start;
* ``gradient_cut``: the read heard, but no gradient through it reaches the top end's push or pop: r_bot comes from a
  shadow DeQue fed the same signals with the top's d and u detached (the forward pass is unchanged);
* ``gradient_cut_values``: as ``gradient_cut``, the top's values detached too, so nothing the top writes is
  trained through the bottom read.

The gradient modes run the reference path (autograd, about a third of the fused path's speed). Usage, from the
checkout's root, with a finished run's directory as the base (its config is reused; seed, cap and mode change):

    PYTHONPATH=. .venv/bin/python docs/probes/bottom_read.py RUN_DIR MODE SEED [CAP] [OUT_DIR]

Outputs go to OUT_DIR (default /tmp/probe-MODE-sSEED): a run directory like the pipeline's (metrics.csv holds the
push and pop means per end that ``reports/recipe/study-log.md`` quotes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import yaml

import pipeline.memory.kinds as kinds
import pipeline.training.module as module
from pipeline.config import RunConfig, from_dict
from pipeline.training.run import train

MODES = ("bottom_heads_frozen", "gradient_cut", "gradient_cut_values")


def zero_grad_hook(index):
    def hook(grad):
        grad = grad.clone()
        grad[index] = 0
        return grad
    return hook


def patch(mode: str) -> None:
    if mode == "bottom_heads_frozen":
        build = module.build_model

        def build_probed(config, input_size, output_size):
            model = build(config, input_size, output_size)
            W = config.memory_width
            rows = [1, 3] + list(range(4 + W, 4 + 2 * W))  # [d_top, d_bot, u_top, u_bot, v_top, v_bot]
            model.signals.weight.register_hook(zero_grad_hook(rows))
            model.signals.bias.register_hook(zero_grad_hook(rows))
            return model

        module.build_model = build_probed
        return
    new_memory, cut_values = kinds.DeQue.new_memory, mode == "gradient_cut_values"

    def new_memory_with_shadow(self, batch_size, width, capacity=None):
        memory = new_memory(self, batch_size, width, capacity)
        memory.shadow = new_memory(self, batch_size, width, capacity)
        return memory

    def step(self, memory, v, d, u):
        m = v.shape[1] // 2
        r_top, _ = memory.step(v[:, :m], v[:, m:], d[:, 0], d[:, 1], u[:, 0], u[:, 1])
        v_top = v[:, :m].detach() if cut_values else v[:, :m]
        _, r_bot = memory.shadow.step(v_top, v[:, m:], d[:, 0].detach(), d[:, 1], u[:, 0].detach(), u[:, 1])
        return torch.cat([r_top, r_bot], dim=-1)

    kinds.DeQue.new_memory, kinds.DeQue.reference_step = new_memory_with_shadow, step


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] not in MODES:
        raise SystemExit(f"usage: bottom_read.py RUN_DIR MODE SEED [CAP] [OUT_DIR]; MODE one of {', '.join(MODES)}")
    base, mode, seed = Path(argv[0]), argv[1], int(argv[2])
    cap = int(argv[3]) if len(argv) > 3 else 1500
    out = Path(argv[4]) if len(argv) > 4 else Path(f"/tmp/probe-{mode}-s{seed}")
    config = yaml.safe_load((base / "config.yaml").read_text())
    name = config["model"]["name"]
    if name != "deque":
        raise SystemExit(f"the base run's model must be deque; got {name!r}")
    config["training"].update(seed=seed, max_batches=cap, early_stop_patience=1)
    if mode.startswith("gradient"):
        config["model"]["implementation"] = "reference"
    patch(mode)
    torch.set_num_threads(1)
    print(train(from_dict(RunConfig, config), out, progress=False))


if __name__ == "__main__":
    main(sys.argv[1:])
