"""The report a researcher reads first, rendered from a small grid's run folders: Table 3's figure at the top, the
table laid out as the paper's, evidence in a file of its own, every figure there and no line an editor cannot show."""

import csv
import json
import re
import shutil

import pandas as pd
import pytest
import yaml
from unrendered import unrender_figures

from pipeline.generalisation import FAR_BANDS, far_pairs, longest_exact_band, read_far_lengths
from pipeline.reports.build import binned_accuracy, wilson, write_report
from pipeline.reports.table3 import EVIDENCE_KINDS, VERDICT_MARKS, anchor
from pipeline.sweep import load_sweep, run_local
from pipeline.training.run import measure_far_lengths

LONGEST_LINE = 1000


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.mark.usefixtures("in_process_pool")  # what it checks is the report, not the pool's processes
def test_the_report_opens_with_table3s_figure_and_reads_in_an_editor(tmp_path, monkeypatch):
    settings = dict(max_batches=20, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                    final_eval_size=20, checkpoint_every=10, early_stop_patience=0, length_pool=2)
    path = tmp_path / "layout.yaml"
    path.write_text(yaml.safe_dump({
        "name": "layout", "workers": 2,
        "defaults": {"model": {"memory_width": 8, "embedding": 8}, "training": settings, "tracking": {"wandb": "off"}},
        "grid": [{"tasks": ["copy"], "models": ["lstm1", "stack"], "hidden": [8], "lr": [1e-2]},
                 # the Stack's read ablation: the same run with every read zeroed (issue 78)
                 {"tasks": ["copy"], "models": ["stack"], "hidden": [8], "lr": [1e-2],
                  "overrides": {"model": {"probes": {"read_zeroed": True}}}}]}))
    sweep = load_sweep(path)
    run_local(sweep, tmp_path / "runs", echo=lambda _: None)
    stack = next(run.run_id() for run in sweep.runs() if run.model.name == "stack" and not run.model.probes.read_zeroed)
    measure_far_lengths(tmp_path / "runs" / stack, per_band=1)
    out = tmp_path / "out"
    # the LSTM's far lengths come from its twin: the same run trained again by a study archived under the report
    lstm = next(run.run_id() for run in sweep.runs() if run.model.name == "lstm1")
    twin = out / "study" / "finished_runs" / lstm
    shutil.copytree(tmp_path / "runs" / lstm, twin)
    measure_far_lengths(twin, per_band=1)
    # (a folder holding only that archive is not a report's yet: written with force, as into a folder of one's own)
    readme = write_report(sweep, path, tmp_path / "runs", out, command="pytest", force=True).read_text()

    assert readme.splitlines()[4] == "![Table 3 at a glance: ours against the paper's, coarse accuracy](table3.png)"
    for figure in re.findall(r"\]\(([^)]+\.png)\)", readme):
        assert (out / figure).is_file(), figure
    assert {p.name for p in out.glob("*.png")} >= {"table3.png", "convergence_copy.png", "length_copy.png",
                                                   "far_lengths.png"}
    assert "## Far past the test lengths (to 512)" in readme and "| Sequence copying | Stack-LSTM |" in readme
    # the ablation is set beside the run it ablates, and is not one of the cell's runs
    ablation = readme.split("## The read ablation")[1].split("\n## ")[0]
    (row,) = [line for line in ablation.splitlines() if line.startswith("| Sequence copying | Stack-LSTM |")]
    assert f"| `{stack}` | 20 | " in row
    assert "| unused: the curves match |" in row or "| used: without its reads" in row
    cell = next(r for r in csv.DictReader(open(out / "table3.csv")) if r["task"] == "copy" and r["model"] == "stack")
    assert cell["runs"] == "1" and cell["run_id"] == stack
    assert (out / "far_lengths.csv").read_text().count("\n") == 1 + 2 * len(FAR_BANDS)
    far_section = readme.split("## Far past the test lengths (to 512)")[1].split("\n## ")[0]
    far_rows = {line.split(" | ")[1]: line for line in far_section.splitlines()
                if line.startswith("| Sequence copying")}
    assert "| selected run (" in far_rows["Stack-LSTM"] and "| twin in study/ (" in far_rows["1-layer LSTM"]
    # a twin that did not learn what its run learned (another draw) says nothing of it: named, not counted
    results = json.loads((twin / "results.json").read_text())
    (twin / "results.json").write_text(json.dumps(dict(results, test_coarse=results["test_coarse"] + 0.5)))
    unrender_figures(monkeypatch)  # the second report's text is what is read: its figures were rendered above
    again = write_report(sweep, path, tmp_path / "runs", out, command="pytest").read_text()
    assert "| Sequence copying | 1-layer LSTM |" not in again.split("## Far past the test lengths")[1].split("\n## ")[0]
    assert "Not measured, their twin another draw" in again and "Sequence copying, 1-layer LSTM: its twin (" in again
    assert "False" in (out / "far_lengths.csv").read_text()
    table3 = (out / "table3.md").read_text()
    assert ("| Task | Model | Size | Training coarse | Training fine | Testing coarse | Testing fine | | Notes |"
            in table3.splitlines())
    copy_stack = next(line for line in table3.splitlines() if line.startswith("|  | Stack-LSTM |"))  # copy's
    assert copy_stack.split(" | ")[2] == "h8"  # the selected run's size
    # the search each memory cell got, read off its runs (the 1-layer LSTM is not a memory: not listed)
    assert "| Sequence copying | Stack-LSTM | h8 | 0.01 | push +1 pop -1 | 0 | 1 / 1 | none |" in readme.splitlines()
    assert "| Sequence copying | 1-layer LSTM | h8 |" not in readme.split("## The search each memory cell got")[1]
    # how the selected memory run used its memory, at the checkpoint it reports
    used = readme.split("## How the memories were used")[1].split("\n## ")[0]
    row = next(line for line in used.splitlines() if line.startswith("| Sequence copying | Stack-LSTM | h8, lr 0.01"))
    assert re.search(r"\| \d\.\d\d / \d\.\d\d \| \d\.\d\d / \d\.\d\d \|$", row), row
    assert "1-layer LSTM" not in used
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


@pytest.mark.parametrize("task", ["copy", "bigram_flip", "svo_sov"])
def test_far_bands_are_drawn_inside_their_windows_the_same_each_time(task):
    for band, (low, high) in enumerate(FAR_BANDS):
        pairs = far_pairs(task, band, 5)
        assert all(low <= len(p.source) <= high for p in pairs)
        assert pairs == far_pairs(task, band, 5)
    assert far_pairs(task, 0, 5) != far_pairs(task, 1, 5)


def test_the_longest_exact_band_stops_at_the_first_error():
    rows = [dict(low=129, high=192, coarse=1.0), dict(low=193, high=256, coarse=1.0), dict(low=257, high=320,
                                                                                           coarse=0.99),
            dict(low=321, high=384, coarse=1.0)]
    assert longest_exact_band(rows) == (193, 256)
    assert longest_exact_band([dict(low=129, high=192, coarse=0.5)]) is None


def test_a_far_measurement_of_an_earlier_checkpoint_is_not_read(tmp_path):
    import json

    (tmp_path / "results.json").write_text(json.dumps({"batches": 200}))
    (tmp_path / "far_lengths.csv").write_text("low,high,n,coarse,fine,batches\n129,192,3,1.0,1.0,100\n")
    assert read_far_lengths(tmp_path) == []
    (tmp_path / "far_lengths.csv").write_text("low,high,n,coarse,fine,batches\n129,192,3,1.0,1.0,200\n")
    assert read_far_lengths(tmp_path)[0]["coarse"] == 1.0


def test_far_eval_size_measures_in_the_final_evaluation_and_keeps_the_run_id(tmp_path):
    from tiny import tiny

    from pipeline.training.run import train

    assert tiny(far_eval_size=2).run_id() == tiny().run_id()  # a measurement, not another run
    train(tiny(far_eval_size=2), tmp_path / "run", progress=False)
    rows = read_far_lengths(tmp_path / "run")
    assert [(int(r["low"]), int(r["high"]), int(r["n"])) for r in rows] == [(lo, hi, 2) for lo, hi in FAR_BANDS]
    with pytest.raises(Exception, match="far_eval_size must lie in"):
        tiny(far_eval_size=-1)


def test_a_run_made_before_its_profile_measured_far_lengths_measures_them_when_it_trains_on(tmp_path):
    """A run directory whose stored config has far_eval_size 0 (made before the profile measured) takes the profile's
    measurement when it is claimed again, as it takes a raised budget: trained on, it writes far_lengths.csv."""
    from tiny import tiny

    from pipeline.rundir import RunDir
    from pipeline.training.run import train
    from pipeline.training.runlife import claim_run_directory

    run_dir = tmp_path / "run"
    train(tiny(max_batches=4), run_dir, progress=False)
    assert not RunDir(run_dir).far_lengths_file.exists()
    assert claim_run_directory(tiny(max_batches=4, far_eval_size=2), run_dir) == "measurements changed"
    assert RunDir(run_dir).read_config().training.far_eval_size == 2
    assert claim_run_directory(tiny(max_batches=4, far_eval_size=2), run_dir) == "same"
    train(tiny(max_batches=6, far_eval_size=2), run_dir, progress=False)  # extended: its final evaluation measures
    assert [int(r["n"]) for r in read_far_lengths(run_dir)] == [2] * len(FAR_BANDS)


def test_each_itg_run_is_placed_against_the_content_blind_references_with_their_errors():
    import pandas as pd

    from pipeline.reports.build import reference_lines
    from pipeline.tasks.itg import ReferencePerplexities

    ref = ReferencePerplexities(skeleton=10.0, skeleton_error=0.01, source_unread=20.0, source_unread_error=0.01,
                                samples=500, seed=0)
    # 9.85 is below the skeleton line but within two standard errors of it: not counted as carrying content words
    table = pd.DataFrame({"task": "svo_sov", "model": ["stack", "queue", "deque", "lstm1", "lstm2"],
                          "run_id": ["a", "b", "c", "d", "e"], "train_perplexity": [9.85, 9.5, 15.0, 19.8, 25.0]})
    lines = reference_lines(table, {"svo_sov": ref, "copy": None})
    rows = {line.split(" | ")[1]: line.split(" | ")[3] for line in lines if line.startswith("| SVO to SOV | ")
            and "LSTM" in line}
    assert rows["Stack-LSTM"].startswith("between the lines")
    assert rows["Queue-LSTM"].startswith("below the skeleton line")
    assert rows["DeQue-LSTM"].startswith("between the lines")
    assert rows["1-layer LSTM"].startswith("at or above the upper line")  # within two errors of it
    assert rows["2-layer LSTM"].startswith("at or above the upper line")
    assert "| SVO to SOV | 10.00 (± 1.0%) | 20.00 (± 1.0%) | 500 (0) |" in lines
    assert reference_lines(table, {"svo_sov": None}) == []


def test_the_search_table_lists_what_was_trained_and_counts_the_grids_runs_not_yet_begun(tmp_path):
    from pipeline.reports.build import search_lines

    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump({
        "name": "search", "defaults": {"training": {"max_batches": 1000}, "tracking": {"wandb": "off"}},
        "grid": [{"tasks": ["copy"], "models": ["stack"], "hidden": [8], "lr": [1e-2, 1e-3], "seeds": [0, 1],
                  "halving": {"at": [200], "keep": [1], "seeds_together": True}},
                 {"tasks": ["copy"], "models": ["queue"], "hidden": [8], "lr": [1e-3]}]}))
    sweep = load_sweep(path)
    rows = [dict(task=run.task, model=run.model.name, hidden=run.model.hidden, lr=run.training.lr,
                 seed=run.training.seed, start="", run_id=run.run_id(), ablation_of=None,
                 # the Stack's lr 1e-2, seed 0 has trained; every other run of the grid waits
                 batches=20 if (run.model.name, run.training.lr, run.training.seed) == ("stack", 1e-2, 0) else 0)
            for run in sweep.runs()]
    lines = search_lines(pd.DataFrame(rows), sweep)
    assert ("| Sequence copying | Stack-LSTM | h8 | 0.01 | init | 0 | 1 / 4 | at 200, keeping 1, seeds together |"
            in lines)
    assert "| Sequence copying | Queue-LSTM | h8 | — | — | — | 0 / 1 | none |" in lines


def test_the_compute_by_block_line_adds_each_labelled_blocks_done_runs_and_the_time_of_runs_under_way(tmp_path):
    """Issue 78 asks what a profile's new blocks took: per block label, the done runs' hours (as the compute line
    counts them) and the wall time so far of runs still under way, the costliest block first; nothing for a profile
    with fewer than two labels."""
    from pipeline.reports.build import block_compute_line
    from pipeline.sweep.status import RunStatus

    path = tmp_path / "blocks.yaml"
    path.write_text(yaml.safe_dump({
        "name": "blocks", "defaults": {"tracking": {"wandb": "off"}},
        "grid": [{"label": "old", "tasks": ["copy"], "models": ["stack"], "hidden": [8], "seeds": [0, 1]},
                 {"label": "new", "tasks": ["copy"], "models": ["queue"], "hidden": [8], "seeds": [0, 1]}]}))
    sweep = load_sweep(path)
    old, old_too, new, under_way = (run.run_id() for run in sweep.runs())
    finished = pd.DataFrame([dict(run_id=run_id, model="stack", batches=100, train_seconds=seconds, eval_seconds=0.0)
                             for run_id, seconds in ((old, 1800.0), (old_too, 1800.0), (new, 3600.0 * 2))])
    statuses = [RunStatus(run, tmp_path / run.run_id(), state, 0, seconds) for run, state, seconds in
                zip(sweep.runs(), ("finished", "finished", "finished", "interrupted"), (0, 0, 0, 1800.0))]
    line = block_compute_line(finished, sweep, statuses)
    assert line == ("By grid block (its `label`), in CPU-hours: new: 2.0 over 1 done run, 0.5 h so far in 1 under "
                    "way; old: 1.0 over 2 done runs.")
    data = yaml.safe_load(path.read_text())
    del data["grid"][1]["label"]
    path.write_text(yaml.safe_dump(data))
    unlabelled = load_sweep(path)
    assert block_compute_line(finished, unlabelled, statuses) == ""


def test_the_experiments_that_hold_a_profiles_run_are_weighed_for_its_cut_runs_the_furthest_each(tmp_path):
    """``elsewhere_of``: an experiment holding one of the profile's runs (any draw of it) is kept by run id, the one
    that went furthest; one holding a run the profile lacks is not."""
    import json

    from pipeline.reports.build import elsewhere_of, experiments_beside

    def experiment(name, run_id, batches, perplexity):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(dict(
            task="gender", model="lstm1", run_id=run_id, batches=batches, stop_reason="plateau",
            train_perplexity=perplexity, train_coarse=0.1, train_fine=0.5, test_coarse=0.0, test_fine=0.3)))
        (folder / "metrics.csv").write_text("step,train/perplexity\n100,20.0\n200,10.0\n")

    experiment("short", "gender-lstm1-a", 40000, 3.0)
    experiment("long", "gender-lstm1-a", 90000, 2.5)
    experiment("other", "gender-lstm1-b", 90000, 1.5)
    found = elsewhere_of(experiments_beside(tmp_path), {"gender-lstm1-a", "gender-lstm1-c"})
    assert list(found) == ["gender-lstm1-a"]
    assert (found["gender-lstm1-a"]["name"], found["gender-lstm1-a"]["batches"]) == ("long", 90000)
    assert found["gender-lstm1-a"]["train_perplexity"] == 2.5


def test_a_convergence_figure_names_an_architecture_drawn_only_in_faint_runs(tmp_path, monkeypatch):
    """A cell with no selected run (none finished) is drawn only faint; its architecture is still named in the
    legend, once, while the faint runs of an architecture that has a selected run stay unnamed."""
    import pandas as pd

    from pipeline.reports import build

    folders = {}
    for run_id in ("queue-sel", "queue-other", "stack-a", "stack-b"):
        folder = tmp_path / run_id
        folder.mkdir()
        (folder / "metrics.csv").write_text("step,train/perplexity,train/coarse,test/coarse\n"
                                            "10,50.0,,\n20,40.0,0.1,0.0\n")
        folders[run_id] = folder
    selected = pd.DataFrame({"task": ["svo_sov"], "model": ["queue"], "run_id": ["queue-sel"]})
    runs = pd.DataFrame({"task": "svo_sov", "model": ["queue", "queue", "stack", "stack"],
                         "run_id": list(folders), "ablation_of": ""})
    saved = []
    monkeypatch.setattr(build, "save_figure", lambda fig, path: saved.append(fig))
    assert build.convergence_figure("svo_sov", selected, tmp_path, tmp_path / "figure.png", runs=runs)
    labels = [text.get_text() for text in saved[0].legends[0].get_texts()]
    assert labels == ["Stack-LSTM: no run selected (faint)", "Queue-LSTM"]


def test_a_convergence_figure_marks_where_table_3_reads_a_run_training_on(tmp_path, monkeypatch):
    """A selected run training on past results it reported is drawn to where it stands now; a vertical line, named in
    the perplexity panel's legend, marks the batch Table 3 reads it at. A done run gets no such line."""
    import pandas as pd

    from pipeline.reports import build

    folder = tmp_path / "stack-on"
    folder.mkdir()
    (folder / "metrics.csv").write_text("step,train/perplexity,train/coarse,test/coarse\n"
                                        "10,50.0,,\n20,40.0,0.1,0.0\n30,30.0,0.2,0.0\n")
    saved = []
    monkeypatch.setattr(build, "save_figure", lambda fig, path: saved.append(fig))
    for training_on, expected in ((True, ["Stack-LSTM", "Stack-LSTM read at 20 (training on)"]),
                                  (False, ["Stack-LSTM"])):
        selected = pd.DataFrame({"task": ["svo_sov"], "model": ["stack"], "run_id": ["stack-on"], "batches": [20],
                                 "training_on": [training_on]})
        assert build.convergence_figure("svo_sov", selected, tmp_path, tmp_path / "figure.png")
        axes = saved[-1].axes
        assert [text.get_text() for text in saved[-1].legends[0].get_texts()] == expected
        assert sum(len(ax.lines) for ax in axes) == 3 + (3 if training_on else 0)  # a curve, and a line, a panel


def test_a_convergence_figures_legend_covers_no_panel(tmp_path, monkeypatch):
    """Every architecture of a task selected, with the reference lines: the legend (eight entries and more) sits
    below the panels, its box clear of every panel's, and the panels keep their height. Placed inside the perplexity
    panel (``loc="best"``), it hid the runs it named."""
    import pandas as pd

    from pipeline.models import MODEL_NAMES
    from pipeline.reports import build

    models = [m for m in MODEL_NAMES if m in build.DISPLAY_NAMES][:7]
    for model in models:
        folder = tmp_path / model
        folder.mkdir()
        (folder / "metrics.csv").write_text("step,train/perplexity,train/coarse,test/coarse\n"
                                            "10,50.0,,\n20,40.0,0.1,0.0\n30,30.0,0.5,0.2\n")
    selected = pd.DataFrame({"task": "svo_sov", "model": models, "run_id": models})
    saved = []
    monkeypatch.setattr(build, "save_figure", lambda fig, path: saved.append(fig))
    assert build.convergence_figure("svo_sov", selected, tmp_path, tmp_path / "figure.png")
    fig = saved[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    assert len(fig.legends[0].get_texts()) >= len(models)
    for ax in fig.axes:
        panel = ax.get_window_extent(renderer)
        assert not legend.overlaps(panel), f"the legend covers the panel {ax.get_title()!r}"
        assert legend.y1 < panel.y0
    assert fig.axes[0].get_position().height * fig.get_size_inches()[1] > 0.6 * build.PANEL_HEIGHT


def test_the_far_lengths_figures_legends_cover_no_panel(monkeypatch):
    """One legend per task, under its column, clear of every panel: inside the coarse panel (``lower left``) it hid
    the runs at 0 and those falling to it."""
    import pandas as pd

    from pipeline.reports import build

    rows = [dict(task=task, model=model, run_id=f"{task}-{model}", measured_on="selected run", machine="m",
                 test_coarse=1.0, stands_for=True, low=low, high=low + 63, n=100, coarse=c, fine=c)
            for task in ("copy", "reversal") for model in ("lstm1", "lstm8", "stack", "queue", "deque")
            for low, c in ((129, 0.0), (193, 0.0), (257, 0.1))]
    saved = []
    monkeypatch.setattr(build, "save_figure", lambda fig, path: saved.append(fig))
    assert build.far_lengths_figure(pd.DataFrame(rows), None)
    fig = saved[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 2 and all(len(legend.get_texts()) == 5 for legend in legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), f"a legend covers {ax.get_title()!r}"


def test_a_length_figure_names_the_architectures_it_has_no_line_for(tmp_path, monkeypatch):
    """The gender figure of the cpu profile: the Stack has no selected run (none finished), so it has no line, and the
    caption says so; a figure where every architecture has its line says nothing of the kind."""
    import pandas as pd

    from pipeline.reports import build

    folder = tmp_path / "queue-sel"
    folder.mkdir()
    (folder / "accuracy_by_length.csv").write_text("split,source_length,n,coarse,fine\n"
                                                   "train,4,10,1.0,1.0\ntest,12,10,0.5,0.75\n")
    selected = pd.DataFrame({"task": ["gender"], "model": ["queue"], "run_id": ["queue-sel"]})
    saved = []
    monkeypatch.setattr(build, "save_figure", lambda fig, path: saved.append(fig))
    for unselected, expected in ((["stack"], "No line for the Stack-LSTM: no run selected (none finished)."),
                                 ([], None)):
        assert build.length_figure("gender", selected, tmp_path, tmp_path / "figure.png", unselected=unselected)
        (caption,) = [t.get_text() for t in saved[-1].texts if t.get_text().startswith("Each point pools")]
        assert (expected in caption) if expected else ("No line" not in caption), caption
