"""Single runs whose metrics.csv was saved, byte for byte, by the training code before its two engines became one
(commit c1144b9), one set per kind of machine: ``tests/data/single_run_metrics/<kind>/<case>.csv``, the kind in its
``machine.txt`` (the CPU and the kernels torch picks for it: float32 sums come out a bit differently on AVX2 and
AVX-512, by ~1e-7 relative). ``tests/test_engine.py`` trains each again and compares: a change to the step, the loop or
the checkpoints that moves a single run's numbers by one bit fails there on a recorded kind of machine; on another
kind it is compared within float32 noise. Every clip mode, a memory model and a deep LSTM, a synthetic and an ITG
task, and a run resumed halfway (its log kept through the checkpoint) are among them. ``<case>-extended-from-archive``
is the first case extended from tests/data/single_run_before_one_engine.tar.gz (40 batches trained on the first kind)
by that code on this kind."""

import csv
import io
import math
from pathlib import Path

from pipeline.config import RunConfig, from_dict

GOLDEN_ROOT = Path(__file__).parent / "data" / "single_run_metrics"
FIRST_KIND = "amd-epyc-avx2"  # where the goldens were first made; what another kind is compared with
NOISE = 1e-5  # relative: float32 rounding over the cases' tens of steps stays below 1e-6 between the recorded kinds

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


def machine_kind() -> str:
    """'<CPU model> / <torch's CPU capability>', e.g. 'AMD EPYC / AVX2': what decides a float32 run's last bits."""
    import torch

    from pipeline.provenance import machine

    return f"{machine().rsplit(',', 1)[0]} / {torch.backends.cpu.get_cpu_capability()}"


def golden_dir(kind: str | None = None) -> Path | None:
    """The golden set made on this kind of machine (None: no set of that kind)."""
    return golden_dir_in(GOLDEN_ROOT, kind)


def golden_dir_in(root: Path, kind: str | None = None) -> Path | None:
    """The set under ``root`` made on this kind of machine (None: no set of that kind)."""
    kind = kind or machine_kind()
    return next((d for d in sorted(root.iterdir())
                 if (d / "machine.txt").is_file() and (d / "machine.txt").read_text().strip() == kind), None)


def assert_golden(text: str, name: str) -> None:
    """``text`` (a metrics.csv) is golden ``name``'s: byte for byte on a recorded kind of machine; elsewhere the same
    rows and columns, every number within :data:`NOISE` of the first kind's."""
    assert_golden_in(GOLDEN_ROOT, text, name)


def assert_golden_in(root: Path, text: str, name: str) -> None:
    """:func:`assert_golden` for the sets under ``root`` (one folder per kind of machine): elsewhere compared with
    :data:`FIRST_KIND`'s set, or the first recorded where ``root`` has none of that kind."""
    here = golden_dir_in(root)
    if here is not None:
        assert text == (here / f"{name}.csv").read_text(), f"{name}: not the bytes recorded for {here.name}"
        return
    first = FIRST_KIND if (root / FIRST_KIND).is_dir() else sorted(d.name for d in root.iterdir() if d.is_dir())[0]
    expected = list(csv.reader(io.StringIO((root / first / f"{name}.csv").read_text())))
    actual = list(csv.reader(io.StringIO(text)))
    assert [len(row) for row in actual] == [len(row) for row in expected] and actual[0] == expected[0], \
        f"{name}: not the rows and columns of {first}'s log"
    for row, (got, want) in enumerate(zip(actual[1:], expected[1:]), start=2):
        for column, a, b in zip(expected[0], got, want):
            if a == b:
                continue
            assert a and b and math.isclose(float(a), float(b), rel_tol=NOISE, abs_tol=1e-12), \
                f"{name}, line {row}, {column}: {a} against {b} on {first} (this machine, {machine_kind()}, " \
                "has no golden set of its own)"


if __name__ == "__main__":  # writes this machine's set; run only to re-baseline on purpose, and say why in the commit
    import shutil
    import sys
    import tarfile
    import tempfile

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from pipeline.training.run import train

    out = golden_dir() or GOLDEN_ROOT / machine_kind().replace("(R)", "").replace(" / ", "-").replace(" ", "-").lower()
    out.mkdir(parents=True, exist_ok=True)
    (out / "machine.txt").write_text(machine_kind() + "\n")
    for case in GOLDEN_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            train(golden_config(case), Path(tmp) / "run", progress=False)
            shutil.copy(Path(tmp) / "run" / "metrics.csv", out / f"{case}.csv")
        print(case, (out / f"{case}.csv").read_text().count("\n"), "lines")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(GOLDEN_ROOT.parent / "single_run_before_one_engine.tar.gz") as archive:
            archive.extractall(tmp, filter="data")
        train(golden_config("stack-reversal-norm"), Path(tmp) / "run", progress=False)
        shutil.copy(Path(tmp) / "run" / "metrics.csv", out / "stack-reversal-norm-extended-from-archive.csv")
