"""The benchmark's pieces, on tiny settings (the benchmark itself is `make bench`, not a test)."""

import pytest
import torch

from pipeline.bench import (
    TIMED,
    Measurement,
    TrainingStep,
    bench_markdown,
    check_targets,
    peak_memory_mb,
    run_benchmark,
)


@pytest.mark.parametrize("name", TIMED)
def test_a_training_step_updates_every_model(name):
    step = TrainingStep(name, hidden=16, steps=7)
    before = [p.detach().clone() for p in step.model.parameters()]
    step()
    changed = [not torch.equal(b, p) for b, p in zip(before, step.model.parameters())]
    assert sum(changed) >= len(changed) - 1  # every parameter moves (a padding row may not)


def test_targets_are_checked_against_the_same_runs_yardstick():
    rows = [Measurement("stack", 256, 131, 100.0, 2.7, 50.0), Measurement("stack", 512, 131, 300.0, 2.2, 80.0),
            Measurement("deque", 256, 131, 130.0, 3.5, 60.0), Measurement("stack", 256, 259, 250.0, 4.1, 150.0),
            Measurement("queue", 256, 259, 250.0, 4.1, 190.0), Measurement("deque", 256, 259, 300.0, 5.0, 210.0)]
    checks = {c["what"]: c for c in check_targets(rows)}
    assert [c["met"] for c in checks.values()] == [True, False, False, True, True, False]
    assert checks["DeQue-LSTM / Stack-LSTM at 131 steps, hidden 256: time"]["measured"] == 1.3  # the ms, not ratios
    text = bench_markdown({"measurements": [], "evaluation": [], "targets": list(checks.values()), "seconds": 1.0,
                           "rounds": 7, "machine": {"cpu": "x", "torch": "2", "cuda": False}}, "Made by test.")
    assert "| Stack-LSTM at 131 steps, hidden 512: time / nn.LSTM | 2 | 2.2 | **no** |" in text

    gpu = bench_markdown({"measurements": [], "evaluation": [], "targets": list(checks.values()), "seconds": 1.0,
                          "rounds": 7, "machine": {"cpu": "x", "torch": "2", "cuda": True, "device": "cuda",
                                                   "gpu": "NVIDIA H200"}}, "Made by test.")
    assert "**no**" not in gpu and "not judged here" in gpu  # the CPU's targets, not the GPU's
    assert "on NVIDIA H200" in gpu and "allocated GPU memory" in gpu and "resident set" not in gpu


def test_peak_memory_is_measured_in_a_fresh_process_whatever_the_parents_peak():
    # Linux carries ru_maxrss over fork and exec: a probe that read it reported the ~1.3 GB of the benchmark
    # process that started it, for every model.
    ballast = torch.ones(600 * 2**20 // 4)  # 600 MB, touched
    assert ballast.sum() > 0
    assert 0 <= peak_memory_mb("lstm1", 16, 7) < 100


def test_fewer_than_seven_rounds_are_refused():
    with pytest.raises(ValueError, match="rounds must be at least 7"):
        run_benchmark(rounds=3)


def test_the_profile_of_a_batch_splits_it_by_phase_and_kind_of_operation(tmp_path):
    from pipeline.bench import OTHER, PHASES, breakdown_markdown, op_group, profile_batch
    from pipeline.memory import native

    assert op_group("mkldnn::_linear_pointwise").startswith("matrix products")
    assert op_group("aten::bmm") == "memory reads (bmm)" and op_group("aten::cumsum").startswith("memory traversals")
    assert op_group("aten::something_new") == OTHER
    result = profile_batch("stack", hidden=16, steps=7, batches=2)
    assert list(result["phases"]) == list(PHASES) and all(ms >= 0 for ms in result["phases"].values())
    forward, backward = result["ops"]["forward"], result["ops"]["backward"]
    memory = "the memory step in C (pop, push, read, adjoints)" if native.library() else "memory reads (bmm)"
    for ops in (forward, backward):
        assert memory in ops and "the fused path's own loop (Python)" in ops
    assert sum(forward.values()) <= result["phases"]["forward"] * 1.05  # self times inside the phase's total
    text = breakdown_markdown([result], "Made by test.")
    assert "## Stack-LSTM, hidden 16, 7 positions" in text and "**backward**" in text
