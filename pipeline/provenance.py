"""What made a result: the command, the commit, the locked environment and the time. Every report and every run
records it."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

from pipeline.paths import REPO_ROOT


def git_commit() -> str:
    """The checked-out commit, with ``-dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# Set (to anything but "" or "0") to train on a working tree with uncommitted changes: `--allow-dirty` sets it for a
# command and the workers it starts. Without it a run refuses such a tree, since the commit it records would not be
# the code that trained it.
ALLOW_DIRTY_ENV = "TRANSDUCE_ALLOW_DIRTY"


def check_committed() -> None:
    """Refuse to train on a checkout whose tracked files differ from its commit (``git_commit`` ends in ``-dirty``),
    unless :data:`ALLOW_DIRTY_ENV` allows it: a run records the commit that trained it, and a report names it."""
    if os.environ.get(ALLOW_DIRTY_ENV, "") not in ("", "0"):
        return
    commit = git_commit()
    if commit.endswith("-dirty"):
        from pipeline.config import ConfigError

        raise ConfigError(f"the checkout at {REPO_ROOT} has uncommitted changes to tracked files (git status), so the "
                          f"commit a run records ({commit}) would not be the code that trained it; commit them first, "
                          f"or pass --allow-dirty ({ALLOW_DIRTY_ENV}=1) to train anyway and record it as -dirty")


LOCK_FILE = REPO_ROOT / "requirements.lock"


def lock_hash() -> str:
    """The first 12 hex digits of requirements.lock's sha256: the exact environment (``make venv`` installs it);
    ``none`` without one."""
    try:
        return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()[:12]
    except OSError:
        return "none"


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity where the system tells (a cluster job or a container
    given 4 of 64 cores gets 4), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: that variable's list where it is set (a
    cluster job's allocation), else every GPU ``nvidia-smi`` lists, else none. Read without torch, so that a sweep's
    pool can give each worker one GPU without initialising CUDA itself."""
    import shutil
    import subprocess

    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [name.strip() for name in listed.split(",") if name.strip() and not name.strip().startswith("-")]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


WORKERS_ENV = "TRANSDUCE_WORKERS"  # set by a sweep's pool in each worker: how many runs share the machine


def workers_sharing() -> int:
    """How many runs a sweep's pool runs side by side with this one (1 outside a pool)."""
    try:
        return max(1, int(os.environ.get(WORKERS_ENV, "1")))
    except ValueError:
        return 1


def machine(device=None) -> str:
    """'<CPU model>, <n> usable cores' (and ', GPU <name>' where ``device`` is a CUDA device): where a run's seconds
    were measured."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    where = f"{model}, {usable_cores()} usable cores"
    if getattr(device, "type", device) == "cuda":
        import torch

        where += f", GPU {torch.cuda.get_device_name(device)}"
    return where


def pinned_torch() -> str:
    """The torch version pyproject.toml pins (``torch==X``): what requirements.lock's environment runs on."""
    import re

    match = re.search(r'"torch==([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text())
    return match.group(1) if match else "unknown"


def provenance_flags(results: dict) -> str:
    """What a run's results say of the code and environment that trained it, where it is not the committed code on
    the pinned torch: '' when clean, else e.g. 'modified checkout (13aa218-dirty); torch 2.11.0+cu130'."""
    flags = []
    dirty = [c for c in str(results.get("commit", "")).split() if c.endswith("-dirty")]
    if dirty:
        flags.append("modified checkout (" + ", ".join(c[:7] + "-dirty" for c in dirty) + ")")
    built = str(results.get("torch") or "")
    version = built.removeprefix("torch ").split(",")[0].split("+")[0]
    if not built:
        flags.append("torch not recorded")
    elif version != pinned_torch():
        flags.append(f"torch {built.removeprefix('torch ').split(',')[0]}")
    return "; ".join(flags)


def machine_label(results: dict) -> str:
    """A run's machine kind in a few words, from its results' ``machine`` and ``torch``: 'AMD EPYC, AVX2', 'Intel
    Xeon, AVX512', 'Intel Xeon, GPU NVIDIA H200'; the CPU kernels only where the run recorded them (runs made before
    :func:`torch_build` did not); 'not recorded' without a machine. Two kinds sum floats in another order, so the same
    run (seed, stream, settings) trained on both is two draws: the report labels each run with this."""
    where = str(results.get("machine") or "")
    if not where:
        return "not recorded"
    parts = [part.strip() for part in where.split(",")]
    cpu = " ".join(word for word in parts[0].replace("(R)", "").replace("(TM)", "").split()
                   if word not in ("Processor", "CPU"))
    gpus = [part for part in parts[1:] if part.startswith("GPU ")]
    kernels = str(results.get("torch") or "").split(",")[1:]  # 'torch 2.13.0+cpu, AVX2' -> [' AVX2']
    return ", ".join([cpu, *gpus, *(k.strip() for k in kernels if k.strip())])


def torch_build() -> str:
    """'torch 2.13.0+cpu, AVX2': the build and the CPU kernels it dispatched to. Two machines with one torch version
    and one code give different floats where these differ (AVX-512 and AVX2 kernels sum in another order), so a run
    retrained elsewhere is the same run only up to its first rounding: results record it beside ``machine``."""
    import torch

    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}"


def current_command() -> str:
    return command_line(Path(sys.argv[0]).name, *sys.argv[1:])


def command_line(*words: object) -> str:
    """A command as a shell reads it back: each word quoted where it needs it (a path with a space, an empty
    ``--out ''``), so that a printed or recorded command runs as it was typed."""
    import shlex

    return shlex.join(str(word) for word in words)


# What a result depends on besides its inputs: the code, the grammars it reads and the environment. A commit that
# changes none of these (one that only adds reports, another profile or docs, say) leaves a report's provenance, and
# so its bytes, as they were. A report adds its own profile (``code_commit(inputs=...)``).
CODE_PATHS = ("pipeline", "configs/grammars", "pyproject.toml", "requirements.lock")


def code_commit(inputs: tuple[str | Path, ...] = ()) -> str:
    """The last commit that changed the code (:data:`CODE_PATHS`) or one of ``inputs`` (files the result was made
    from, such as a profile), with ``-dirty`` when those files differ from it;
    outside git (a copy sent to a cluster or GPU machine without its ``.git``), the commit the sender declares in
    ``TRANSDUCE_CODE_COMMIT``, marked as declared, else ``unknown``. A report regenerated from the same runs by the
    same code names the same commit."""
    inside = [Path(p).resolve() for p in inputs]
    paths = [*CODE_PATHS, *(str(p) for p in inside if p.is_relative_to(REPO_ROOT.resolve()))]  # git sees no others
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%H", "--", *paths], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *paths],
                               cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()
        return (head or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        declared = os.environ.get("TRANSDUCE_CODE_COMMIT", "").strip()
        return f"{declared} (declared; no git here)" if declared else "unknown"


def provenance(command: str | None = None, dated: bool = False, inputs: tuple[str | Path, ...] = ()) -> str:
    """One markdown line: the command, the code's commit (see :func:`code_commit`, ``inputs`` included) and the
    environment lock that produced a report, and with ``dated`` the UTC time (for measurements; a report made from
    runs leaves it out, so that regenerating it from the same runs with the same code gives the same bytes)."""
    when = dt.datetime.now(dt.timezone.utc).strftime(", %Y-%m-%d %H:%M UTC") if dated else ""
    return (f"Made by `{command or current_command()}` with the code at commit `{code_commit(inputs)}` and environment "
            f"lock `{lock_hash()}` (requirements.lock){when}.")
