"""``python -m pipeline.sweep RUN_DIR``: the local pool's worker process (see :mod:`pipeline.sweep.worker`)."""

import sys

from pipeline.rundir import DONE
from pipeline.runtime import configure_cpu_process
from pipeline.sweep.lifetime import watch_parent
from pipeline.sweep.worker import run_one

watch_parent()
configure_cpu_process()
state = run_one(sys.argv[1])
print(f"{state}: {sys.argv[1]}", flush=True)
sys.exit(0 if state in DONE else 1)
