"""The fused path's memory step in C (``native.c``): built once per machine with the system's C compiler, loaded with
ctypes, and used by :mod:`pipeline.models.fused` on CPU tensors of float32 or float64.

Why C: at batch 10 a memory step costs ~30 tiny ATen calls forwards and ~35 backwards, and the calls, not their
arithmetic, are most of the memory's time (``docs/performance.md``). One C call per step does the same equations
(pop, push, read and their adjoints, eq. 1–18, footnote 1's ties), and a read touches only the rows it reads.

It is an accelerator, never a requirement. Without a C compiler, on CUDA, for other dtypes, or with
``TRANSDUCE_NATIVE=0`` in the environment, the fused path takes the Python steps of :mod:`pipeline.memory.steps`,
which stay the definition: ``tests/test_native.py`` compares the two step by step, and ``tests/test_fused.py`` the
whole model against the readable reference path, both ways.

The library is built on first use into ``$TRANSDUCE_NATIVE_CACHE`` (default ``~/.cache/transduce-pipeline``), under a
name that hashes the source, the compiler's version and the flags, so a changed source or compiler is rebuilt and
concurrent first uses (a sweep's workers) each write their own temporary file and rename it into place.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("native.c")
FLAGS = ("-O3", "-std=c11", "-shared", "-fPIC")
DISABLE_ENV = "TRANSDUCE_NATIVE"  # "0": always the Python steps
CACHE_ENV = "TRANSDUCE_NATIVE_CACHE"
SUFFIX = {torch.float32: "f32", torch.float64: "f64"}


class Sequence(ctypes.Structure):
    """Mirrors ``Sequence`` in native.c."""

    _fields_ = [(name, ctypes.c_int64) for name in ("B", "L", "m", "ends", "pop_top", "read_top")] + \
               [(name, ctypes.c_void_p) for name in ("strengths", "sigs", "live", "values", "reads")] + \
               [(name, ctypes.c_int64) for name in ("sig_row", "read_step", "read_row")] + \
               [(name, ctypes.c_void_p) for name in ("g_values", "g_sig", "g_s0", "g_s1", "scratch")]


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "transduce-pipeline")


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The built library, or None (and one warning saying why) where it cannot be had."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return None
    compiler = _compiler()
    if compiler is None:
        warnings.warn("no C compiler found (set CC): the fused memory path runs its Python steps, about 1.5x slower",
                      stacklevel=2)
        return None
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
        key = hashlib.sha256(SOURCE.read_bytes() + version.encode() + " ".join(FLAGS).encode()).hexdigest()[:16]
        target = cache_dir() / f"memory-{key}.so"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
            os.close(fd)
            try:
                subprocess.run([compiler, *FLAGS, "-o", tmp, str(SOURCE)], check=True, capture_output=True,
                               text=True, timeout=300)
                os.replace(tmp, target)  # atomic: a concurrent build writes the same bytes under its own name
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        warnings.warn(f"the C memory step could not be built ({detail.strip().splitlines()[-1] if detail else error}):"
                      " the fused memory path runs its Python steps", stacklevel=2)
        return None
    for suffix in SUFFIX.values():
        getattr(lib, f"forward_{suffix}").argtypes = [ctypes.POINTER(Sequence), ctypes.c_int64]
        getattr(lib, f"backward_{suffix}").argtypes = [ctypes.POINTER(Sequence), ctypes.c_int64, ctypes.c_void_p,
                                                       ctypes.c_int64]
    lib.scratch_bytes.restype = ctypes.c_int64
    lib.scratch_bytes.argtypes = [ctypes.c_int64, ctypes.c_int64]
    return lib


def available(like: Tensor) -> bool:
    """Whether the C step serves tensors like ``like``: a CPU tensor of float32 or float64, and the library built."""
    return like.device.type == "cpu" and like.dtype in SUFFIX and library() is not None


class NativeSequence:
    """The C memory over one sequence of the fused path: ``forward(t)`` steps it, ``backward(t, g_r)`` steps back.

    ``sigs`` (L, B, 2·ends + ends·m): every step's sigmoid(d, u) (before the mask) and tanh(v), written by the
    caller before ``forward(t)``; ``live`` (L, B) or None; ``values`` (B, ends·L, m): the value rows; ``reads``: a
    (L, B, ·) view whose step t, batch row b starts where r_t goes (ends·m values, top first)."""

    def __init__(self, kind, sigs: Tensor, live: Tensor | None, values: Tensor, reads: Tensor) -> None:
        lib = library()
        L, B, sig_row = sigs.shape
        ends, m = kind.ends, values.shape[-1]
        like = dict(dtype=sigs.dtype, device=sigs.device)
        self.lib, self.suffix = lib, SUFFIX[sigs.dtype]
        assert sigs.is_contiguous() and values.is_contiguous() and reads.stride(-1) == 1
        self.live = None if live is None else live.to(sigs.dtype).contiguous()
        self.strengths = torch.empty(B * ends * L * (L + 1) // 2, **like)
        self.scratch = torch.empty(lib.scratch_bytes(ends, L), dtype=torch.uint8)
        self.sigs, self.values, self.reads = sigs, values, reads  # kept alive: the struct points into them
        self.seq = Sequence(B=B, L=L, m=m, ends=ends, pop_top=int(getattr(kind, "pop_from_top", True)),
                            read_top=int(getattr(kind, "read_from_top", True)),
                            strengths=self.strengths.data_ptr(), sigs=sigs.data_ptr(),
                            live=None if self.live is None else self.live.data_ptr(), values=values.data_ptr(),
                            reads=reads.data_ptr(), sig_row=sig_row, read_step=reads.stride(0),
                            read_row=reads.stride(1), scratch=self.scratch.data_ptr())
        self._forward = getattr(lib, f"forward_{self.suffix}")
        self._pointer = ctypes.byref(self.seq)

    def forward(self, t: int) -> None:
        """Step t: write v_t's rows, pop, push, read into ``reads``."""
        self._forward(self._pointer, t)

    def start_backward(self, g_values: Tensor, g_sig: Tensor) -> None:
        """Before stepping back: ``g_values`` (zeros like ``values``) collects the rows' gradients, ``g_sig`` (like
        ``sigs``) receives each step's dL/d(pre-activations of d, u, v)."""
        assert g_values.is_contiguous() and g_sig.is_contiguous()
        B, ends, L = self.seq.B, self.seq.ends, self.seq.L
        self.g_values, self.g_sig = g_values, g_sig
        self.g_s = torch.empty(2, B * ends * L, dtype=g_sig.dtype)
        self.seq.g_values, self.seq.g_sig = g_values.data_ptr(), g_sig.data_ptr()
        self.seq.g_s0, self.seq.g_s1 = self.g_s[0].data_ptr(), self.g_s[1].data_ptr()
        self._backward = getattr(self.lib, f"backward_{self.suffix}")

    def backward(self, t: int, g_r: Tensor) -> None:
        """Step t backwards from dL/dr_t (B, ends·m; rows may be strided) and dL/ds_t from step t+1."""
        assert g_r.stride(-1) == 1 and g_r.dtype == self.g_sig.dtype
        self._backward(self._pointer, t, g_r.data_ptr(), g_r.stride(0))
