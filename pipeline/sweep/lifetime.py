"""A worker never outlives its sweep: however the sweep dies (``kill -9`` included), its workers stop, and the
runs they held become *interrupted*, to be resumed by the next sweep.

Two mechanisms, because either alone has a gap: on Linux the kernel sends the worker SIGTERM the moment its parent
dies (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec); everywhere, a watchdog thread in the worker checks
every second that its parent is still the sweep that started it. SIGTERM makes Lightning stop at the next batch;
the run resumes from its last checkpoint.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading

PARENT_ENV = "TRANSDUCE_SWEEP_PID"  # the sweep's pid, as its workers see it
_PR_SET_PDEATHSIG = 1


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl
    except (OSError, AttributeError, TypeError):
        return None
    prctl.argtypes, prctl.restype = [ctypes.c_int, ctypes.c_ulong], ctypes.c_int
    return prctl


def die_with_parent():
    """A ``preexec_fn`` for :class:`subprocess.Popen` (None where unsupported): the child gets SIGTERM when the
    process that started it dies. Checks the parent afterwards, in case it died before the call."""
    prctl = _prctl()  # looked up here, in the parent, not between fork and exec
    if prctl is None:
        return None
    parent = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return setup


def watch_parent(interval: float = 1.0) -> None:
    """In a worker started by a sweep (``$TRANSDUCE_SWEEP_PID`` set): SIGTERM this process once the sweep is gone."""
    expected = os.environ.get(PARENT_ENV)
    if not expected or not expected.isdigit():
        return

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if os.getppid() != int(expected):
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="watch-sweep", daemon=True).start()
