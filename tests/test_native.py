"""The fused path's C memory step (pipeline/memory/native.c) equals the Python steps it stands in for, step by step,
forwards and backwards, ties included; and the fused path without it (no compiler, CUDA, TRANSDUCE_NATIVE=0) still
equals the readable reference. tests/test_fused.py compares the whole model, C step included, to the reference."""

import subprocess
import sys
import warnings

import pytest
import torch

from pipeline.memory import native
from pipeline.memory.kinds import DeQue, Queue, SingleEnded, Stack

pytestmark = pytest.mark.skipif(native.library() is None, reason="no C compiler: the Python steps serve alone")


class NewestReadQueue(SingleEnded):  # pops the bottom, reads the top: the flags' fourth combination
    name, pop_from_top, read_from_top = "newest-read queue", False, True


class OldestReadStack(SingleEnded):
    name, pop_from_top, read_from_top = "oldest-read stack", True, False


KINDS = [Stack(), Queue(), DeQue(), NewestReadQueue(), OldestReadStack()]


def signals(kind, L, B, m, dtype, seed, ties):
    """sigmoid(d, u) and tanh(v) of every step as the fused path lays them out, (L, B, 2 ends + ends m). With
    ``ties``, d and u are drawn from {0, 0.5, 1} and so are exact: whole rows are popped to exactly 0, pops stop
    exactly at a row's edge and reads exactly fill their quantity, where footnote 1's rule decides the gradient."""
    gen = torch.Generator().manual_seed(seed)
    D = 2 * kind.ends
    du = torch.randint(0, 3, (L, B, D), generator=gen).to(dtype) / 2 if ties else torch.rand(L, B, D, generator=gen,
                                                                                               dtype=dtype)
    v = torch.rand(L, B, kind.ends * m, generator=gen, dtype=dtype) * 2 - 1
    return torch.cat([du, v], dim=-1).contiguous()


def python_steps(kind, sigs, live, g_r):
    """The reads, and the gradients of the signals' pre-activations and of the value rows, from the Python steps
    exactly as pipeline.models.fused calls them."""
    L, B, _ = sigs.shape
    D, m = 2 * kind.ends, (sigs.shape[-1] - 2 * kind.ends) // kind.ends
    values = torch.empty(B, kind.ends * L, m, dtype=sigs.dtype)
    reads = torch.empty(L, B, kind.reads * m, dtype=sigs.dtype)
    s, traces = sigs.new_zeros(B, 0), []
    for t in range(L):
        du = sigs[t, :, :D] * (1 if live is None else live[t].unsqueeze(-1))
        s, trace = kind.fused_step(s, du[:, : kind.ends], du[:, kind.ends :], sigs[t, :, D:], values, t, L, reads[t])
        traces.append(trace)
    g_values, g_sig, g_s = torch.zeros_like(values), torch.empty_like(sigs), None
    p, v = sigs[..., :D], sigs[..., D:]
    coef = p * (1 - p) * (1 if live is None else live.unsqueeze(-1))
    for t in range(L - 1, -1, -1):
        g_s, g_du, g_v = kind.fused_step_backward(g_r[t], g_s, traces[t], values, g_values, t, L)
        g_sig[t, :, :D] = g_du * coef[t]
        g_sig[t, :, D:] = g_v * (1 - v[t] * v[t])
    return reads, g_sig, g_values, values


def native_steps(kind, sigs, live, g_r):
    L, B, _ = sigs.shape
    m = (sigs.shape[-1] - 2 * kind.ends) // kind.ends
    values = torch.empty(B, kind.ends * L, m, dtype=sigs.dtype)
    reads = torch.full((L, B, kind.reads * m), float("nan"), dtype=sigs.dtype)
    seq = kind.native_sequence(sigs, live, values, reads)
    assert seq is not None
    for t in range(L):
        seq.forward(t)
    g_values, g_sig = torch.zeros_like(values), torch.full_like(sigs, float("nan"))
    seq.start_backward(g_values, g_sig)
    for t in range(L - 1, -1, -1):
        seq.backward(t, g_r[t])
    return reads, g_sig, g_values, values


@pytest.mark.parametrize("ties", [False, True], ids=["random", "ties"])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_the_c_step_equals_the_python_steps_forwards_and_backwards(kind, padded, ties):
    L, B, m = 17, 4, 5
    sigs = signals(kind, L, B, m, torch.float64, seed=7, ties=ties)
    live = None
    if padded:
        live = (torch.arange(L).unsqueeze(1) < torch.tensor([17, 11, 4, 17])).to(torch.float64)
    g_r = torch.randn(L, B, kind.reads * m, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    expected, got = python_steps(kind, sigs, live, g_r), native_steps(kind, sigs, live, g_r)
    for what, e, g in zip(("reads", "signal gradients", "value-row gradients", "value rows"), expected, got):
        torch.testing.assert_close(g, e, atol=1e-12, rtol=0, msg=what)
    reads, g_sig, g_values, _ = expected
    assert reads.abs().sum() > 0 and g_sig[..., : 2 * kind.ends].abs().sum() > 0 and g_values.abs().sum() > 0


@pytest.mark.parametrize("kind", [Stack(), DeQue()], ids=lambda k: k.name)
def test_the_c_step_in_float32_stays_within_rounding_of_float64(kind):
    sigs = signals(kind, 40, 3, 8, torch.float64, seed=9, ties=False)
    g_r = torch.randn(40, 3, kind.reads * 8, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    exact = python_steps(kind, sigs, None, g_r)
    single = native_steps(kind, sigs.float(), None, g_r.float())
    for e, g in zip(exact, single):
        torch.testing.assert_close(g.double(), e, atol=1e-4, rtol=1e-4)


def test_the_c_step_handles_strided_gradient_rows():
    """Backwards the fused path hands over dL/dr_t as a slice of a wider (B, R + H) buffer."""
    kind = Stack()
    sigs = signals(kind, 9, 3, 4, torch.float64, seed=11, ties=False)
    wide = torch.randn(9, 3, 4 + 6, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    g_r = wide[..., :4]
    assert not g_r[0].is_contiguous()
    torch.testing.assert_close(native_steps(kind, sigs, None, g_r)[1], python_steps(kind, sigs, None, g_r)[1],
                               atol=1e-12, rtol=0)


def test_only_the_memories_that_have_one_use_the_c_step():
    from pipeline.memory.kinds import MemoryKind

    sigs = torch.zeros(3, 2, 2 + 4)
    assert MemoryKind().native_sequence(sigs, None, torch.zeros(2, 3, 4), torch.zeros(3, 2, 4)) is None
    assert Stack().native_sequence(sigs.half(), None, torch.zeros(2, 3, 4).half(), torch.zeros(3, 2, 4).half()) is None


@pytest.mark.parametrize("name", ["stack", "deque"])
def test_without_the_c_step_the_fused_path_still_equals_the_reference(name, monkeypatch):
    """TRANSDUCE_NATIVE=0 (and so a machine without a compiler, or CUDA) runs the Python steps."""
    from tests.test_fused import pair_of_models

    monkeypatch.setenv(native.DISABLE_ENV, "0")
    native.library.cache_clear()
    try:
        assert not native.available(torch.zeros(1, dtype=torch.float64))
        ref, fused = pair_of_models(name)
        inputs = torch.randint(1, 11, (3, 12), generator=torch.Generator().manual_seed(4))
        for model in (ref, fused):
            model(inputs).pow(2).sum().backward()
        torch.testing.assert_close(fused(inputs), ref(inputs), atol=1e-12, rtol=0)
        for (n, p), q in zip(ref.named_parameters(), fused.parameters()):
            torch.testing.assert_close(q.grad, p.grad, atol=1e-11, rtol=0, msg=n)
    finally:
        monkeypatch.delenv(native.DISABLE_ENV)
        native.library.cache_clear()


def test_a_machine_without_a_compiler_warns_once_and_runs_the_python_steps(tmp_path):
    """In a fresh process: no compiler on CC, an empty cache; the model still trains."""
    code = (
        "import warnings, torch\n"
        "from pipeline.memory import native\n"
        "from pipeline.config import ModelConfig\n"
        "from pipeline.models import build_model\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    model = build_model(ModelConfig(name='stack', hidden=8, memory_width=4, embedding=4), 7, 5)\n"
        "    model(torch.randint(1, 7, (2, 6))).sum().backward()\n"
        "    model(torch.randint(1, 7, (2, 6))).sum().backward()\n"
        "assert native.library() is None\n"
        "print(len([w for w in caught if 'C compiler' in str(w.message)]))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "CC": "no-such-compiler", native.CACHE_ENV: str(tmp_path),
           "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    assert not any(tmp_path.iterdir())


def test_a_failed_build_warns_and_leaves_no_partial_library(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a "compiler" that exits 1
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    native.library.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert native.library() is None
        assert any("could not be built" in str(w.message) for w in caught)
        assert not list(tmp_path.glob("*.so"))
    finally:
        native.library.cache_clear()


def test_the_library_is_rebuilt_when_its_source_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    source = tmp_path / "native.c"
    source.write_text(native.SOURCE.read_text())
    monkeypatch.setattr(native, "SOURCE", source)
    native.library.cache_clear()
    try:
        assert native.library() is not None
        source.write_text(native.SOURCE.read_text() + "\n/* changed */\n")
        native.library.cache_clear()
        assert native.library() is not None
        assert len(list(tmp_path.glob("memory-*.so"))) == 2
    finally:
        native.library.cache_clear()
