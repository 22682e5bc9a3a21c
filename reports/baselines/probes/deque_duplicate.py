"""A probe of reports/baselines/study-log.md ("How the DeQue-LSTM duplicates a string, and where it stops").

Decodes binary strings of the given lengths greedily with a trained DeQue-LSTM of the baselines profile's
duplicate_string cell (no training) and records, for each string, how the memory was used: whether the output is
exact and where its first error falls, what the bottom end took in and gave up while the source was read, and which
pushed row the bottom read takes for the first and last output of each copy. From the repository root:

  python reports/baselines/probes/deque_duplicate.py OUT.csv RUN_DIR [RUN_DIR ...] [--lengths 40 80 ...] [--strings 4]

The strings are drawn with their own seeds (random.Random(1000 * length + i)), the same for every run.

The DeQue's rows after step t (pipeline.memory.deque): t + 1 rows pushed at the bottom, the latest first, then t + 1
pushed at the top, in the order of their steps. A read of the bottom end puts its weights on rows of both kinds: on
top-pushed rows (a value the controller wrote on top: the string, as this model writes it) and on bottom-pushed rows
(whatever the bottom push wrote: here little, ~0.04 a step). So

* ``bottom_balance``: the bottom pushes' strengths less the bottom pops', summed over the steps that read <s> and the
  source. Above 0, bottom-pushed rows are left under the string when the target starts; below 0, the bottom pops
  have eaten into the string itself (at ~0.88 a row, one symbol's worth is about -0.9).
* ``lag_*``: where the bottom read lands among the top-pushed rows, as the step that pushed them (the centre of its
  weights there), less the output's index in its copy. Output j is predicted from the read after step n + j (n the
  source length: <s> is step 0, the source steps 1..n, the separator n + 1). An exact rotation keeps it constant.
"""
import argparse
import csv
import random
from pathlib import Path

import torch

from pipeline.evaluation import greedy_decode
from pipeline.training.run import load_run

LENGTHS = (40, 80, 128, 192, 256, 320, 384, 448, 512)


def probe(module, source: list[int]) -> dict:
    model, vocab = module.model, module.vocab
    n = len(source)
    target = [int(x) for x in module.task.transform(torch.tensor(source).numpy())]
    steps: list[dict] = []

    def record(token: int, state) -> None:
        t = len(steps)
        pushes = dict(zip(model.memory.push_ends, (float(x) for x in state.push[0])))
        pops = dict(zip(model.memory.pop_ends, (float(x) for x in state.pop[0])))
        w = model.memory.read_weights(state.memory.strengths)["bottom"][0]
        bottom_rows, top_rows = w[: t + 1], w[t + 1:]  # bottom pushes (latest first), top pushes (in step order)
        centre = float((top_rows * torch.arange(len(top_rows))).sum() / top_rows.sum()) if top_rows.sum() > 0 else None
        steps.append(dict(push=pushes, pop=pops, under=float(bottom_rows.sum()), centre=centre))

    outputs = greedy_decode(model, source, vocab, 2 * n + 1, on_read=record)
    reference = target + [vocab.eos]
    wrong = [j for j, (o, r) in enumerate(zip(outputs, reference)) if o != r]
    first_error = wrong[0] if wrong else (len(outputs) if len(outputs) < len(reference) else None)
    reading = steps[: n + 1]  # <s> and the source

    def lag(j: int) -> float | None:  # output j's read (after step n + j) against its index in its copy
        if n + j >= len(steps) or steps[n + j]["centre"] is None:
            return None
        row = steps[n + j]["centre"]
        # copy 1 reads the rows pushed while the source was read (symbol j is read at step j + 1); copy 2 those pushed
        # while copy 1 was written (its output i is read back at step n + 2 + i): 0 when it reads the row pushed then
        return round(row - (j + 1 if j < n else j + 2), 2)

    return dict(length=n, exact=not wrong and len(outputs) == len(reference),
                first_error=first_error,
                first_error_in=None if first_error is None else ("copy 1", "copy 2", "</s>")[min(first_error // n, 2)],
                bottom_balance=round(sum(s["push"]["bottom"] - s["pop"]["bottom"] for s in reading), 2),
                under_at_first_output=round(steps[n]["under"], 3),
                lag_copy1_first=lag(0), lag_copy1_last=lag(n - 1),
                lag_copy2_first=lag(n), lag_copy2_last=lag(2 * n - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description="How a trained DeQue-LSTM duplicates strings of growing length.")
    parser.add_argument("out", type=Path, help="the CSV to write")
    parser.add_argument("runs", type=Path, nargs="+", help="run folders of duplicate_string DeQue-LSTMs")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--strings", type=int, default=4, help="strings a length")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for run in args.runs:
        module = load_run(run, "best", "cpu")
        if module.config.task != "duplicate_string" or module.config.model.name != "deque":
            parser.error(f"{run} is a {module.config.model.name} on {module.config.task}: this probe reads a "
                         "DeQue-LSTM on duplicate_string")
        for length in args.lengths:
            for i in range(args.strings):
                draw = random.Random(1000 * length + i)
                source = [draw.randrange(2) for _ in range(length)]
                row = dict(run=run.name, string=i, **probe(module, source))
                print(row, flush=True)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
