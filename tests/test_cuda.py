"""The CUDA path: training, evaluation and the benchmark on a GPU. Skipped where torch sees no CUDA device (this
project's CPU machines and CI); run on a GPU machine with `pytest -m cuda`."""

import pytest
import torch

# Imported here, not in the tests: CI collects this module without a GPU, so a name renamed elsewhere fails there
from pipeline.bench import TrainingStep, cuda_peak_memory_mb, random_batch
from pipeline.bench_population import population_of
from pipeline.config import ModelConfig, RunConfig, from_dict
from pipeline.inspection import inspect_run
from pipeline.models import build_model
from pipeline.training.population import CapturedStep, PopulationRMSprop, population_step
from pipeline.training.run import evaluate_run, train

pytestmark = pytest.mark.cuda  # skipped without a GPU (conftest.py)


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.mark.parametrize("name", ["lstm1", "stack", "deque"])
def test_a_run_trains_and_evaluates_on_the_gpu(tmp_path, name):
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": name, "hidden": 16, "memory_width": 8,
                                                                 "embedding": 8},
                                   "training": {"max_batches": 20, "eval_every": 10, "eval_size": 10,
                                                "test_eval_size": 10, "final_eval_size": 10,
                                                "perplexity_every": 10},
                                   "tracking": {"wandb": "off"}})
    results = train(config, tmp_path / "run", progress=False, accelerator="cuda")
    assert results["batches"] == 20 and 0 <= results["test_fine"] <= 1
    # the run says it trained on the GPU, and under which torch (installed apart from requirements.lock)
    assert f", GPU {torch.cuda.get_device_name()}" in results["machine"] and results["torch"] == torch.__version__
    again = evaluate_run(tmp_path / "run", splits=("test",))
    assert again["test"]["n"] == 1000


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_fused_equals_reference_on_the_gpu(name):
    torch.manual_seed(0)
    ref = build_model(ModelConfig(name=name, hidden=32, memory_width=8, implementation="reference"), 20, 10).cuda()
    fused = build_model(ModelConfig(name=name, hidden=32, memory_width=8), 20, 10).cuda()
    fused.load_state_dict(ref.state_dict())
    inputs = torch.randint(1, 20, (4, 30), device="cuda")
    lengths = torch.tensor([30, 25, 12, 30], device="cuda")
    assert torch.allclose(ref(inputs, lengths), fused(inputs, lengths), atol=1e-4)


def test_the_benchmark_step_runs_on_the_gpu():
    TrainingStep("stack", 64, 20, device="cuda")()
    assert cuda_peak_memory_mb("stack", 64, 20) > 0


def test_evaluation_and_inspection_run_on_the_gpu(tmp_path):
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": "stack", "hidden": 16, "memory_width": 8,
                                                                 "embedding": 8},
                                   "training": {"max_batches": 10, "eval_every": 10, "eval_size": 10,
                                                "test_eval_size": 10, "final_eval_size": 10, "perplexity_every": 10},
                                   "tracking": {"wandb": "off"}})
    train(config, tmp_path / "run", progress=False, accelerator="cpu")
    on_cpu = evaluate_run(tmp_path / "run", splits=("train",))
    on_gpu = evaluate_run(tmp_path / "run", splits=("train",), accelerator="cuda")
    assert abs(on_gpu["train"]["fine"] - on_cpu["train"]["fine"]) < 0.01
    trace = inspect_run(tmp_path / "run", index=0, accelerator="cuda")
    assert len(trace.strengths) == len(trace.tokens)


@pytest.mark.parametrize("model", ["lstm2", "lstm4", "deque", "jm_stack", "transformer"])
def test_a_population_steps_on_the_gpu_as_on_the_cpu(model):
    """Issue 36: the population step on CUDA, in float64, equals the same step on the CPU (10 steps, 3 members)."""
    import copy

    torch.manual_seed(0)
    cpu_population, _ = population_of(model, 3, 16, torch.device("cpu"))
    gpu_population = copy.deepcopy(cpu_population).double().cuda()
    cpu_population.double()
    cpu_optimizer = PopulationRMSprop(cpu_population.ordered_parameters(), [1e-3, 5e-3, 5e-4], 0.9, 1e-8)
    gpu_optimizer = PopulationRMSprop(gpu_population.ordered_parameters(), [1e-3, 5e-3, 5e-4], 0.9, 1e-8)
    for step in range(10):
        batches = [random_batch(12, 3 * step + k) for k in range(3)]
        cpu_loss, _ = population_step(cpu_population, cpu_optimizer, batches, 1.0)
        gpu_loss, _ = population_step(gpu_population, gpu_optimizer, [b.to("cuda") for b in batches], 1.0)
        torch.testing.assert_close(gpu_loss.cpu(), cpu_loss, rtol=1e-9, atol=1e-12)
    for mine, theirs in zip(gpu_population.ordered_parameters(), cpu_population.ordered_parameters()):
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model", ["lstm2", "lstm8", "deque", "jm_stack", "transformer"])
def test_a_captured_population_step_replays_the_eager_step(model):
    """Issue 36: the step captured as a CUDA graph (warm-up and capture leave every parameter and RMSProp state as
    they were) and replayed on new batches equals the eager step at the same static length, in float64."""
    import copy

    torch.manual_seed(0)
    eager, _ = population_of(model, 3, 16, torch.device("cuda"))
    eager.double()
    graphed = copy.deepcopy(eager)
    rates = [1e-3, 5e-3, 5e-4]
    eager_optimizer = PopulationRMSprop(eager.ordered_parameters(), rates, 0.9, 1e-8)
    graphed_optimizer = PopulationRMSprop(graphed.ordered_parameters(), rates, 0.9, 1e-8)
    step = CapturedStep(graphed, graphed_optimizer, 1.0, batch_size=10, length=16)
    assert step.graph is not None
    for mine, theirs in zip(graphed.ordered_parameters(), eager.ordered_parameters()):
        assert torch.equal(mine, theirs)  # the warm-up changed nothing
    for k in range(10):
        batches = [random_batch(12 + k % 4, 3 * k + m) for m in range(3)]
        want, _ = population_step(eager, eager_optimizer, [b.to("cuda") for b in batches], 1.0, length=16)
        got, _ = step(batches)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    for mine, theirs in zip(graphed.ordered_parameters(), eager.ordered_parameters()):
        torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-9, atol=1e-12)
