"""A screen: one change at a time against a baseline, its report written from real (tiny) runs."""

import pytest
import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.reports.kinds import kind_there


def screen_profile(tmp_path, changes: int = 2):
    """A screen of a tiny 1-layer LSTM on reversal: the baseline and the first ``changes`` of its two changes."""
    training = dict(max_batches=30, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    block = {"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8]}
    grid = [{"label": "baseline", **block},
            {"label": "forget-gate bias 1", **block, "overrides": {"model": {"forget_bias": 1.0}}},
            {"label": "source fed reversed", **block, "overrides": {"model": {"source_order": "reversed"}}}]
    profile = {"name": "screen-t", "workers": 1,
               "defaults": {"model": {"embedding": 4}, "training": training, "tracking": {"wandb": "off"}},
               "grid": grid[:1 + changes]}
    path = tmp_path / "screen.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


@pytest.mark.usefixtures("in_process_pool")  # the pool's plan, not its processes
def test_a_screen_trains_its_grid_and_reports_each_change_against_the_baseline(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    path = screen_profile(tmp_path)
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["screen", str(path), "--runs-dir", str(tmp_path / "runs"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    readme = (out / "README.md").read_text()
    assert kind_there(out) == "screen" and readme.startswith("# Screen: `screen-t`")
    rows = [line for line in readme.splitlines() if line.startswith("| reversal |")]
    assert [row.split(" | ")[2] for row in rows] == ["baseline", "forget-gate bias 1", "source fed reversed"]
    assert "| 1.00 |" in rows[0]  # the baseline against itself
    assert "No change clearly helps" in readme or "Clearly helps:" in readme  # all done: a conclusion, either way
    # a study's report never overwrites a screen's
    again = CliRunner().invoke(app, ["study", str(path), "--runs-dir", str(tmp_path / "runs"), "--out", str(out),
                                     "--report-only"])
    assert again.exit_code != 0 and "holds a screen's report" in again.output


def test_a_report_only_screen_or_study_from_no_done_run_is_refused_and_the_report_there_kept(tmp_path, cache_dir,
                                                                                             monkeypatch):
    """Issue 80: `transduce screen configs/lstm-screen.yaml --report-only` (and `study`) on a fresh clone replaced the
    committed report with "12 runs: 12 pending" and empty tables. Refused in one line unless --force."""
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    path = screen_profile(tmp_path, changes=1)
    result = CliRunner().invoke(app, ["screen", str(path), "--runs-dir", str(tmp_path / "fresh"), "--report-only"])
    assert result.exit_code == 2 and "--runs-dir" in result.stderr and "does not exist" in result.stderr
    (tmp_path / "fresh").mkdir()  # there, and empty
    for kind, title in (("screen", "# Screen: `screen-t`\n"), ("study", "# Study: `screen-t`\n")):
        out = tmp_path / kind
        out.mkdir()
        (out / "README.md").write_text(title + "\ncommitted\n")
        (out / "runs.csv").write_text("committed\n")
        result = CliRunner().invoke(app, [kind, str(path), "--runs-dir", str(tmp_path / "fresh"), "--out", str(out),
                                          "--report-only"])
        assert result.exit_code == 2, result.output
        assert "0 of the 2 runs" in result.stderr and "--force" in result.stderr and "Traceback" not in result.output
        assert (out / "README.md").read_text() == title + "\ncommitted\n"
        assert (out / "runs.csv").read_text() == "committed\n"
