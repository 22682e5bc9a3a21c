"""Population training's step (pipeline/training/population.py): in float64, every member of a population that
differs in seed, learning rate and task equals the same run trained alone, step for step, in either clip mode: loss,
every parameter, RMSProp's state."""

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from pipeline.config import RunConfig, from_dict, to_dict
from pipeline.data.encoding import IGNORE_INDEX
from pipeline.data.stream import TrainingBatches
from pipeline.models import MODELS, unstackable
from pipeline.training.module import TransductionModule
from pipeline.training.population import PopulationRMSprop, population_class, population_step

# Steps each member takes, by clip mode. RMSProp has state from step 1, and at clip 0.05 norm clipping acts on every
# step, so 5 steps hold what norm clipping can get wrong. Value clipping acts only now and then (each member's own
# gradients: copy's at steps 2 and 9, reversal's at 1 and 4, bigram flipping's at 8), so it takes 10. Each step is a
# real batch of up to 131 positions.
STEPS = {"norm": 5, "value": 10}


# The baselines beside the paper at tiny sizes: a Transformer of two blocks (width 8, two heads) under each encoding
# that can be stacked, and a JM stack shallower than the longest sequence (its bottom drops) that reads two rows.
BASELINES = {"transformer": {"layers": 2, "heads": 2, "width": 8, "feedforward": 16},
             "jm_stack": {"stack_depth": 9, "stack_read": 2}}


def member_config(task, seed, lr, model, clip_mode="norm"):
    name = f"lstm{model}" if isinstance(model, int) else model
    name, _, encoding = name.partition(":")  # "transformer:learned": the Transformer with learned positions
    settings = {"name": name, "hidden": 12, "embedding": 6, "memory_width": 5, **BASELINES.get(name, {})}
    if encoding:
        settings["positional_encoding"] = encoding
    return from_dict(RunConfig, {"task": task, "model": settings,
                                 "training": {"seed": seed, "lr": lr, "clip_mode": clip_mode, "clip": 0.05},
                                 "tracking": {"wandb": "off"}})


def population_of(model, modules, vocab=None):
    """The stacked population of ``modules`` as the engine makes it: the registry entry's class."""
    return population_class(member_config("copy", 0, 1e-3, model).model.name)(modules, vocab)


def single_run(config, dtype=torch.float64):
    """A run's module as training builds it (seeded as train() seeds it), in ``dtype``, and its batches."""
    L.seed_everything(config.training.seed, workers=True, verbose=False)
    module = TransductionModule.from_config(config).to(dtype)
    t = config.training
    batches = TrainingBatches(module.task, module.vocab, seed=t.seed, batch_size=t.batch_size, pool=t.length_pool)
    return module, batches


def train_alone(config, steps, dtype=torch.float64):
    """What a single run's step is, written out here as the oracle (the mean cross-entropy of the target tokens,
    clipping by norm or by value, torch's RMSprop): the losses, and the module and optimizer after ``steps``."""
    module, batches = single_run(config, dtype)
    t = config.training
    optimizer = torch.optim.RMSprop(module.parameters(), lr=t.lr, alpha=t.rmsprop_alpha, eps=t.rmsprop_eps)
    losses = []
    for step in range(steps):
        batch = batches.batch(step)
        logits = module.model(batch.inputs, batch.lengths)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE_INDEX,
                               reduction="sum") / batch.target_lengths.sum()
        loss.backward()
        if t.clip_mode == "norm":
            torch.nn.utils.clip_grad_norm_(module.parameters(), t.clip)
        else:
            torch.nn.utils.clip_grad_value_(module.parameters(), t.clip)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, module, optimizer


# the 4- and 8-layer LSTMs are `slow` (~6 CPU-s): the 2-layer one steps the same wavefront over its layers; so is the
# 2-layer LSTM clipped by value: the Stack's and the Transformer's members clip by value here
@pytest.mark.parametrize("model,clip_mode", [(1, "norm"), (2, "norm"), pytest.param(4, "norm", marks=pytest.mark.slow),
                                             pytest.param(8, "norm", marks=pytest.mark.slow), ("stack", "norm"),
                                             ("queue", "norm"), ("deque", "norm"),
                                             pytest.param(2, "value", marks=pytest.mark.slow), ("stack", "value"),
                                             ("jm_stack", "norm"), ("transformer:sinusoidal", "norm"),
                                             ("transformer:learned", "norm"), ("transformer:none", "value")])
def test_every_member_equals_its_run_trained_alone(model, clip_mode):
    configs = [member_config("copy", 3, 1e-3, model, clip_mode), member_config("reversal", 7, 5e-3, model, clip_mode),
               member_config("bigram_flip", 11, 5e-4, model, clip_mode)]
    singles = [single_run(c) for c in configs]
    population = population_of(model, [m.model for m, _ in singles])
    assert_members_equal_their_runs_alone(population, configs, singles, STEPS[clip_mode], clip_mode)


def assert_members_equal_their_runs_alone(population, configs, singles, steps, clip_mode="norm"):
    """Step ``population`` ``steps`` times, each member on its own run's batches, and check in float64 that every
    member equals its run trained alone: losses, parameters and RMSProp state (each member's own part of a padded
    one). Returns the population's optimizer and, per member, the run alone's module and optimizer."""
    t = configs[0].training
    optimizer = PopulationRMSprop(population.ordered_parameters(), [c.training.lr for c in configs],
                                  t.rmsprop_alpha, t.rmsprop_eps)
    losses = [nll / tokens for nll, tokens in
              (population_step(population, optimizer, [batches.batch(step) for _, batches in singles], t.clip,
                               clip_mode)
               for step in range(steps))]
    alone_runs = []
    for k, config in enumerate(configs):
        alone, module, alone_optimizer = train_alone(config, steps)
        assert [loss[k].item() for loss in losses] == pytest.approx(alone, rel=1e-9, abs=0)
        together = population.member_state_dict(k)
        for name, p in module.model.named_parameters():
            torch.testing.assert_close(together[name], p.detach(), rtol=1e-9, atol=1e-12, msg=name)
            mine = optimizer.square_avg[population.names.index(name)][population.own(k, name)]
            state = alone_optimizer.state[p]["square_avg"]
            torch.testing.assert_close(mine, state, rtol=1e-9, atol=1e-15, msg=f"square_avg of {name}")
        alone_runs.append((module, alone_optimizer))
    return optimizer, alone_runs


@pytest.mark.parametrize("model", [2, "stack", "jm_stack", "transformer:learned"])
def test_members_of_other_vocabularies_padded_to_the_largest_equal_their_runs_alone(model):
    """A synthetic task's run (259 input, 129 output ids), an SVO->SOV run and a gender run (their grammars' own)
    stacked as one model: the vocabularies are padded to the largest and the padding's logits masked, and every member
    still equals its run trained alone (float64); its padding rows stay zero, with no RMSProp state; each is scored in
    the stacked pass as its own model scores. A slot taken by a run of another task (Population.place) holds that
    run's parameters exactly, the rest of the slot zero."""
    import numpy as np

    from pipeline.evaluation import evaluate
    from pipeline.training.population import evaluate_population

    configs = [member_config("copy", 3, 1e-3, model), member_config("svo_sov", 7, 5e-3, model),
               member_config("gender", 11, 5e-4, model)]
    singles = [single_run(c) for c in configs]
    sizes = [(m.model.input_size, m.model.output_size) for m, _ in singles]
    assert len(set(sizes)) == 3
    population = population_of(model, [m.model for m, _ in singles])
    assert population.padded and population.vocab == (max(i for i, _ in sizes), max(o for _, o in sizes))
    optimizer, alone_runs = assert_members_equal_their_runs_alone(population, configs, singles, STEPS["norm"])
    for k, (trained, _) in enumerate(alone_runs):
        together = population.member_state_dict(k)
        for name, p in trained.model.named_parameters():
            i, own, rows = population.names.index(name), population.own(k, name), p.shape[0]
            if len(own) > 1 and population.member(name).shape[1] > rows:  # this member's padding: zero, no state
                assert not population.member(name)[k, rows:].any() and not optimizer.square_avg[i][k, rows:].any()
        singles[k][0].model.load_state_dict(together)
    pairs = [m.task.sample_batch(np.random.default_rng(k), "train", 12) for k, (m, _) in enumerate(singles)]
    stacked = evaluate_population(population, pairs, [m.vocab for m, _ in singles])
    for (module, _), own_pairs, scores in zip(singles, pairs, stacked):
        assert torch.equal(scores.correct_prefix, evaluate(module.model, own_pairs, module.vocab).correct_prefix)
    newcomer = single_run(member_config("gender", 13, 1e-3, model))[0].model  # into the copy run's slot
    population.place(0, newcomer)
    placed = population.member_state_dict(0)
    assert all(torch.equal(placed[name], p.detach()) for name, p in newcomer.named_parameters())
    assert not population.member("embed.weight")[0, newcomer.input_size:].any()
    assert population.output_live[0].sum().item() == newcomer.output_size


def test_members_clip_by_their_own_norm_or_values_and_a_mixed_population_is_refused():
    from pipeline.training.step import clip_members

    a = torch.nn.Parameter(torch.zeros(2, 3))
    a.grad = torch.tensor([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])  # norms 5 and 0.5
    clip_members([a], 1.0, "norm")
    assert a.grad[0].norm().item() == pytest.approx(1.0, rel=1e-5)  # clipped to 1
    assert a.grad[1].tolist() == pytest.approx([0.3, 0.4, 0.0])  # left alone: the other member's norm is not its
    a.grad = torch.tensor([[3.0, -4.0, 0.5], [0.3, 0.4, -0.2]])
    clip_members([a], 0.35, "value")
    assert a.grad.flatten().tolist() == pytest.approx([0.35, -0.35, 0.35, 0.3, 0.35, -0.2])
    with pytest.raises(ValueError, match="clip mode 'both' is not one of norm, value"):
        clip_members([a], 1.0, "both")
    small, large = (single_run(member_config("copy", 0, 1e-3, 1))[0].model,
                    single_run(member_config("copy", 0, 1e-3, 2))[0].model)
    with pytest.raises(ValueError, match="same architecture \\(vocabularies aside\\)"):
        population_of(1, [small, large])


def test_the_baselines_stack_where_they_can_and_a_population_they_cannot_form_is_refused(tmp_path):
    """The Transformer under a randomised encoding draws each member's positions on the host at every batch: it is
    refused as a batched population, by name, before any work (check_population) and by the class itself; members
    that differ in what no parameter's shape shows (a JM stack's depth, a Transformer's encoding or heads) are
    refused too. Every other model of the registry can be stacked."""
    from pipeline.config import ConfigError
    from pipeline.training.run import cannot_batch, check_population

    # every architecture of the registry has its stacked model in training's own table
    assert [name for name in MODELS if cannot_batch(member_config("copy", 0, 1e-3, name))] == []
    randomised = member_config("copy", 0, 1e-3, "transformer:randomised")
    assert "randomised positional encoding" in unstackable(randomised.model)
    with pytest.raises(ConfigError, match="cannot be stacked as one batched population \\(a randomised"):
        check_population([randomised], [tmp_path / "r"], batched=True)
    check_population([randomised], [tmp_path / "r"], batched=False)  # one member after another: fine
    with pytest.raises(ValueError, match="randomised positional encoding cannot be stacked"):
        population_of("transformer", [single_run(randomised)[0].model])
    pairs = [("jm_stack", {"stack_depth": 8}), ("transformer:learned", {"positional_encoding": "none"}),
             ("transformer", {"heads": 4})]
    for model, change in pairs:
        config = member_config("copy", 0, 1e-3, model)
        other = from_dict(RunConfig, {**to_dict(config), "model": {**to_dict(config)["model"], **change}})
        with pytest.raises(ValueError, match="every member of a population must have the same"):
            population_of(model, [single_run(config)[0].model, single_run(other)[0].model])


def test_the_reference_loop_is_what_train_does(tmp_path, cache_dir, monkeypatch):
    """The single run the population is compared with, written out above, is the real one: after 20 batches of
    `train` (float32) its last checkpoint holds the reference loop's parameters."""
    from pipeline.training.run import train

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    config = from_dict(RunConfig, {**to_dict(member_config("reversal", 5, 5e-3, 2)),
                                   "training": {**to_dict(member_config("reversal", 5, 5e-3, 2).training),
                                                "max_batches": 20, "perplexity_every": 10, "eval_every": 20,
                                                "eval_size": 5, "test_eval_size": 5, "final_eval_size": 5,
                                                "checkpoint_every": 20}})
    train(config, tmp_path / "run", progress=False)
    trained = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    _, module, _ = train_alone(config, 20, dtype=torch.float32)
    for name, p in module.named_parameters():
        torch.testing.assert_close(trained[name], p.detach(), rtol=1e-5, atol=1e-6, msg=name)


def test_the_population_bench_writes_one_record_per_measurement(tmp_path):
    import json

    from pipeline.bench_population import run_population_benchmark

    readme = run_population_benchmark("cpu", tmp_path, models=("lstm1", "queue"), sizes=(1, 2), hidden=8, steps=7,
                                      echo=lambda _: None)
    records = json.loads((tmp_path / "bench-population.json").read_text())
    assert [(r["model"], r["population"], r["mode"]) for r in records] == [
        ("lstm1", 1, "batched"), ("lstm1", 2, "batched"), ("queue", 1, "batched"), ("queue", 2, "batched"),
        ("lstm1", 1, "one after another"), ("lstm1", 8, "one after another"),
        ("queue", 1, "one after another"), ("queue", 8, "one after another")]
    assert all(set(r) >= {"model", "population", "device", "member_batches_per_s", "peak_mb"} for r in records)
    assert all(r["launches_per_step"] > 100 for r in records if r["mode"] == "batched")
    assert all(r["member_batches_per_s"] > 0 and r["device"] == "cpu" for r in records)
    text = readme.read_text()
    assert "| 1-layer LSTM |" in text and "| Queue-LSTM |" in text
    assert "on `cpu`, eager (the batches copied in each step)" in text
    assert "## Projected wall time of `configs/paper.yaml`" in text and "| Queue-LSTM | 512 * | 75 |" in text
    assert "| 1-layer LSTM | " in text.split("One after another")[1] and "stepped one after another" in text


@pytest.mark.parametrize("layers", [1, 3])
def test_the_wavefront_recurrences_backward_is_its_forwards_gradient(layers):
    """WavefrontLSTM's written-out backward against finite differences of its forward (float64), for every input:
    the skewed input products, the weights, the initial states; the layers not yet started and past the end
    included (L = 4 positions, 3 layers: 6 diagonals)."""
    from pipeline.training.population import WavefrontLSTM

    P, B, H, L = 2, 2, 3, 4
    D, K = L + layers - 1, H if layers == 1 else 2 * H
    generator = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64, requires_grad=True)

    inputs = (rand(D, P, layers, B, 4 * H), rand(P, layers, 4 * H, K), rand(P, layers, H), rand(P, layers, H))
    assert torch.autograd.gradcheck(WavefrontLSTM.apply, inputs)
    assert WavefrontLSTM.apply(*inputs).shape == (P, B, L, H)


def test_a_deep_lstm_population_steps_its_layers_as_a_wavefront():
    """On a GPU a small population's step costs its kernel launches (docs/performance.md): with the layers stepped
    on anti-diagonals an 8-layer step launches about what a 1-layer one does plus a few per extra diagonal, not eight
    times as much (layer by layer, at 131 positions: 3,701 / 28,838 launches), and the count is the same whatever the
    hidden size."""
    from pipeline.bench_population import launches_per_step

    one, eight = launches_per_step("lstm1", 131), launches_per_step("lstm8", 131)
    assert eight < 2 * one, (one, eight)
    assert launches_per_step("lstm8", 31) < launches_per_step("lstm8", 131)  # it counts positions


def test_the_population_profile_says_where_a_step_goes(tmp_path, monkeypatch):
    """`bench --population --profile`: per model the step's wall and busy time and its costliest operators, from the
    profiler (the operators a population step of a deep LSTM and of a Stack-LSTM run)."""
    from typer.testing import CliRunner

    import pipeline.bench_population
    from pipeline.cli import app

    real = pipeline.bench_population.profile_population
    short = lambda *args, **kwargs: real(*args, **{**kwargs, "steps": 7})  # noqa: E731 (7 positions: a quick profile)
    monkeypatch.setattr(pipeline.bench_population, "profile_population", short)
    out = CliRunner().invoke(app, ["bench", "--population", "--profile", "--hidden", "8", "--size", "2", "--out",
                                   str(tmp_path), "--model", "stack", "--model", "lstm2"])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "bench-population-profile.md").read_text()
    assert ("`transduce bench --population --profile --hidden 8 --size 2 --model stack --model lstm2`"
            in text and "P = 2 members" in text)
    assert "## Queue-LSTM" not in text and "## DeQue-LSTM" not in text  # only the models asked for
    for model in ("Stack-LSTM", "2-layer LSTM"):
        section = text.split(f"## {model}: wall ")[1].split("##")[0]
        assert "| `aten::bmm` |" in section or "| `aten::baddbmm` |" in section, section
    assert "WavefrontLSTM" in text.split("## 2-layer LSTM")[1]  # the deep LSTM's recurrence, one node each way


def test_the_population_bench_measures_each_hidden_size_it_is_given(tmp_path):
    """Hidden 512 measured, not scaled from 256: one record per size, a table row per model and size, and the
    projection then prices each size from its own records (no estimate mark)."""
    import json

    from typer.testing import CliRunner

    from pipeline.bench_population import run_population_benchmark
    from pipeline.cli import app
    from pipeline.projection import step_times

    readme = run_population_benchmark("cpu", tmp_path, models=("lstm1",), sizes=(1, 2), hidden=(8, 16), steps=7,
                                      echo=lambda _: None)
    records = json.loads((tmp_path / "bench-population.json").read_text())
    assert [(r["hidden"], r["population"]) for r in records if r["mode"] == "batched"] == [(8, 1), (8, 2), (16, 1),
                                                                                            (16, 2)]
    assert {r["hidden"] for r in records if r["mode"] != "batched"} == {8}  # the comparison at the first size
    assert set(step_times(records)) == {("lstm1", 8), ("lstm1", 16)}
    text = readme.read_text()
    assert "| 1-layer LSTM | 8 |" in text and "| 1-layer LSTM | 16 |" in text and "hidden 8 and 16" in text
    out = CliRunner().invoke(app, ["bench", "--population", "--hidden", "0", "--out", str(tmp_path / "x")])
    assert out.exit_code == 2 and "--hidden 0: must be a width in 1-8,192" in out.output
    out = CliRunner().invoke(app, ["bench", "--population", "--size", "2000", "--out", str(tmp_path / "x")])
    assert out.exit_code == 2 and "--size 2000: must be a population size in 1-1,024" in out.output
    out = CliRunner().invoke(app, ["bench", "--population", "--model", "gru", "--out", str(tmp_path / "x")])
    assert out.exit_code == 2 and "--model gru: must be a model that stacks as a population, one of lstm1" in out.output
    assert not (tmp_path / "x").exists()


def test_the_population_bench_measures_the_baselines_it_is_asked_for(tmp_path, monkeypatch):
    """``bench --population --model``: the baselines' populations (the JM stack's, the Transformer's) measured, one
    record per size, and the command that asked for them named in the report."""
    import json

    from typer.testing import CliRunner

    import pipeline.bench_population
    from pipeline.cli import app

    real = pipeline.bench_population.run_population_benchmark
    short = lambda *args, **kwargs: real(*args, **{**kwargs, "steps": 7})  # noqa: E731 (7 positions: a quick bench)
    monkeypatch.setattr(pipeline.bench_population, "run_population_benchmark", short)
    out = CliRunner().invoke(app, ["bench", "--population", "--model", "jm_stack", "--model", "transformer",
                                   "--hidden", "8", "--size", "1", "--size", "2", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    records = json.loads((tmp_path / "bench-population.json").read_text())
    assert [(r["model"], r["population"]) for r in records if r["mode"] == "batched"] == [
        ("jm_stack", 1), ("jm_stack", 2), ("transformer", 1), ("transformer", 2)]
    text = (tmp_path / "bench-population.md").read_text()
    assert "| JM Stack-LSTM | 8 |" in text and "| Transformer | 8 |" in text
    assert "--model jm_stack --model transformer" in text


def test_the_projection_counts_successive_halvings_whole_budget_and_the_cpu_runs_mean(tmp_path):
    """configs/paper.yaml's LSTM brackets: 5 rates to 5,000 batches, 2 on to 20,000, 1 to 300,000, per task and size;
    its memory runs: as many batches as the cpu profile's runs of that model trained on average, at most the cap."""
    import pandas as pd

    from pipeline.bench_population import projection_lines
    from pipeline.projection import plan
    from pipeline.sweep import load_sweep

    runs = tmp_path / "all_runs.csv"
    pd.DataFrame({"model": ["stack", "stack", "queue", "deque"], "batches": [1000, 3000, 60000, 500]}).to_csv(runs)
    phases = plan(load_sweep("configs/paper.yaml"), runs)
    batches = lambda model: sum(p.member_batches for p in phases if p.model == model)  # noqa: E731
    bracket = 5 * 5000 + 2 * (20000 - 5000) + 1 * (300000 - 20000)
    assert batches("lstm8") == 10 * bracket  # 5 tasks x 2 sizes: 10 brackets of 5 runs
    assert batches("stack") == 150 * 2000 and batches("deque") == 300 * 500
    assert batches("queue") == 150 * 50000  # the mean, at most the run's cap (50,000)
    lines = "\n".join(projection_lines([{"model": "stack", "population": 64, "member_batches_per_s": 100.0,
                                          "mode": "batched"}], "cuda", cpu_runs=runs))
    assert "| Stack-LSTM | 256 | 75 |" in lines and "Not projected (no step time measured): deque" in lines


@pytest.mark.parametrize("model", [2, "deque", "jm_stack", "transformer:sinusoidal"])
def test_the_captured_steps_bookkeeping_equals_the_step_off_a_gpu(model):
    """CapturedStep on a CPU (nothing captured: its static tensors stepped eagerly) equals population_step at the
    same static length, in float64: the batches copied in, the token counts, the gradients cleared each step. The
    capture itself is tests/test_cuda.py's."""
    import copy

    from pipeline.training.population import CapturedStep

    configs = [member_config("copy", 3, 1e-3, model), member_config("reversal", 7, 5e-3, model),
               member_config("bigram_flip", 11, 5e-4, model)]
    singles = [single_run(c) for c in configs]
    population = population_of(model, [m.model for m, _ in singles])
    twin = copy.deepcopy(population)
    t = configs[0].training
    rates = [c.training.lr for c in configs]
    optimizer = PopulationRMSprop(population.ordered_parameters(), rates, t.rmsprop_alpha, t.rmsprop_eps)
    twin_optimizer = PopulationRMSprop(twin.ordered_parameters(), rates, t.rmsprop_alpha, t.rmsprop_eps)
    captured = CapturedStep(twin, twin_optimizer, t.clip, t.batch_size, length=131)
    assert captured.graph is None
    for step in range(4):  # the gradients cleared between steps, and RMSProp's state carried over
        batches = [batches.batch(step) for _, batches in singles]
        want, want_tokens = population_step(population, optimizer, batches, t.clip, length=131)
        got, got_tokens = captured(batches)
        assert torch.equal(got_tokens, want_tokens)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    for mine, theirs in zip(twin.ordered_parameters(), population.ordered_parameters()):
        torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("model", [2, "stack", "jm_stack", "transformer:none"])
def test_a_population_scored_in_one_stacked_pass_scores_each_member_as_its_own_model_would(model, monkeypatch):
    """evaluate_population (a batched population's evaluations, one stacked pass per chunk) gives every member the
    logits and correct prefixes that evaluate gives the member's own model, in float64: three members that differ in
    task, seed and learning rate, each on its own 60 sequences of lengths 1-64 (two chunks, each member's in its own
    length order); and a population scored on sets of different sizes is refused."""
    import numpy as np

    import pipeline.evaluation
    from pipeline.evaluation import evaluate
    from pipeline.training.population import evaluate_population

    seen = []  # the logits every chunk is scored on, in the order scored
    score = pipeline.evaluation.correct_prefix_from_logits

    def recording(logits, batch):
        seen.append(logits.clone())
        return score(logits, batch)

    monkeypatch.setattr(pipeline.evaluation, "correct_prefix_from_logits", recording)

    configs = [member_config("copy", 3, 1e-3, model), member_config("reversal", 7, 5e-3, model),
               member_config("bigram_flip", 11, 5e-4, model)]
    singles = [single_run(c) for c in configs]
    for (module, batches), config in zip(singles, configs):  # a few steps: weights off their initialisation
        optimizer = torch.optim.RMSprop(module.parameters(), lr=config.training.lr)
        for step in range(5):
            batch = batches.batch(step)
            logits = module.model(batch.inputs, batch.lengths)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE_INDEX)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    population = population_of(model, [m.model for m, _ in singles])
    pairs = [m.task.sample_batch(np.random.default_rng(k), "train", 60) for k, (m, _) in enumerate(singles)]
    vocabs = [m.vocab for m, _ in singles]
    together = evaluate_population(population, pairs, vocabs)
    stacked, seen[:] = list(seen), []
    for k, ((module, _), own, scores) in enumerate(zip(singles, pairs, together)):
        alone = evaluate(module.model, own, module.vocab)
        assert torch.equal(scores.correct_prefix, alone.correct_prefix)
        assert (scores.coarse, scores.fine) == (alone.coarse, alone.fine)
        for chunk, logits in enumerate(seen):  # member k's chunks, scored alone, against its rows of the stacked pass
            torch.testing.assert_close(stacked[chunk * len(singles) + k], logits, rtol=1e-9, atol=1e-12)
        seen.clear()
    with pytest.raises(ValueError, match="as many pairs per member"):
        evaluate_population(population, [pairs[0], pairs[1], pairs[2][:10]], vocabs)
