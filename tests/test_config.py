"""Typed configs: unknown keys, wrong types and bad values are refused with the key's path, before any compute."""

import pytest
import yaml

from pipeline.config import ConfigError, ModelConfig, RunConfig, from_dict, load_yaml, resolve_run_config, to_dict
from pipeline.paths import CONFIG_DIR


def test_defaults_are_the_paper_settings_and_configs_run_yaml_lists_them():
    config = RunConfig()
    assert (config.model.hidden, config.model.memory_width, config.model.embedding) == (256, 256, 64)
    assert (config.training.batch_size, config.training.clip, config.model.pop_bias) == (10, 1.0, -1.0)
    assert to_dict(resolve_run_config(CONFIG_DIR / "run.yaml")) == to_dict(config)
    # ... every key of the config, so that the file documents all of them
    listed = yaml.safe_load((CONFIG_DIR / "run.yaml").read_text())
    for section, values in to_dict(config).items():
        if isinstance(values, dict):
            missing = set(values) ^ set(listed[section])
            assert not missing, f"configs/run.yaml, {section}: {missing}"


@pytest.mark.parametrize("data, message", [
    ({"modle": {}}, "unknown key 'modle'; allowed keys here: length_distribution, model, task, tracking, training"),
    ({"model": {"hiden": 3}}, "unknown key 'model.hiden'"),
    ({"training": {"lr": "fast"}}, "training.lr must be a number, got 'fast'"),
    ({"training": {"max_batches": 2.5}}, "training.max_batches must be an integer, got 2.5"),
    ({"training": {"max_batches": True}}, "training.max_batches must be an integer, got True"),
    ({"training": {"lr": 0}}, "training.lr must be positive and finite, got 0.0"),
    ({"training": {"lr": float("inf")}}, "training.lr must be positive and finite, got inf"),
    (yaml.safe_load("training: {lr: .inf}"), "training.lr must be positive and finite, got inf"),
    ({"training": {"clip_mode": "l2"}}, "training.clip_mode must be one of 'norm', 'value'; got 'l2'"),
    ({"training": {"test_eval_size": 5000}}, "training.test_eval_size must lie in [1, 1000]"),
    ({"training": {"eval_every": 20, "perplexity_every": 100}},
     "training.eval_every must be at least perplexity_every (100)"),  # its early checkpoints: no perplexity (NaN)
    ({"task": "sorting"}, "task must be one of copy, reversal, bigram_flip, svo_sov, gender, reverse_string, "
                          "duplicate_string; got 'sorting'"),
    ({"model": {"name": "gru"}}, "model.name must be one of lstm1, lstm2, lstm4, lstm8, stack, queue, deque"),
    ({"model": "stack"}, "model must be a mapping, got 'stack'"),
    ({"tracking": {"wandb": "yes"}}, "tracking.wandb must be one of 'offline', 'online', 'off'; got 'yes'"),
])
def test_bad_values_are_refused_with_their_path(data, message):
    with pytest.raises(ConfigError) as error:
        from_dict(RunConfig, data)
    assert message in str(error.value)


def test_yaml_numbers_like_1e_3_are_read_as_floats(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("training:\n  lr: 1e-3\n")  # YAML 1.1 reads this as a string
    assert load_yaml(RunConfig, file).training.lr == 0.001


def test_yaml_errors_name_the_file(tmp_path):
    file = tmp_path / "bad.yaml"
    file.write_text("training:\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown key 'training.lrr'"):
        load_yaml(RunConfig, file)
    with pytest.raises(ConfigError, match="does not exist"):
        load_yaml(RunConfig, tmp_path / "missing.yaml")


def test_command_line_overrides_win_over_the_file(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("task: copy\nmodel:\n  name: queue\ntraining:\n  lr: 5.0e-4\n  seed: 3\n")
    config = resolve_run_config(file, lr=1e-4, hidden=512, seed=None)
    assert (config.task, config.model.name, config.model.hidden) == ("copy", "queue", 512)
    assert (config.training.lr, config.training.seed) == (1e-4, 3)


def test_run_id_is_readable_and_changes_with_anything_that_changes_the_result():
    a = RunConfig()
    b = from_dict(RunConfig, {"training": {"eval_every": 500}})
    c = from_dict(RunConfig, {"tracking": {"wandb": "off"}})
    assert a.run_id().startswith("reversal-stack-h256-lr0.001-s0-")
    assert a.run_id() != b.run_id()
    assert a.run_id() == c.run_id()  # where metrics are mirrored does not change the run


def test_a_training_key_added_later_keeps_earlier_run_ids_at_its_earlier_value():
    from pipeline.config import LATER_TRAINING_KEYS, stored_run_config

    # an archived run's stored config, written before the key existed, and the same run listed by a profile today
    stored = to_dict(RunConfig())
    for key in LATER_TRAINING_KEYS:
        del stored["training"][key]
    assert stored_run_config(stored).run_id() == RunConfig().run_id()
    # the new value is a different run
    patient = from_dict(RunConfig, {"training": {"plateau_after_leaving_start": True}})
    assert patient.run_id() != RunConfig().run_id()


@pytest.mark.parametrize("args, message", [
    (["--hidden", "1000000000"], "model.hidden must be at most 8,192, got 1000000000"),
    (["--seed", "99999999999999999999"], "training.seed must lie in [0, 4294967295]"),
])
def test_sizes_and_seeds_out_of_range_are_refused_before_anything_is_created(tmp_path, args, message):
    """Issue 35, fault 8: a MemoryError and a seed Lightning would replace were tracebacks that left a pending run
    folder behind."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    result = CliRunner().invoke(app, ["train", "--run-dir", str(tmp_path / "run"), "--no-progress", *args])
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


def test_a_binary_or_empty_config_and_a_huge_sample_are_refused_in_one_line(tmp_path):
    """Issue 35, fault 10: a binary profile was a UnicodeDecodeError, an empty --config silently trained the defaults,
    `sample -n 99999999999` asked numpy for 745 GiB."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    runner = CliRunner()
    binary = tmp_path / "profile.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    result = runner.invoke(app, ["sweep", str(binary), "--status"])
    assert result.exit_code == 2 and "not a text file (not UTF-8)" in result.output and "Traceback" not in result.output
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    result = runner.invoke(app, ["train", "--config", str(empty), "--run-dir", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2 and "empty; give at least one key" in " ".join(result.output.split())
    assert not (tmp_path / "run").exists()
    result = runner.invoke(app, ["sample", "copy", "-n", "99999999999"])
    assert result.exit_code == 2 and "it must be an integer <= 100,000" in " ".join(result.output.split())


def test_a_stored_config_from_before_the_push_bias_existed_reads_as_what_it_trained_with():
    from pipeline.config import stored_run_config

    stored = to_dict(RunConfig(model=ModelConfig(name="deque")).resolved())
    for key in ("push_bias", "bottom_push_bias", "bottom_pop_bias"):
        del stored["model"][key]
    model = stored_run_config(stored).model  # nn.Linear's initialisation, the bottom end as the top: the old start
    assert (model.push_bias, model.bottom_push_bias, model.bottom_pop_bias) == (None, None, None)


def test_a_start_left_at_default_is_the_models_own_and_is_resolved_where_a_run_becomes_concrete(tmp_path):
    from pipeline.rundir import RunDir

    assert RunConfig().model.push_bias == "default"
    stack, deque = RunConfig(), RunConfig(model=ModelConfig(name="deque"))
    assert stack.resolved().model.push_bias == 1.0 and stack.resolved().model.bottom_push_bias is None
    start = deque.resolved().model
    assert (start.push_bias, start.bottom_push_bias, start.bottom_pop_bias) == (None, -4.0, -4.0)
    # "default" and the start it stands for are one run; a bias that is set is kept, at either end
    explicit = RunConfig(model=ModelConfig(name="deque", push_bias=None, bottom_push_bias=-4.0, bottom_pop_bias=-4.0))
    assert deque.run_id() == explicit.run_id()
    assert RunConfig(model=ModelConfig(name="deque", push_bias=1.0)).resolved().model.bottom_pop_bias == -4.0
    assert RunConfig(model=ModelConfig(name="deque", push_bias=1.0)).run_id() != deque.run_id()
    # the model is named after the defaults are merged: --model deque on a file that names no start gets the DeQue's
    config = tmp_path / "run.yaml"
    config.write_text("model: {hidden: 16}\n")
    via_cli = resolve_run_config(config, model="deque")
    assert via_cli.model.hidden == 16 and via_cli.resolved().model.bottom_push_bias == -4.0
    # a run stores its start resolved, so a later default never changes what a stored run means
    folder = RunDir(tmp_path / "run")
    folder.path.mkdir()
    folder.write_config(deque)
    assert yaml.safe_load(folder.config_file.read_text())["model"]["bottom_pop_bias"] == -4.0
    assert folder.read_config().identity() == deque.identity()
    assert from_dict(RunConfig, {"model": {"push_bias": "default"}}).model.push_bias == "default"
    assert from_dict(RunConfig, {"model": {"push_bias": "1e-1"}}).model.push_bias == 0.1
    with pytest.raises(ConfigError, match="model.bottom_pop_bias must be a number, null or one of 'default'; got "
                                          "'defualt' \\(str\\)"):
        from_dict(RunConfig, {"model": {"bottom_pop_bias": "defualt"}})


def test_each_experiment_config_is_its_archived_run():
    """configs/experiments/X.yaml continues the run archived in reports/experiments/X: a changed default must not
    make it another run (it did: the push bias's default of +1 once turned every one of them into a new run)."""
    from pipeline.config import stored_run_config

    archived = sorted((CONFIG_DIR.parent / "reports" / "experiments").glob("*/config.yaml"))
    assert archived
    for stored in archived:
        config = CONFIG_DIR / "experiments" / f"{stored.parent.name}.yaml"
        if config.exists():
            assert resolve_run_config(config).identity() == stored_run_config(yaml.safe_load(stored.read_text())
                                                                               ).identity(), config.name


def test_the_far_lengths_profile_trains_the_cpu_profiles_learned_memory_runs_again_run_for_run():
    """configs/far-lengths.yaml stands for the cpu profile's selected memory runs that learned (their far lengths are
    taken from it by run id): each of its runs must have the id of one of those, so a setting copied wrong, or a
    cell whose selected run changed, fails here rather than measuring a run nobody reports."""
    import pandas as pd

    from pipeline.sweep import load_sweep

    far = {run.run_id() for run in load_sweep(CONFIG_DIR / "far-lengths.yaml").runs()}
    cpu = {run.run_id() for run in load_sweep(CONFIG_DIR / "cpu.yaml").runs()}
    table = pd.read_csv(CONFIG_DIR.parent / "reports" / "cpu" / "table3.csv")
    learned = set(table[table.model.isin(["stack", "queue", "deque"]) & (table.train_coarse >= 0.99)].run_id)
    assert far <= cpu and far == learned
    assert load_sweep(CONFIG_DIR / "far-lengths.yaml").reports_dir().relative_to(
        load_sweep(CONFIG_DIR / "cpu.yaml").reports_dir()).parts == ("far-lengths",)  # where reports/cpu/ looks


def test_the_baselines_probe_configs_are_the_profiles_run_and_one_change_to_it():
    """reports/baselines/study-log.md's probes change one thing at a time from a run of the baselines profile (the
    Stack-LSTM on reverse_string, the Queue-LSTM on duplicate_string): each base config must be that run (its id), and
    each variant that run but for the one setting the log names, or a probe would measure two changes."""
    from dataclasses import replace

    from pipeline.sweep import load_sweep

    profile = {run.run_id() for run in load_sweep(CONFIG_DIR / "baselines.yaml").runs()}
    for model, task, suffix, section, setting, value in (
            ("stack", "reverse_string", "shared", "model", "target_inputs", "shared"),
            ("queue", "duplicate_string", "pop4", "model", "pop_bias", -4.0)):
        base = resolve_run_config(CONFIG_DIR / "experiments" / f"baselines-{model}-{task}.yaml")
        assert base.run_id() in profile and base.task == task and base.model.name == model
        variant = resolve_run_config(CONFIG_DIR / "experiments" / f"baselines-{model}-{task}-{suffix}.yaml")
        changed, original = getattr(variant, section), getattr(base, section)
        assert getattr(changed, setting) == value != getattr(original, setting)
        undone = replace(variant, **{section: replace(changed, **{setting: getattr(original, setting)})})
        assert undone.identity() == base.identity()


@pytest.mark.parametrize("text, message", [
    ("training:\n  yes: 1\n  bogus: 2\n", "unknown key 'training.bogus'"),
    ("training:\n  yes: 1\n  3: 2\n", "unknown key 'training.3' (YAML read it as the int 3: quote a key"),
    ("model:\n  on: 1\n", "unknown key 'model.True' (YAML read it as the bool True"),
])
def test_unknown_keys_of_mixed_types_are_named_not_a_traceback(tmp_path, text, message):
    """Issue 80: YAML 1.1 reads a bare `yes` key as true; beside a string key, sorting the unknown keys raised
    TypeError: '<' not supported between 'str' and 'bool'."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_yaml(RunConfig, path)
    assert message in str(error.value)
    result = CliRunner().invoke(app, ["train", "--config", str(path), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()
    profile = tmp_path / "p.yaml"  # and in a profile, at its top level or in a grid block
    profile.write_text("name: p\nyes: 1\nbogus: 2\ngrid: [{tasks: [copy], models: [stack], on: 1, 3: 2}]\n")
    result = CliRunner().invoke(app, ["sweep", str(profile), "--status"])
    assert result.exit_code == 2 and "unknown key 'bogus'" in result.stderr and "Traceback" not in result.output
