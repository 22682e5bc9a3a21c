"""The baselines' report (pipeline/reports/baselines.py), rendered from tiny run folders: a Transformer and the JM
Stack-LSTM on copy and on Delétang et al.'s reverse_string, hidden 16, 20 batches. The numbers mean nothing; the
layout is what is checked: the table by task and model, the published scores beside ours, the figure, lines an editor
can show, and a report that says so when nothing is trained yet."""

import re

import pytest
import yaml

from pipeline.config import ModelConfig
from pipeline.reports.baselines import FIGURE, TOKEN_FILE, variant, variant_name
from pipeline.reports.build import beside_the_paper, write_report
from pipeline.reports.kinds import ReportRefused
from pipeline.reports.profile import write_profile_report
from pipeline.reports.published import DELETANG_ARCHITECTURES, deletang_table2
from pipeline.rundir import RunDir
from pipeline.sweep import load_sweep

LONGEST_LINE = 1000
TASKS = ["copy", "reverse_string"]
# 2 sequences a split at the end, 1 a far band: Delétang et al.'s score decodes the test and long sets greedily (to
# length 500), the slow part of a run here; what these tests check is the layout and where each number comes from
TRAINING = dict(max_batches=20, perplexity_every=10, eval_every=10, eval_size=10, test_eval_size=10,
                final_eval_size=2, far_eval_size=1, checkpoint_every=10, early_stop_patience=0, length_pool=2)
TABLE_HEADER = ("| task | model | lr | seeds done / in grid | learned | not learned: still falling at the cap | "
                "selected run | training coarse / fine | "
                "test coarse / fine | exact up to | CPU-hours |")


@pytest.fixture(scope="module")
def cache(cache_dir):
    return cache_dir  # the session's shared cache (conftest.py): the copy sets are generated once for every module


@pytest.fixture(autouse=True)
def private_cache(cache, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache))


def profile(folder, name="tiny-baselines", tasks=TASKS, models=("transformer", "jm_stack"), **training):
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "defaults": {"model": {"memory_width": 8, "embedding": 8}, "training": {**TRAINING, **training},
                                   "tracking": {"wandb": "off"}},
        "grid": [{"tasks": list(tasks), "models": list(models), "hidden": [16], "lr": [1e-2]}]}))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache):
    """The tiny profile's four runs, trained one by one with the training entry point."""
    from pipeline.training.run import train

    mp = pytest.MonkeyPatch()
    mp.setenv("TRANSDUCE_DATA_CACHE", str(cache))
    folder = tmp_path_factory.mktemp("baselines")
    path = profile(folder)
    sweep = load_sweep(path)
    for run in sweep.runs():
        train(run, folder / "runs" / run.run_id(), progress=False)
    mp.undo()
    return path, sweep, folder / "runs"


def test_the_report_sets_each_model_beside_the_others_and_beside_the_published_scores(trained, tmp_path):
    path, sweep, runs = trained
    assert beside_the_paper(sweep)
    out = tmp_path / "out"
    readme = write_profile_report(sweep, path, runs, out, command="pytest")  # transduce report's choice
    text = readme.read_text()
    lines = text.splitlines()

    assert lines[0] == "# Baselines: profile `tiny-baselines`" and not (out / "table3.md").exists()
    assert "Not trained yet" not in text and "Compute: " in text
    assert TABLE_HEADER in lines
    for task in ("Sequence copying", "Reverse string (Delétang et al.)"):
        for model in ("Transformer (sinusoidal)", "JM Stack-LSTM"):
            row = next(line for line in lines if line.startswith(f"| {task} | {model} | 0.01 | 1 / 1 |"))
            cells = row.split(" | ")
            assert len(cells) == TABLE_HEADER.count(" | ") + 1
            assert re.fullmatch(r"—|\d of 1", cells[5])
            assert re.fullmatch(r"\d\.\d\d / \d\.\d\d", cells[7]) and re.fullmatch(r"\d\.\d\d / \d\.\d\d", cells[8])
            assert re.fullmatch(r"\d+|not even 129–192", cells[9])  # the far bands were measured (far_eval_size)

    # Delétang et al.'s score: ours as each selected run recorded it, theirs beside it
    assert re.search(r"\| Reverse string \(Delétang et al\.\) \| Transformer \(sinusoidal\) \| \d+\.\d \| \d+\.\d "
                     r"\(1 of 1 runs scored\) \| not transcribed \(Transformer\) \|", text)
    assert re.search(r"\| Reverse string \(Delétang et al\.\) \| JM Stack-LSTM \| \d+\.\d \| .* \| not transcribed "
                     r"\(Stack-RNN\) \|", text)
    assert "| task | " + " | ".join(DELETANG_ARCHITECTURES) + " |" in lines
    assert "| Reverse string (Delétang et al.) |" + " not transcribed |" * 5 in lines
    assert "| Duplicate string" not in text  # only the tasks the profile trained

    assert f"]({FIGURE})" in text and (out / FIGURE).is_file()
    assert "## How the memories were used" not in text  # neither model has one of the paper's memories
    for name in ("all_runs.csv", "cells.csv", TOKEN_FILE):
        assert (out / name).is_file(), name
    assert max(map(len, lines)) <= LONGEST_LINE


@pytest.mark.usefixtures("figures_unrendered")  # the scores the report keeps, not its figure
def test_runs_of_their_tasks_record_their_score_which_the_report_keeps_without_checkpoints(trained, tmp_path):
    """Every run of Delétang et al.'s tasks records its score at its end (checkpoints are not archived: a score that
    needed one would be lost with the runs folder); runs of the paper's tasks record none. The recorded score is
    what the report would measure on the run's best checkpoint (measured once per run, by the report below: greedy
    decoding, one pair at a time, is the slow part of this test)."""
    import json
    import shutil

    import pandas as pd

    path, sweep, runs = trained
    recorded = {}
    for folder in runs.iterdir():
        results = RunDir(folder).read_results()
        if results["task"] == "reverse_string":
            assert 0 <= results["token_accuracy"] <= 1
            recorded[folder.name] = results["token_accuracy"]
        else:
            assert "token_accuracy" not in results
    assert len(recorded) == 2
    bare = tmp_path / "bare"
    shutil.copytree(runs, bare)
    for folder in bare.iterdir():
        shutil.rmtree(RunDir(folder).best_checkpoint.parent)
    out = tmp_path / "out"
    write_profile_report(sweep, path, bare, out, command="pytest")
    scores = (out / TOKEN_FILE).read_text()
    assert scores.count("recorded by the run") == 2 and "measured" not in scores

    # A run finished before runs recorded it: the report measures the selected run's best checkpoint, once, and
    # keeps the score when the checkpoint is gone
    older = tmp_path / "older"
    shutil.copytree(runs, older)
    for folder in older.iterdir():
        results = RunDir(folder).read_results()
        results.pop("token_accuracy", None)
        RunDir(folder).results_file.write_text(json.dumps(results))
    out = tmp_path / "older-report"
    write_profile_report(sweep, path, older, out, command="pytest")
    first = (out / TOKEN_FILE).read_text()
    assert first.count("measured by the report on its best checkpoint") == 2  # reverse_string's two selected runs
    measured = pd.read_csv(out / TOKEN_FILE).set_index("run_id").token_accuracy.to_dict()
    assert measured == recorded  # what each run recorded at its end is what its best checkpoint measures
    for folder in older.iterdir():
        shutil.rmtree(RunDir(folder).best_checkpoint.parent)
    write_profile_report(sweep, path, older, out, command="pytest")
    assert (out / TOKEN_FILE).read_text() == first
    fresh = tmp_path / "fresh"
    write_profile_report(sweep, path, older, fresh, command="pytest")  # nothing measured before, nothing to measure
    assert (fresh / TOKEN_FILE).read_text().count("\n") == 1
    assert "| Reverse string (Delétang et al.) | JM Stack-LSTM | not scored | — |" in (fresh / "README.md").read_text()


def test_with_no_run_done_the_report_says_it_is_not_trained_yet(tmp_path):
    path = profile(tmp_path, "untrained")
    out = tmp_path / "out"
    text = write_profile_report(load_sweep(path), path, tmp_path / "runs", out, command="pytest").read_text()
    assert "**Not trained yet.** None of the 4 runs has finished" in text
    assert "| Sequence copying | Transformer (sinusoidal) | 0.01 | 1 | 20 |" in text  # the grid as planned
    assert "| Reverse string (Delétang et al.) |" + " not transcribed |" * 5 in text
    assert TABLE_HEADER not in text and not (out / FIGURE).exists()
    assert max(map(len, text.splitlines())) <= LONGEST_LINE


def test_a_baselines_report_never_overwrites_a_table3_report(tmp_path):
    path = profile(tmp_path, "beside")
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("# Report: profile `cpu`\n")
    with pytest.raises(ReportRefused, match="holds a profile's report"):
        write_profile_report(load_sweep(path), path, tmp_path / "runs", out, command="pytest")


def test_the_table3_report_refuses_a_profile_beside_the_paper_before_writing(tmp_path):
    path = profile(tmp_path, "beside")
    out = tmp_path / "out"
    with pytest.raises(ReportRefused, match="beside the paper's, so it has no Table 3"):
        write_report(load_sweep(path), path, tmp_path / "runs", out, command="pytest")
    assert not out.exists()


def test_each_positional_encoding_is_a_row_of_its_own():
    rows = {variant(ModelConfig(name="transformer", positional_encoding=p)) for p in ("sinusoidal", "none")}
    assert rows == {"transformer/sinusoidal", "transformer/none"}
    assert variant(ModelConfig(name="jm_stack")) == "jm_stack"
    assert variant_name("transformer/randomised") == "Transformer (randomised)"
    assert variant_name("stack") == "Stack-LSTM"


def test_the_published_scores_cover_both_tasks_and_every_architecture_and_name_where_each_was_checked():
    table = deletang_table2()
    assert set(table.task) == {"reverse_string", "duplicate_string"}
    assert all(sorted(part.architecture) == sorted(DELETANG_ARCHITECTURES) for _, part in table.groupby("task"))
    entered = table[table.score.notna()]
    assert entered.score.between(0, 100).all()
    assert entered.source.notna().all() and table[table.score.isna()].source.isna().all()  # a score has its source


def test_a_score_not_transcribed_is_said_so_never_a_number(tmp_path):
    import pandas as pd

    from pipeline.reports.baselines import deletang_lines

    cells = pd.DataFrame([dict(task="duplicate_string", variant="transformer/none", run_id=None, done=0),
                          dict(task="duplicate_string", variant="lstm1", run_id=None, done=0)])
    scores = pd.DataFrame(columns=["task", "variant", "run_id", "token_accuracy"])
    lines = deletang_lines(cells, scores, ["duplicate_string"], ["transformer/none", "lstm1"])
    assert any(line.endswith("| 52.8 (Transformer) |") and "Transformer (none)" in line for line in lines)
    assert any(line.endswith("| not transcribed (LSTM) |") and "1-layer LSTM" in line for line in lines)
    row = next(line for line in lines if line.startswith("| Duplicate string (Delétang et al.) | not"))
    assert row.count("not transcribed") == 4 and "| 52.8 |" in row


def test_each_memory_cell_shows_its_selected_runs_push_and_pop_at_the_checkpoint_it_reports(tmp_path, monkeypatch):
    """The memories' table: per task and memory model, the selected run's mean push and pop over the source and
    target halves as metrics.csv logged them at the evaluation of the checkpoint the run reports (the DeQue's two
    ends each); models without one of the paper's memories get no row (the JM stack makes it a baselines profile)."""
    import math

    import pandas as pd

    from pipeline.training.run import train

    path = profile(tmp_path, "memories", tasks=["copy"], models=["stack", "deque", "lstm1", "jm_stack"],
                   far_eval_size=0)  # the far lengths are not what this table reads
    sweep = load_sweep(path)
    for run in sweep.runs():
        folder = tmp_path / "runs" / run.run_id()
        train(run, folder, progress=False)
        # an evaluation after the reported checkpoint, as a run's last evaluations usually are: not what it reports
        metrics = RunDir(folder).metrics_file
        header = metrics.read_text().splitlines()[0].split(",")
        later = {"step": "999", "train/coarse": "0.0", **{c: "0.777" for c in header if c.startswith("memory/")}}
        with metrics.open("a") as f:
            f.write(",".join(later.get(c, "") for c in header) + "\n")
    out = tmp_path / "out"
    text = write_profile_report(sweep, path, tmp_path / "runs", out, command="pytest").read_text()
    table = text.split("## How the memories were used", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| Sequence copying |")]
    assert len(rows) == 2 and "1-layer LSTM" not in table and "JM Stack-LSTM" not in table

    cells = pd.read_csv(out / "cells.csv").set_index("variant")
    for model, name in (("stack", "Stack-LSTM"), ("deque", "DeQue-LSTM")):
        folder = tmp_path / "runs" / cells.loc[model, "run_id"]
        step = RunDir(folder).read_results()["selected_step"]
        logged = next(row for row in RunDir(folder).read_metrics()
                      if row["step"] == str(step) and row.get("train/coarse"))
        row = next(line for line in rows if f"| {name} |" in line)
        assert f"s0 at batch {step:,}" in row
        if model == "stack":
            expected = [logged[f"memory/{s}_{h}"] for s in ("push", "pop") for h in ("source", "target")]
            assert cells.loc[model, "push_source_bottom"] != cells.loc[model, "push_source_bottom"]  # NaN: one end
        else:
            expected = [logged[f"memory/{s}_{h}_{e}"] for s in ("push", "pop") for e in ("top", "bottom")
                        for h in ("source", "target")]
        numbers = re.findall(r"\d\.\d\d", row.split(" | ", 3)[3])
        assert numbers == [f"{float(v):.2f}" for v in expected]
    assert math.isnan(cells.loc["lstm1", "push_source"])


def test_a_cell_counts_the_runs_that_did_not_learn_and_hit_the_cap_still_falling():
    """Of a cell's done runs that did not learn, those that stopped at the cap with their training perplexity still
    falling (``still_improving``, the plateau rule's trend check): not one that learned, one flat at the cap, one the
    plateau rule stopped, or one not done, whatever its trend."""
    import pandas as pd

    from pipeline.reports.baselines import cap_line, cell_lines, cell_table

    def run(seed, state="finished", stop="budget", falling=True, learned_at=None, variant="lstm1"):
        return dict(task="copy", variant=variant, model=variant, lr=1e-3, seed=seed, max_batches=4000, state=state,
                    stop_reason=stop if state == "finished" else None, still_improving=falling,
                    learned_at=learned_at, cpu_seconds=60.0)

    runs = pd.DataFrame([run(0), run(1, falling=False), run(2, stop="plateau"), run(3, learned_at=1500),
                         run(4, state="pending"), run(5, stop="converged", learned_at=2000, variant="queue")])
    runs["learned_at"] = runs.learned_at.astype("Int64")
    cells = cell_table(runs, pd.DataFrame(), None, ["copy"], ["lstm1", "queue"]).set_index("variant")
    assert cells.loc["lstm1", ["done", "learned", "cap_falling"]].tolist() == [4, 1, 1]
    unknown = pd.concat([runs, pd.DataFrame([run(6, falling=float("nan"))])])  # no trend recorded: not counted
    assert cell_table(unknown, pd.DataFrame(), None, ["copy"], ["lstm1"]).cap_falling.tolist() == [1]
    assert cells.loc["queue", ["done", "learned", "cap_falling"]].tolist() == [1, 1, 0]
    lines = cell_lines(cells.reset_index())
    assert lines[2].startswith("| Sequence copying | 1-layer LSTM | 0.001 | 4 / 5 | 1 of 4 (25%) | 1 of 3 | —")
    assert lines[3].startswith("| Sequence copying | Queue-LSTM | 0.001 | 1 / 1 | 1 of 1 (100%) | — | —")

    # the sentence under the table: the cells where no seed learned, and those whose runs all ran out still falling
    assert cap_line(cells.reset_index()) == []  # both cells learned on a seed
    nothing = pd.DataFrame([run(0, variant="stack"), run(1, variant="stack"), run(0, variant="deque"),
                            run(1, falling=False, variant="deque"), run(2, variant="jm_stack", state="pending")])
    nothing["learned_at"] = nothing.learned_at.astype("Int64")
    cells = cell_table(pd.concat([runs, nothing]), pd.DataFrame(), None, ["copy"],
                       ["lstm1", "queue", "stack", "deque", "jm_stack"])
    assert cap_line(cells)[0].startswith("2 of the 4 cells with a run done learned on none of their done seeds; in 1 "
                                         "of them every one of those runs hit the cap")


def test_memory_signals_are_read_at_the_step_asked_else_the_last():
    from pipeline.reports.recipe import memory_signals

    rows = [{"step": "10", "memory/push_source": "0.1", "memory/pop_target": "0.2"}, {"step": "15", "train/loss": "1"},
            {"step": "20", "memory/push_source": "0.9", "memory/pop_target": "0.8"}]
    assert memory_signals("stack", rows, 10)["push_source"] == 0.1
    assert memory_signals("stack", rows)["push_source"] == 0.9
    assert memory_signals("stack", rows, 20)["pop_target"] == 0.8
    assert all(v != v for v in (memory_signals("stack", rows, 15)["push_source"],
                                memory_signals("stack", rows)["push_source_bottom"]))  # NaN: no evaluation, one end
    two = [{"step": "10", "memory/push_source_top": "0.3", "memory/push_source_bottom": "0.4"}]
    assert memory_signals("deque", two, 10)["push_source"] == 0.3
    assert memory_signals("deque", two, 10)["push_source_bottom"] == 0.4
    assert all(v != v for v in memory_signals("jm_stack", [{"step": "10", "train/coarse": "0.5"}], 10).values())
