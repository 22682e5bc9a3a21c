"""How every training, evaluation and benchmark process sets up the machine it runs on: the device it asks for
(:func:`resolve_device`), and on a CPU the following.

* **One torch thread.** Two threads are unstable on the 2-core machines this was built on, and two single-thread
  processes (the sweep's local pool) use both cores better than one process with two threads.
* **Keep freed memory in the process.** A training batch of a memory model allocates a few dozen buffers of
  1–20 MB (gate activations, the value rows, their gradients) and frees them when the batch ends. glibc's
  ``malloc`` serves blocks that size with ``mmap`` and returns them to the OS on ``free``, or trims them off the
  top of its heap, so the next batch takes fresh pages from the kernel and runs on cold memory again. Raising the
  mmap threshold to its maximum (32 MiB) and the trim threshold to 256 MiB keeps those blocks in the heap, where
  the next batch reuses them. Measured on the 2-core machine (``docs/performance.md``): a Stack-LSTM batch at
  hidden 256, 131 positions, 97–103 ms → 86–90 ms; the plain ``nn.LSTM``, 24.3 → 23.8 ms. The cost is that a
  process holds on to up to 256 MiB it no longer uses. Setting only one of the two thresholds is slower than
  setting neither (glibc then stops adapting the other). Elsewhere than glibc this part does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch

from pipeline.config import ConfigError

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest accepted value on 64-bit systems
TRIM_THRESHOLD = 256 << 20


def configure_cpu_process() -> bool:
    """One torch thread; keep freed buffers for reuse. Returns whether the allocator could be configured."""
    torch.set_num_threads(1)
    return keep_freed_memory()


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep blocks of up to 32 MiB in the heap after they are freed (see the module notes)."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (musl has no mallopt), or no C library found
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


ACCELERATORS = ("auto", "cpu", "cuda")


def resolve_device(accelerator: str = "auto") -> torch.device:
    """``auto``: a GPU when torch sees one, else the CPU; ``cpu`` / ``cuda``: that (refused if absent)."""
    if accelerator not in ACCELERATORS:
        raise ConfigError(f"accelerator must be one of {', '.join(ACCELERATORS)}; got {accelerator!r}")
    if accelerator == "cuda" and not torch.cuda.is_available():
        raise ConfigError("accelerator 'cuda' was asked for, but torch sees no CUDA device (a CPU-only torch build, "
                          "or no GPU)")
    return torch.device("cuda" if accelerator != "cpu" and torch.cuda.is_available() else "cpu")
