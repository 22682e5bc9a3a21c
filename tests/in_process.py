"""The local pool's workers run in the test's own process: for the tests whose property is a sweep's plan, archive or
report, not its worker processes (each of which pays ~2.4 s of importing torch and Lightning)."""

import contextlib
import os
import subprocess
import sys
import types


class InProcessWorker:
    """A stand-in for the local pool's worker process (``python -m pipeline.sweep [--width N] RUN_DIR ...``) that runs
    the worker's job, :func:`pipeline.sweep.worker.run_job`, in the test's own process, its output in the log the pool
    opened, and ends with the worker's exit status: the pool's planning, halving, archiving and statuses are the
    same, without the ~2.4 s of importing torch and Lightning that each worker process pays."""

    def __init__(self, args, env=None, stdout=None, stderr=None, preexec_fn=None, **kwargs):
        from pipeline.provenance import WORKERS_ENV
        from pipeline.rundir import DONE
        from pipeline.sweep.worker import UNRECORDED_EXIT, run_job

        assert list(args[1:3]) == ["-m", "pipeline.sweep"], args
        job = list(args[3:])
        width = None
        if job[:1] == ["--width"]:
            width, job = int(job[1]), job[2:]
        self.pid = os.getpid()
        saved = os.environ.get(WORKERS_ENV)
        os.environ[WORKERS_ENV] = (env or {}).get(WORKERS_ENV, "1")
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stdout):
                try:
                    states = run_job(job, width)
                except OSError as error:  # as the worker's __main__: said, and its own exit status
                    print(f"{job[0]}: {error}", file=sys.stderr, flush=True)
                    self.returncode = UNRECORDED_EXIT
                    return
                for state, run_dir in zip(states, job):
                    print(f"{state}: {run_dir}", flush=True)
            self.returncode = 0 if all(state in DONE for state in states) else 1
        finally:
            if saved is None:
                os.environ.pop(WORKERS_ENV, None)
            else:
                os.environ[WORKERS_ENV] = saved

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def terminate(self):
        pass

    def kill(self):
        pass



def pool_in_process(monkeypatch) -> None:
    """Make :func:`pipeline.sweep.local.run_local` start an :class:`InProcessWorker` where it would start a worker
    process (only there: ``subprocess`` elsewhere is untouched), and not wait between polls for a process to end."""
    from pipeline.sweep import local

    monkeypatch.setattr(local, "subprocess", types.SimpleNamespace(Popen=InProcessWorker, STDOUT=subprocess.STDOUT,
                                                                   TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(local, "wait_for_a_child", lambda children, timeout: None)
