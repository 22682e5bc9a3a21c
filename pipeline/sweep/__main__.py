"""``python -m pipeline.sweep [--width N] RUN_DIR [RUN_DIR ...]``: the local pool's worker process, one run or a
population trained N at a time (see :mod:`pipeline.sweep.worker`)."""

import sys

from pipeline.rundir import DONE
from pipeline.runtime import configure_cpu_process
from pipeline.sweep.lifetime import watch_parent
from pipeline.sweep.worker import run_job

watch_parent()
configure_cpu_process()
args = sys.argv[1:]
width = None
if args[:1] == ["--width"]:
    width, args = int(args[1]), args[2:]
states = run_job(args, width)
for state, run_dir in zip(states, args):
    print(f"{state}: {run_dir}", flush=True)
sys.exit(0 if all(state in DONE for state in states) else 1)
