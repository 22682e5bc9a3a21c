"""``python -m pipeline.sweep RUN_DIR [RUN_DIR ...]``: the local pool's worker process, one run or a population
(see :mod:`pipeline.sweep.worker`)."""

import sys

from pipeline.rundir import DONE
from pipeline.runtime import configure_cpu_process
from pipeline.sweep.lifetime import watch_parent
from pipeline.sweep.worker import run_job

watch_parent()
configure_cpu_process()
states = run_job(sys.argv[1:])
for state, run_dir in zip(states, sys.argv[1:]):
    print(f"{state}: {run_dir}", flush=True)
sys.exit(0 if all(state in DONE for state in states) else 1)
