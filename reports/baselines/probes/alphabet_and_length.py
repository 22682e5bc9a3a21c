"""A probe of reports/baselines/study-log.md ("Why the Stack-LSTM does not learn binary reversal").

The Stack-LSTM learns the paper's reversal (128 symbols, sources of 8-64) and stays off its stack on Delétang et al.'s
binary reverse_string (2 symbols, sources of 1-40). This trains it on the two tasks between, each changing one of the
two differences, with everything else its run of the baselines profile on reverse_string at that seed (hidden 256,
lr 1e-3, 4,000 batches; configs/experiments/baselines-stack-reverse_string.yaml is seed 0's):

  reverse_string_a128        128 symbols, sources of 1-40 (their lengths, the paper's alphabet)
  reverse_string_paper_len   2 symbols, sources of 8-64 (the paper's lengths, their alphabet)

The two tasks are registered here, for this probe only (pipeline.tasks.register_task, evaluation-set seeds 9100 and
9200); the pipeline trains, evaluates and records them as any other. From the repository root:

  python reports/baselines/probes/alphabet_and_length.py runs/probes SEED [TASK ...] [--model NAME]

(--model: another model of the profile, with its own settings there, e.g. jm_stack; default the Stack-LSTM.)
"""
import argparse
from pathlib import Path

from pipeline.config import resolve_run_config
from pipeline.models import MODEL_NAMES
from pipeline.sweep import load_sweep
from pipeline.tasks import SPLITS, TaskEntry, register_task
from pipeline.tasks.deletang import BINARY, DELETANG_SPLITS
from pipeline.tasks.synthetic import SyntheticTask, reverse
from pipeline.training.run import train

PROFILE = Path(__file__).resolve().parents[3] / "configs" / "baselines.yaml"
TASKS = {
    "reverse_string_a128": TaskEntry(
        "reverse_string_a128", lambda: SyntheticTask("reverse_string_a128", reverse, splits=DELETANG_SPLITS),
        "Reverse string, 128 symbols", 9100, paper=False),
    "reverse_string_paper_len": TaskEntry(
        "reverse_string_paper_len", lambda: SyntheticTask("reverse_string_paper_len", reverse, symbols=BINARY,
                                                          splits=SPLITS),
        "Reverse string, the paper's lengths", 9200, paper=False),
}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The Stack-LSTM between the paper's reversal and Delétang's.")
    parser.add_argument("runs", type=Path, help="where the run folders go, e.g. runs/probes")
    parser.add_argument("seed", type=int)
    parser.add_argument("tasks", nargs="*", metavar="TASK", help=f"any of {', '.join(TASKS)} (default: both)")
    parser.add_argument("--model", default="stack", choices=list(MODEL_NAMES))
    args = parser.parse_args()
    for task in args.tasks:
        if task not in TASKS:
            parser.error(f"unknown task {task!r}: this probe trains {', '.join(TASKS)}")
    for entry in TASKS.values():
        register_task(entry)
    # The profile's own run of that model and seed on reverse_string, with the task changed and nothing else
    profile = [run for run in load_sweep(PROFILE).runs() if run.task == "reverse_string"
               and run.model.name == args.model and run.training.seed == args.seed]
    if len(profile) != 1:
        parser.error(f"the baselines profile has {len(profile)} runs of {args.model} on reverse_string at seed "
                     f"{args.seed}; this probe needs exactly one")
    for task in args.tasks or list(TASKS):
        config = resolve_run_config(profile[0], task=task, wandb="off")
        print(task, train(config, args.runs / f"{task}-{args.model}-s{args.seed}", progress=False), flush=True)
