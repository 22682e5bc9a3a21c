"""The recipe's selectable readings (target ids, readout width, end biases, early-stop threshold) and the study
report that measures them: what each option changes, and how a study counts seeds that learned."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import yaml

from pipeline.config import (
    PROBE_KEYS,
    ConfigError,
    ModelConfig,
    ProbeConfig,
    RunConfig,
    TrainingConfig,
    from_dict,
    to_dict,
)
from pipeline.data.encoding import JointVocabulary, collate
from pipeline.evaluation import evaluate, greedy_correct_prefix
from pipeline.models import build_model, count_parameters
from pipeline.reports.recipe import labelled_runs, learned_at, study_table, write_study_report
from pipeline.sweep import load_sweep, run_local
from pipeline.tasks import get_task


def test_shared_target_inputs_read_a_target_symbol_through_its_source_id():
    task = get_task("copy")
    separate, shared = JointVocabulary.for_task(task), JointVocabulary.for_task(task, "shared")
    assert (separate.input_size, shared.input_size) == (3 + 128 + 128, 3 + 128)
    assert shared.output_size == separate.output_size == 129
    pairs = task.sample_batch(np.random.default_rng(0), "train", 4)
    batch = collate(pairs, shared)
    k = len(pairs[0].source)
    source_ids, target_ids = batch.inputs[0, 1 : k + 1], batch.inputs[0, k + 2 : 2 * k + 2]
    assert torch.equal(source_ids, target_ids)  # copy: the same symbols, read through the same ids
    assert batch.inputs.max() < shared.input_size
    assert torch.equal(batch.targets, collate(pairs, separate).targets)  # what is predicted does not change


def test_shared_target_inputs_leave_tasks_with_different_alphabets_alone():
    task = get_task("svo_sov")
    assert JointVocabulary.for_task(task, "shared") == JointVocabulary.for_task(task)
    with pytest.raises(ValueError, match="target_inputs must be 'separate' or 'shared', got 'both'"):
        JointVocabulary.for_task(task, "both")
    with pytest.raises(ConfigError, match="model.target_inputs must be one of 'separate', 'shared'; got 'x'"):
        from_dict(RunConfig, {"model": {"target_inputs": "x"}})


@pytest.mark.parametrize("name", ["stack", "lstm1"])
def test_greedy_decoding_feeds_predictions_back_through_the_shared_ids(name):
    # teacher-forced scoring and step-by-step greedy decoding agree only if both read targets the same way
    task = get_task("reversal")
    vocab = JointVocabulary.for_task(task, "shared")
    torch.manual_seed(0)
    model = build_model(ModelConfig(name=name, hidden=16, memory_width=8, embedding=8, target_inputs="shared"),
                        vocab.input_size, vocab.output_size)
    pairs = task.sample_batch(np.random.default_rng(1), "train", 3)
    prefix = greedy_correct_prefix(model, pairs, vocab)
    assert torch.equal(torch.as_tensor(prefix), torch.as_tensor(evaluate(model, pairs, vocab).correct_prefix))


def test_readout_width_changes_the_readout_only():
    narrow = build_model(ModelConfig(name="stack", hidden=32, memory_width=8), 20, 10)
    wide = build_model(ModelConfig(name="stack", hidden=32, memory_width=8, readout_width=32), 20, 10)
    assert narrow.readout.project.out_features == 64 and wide.readout.project.out_features == 32
    expected = (32 * 32 + 32 + 32 * 10 + 10) - (32 * 64 + 64 + 64 * 10 + 10)
    assert count_parameters(wide) - count_parameters(narrow) == expected
    with pytest.raises(ConfigError, match="model.readout_width must be positive, got 0"):
        from_dict(RunConfig, {"model": {"readout_width": 0}})


def test_end_biases_of_the_deque():
    torch.manual_seed(0)
    plain = build_model(ModelConfig(name="deque", hidden=8, memory_width=4), 20, 10)
    torch.manual_seed(0)
    biased = build_model(ModelConfig(name="deque", hidden=8, memory_width=4, bottom_push_bias=-2.0, pop_bias=-2.0,
                                     bottom_pop_bias=-0.5), 20, 10)
    # bias layout [d_top, d_bottom, u_top, u_bottom, v ...]
    # The DeQue's own start (issue 37): the top's push at nn.Linear's U(-1/sqrt(8), 1/sqrt(8)), its pop at the pop
    # bias; the bottom end all but still, push and pop at -4.
    assert plain.signals.bias[1:4].tolist() == [-4.0, -1.0, -4.0]
    assert abs(plain.signals.bias[0].item()) <= 8 ** -0.5
    assert biased.signals.bias[1:4].tolist() == [-2.0, -2.0, -0.5]
    assert biased.signals.bias[0] == plain.signals.bias[0]  # the top's push left at the DeQue's start
    pushed = build_model(ModelConfig(name="deque", hidden=8, memory_width=4, push_bias=1.5), 20, 10)
    assert pushed.signals.bias[:4].tolist() == [1.5, -4.0, -1.0, -4.0]  # a set bias replaces its end's start only
    alike = build_model(ModelConfig(name="deque", hidden=8, memory_width=4, push_bias=1.5, bottom_push_bias=None,
                                    bottom_pop_bias=None), 20, 10)
    assert alike.signals.bias[:4].tolist() == [1.5, 1.5, -1.0, -1.0]  # null at the bottom: as the top's
    stack = build_model(ModelConfig(name="stack", hidden=8, memory_width=4), 20, 10)
    assert stack.signals.bias[:2].tolist() == [1.0, -1.0]  # the Stack's start: push +1, pop -1 (issue 37)
    linear = build_model(ModelConfig(name="stack", hidden=8, memory_width=4, push_bias=None), 20, 10)
    assert abs(linear.signals.bias[0].item()) <= 8 ** -0.5  # None: nn.Linear's own U(-1/sqrt(8), 1/sqrt(8))
    # one-ended memories have no bottom: the bottom biases are ignored, the rest is unchanged
    torch.manual_seed(0)
    stack = build_model(ModelConfig(name="stack", hidden=8, memory_width=4, bottom_push_bias=-2.0), 20, 10)
    assert stack.signals.bias[1] == -1.0


def _seed_0_model(**fields):
    """The model ``fields`` name (probes among them), built from seed 0: two calls give one network but for what
    their fields change."""
    probes = {key: fields.pop(key) for key in PROBE_KEYS if key in fields}
    torch.manual_seed(0)
    return build_model(ModelConfig(**fields, probes=ProbeConfig(**probes)), 20, 10)


def _equal_but(a, b, changed) -> bool:
    """Whether models a and b hold equal tensors under every state key ``changed(key)`` does not pick."""
    return all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items() if not changed(k))


def test_bottom_read_gain_scales_only_the_bottom_reads_input_weights():
    # controller input [i_t (embedding 6); r_top (4); r_bottom (4)]
    config = dict(name="deque", hidden=8, memory_width=4, embedding=6)
    plain, unheard, halved = (_seed_0_model(**config, bottom_read_gain=g) for g in (None, 0.0, 0.5))
    w, w0, w_half = (m.controller.weight_ih for m in (plain, unheard, halved))
    assert torch.count_nonzero(w0[:, 10:14]) == 0 and torch.count_nonzero(w[:, 10:14]) > 0
    assert torch.equal(w0[:, :10], w[:, :10]) and torch.allclose(w_half[:, 10:14], 0.5 * w[:, 10:14])
    # nothing else moves: the same seed gives the same network otherwise (a paired comparison)
    assert _equal_but(plain, unheard, lambda key: key == "controller.weight_ih")
    # a one-read memory ignores it; null and the key's absence name the same run (its id as before the key existed)
    stack = _seed_0_model(name="stack", hidden=8, memory_width=4, bottom_read_gain=0.0)
    assert torch.count_nonzero(stack.controller.weight_ih[:, -4:]) > 0
    assert "bottom_read_gain" not in RunConfig().identity()["model"]
    assert RunConfig(model=ModelConfig(name="deque", probes=ProbeConfig(bottom_read_gain=0.0))).run_id() != RunConfig(
        model=ModelConfig(name="deque")).run_id()
    for bad in (-0.5, 2.0):
        with pytest.raises(ConfigError, match=f"model.probes.bottom_read_gain must lie in \\[0, 1\\].*got {bad}"):
            from_dict(RunConfig, {"model": {"name": "deque", "probes": {"bottom_read_gain": bad}}})


def test_bottom_read_heard_from_holds_the_bottom_read_at_zero_until_its_batch():
    # controller input [i_t (embedding 6); r_top (4); r_bottom (4)]: the bottom read is columns 10-13
    config = dict(name="deque", hidden=8, memory_width=4, embedding=6)
    plain, late = _seed_0_model(**config), _seed_0_model(**config, bottom_read_heard_from=2)
    w, w_late = plain.controller.weight_ih, late.controller.weight_ih
    assert torch.count_nonzero(w_late[:, 10:14]) == 0 and torch.count_nonzero(w[:, 10:14]) > 0
    assert torch.equal(w_late[:, :10], w[:, :10])
    assert _equal_but(plain, late, lambda key: key in ("controller.weight_ih", "input_mask"))  # paired otherwise
    inputs = torch.randint(1, 20, (3, 9), generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.RMSprop(late.parameters(), lr=1e-2, alpha=0.9)

    def train_one_batch(step):
        late.before_batch(step)
        optimizer.zero_grad()
        late(inputs).square().mean().backward()
        optimizer.step()
        return late.controller.weight_ih.grad

    for step in (0, 1):  # unheard: no gradient reaches the bottom read's weights, so they stay 0 ...
        grad = train_one_batch(step)
        assert torch.count_nonzero(grad[:, 10:14]) == 0 and torch.count_nonzero(grad[:, :10]) > 0
    assert torch.count_nonzero(w_late[:, 10:14]) == 0 and not torch.equal(w_late[:, :10], w[:, :10])
    grad = train_one_batch(2)  # ... and from its batch on they are trained like every other weight
    assert torch.count_nonzero(grad[:, 10:14]) > 0 and torch.count_nonzero(w_late[:, 10:14]) > 0
    # a one-read memory ignores it; null and the key's absence name the same run
    stack = _seed_0_model(name="stack", hidden=8, memory_width=4, bottom_read_heard_from=5)
    assert torch.count_nonzero(stack.controller.weight_ih[:, -4:]) > 0 and "input_mask" not in stack.state_dict()
    assert "bottom_read_heard_from" not in RunConfig().identity()["model"]
    late = ProbeConfig(bottom_read_heard_from=1000)
    assert RunConfig(model=ModelConfig(name="deque", probes=late)).run_id() != RunConfig(
        model=ModelConfig(name="deque")).run_id()
    for bad, message in ((-1, "must be a batch count >= 0 or null, got -1"), (True, "must be an integer, got True")):
        with pytest.raises(ConfigError, match=f"model.probes.bottom_read_heard_from {message}"):
            from_dict(RunConfig, {"model": {"name": "deque", "probes": {"bottom_read_heard_from": bad}}})


def test_with_a_gain_the_held_bottom_read_waits_at_its_initialisation():
    """bottom_read_gain with bottom_read_heard_from: the weights wait behind the mask at gain x their start (null:
    0, the first runs' start), so the model computes the same function as the zero-weight one until the release,
    and from the release on it hears the read through nn.LSTMCell's initial weights."""
    config = dict(name="deque", hidden=8, memory_width=4, embedding=6)
    plain = _seed_0_model(**config)
    at_zero = _seed_0_model(**config, bottom_read_heard_from=2)
    at_start = _seed_0_model(**config, bottom_read_heard_from=2, bottom_read_gain=1.0)
    assert torch.equal(at_start.controller.weight_ih, plain.controller.weight_ih)
    assert torch.count_nonzero(at_zero.controller.weight_ih[:, 10:14]) == 0
    inputs = torch.randint(1, 20, (3, 9), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(at_start(inputs), at_zero(inputs), rtol=0, atol=0)  # the read unheard by both
    at_start.before_batch(2)
    at_zero.before_batch(2)
    assert not torch.allclose(at_start(inputs), at_zero(inputs))  # released: heard through different weights
    torch.testing.assert_close(at_start(inputs), plain(inputs), rtol=0, atol=0)  # ... at_start's are the plain's
    waits_at_start, waits_at_zero = (ProbeConfig(bottom_read_heard_from=2, bottom_read_gain=1.0),
                                     ProbeConfig(bottom_read_heard_from=2))
    assert RunConfig(model=ModelConfig(name="deque", probes=waits_at_start)).run_id() != \
        RunConfig(model=ModelConfig(name="deque", probes=waits_at_zero)).run_id()


@pytest.mark.parametrize("implementation", ["reference", "fused"])
def test_a_run_hears_the_bottom_read_from_its_batch_and_not_before(tmp_path, implementation):
    """The real training loop: the bottom read's weights are still 0 after 6 batches when heard from batch 10, and
    trained when heard from batch 3 (both paths; the fused path's gradient goes through the same mask)."""
    from pipeline.training.run import train
    from tests.tiny import tiny

    for heard_from, trained in ((10, False), (3, True)):
        config = tiny(max_batches=6)
        config = dataclasses.replace(config, model=dataclasses.replace(
            config.model, name="deque", implementation=implementation,
            probes=ProbeConfig(bottom_read_heard_from=heard_from)))
        run_dir = tmp_path / f"{implementation}-{heard_from}"
        train(config, run_dir, progress=False)
        state = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
        bottom = state["model.controller.weight_ih"][:, 4 + 4 : 4 + 8]  # embedding 4, memory width 4
        assert (torch.count_nonzero(bottom) > 0) == trained, (heard_from, bottom)


def test_value_gain_scales_only_the_value_head():
    # signal rows [d (ends), u (ends), v (ends * m)]: the DeQue's 2 + 2 control rows stay, its 2 * 4 value rows scale
    config = dict(name="deque", hidden=8, memory_width=4, embedding=6)
    plain, loud = _seed_0_model(**config), _seed_0_model(**config, value_gain=8.0)
    for name in ("weight", "bias"):
        p, q = getattr(plain.signals, name), getattr(loud.signals, name)
        assert torch.equal(p[:4], q[:4]) and torch.allclose(q[4:], 8.0 * p[4:]) and not torch.equal(p[4:], q[4:])
    assert _equal_but(plain, loud, lambda key: key.startswith("signals."))  # paired: the same seed otherwise
    # on the Stack (one end) the value rows start after its one d and one u
    stack = _seed_0_model(name="stack", hidden=8, memory_width=4)
    loud_stack = _seed_0_model(name="stack", hidden=8, memory_width=4, value_gain=2.0)
    assert torch.equal(stack.signals.bias[:2], loud_stack.signals.bias[:2])
    assert torch.allclose(loud_stack.signals.weight[2:], 2.0 * stack.signals.weight[2:])
    # null and the key's absence name the same run; a gain names another
    assert "value_gain" not in RunConfig().identity()["model"]
    assert RunConfig(model=ModelConfig(name="deque", probes=ProbeConfig(value_gain=8.0))).run_id() != RunConfig(
        model=ModelConfig(name="deque")).run_id()
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ConfigError, match=f"model.probes.value_gain must be a positive finite number.*got {bad}"):
            from_dict(RunConfig, {"model": {"name": "deque", "probes": {"value_gain": bad}}})


def test_early_stop_threshold_is_validated():
    assert TrainingConfig().early_stop_coarse == 1.0
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match=f"training.early_stop_coarse must lie in \\(0, 1\\], got {bad}"):
            from_dict(RunConfig, {"training": {"early_stop_coarse": bad}})


def test_learned_at_is_the_first_evaluation_at_the_threshold():
    rows = [{"step": "100", "train/perplexity": "50"}, {"step": "250", "train/coarse": "0.5"},
            {"step": "500", "train/coarse": "0.995"}, {"step": "750", "train/coarse": "1.0"}]
    assert learned_at(rows) == 500
    assert learned_at(rows, threshold=1.0) == 750
    assert learned_at(rows[:2]) is None


def test_study_table_counts_seeds_and_medians():
    import pandas as pd

    runs = pd.DataFrame([
        dict(task="copy", model="queue", choice="a", lr=1e-3, seed=s, state=state, learned_at=at, max_batches=6000)
        for s, state, at in [(0, "finished", 1000), (1, "finished", None), (2, "finished", 3000),
                             (3, "running", None), (4, "pruned", None)]])
    (row,) = study_table(runs).itertuples()
    # a pruned seed is done and did not learn: it lowers the share (it once counted as not done, which raised it)
    assert (row.seeds, row.done, row.learned, row.median_batches) == (5, 4, 2, 2000)
    assert math.isclose(row.share, 2 / 4)
    assert row.per_seed == "s0: 1000, s1: —, s2: 3000, s3: (running), s4: — (pruned)"


def test_recipe_profile_labels_every_block():
    sweep = load_sweep("configs/recipe.yaml")
    labels = [choice for choice, _ in labelled_runs(sweep)]
    assert len(labels) == len(sweep.runs()) and all(labels) and "defaults" in labels
    assert all(run.training.early_stop_coarse == 0.99 for run in sweep.runs())


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_tiny_study_runs_and_reports(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    data = {"name": "tinystudy", "workers": 2,
            "defaults": {"model": {"memory_width": 8, "embedding": 8},
                         "training": dict(max_batches=20, perplexity_every=10, eval_every=10, eval_size=10,
                                          test_eval_size=10, final_eval_size=10, checkpoint_every=10,
                                          early_stop_patience=1, early_stop_coarse=0.99),
                         "tracking": {"wandb": "off"}},
            "grid": [{"label": "separate", "tasks": ["copy"], "models": ["stack"], "hidden": [16], "seeds": [0]},
                     {"label": "shared", "tasks": ["copy"], "models": ["stack"], "hidden": [16], "seeds": [0],
                      "overrides": {"model": {"target_inputs": "shared"}}}]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    sweep = load_sweep(path)
    assert [s.state for s in run_local(sweep, tmp_path / "runs", echo=lambda _: None)] == ["finished"] * 2
    readme = write_study_report(sweep, path, tmp_path / "runs", tmp_path / "out", command="pytest")
    text = readme.read_text()
    assert "| Stack-LSTM / copy | separate | 0.001 | 0 / 1 (of 1) | 0% (0%–97%) |" in text
    assert "| Stack-LSTM / copy | shared | 0.001 | 0 / 1 (of 1) | 0% (0%–97%) |" in text
    assert (tmp_path / "out" / "runs.csv").read_text().count("\n") == 3
    assert to_dict(sweep.runs()[1].model)["target_inputs"] == "shared"


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_study_runs_its_failed_runs_again_only_when_asked(tmp_path, cache_dir, monkeypatch):
    from tiny import tiny_profile
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.rundir import RunDir
    from pipeline.sweep import sweep_status

    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    path = tiny_profile(tmp_path, workers=1)
    sweep, runs = load_sweep(path), tmp_path / "runs"
    failed = sweep.runs()[1]
    folder = RunDir(runs / failed.run_id())
    folder.path.mkdir(parents=True)
    folder.write_failure({"error": "RuntimeError: made up", "traceback": "", "commit": "", "time": ""})
    args = ["study", str(path), "--runs-dir", str(runs), "--out", str(tmp_path / "out")]
    CliRunner().invoke(app, args)
    assert [s.state for s in sweep_status(sweep, runs)] == ["finished", "failed"]
    result = CliRunner().invoke(app, [*args, "--retry-failed"])
    assert result.exit_code == 0, result.output
    assert [s.state for s in sweep_status(sweep, runs)] == ["finished", "finished"]


def test_a_study_never_overwrites_a_profiles_report_nor_a_profile_a_studys(tmp_path):
    """Fault 2 of issue 35: `transduce study configs/cpu.yaml --report-only` replaced the committed Table 3 with a
    study README. Refused in one line, before any training, and the report there is untouched."""
    from typer.testing import CliRunner

    from pipeline.cli import app
    from pipeline.reports.kinds import ReportRefused, check_kind

    table3 = tmp_path / "cpu"
    table3.mkdir()
    (table3 / "README.md").write_text("# Report: profile `cpu`\n\nTable 3\n")
    result = CliRunner().invoke(app, ["study", "configs/cpu.yaml", "--report-only", "--out", str(table3)])
    assert result.exit_code == 2 and "holds a profile's report; a study's report never overwrites it" in result.output
    assert "Traceback" not in result.output
    assert (table3 / "README.md").read_text() == "# Report: profile `cpu`\n\nTable 3\n"
    (table3 / "README.md").write_text("# Study: `recipe`\n")
    with pytest.raises(ReportRefused, match="holds a study's report; a profile's report never overwrites it"):
        check_kind(table3, "profile")
    check_kind(table3, "study")  # the same kind rewrites its own
    check_kind(tmp_path / "new", "profile")  # and a new folder is anyone's


def test_the_share_of_seeds_has_its_exact_interval():
    from pipeline.reports.recipe import binomial_cdf, clopper_pearson

    low, high = clopper_pearson(5, 6)  # docs/recipe.md: 5 of 6 is consistent with 36% to 99.6%
    assert (round(low, 3), round(high, 3)) == (0.359, 0.996)
    # the closed forms at the edges: k = 0 and k = n
    assert clopper_pearson(0, 16) == (0.0, pytest.approx(1 - 0.025 ** (1 / 16), abs=1e-12))
    assert clopper_pearson(16, 16) == (pytest.approx(0.025 ** (1 / 16), abs=1e-12), 1.0)
    # the definition: each tail at the bounds holds 2.5%
    low, high = clopper_pearson(15, 16)
    assert 1 - binomial_cdf(14, 16, low) == pytest.approx(0.025, abs=1e-9)
    assert binomial_cdf(15, 16, high) == pytest.approx(0.025, abs=1e-9)
    assert all(math.isnan(x) for x in clopper_pearson(0, 0))


def test_a_studys_rows_are_sorted_by_cell_and_its_conclusion_ranks_sure_choices_first():
    import pandas as pd

    from pipeline.reports.recipe import by_cell, study_conclusions

    def row(task, model, choice, learned, done):
        from pipeline.reports.recipe import clopper_pearson

        low, high = clopper_pearson(learned, done)
        return dict(task=task, model=model, choice=choice, lr=1e-3, seeds=done, done=done, learned=learned,
                    share=learned / done, share_low=low, share_high=high, median_batches=1000.0, cap=6000,
                    per_seed="")

    table = pd.DataFrame([row("reversal", "deque", "a", 9, 16), row("copy", "queue", "b", 16, 16),
                          row("reversal", "stack", "two of two", 2, 2), row("reversal", "stack", "sixteen", 16, 16)])
    ordered = by_cell(table)
    assert list(zip(ordered.task, ordered.model, ordered.choice)) == [
        ("copy", "queue", "b"), ("reversal", "stack", "sixteen"), ("reversal", "stack", "two of two"),
        ("reversal", "deque", "a")]
    lines = study_conclusions(table)
    assert lines[1].startswith("- **Stack-LSTM / reversal**: sixteen, lr 0.001: 16 of 16 seeds learned (100%, 79%")
    assert "; next, two of two" in lines[1]


def test_a_run_stored_with_its_probes_beside_the_model_keys_reads_with_them_in_probes_and_keeps_its_id(tmp_path):
    """Runs made before the probes had their own section store them flat (``model.value_gain``): read back, they
    sit in ``model.probes`` and the run keeps the id its folder is named by; a profile writes them nested."""
    from pipeline.config import stored_run_config

    archived = "reports/recipe/seeds/finished_runs/reversal-deque-h256-lr0.001-s204-442de742"
    stored = yaml.safe_load(open(f"{archived}/config.yaml"))
    assert stored["model"]["value_gain"] == 8.0 and "probes" not in stored["model"]
    config = stored_run_config(stored)
    assert config.model.probes == ProbeConfig(value_gain=8.0)
    assert config.run_id() == archived.rsplit("/", 1)[1]
    nested = {**stored, "model": {k: v for k, v in stored["model"].items() if k != "value_gain"}}
    nested["model"]["probes"] = {"value_gain": 8.0}
    assert stored_run_config(nested) == config
    with pytest.raises(ConfigError, match="unknown key 'model.value_gain'"):  # a profile or run file: nested only
        from_dict(RunConfig, {"model": {"name": "deque", "value_gain": 8.0}})


def test_push_and_pop_are_written_one_way_for_one_and_two_ended_memories():
    from pipeline.reports.recipe import MEMORY_COLUMNS, push_pop_text

    signals = dict.fromkeys(MEMORY_COLUMNS, float("nan"))
    signals |= {"push_source": 0.994, "push_target": 0.0, "pop_source": 0.01, "pop_target": 0.996}
    assert push_pop_text(signals, 1) == ("0.99 / 0.00", "0.01 / 1.00")
    signals |= {"push_source_bottom": 0.5, "push_target_bottom": 0.25}
    assert push_pop_text(signals, 2) == ("top 0.99 / 0.00, bottom 0.50 / 0.25", "top 0.01 / 1.00, bottom —")
