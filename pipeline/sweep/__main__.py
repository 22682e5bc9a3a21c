"""``python -m pipeline.sweep [--width N] RUN_DIR [RUN_DIR ...]``: the local pool's worker process, one run or a
population trained N at a time (see :mod:`pipeline.sweep.worker`)."""

import sys
from pathlib import Path

from pipeline.rundir import DONE, RunDir
from pipeline.runtime import configure_cpu_process
from pipeline.sweep.lifetime import watch_parent
from pipeline.sweep.worker import UNRECORDED_EXIT, run_job

USAGE = "usage: python -m pipeline.sweep [--width N] RUN_DIR [RUN_DIR ...] (`transduce sweep` starts it)"


def refuse(message: str) -> None:
    """A worker started by hand with what is not a run folder (``--help``, a typo) says so in one line and exits 2,
    before it locks, and so makes, a folder of that name."""
    print(f"python -m pipeline.sweep: {message}; {USAGE}", file=sys.stderr, flush=True)
    sys.exit(2)


args = sys.argv[1:]
width = None
if args[:1] == ["--width"]:
    if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
        refuse(f"--width takes a whole number of runs at a time, at least 1; got {' '.join(args[1:2]) or 'nothing'!r}")
    width, args = int(args[1]), args[2:]
if not args:
    refuse("no run folder given")
for arg in args:
    if not RunDir(Path(arg)).config_file.is_file():
        refuse(f"{arg!r} is not a run folder (it holds no config.yaml)")

watch_parent()
configure_cpu_process()
try:
    states = run_job(args, width)
except OSError as error:  # the run folder could not be written, not even its failure record (a full disk, say)
    try:
        print(f"{args[0]}: {error}", file=sys.stderr, flush=True)
    except OSError:
        pass
    sys.exit(UNRECORDED_EXIT)
for state, run_dir in zip(states, args):
    print(f"{state}: {run_dir}", flush=True)
sys.exit(0 if all(state in DONE for state in states) else 1)
