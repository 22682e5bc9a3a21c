"""The lock that makes a run directory belong to one worker at a time.

An exclusive ``flock`` on ``<run dir>/.lock``, held for the whole run. The kernel releases it when its process ends,
however it ends (``kill -9`` included), so a lock is never left stale by a dead worker: the next sweep takes it
over. The holder writes its pid and host into the file so that ``--status`` and an unfinished sweep can say who
holds a run. (``flock`` is per host on some network filesystems; on a cluster, SLURM runs one task per run.)
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"  # in the run folder; pipeline.rundir lists it among the folder's files


@contextmanager
def run_lock(run_dir: Path, patience: float = 0.0):
    """Hold the run's exclusive lock for the duration. Yields False when another process holds it for longer than
    ``patience`` seconds (a status probe holds it for microseconds; a worker, for the whole run)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    check_lock_file(run_dir)
    # "a+": opening must not truncate the holder's pid line; only the holder rewrites it
    with open(run_dir / LOCK_FILE, "a+") as handle:
        deadline = time.monotonic() + patience
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_trouble(run_dir: Path) -> str:
    """Why ``<run dir>/.lock`` cannot be the run's lock ('' when it can, or is not there yet): a directory, a link,
    anything but a regular file."""
    path = run_dir / LOCK_FILE
    if path.is_symlink() or (path.exists() and not path.is_file()):
        what = "a link" if path.is_symlink() else "a directory" if path.is_dir() else "not a regular file"
        return f"{path} is {what}, not the run's lock file; remove it (the next run makes a new one)"
    return ""


def check_lock_file(run_dir: Path) -> None:
    """Refuse, in one line, a run whose lock file is unusable (:func:`lock_trouble`)."""
    trouble = lock_trouble(run_dir)
    if trouble:
        from pipeline.config import ConfigError

        raise ConfigError(trouble)


def claim_owner(handle) -> None:
    """Record this process as the lock's holder (called by a worker once it holds the lock)."""
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {socket.gethostname()}\n")
    handle.flush()


def is_locked(run_dir: Path) -> bool:
    if not (run_dir / LOCK_FILE).exists() or lock_trouble(run_dir):  # an unusable lock is nobody's: RunDir.check
        return False
    with run_lock(run_dir) as acquired:
        return not acquired


def lock_owner(run_dir: Path) -> str:
    """'pid 1234 on host' of the last process that held the run's lock, or '' when none recorded it."""
    try:
        pid, host = (run_dir / LOCK_FILE).read_text().split()[:2]
    except (OSError, ValueError):
        return ""
    return f"pid {pid} on {host}"
