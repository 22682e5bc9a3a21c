"""``python -m pipeline.sweep [--width N] RUN_DIR [RUN_DIR ...]``: the local pool's worker process, one run or a
population trained N at a time (see :mod:`pipeline.sweep.worker`)."""

import sys

from pipeline.rundir import DONE
from pipeline.runtime import configure_cpu_process
from pipeline.sweep.lifetime import watch_parent
from pipeline.sweep.worker import UNRECORDED_EXIT, run_job

watch_parent()
configure_cpu_process()
args = sys.argv[1:]
width = None
if args[:1] == ["--width"]:
    width, args = int(args[1]), args[2:]
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
