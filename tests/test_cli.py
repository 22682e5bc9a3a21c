import json
import re

import pytest
from typer.testing import CliRunner

from pipeline import __version__
from pipeline.cli import app
from pipeline.paths import REPO_ROOT as REPO
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


def test_params_json_lists_every_model_and_hidden_size():
    result = runner.invoke(app, ["params", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {(r["model"], r["hidden"]) for r in rows} == {(m, h) for m in ("lstm1", "lstm2", "lstm4", "lstm8", "stack",
                                                                           "queue", "deque", "transformer", "jm_stack")
                                                         for h in (256, 512)}
    assert all(isinstance(r["params"], int) and r["params"] > 0 for r in rows)


def test_params_table_shows_ours_beside_the_paper(tmp_path):
    out = tmp_path / "table2.md"
    result = runner.invoke(app, ["params", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "| Stack-LSTM | 256 | 700,099 | 6.7e+05 |" in result.stdout
    assert "| Transformer | 256 | 703,297 | 700,099 | 1.005 |" in result.stdout.split("## Beside the paper")[1]
    assert out.read_text() == result.stdout.rstrip("\n") + "\n"


@pytest.mark.parametrize("args, expected", [
    (["train", "--model", "gru"], "'gru' is not one of 'lstm1'"),
    (["train", "--task", "sort"], "'sort' is not one of 'copy'"),
    (["train", "--lr", "0"], "Invalid value for '--lr': got 0.0; it must be a finite number > 0"),
    (["train", "--lr", "-1e-3"], "got -0.001; it must be a finite number > 0"),
    (["train", "--hidden", "0"], "Invalid value for '--hidden': got 0"),
    (["train", "--wandb", "sometimes"], "Invalid value for '--wandb': Value error, 'sometimes' is not one of "
                                        "'offline', 'online', 'off'"),
    (["evaluate", "/nonexistent/run"], "is not a run directory (no config.yaml)"),
])
def test_train_and_evaluate_refuse_bad_arguments_before_any_compute(args, expected, tmp_path):
    result = runner.invoke(app, args + (["--run-dir", str(tmp_path / "run")] if args[0] == "train" else []))
    assert result.exit_code != 0
    assert expected in flat(result.stderr)
    assert not (tmp_path / "run").exists()


def test_a_file_where_a_folder_should_be_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    """Issue 35, fault 9: the command line's one error boundary turns what the filesystem refuses into one line
    naming the path (as root, a read-only folder is writable, so a file in a folder's place stands in for it)."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    runner = CliRunner()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    profile = REPO / "configs" / "smoke.yaml"
    cases = [["report", str(profile), "--out", str(blocker), "--force"],
             ["sweep", str(profile), "--runs-dir", str(blocker / "runs"), "--only", "copy-lstm1-*"]]
    for args in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and str(blocker) in result.stderr, (args, result.stderr)
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(blocker))
    result = runner.invoke(app, ["generate", "copy"])
    assert result.exit_code == 2 and str(blocker) in result.stderr and "Traceback" not in result.output


def test_output_cut_short_by_its_reader_stops_quietly_not_as_a_folder_error():
    """`transduce ... | head`: once the reader has gone, the command stops with SIGPIPE's status and says nothing
    (a broken pipe is an OSError, which the error boundary once reported as a folder that could not be written)."""
    import signal
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "sample", "copy", "-n", "20000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert process.stdout.readline().startswith(b'{"source": [')
    process.stdout.close()  # the reader goes away, as `head -1` does
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE
    assert stderr == "", stderr


def test_help_shows_flags_without_values_choices_and_whole_summaries():
    """The third probe's item 18: `--wandb` listed its choices as <str>, flags read as if they took a value
    (`--restore <bool>`), and summaries in `transduce --help` broke mid-sentence."""
    text = runner.invoke(app, ["--help"]).stdout
    summaries = text.split("Commands:")[1].replace("[...]", "")
    assert "..." not in summaries  # every summary whole, where Click cut them at ~45 columns
    assert "archive      Keep a profile's finished runs" in text
    train = flat(runner.invoke(app, ["train", "--help"]).stdout)
    assert "--wandb <offline|online|off>" in train and "<bool>" not in train
    archive = flat(runner.invoke(app, ["archive", "--help"]).stdout)
    assert "--restore The other way" in archive and "<bool>" not in archive
