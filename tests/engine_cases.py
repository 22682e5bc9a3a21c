"""Single runs whose metrics.csv was saved, byte for byte, by the training code before its two engines became one
(``tests/data/single_run_metrics/<case>.csv``, made by ``python tests/engine_cases.py`` at commit c1144b9).
``tests/test_engine.py`` trains each again and compares: a change to the step, the loop or the checkpoints that moves a
single run's numbers by one bit fails there. Every clip mode, a memory model and a deep LSTM, a synthetic and an ITG
task, and a run resumed halfway (its log kept through the checkpoint) are among them."""

from pathlib import Path

from pipeline.config import RunConfig, from_dict

GOLDEN_DIR = Path(__file__).parent / "data" / "single_run_metrics"

# case -> (task, model, clip mode, learning rate, batches)
GOLDEN_CASES = {
    "stack-reversal-norm": ("reversal", "stack", "norm", 1e-3, 60),
    "queue-copy-value": ("copy", "queue", "value", 5e-3, 60),
    "lstm2-gender-norm": ("gender", "lstm2", "norm", 2e-3, 60),
    "deque-svo_sov-value": ("svo_sov", "deque", "value", 1e-3, 40),
}


def golden_config(case: str, max_batches: int | None = None) -> RunConfig:
    task, model, clip_mode, lr, batches = GOLDEN_CASES[case]
    training = dict(seed=3, lr=lr, max_batches=max_batches or batches, clip_mode=clip_mode, clip=0.5,
                    perplexity_every=10, eval_every=20, eval_size=10, test_eval_size=10, final_eval_size=10,
                    checkpoint_every=20, early_stop_patience=0)
    return from_dict(RunConfig, {"task": task, "model": {"name": model, "hidden": 16, "embedding": 8,
                                                         "memory_width": 8},
                                 "training": training, "tracking": {"wandb": "off"}})


if __name__ == "__main__":  # writes the files; run only to re-baseline on purpose, and say why in the commit
    import shutil
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from pipeline.training.run import train

    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for case in GOLDEN_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            train(golden_config(case), Path(tmp) / "run", progress=False)
            shutil.copy(Path(tmp) / "run" / "metrics.csv", GOLDEN_DIR / f"{case}.csv")
        print(case, (GOLDEN_DIR / f"{case}.csv").read_text().count("\n"), "lines")
