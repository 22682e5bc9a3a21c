"""The report a researcher reads first, rendered from a small grid's run folders: Table 3's figure at the top, the
table laid out as the paper's, evidence in a file of its own, every figure there and no line an editor cannot show."""

import re

import pytest
import yaml

from pipeline.reports.build import binned_accuracy, wilson, write_report
from pipeline.reports.table3 import EVIDENCE_KINDS, VERDICT_MARKS, anchor
from pipeline.sweep import load_sweep, run_local

LONGEST_LINE = 1000


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


def test_the_report_opens_with_table3s_figure_and_reads_in_an_editor(tmp_path):
    settings = dict(max_batches=20, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=20, checkpoint_every=10, early_stop_patience=0, length_pool=2)
    path = tmp_path / "layout.yaml"
    path.write_text(yaml.safe_dump({
        "name": "layout", "workers": 2,
        "defaults": {"model": {"memory_width": 8, "embedding": 8}, "training": settings, "tracking": {"wandb": "off"}},
        "grid": [{"tasks": ["copy"], "models": ["lstm1", "stack"], "hidden": [8], "lr": [1e-2]}]}))
    sweep = load_sweep(path)
    run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    out = tmp_path / "out"
    readme = write_report(sweep, path, tmp_path / "runs", out, command="pytest").read_text()

    assert readme.splitlines()[4] == "![Table 3 at a glance: ours against the paper's, coarse accuracy](table3.png)"
    for figure in re.findall(r"\]\(([^)]+\.png)\)", readme):
        assert (out / figure).is_file(), figure
    assert {p.name for p in out.glob("*.png")} >= {"table3.png", "convergence_copy.png", "length_copy.png"}
    table3 = (out / "table3.md").read_text()
    assert ("| Task | Model | Training coarse | Training fine | Testing coarse | Testing fine | | Notes |"
            in table3.splitlines())
    copy_stack = next(line for line in table3.splitlines() if line.startswith("|  | Stack-LSTM |"))  # copy's
    assert re.search(r"\| \d\.\d\d \(0\.89\) \*?\*?[+−]\d\.\d\d\*?\*? \|", copy_stack)  # ours (paper) difference
    assert copy_stack.split(" | ")[-2] in VERDICT_MARKS.values()
    evidence = (out / "evidence.md").read_text()
    for label, _ in EVIDENCE_KINDS.values():  # each kind defined once, and the legend's links land on it
        assert evidence.count(f"\n## {label}\n") == 1 and f"(evidence.md#{anchor(label)})" in readme
    for name in ("README.md", "table3.md", "evidence.md", "table2.md"):
        longest = max(map(len, (out / name).read_text().splitlines()))
        assert longest <= LONGEST_LINE, (name, longest)


def test_wilson_intervals_hold_the_proportion_and_stay_in_bounds():
    assert wilson(0, 20)[0] == 0.0 and 0.1 < wilson(0, 20)[1] < 0.2
    assert wilson(20, 20)[1] == 1.0 and 0.8 < wilson(20, 20)[0] < 0.9
    low, high = wilson(50, 100)
    assert low < 0.5 < high and abs((low + high) / 2 - 0.5) < 1e-9


def test_length_bins_pool_their_sequences():
    import pandas as pd

    frame = pd.DataFrame({"split": ["train"] * 3, "source_length": [8, 9, 16], "n": [10, 30, 10],
                          "coarse": [1.0, 0.0, 0.5], "fine": [1.0, 0.5, 0.5]})
    bins = binned_accuracy(frame)
    assert list(bins["n"]) == [10, 40] and list(bins["first"]) == [1, 9]
    assert bins["coarse"].iloc[1] == pytest.approx((0 * 30 + 0.5 * 10) / 40)
