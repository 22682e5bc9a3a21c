import json
import re

import pytest
from typer.testing import CliRunner

from pipeline import __version__
from pipeline.cli import app
from pipeline.tasks import get_task

runner = CliRunner()


def flat(text: str) -> str:
    """Error text without Rich's box drawing and line wrapping."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_version_command_prints_package_version():
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_sample_prints_json_lines_of_words():
    result = runner.invoke(app, ["sample", "gender", "--split", "test", "-n", "3", "--seed", "4"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 3
    task = get_task("gender")
    for line in lines:
        assert set(line) == {"source", "target"}
        assert 65 <= len(line["source"]) <= 128
        assert set(line["source"]) <= set(task.source_vocab) and set(line["target"]) <= set(task.target_vocab)
    assert runner.invoke(app, ["sample", "gender", "--split", "test", "-n", "3", "--seed", "4"]).stdout == result.stdout
    assert runner.invoke(app, ["sample", "gender", "--split", "test", "-n", "3", "--seed", "5"]).stdout != result.stdout


@pytest.mark.parametrize("args, expected", [
    (["sample", "copie"], "'copie' is not one of 'copy', 'reversal', 'bigram_flip', 'svo_sov', 'gender'"),
    (["sample", "copy", "--split", "dev"], "'dev' is not one of 'train', 'test', 'long'"),
    (["sample", "copy", "-n", "0"], "Invalid value for '-n': got 0; it must be an integer >= 1"),
    (["sample", "copy", "--seed", "-2"], "Invalid value for '--seed': got -2; it must be an integer >= 0"),
    (["generate", "copy", "gendre"], "'gendre' is not one of 'copy', 'reversal', 'bigram_flip', 'svo_sov', 'gender'"),
    (["data-report", "--samples", "0"], "Invalid value for '--samples': got 0"),
])
def test_bad_arguments_fail_cleanly_naming_the_value_and_the_choices(args, expected, tmp_path):
    result = runner.invoke(app, args + (["--cache-dir", str(tmp_path)] if args[0] == "generate" else []))
    assert result.exit_code != 0
    assert expected in flat(result.stderr)
    assert "Traceback" not in result.output and result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # nothing was generated


def test_generate_fills_the_cache_for_the_named_tasks(tmp_path):
    result = runner.invoke(app, ["generate", "copy", "reversal", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "reversal"]
    assert len(list((tmp_path / "copy").glob("*.manifest.json"))) == 3
    assert "6 evaluation sets ready" in result.stderr


def test_data_report_writes_histograms_and_a_table(tmp_path):
    result = runner.invoke(app, ["data-report", "--samples", "300", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gender_lengths.png", "lengths.md", "svo_sov_lengths.png"]
    text = (tmp_path / "lengths.md").read_text()
    assert "transduce data-report --samples 300 --seed 0" in text
    assert re.search(r"\| svo_sov \| [\d.]+% \| [\d.]+% \| [\d.]+% \| [\d.]+% \| [\d.]+% \|", text)
    assert (tmp_path / "svo_sov_lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
