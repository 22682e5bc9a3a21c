"""Typed configs: unknown keys, wrong types and bad values are refused with the key's path, before any compute."""

import pytest
import yaml

from pipeline.config import ConfigError, RunConfig, from_dict, load_yaml, resolve_run_config, to_dict
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
    ({"task": "sorting"}, "task must be one of copy, reversal, bigram_flip, svo_sov, gender; got 'sorting'"),
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

    stored = to_dict(RunConfig())
    del stored["model"]["push_bias"]
    assert stored_run_config(stored).model.push_bias is None  # nn.Linear's initialisation, the old default
    assert RunConfig().model.push_bias == 1.0  # the default since issue 37
