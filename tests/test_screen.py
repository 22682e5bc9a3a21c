"""A screen: one change at a time against a baseline, its report written from real (tiny) runs."""

import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.reports.kinds import kind_there


def test_a_screen_trains_its_grid_and_reports_each_change_against_the_baseline(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
    training = dict(max_batches=30, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=10, checkpoint_every=10, early_stop_patience=0)
    block = {"tasks": ["reversal"], "models": ["lstm1"], "hidden": [8]}
    profile = {"name": "screen-t", "workers": 1,
               "defaults": {"model": {"embedding": 4}, "training": training, "tracking": {"wandb": "off"}},
               "grid": [{"label": "baseline", **block},
                        {"label": "forget-gate bias 1", **block, "overrides": {"model": {"forget_bias": 1.0}}},
                        {"label": "source fed reversed", **block,
                         "overrides": {"model": {"source_order": "reversed"}}}]}
    path = tmp_path / "screen.yaml"
    path.write_text(yaml.safe_dump(profile))
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
