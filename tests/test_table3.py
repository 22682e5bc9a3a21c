"""Table 3's rules on a small synthetic set of runs: §5 selection (NaN perplexities never selected), seeds and
spread per cell, and the verdict rule."""

import math

import pandas as pd
import pytest

from pipeline.config import SweepConfig, from_dict
from pipeline.reports.table3 import RUN_COLUMNS, select_models, summary_line, table3, verdict

PAPER_STACK_REVERSAL = dict(train_coarse=1.0, train_fine=1.0, test_coarse=1.0, test_fine=1.0)


def run(seed, ppl, test_coarse, lr=1e-3, state="finished", stop="converged", model="stack", task="reversal",
        batches=1500, improving=False, train=1.0, left_start_at=100):
    return dict(task=task, model=model, hidden=256, lr=lr, seed=seed, setting=f"lr{lr:g}", max_batches=5000,
                cap=math.nan, state=state,
                batches=batches, stop_reason=stop if state in ("finished", "pruned") else None, train_perplexity=ppl,
                train_coarse=train, train_fine=train, test_coarse=test_coarse, test_fine=test_coarse,
                learned=train >= 0.99, still_improving=improving, trend_batches=1000, trend_tolerance=0.02,
                left_start_at=left_start_at, start="", provenance="", unconfirmed_plateau=False, halved=False,
                run_id=f"{task}-{model}-{lr:g}-s{seed}", commit="abc")


def runs(*rows):
    return pd.DataFrame(list(rows), columns=RUN_COLUMNS)


def test_selection_takes_the_lowest_finite_perplexity_of_done_runs():
    table = runs(run(0, math.nan, 1.0), run(1, 1.02, 0.9), run(2, 1.01, 0.8, state="running"),
                 run(3, 1.05, 1.0, state="pruned", stop="pruned"), run(4, float("inf"), 1.0))
    (chosen,) = select_models(table).itertuples()
    assert chosen.seed == 1  # seed 0 is NaN, seed 2 is not done, seed 4 is infinite
    assert select_models(runs(run(0, math.nan, 1.0))).empty


def test_selection_never_takes_a_halved_run_and_gives_a_tie_to_the_lower_run_id():
    """A run cut at a rung of a learning-rate search is never a cell's result, however low its perplexity; two runs
    at one perplexity go to the lower run id, whatever their order in the table."""
    halved = dict(run(0, 1.00, 1.0, lr=5e-3), state="pruned", stop="budget", halved=True)
    later, earlier = run(1, 1.02, 0.9, lr=1e-3), run(2, 1.02, 0.8, lr=5e-4)
    assert earlier["run_id"] < later["run_id"]
    for order in ((halved, later, earlier), (earlier, halved, later)):
        (chosen,) = select_models(runs(*order)).itertuples()
        assert chosen.run_id == earlier["run_id"]
    (chosen,) = select_models(runs(dict(halved, halved=False), later, earlier)).itertuples()
    assert chosen.seed == 0  # not halved: the lowest perplexity is chosen


def test_a_version_1_stop_reads_budget_limited_unless_its_numbers_already_reproduce():
    """A run that version 1 of the plateau rule stopped where version 2 would not have (``unconfirmed_plateau``) is
    budget-limited where its numbers disagree, and keeps "reproduced" where they already match the paper's."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["reversal"], "models": ["stack"]}]})

    def cell(**changes):
        row = dict(run(0, 2.5, 0.4, stop="plateau", train=0.6), **changes)
        (got,) = table3(runs(row), sweep).query("task == 'reversal' and model == 'stack'").itertuples()
        return got

    assert cell().verdict == "disagrees at convergence"
    v1 = cell(unconfirmed_plateau=True)
    assert v1.verdict == "budget-limited" and "version 1 of the plateau rule" in v1.evidence
    assert cell(unconfirmed_plateau=True, train_coarse=1.0, train_fine=1.0, test_coarse=1.0,
                test_fine=1.0).verdict == "reproduced"


def test_a_cell_whose_search_cut_a_run_that_stands_lower_is_not_settled():
    """The copy Stack's case: successive halving cut a setting at a rung whose run, trained on by an earlier grid,
    stands far below the selected run. A cell that would disagree (or stop on its plateau) is then budget-limited,
    its evidence naming the cut run; a cut run above the selected one, or with no finite perplexity, changes
    nothing, and a cell that already reproduces stays reproduced."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["reversal"], "models": ["stack"]}]})
    flat = run(0, 35.1, 0.0, stop="plateau", train=0.0)
    cut = run(1, 3.18, 0.0, lr=5e-4, state="pruned", stop="budget", batches=40000, train=0.0) | {"halved": True}

    def cell(*rows):
        (got,) = table3(runs(*rows), sweep).query("task == 'reversal' and model == 'stack'").itertuples()
        return got

    alone = cell(flat)
    assert alone.verdict == "disagrees at convergence" and "cut-lower" not in alone.note_kinds
    got = cell(flat, cut)
    assert got.seed == 0  # a cut run is never the cell's run
    assert got.verdict == "budget-limited"
    assert "its search cut `reversal-stack-0.0005-s1`" in got.evidence and "3.18" in got.evidence
    assert "cut-lower" in got.note_kinds.split()
    never_left = run(0, 120.0, 0.0, stop="plateau", train=0.0, left_start_at=math.nan)
    assert cell(never_left).verdict == "stopped on its starting plateau"
    assert cell(never_left, cut).verdict == "budget-limited"
    failed = cut | {"state": "failed", "stop_reason": None, "train_perplexity": math.nan, "batches": math.nan}
    for harmless in (cut | {"train_perplexity": 40.0}, cut | {"train_perplexity": math.nan}, failed):
        kept = cell(flat, harmless)
        assert kept.verdict == "disagrees at convergence" and "cut-lower" not in kept.note_kinds
    solved = run(0, 35.1, 1.0)
    assert cell(solved, cut).verdict == "reproduced"
    # the gender 1-layer LSTM's case: the cut run stopped at its rung above the selected run, and the same run, trained
    # to the block's cap outside the profile (an experiment; another draw), stands below it
    rung = cut | {"train_perplexity": 38.7, "batches": 20000}
    for later, expected in ((30.2, "budget-limited"), (36.0, "disagrees at convergence")):
        elsewhere = {rung["run_id"]: dict(run_id=rung["run_id"], name="lstm1-gender-lr1e-3", batches=90000,
                                          train_perplexity=later)}
        (got,) = table3(runs(flat, rung), sweep, elsewhere=elsewhere).query(
            "task == 'reversal' and model == 'stack'").itertuples()
        assert got.verdict == expected
        assert ("trained to 90,000 batches outside the profile (`lstm1-gender-lr1e-3`)" in got.evidence) == (
            expected == "budget-limited")
    not_cut = {flat["run_id"]: dict(run_id=flat["run_id"], name="x", batches=90000, train_perplexity=1.0)}
    assert cell(flat).verdict == "disagrees at convergence"  # the selected run's own experiment is not a cut run
    (got,) = table3(runs(flat), sweep, elsewhere=not_cut).query("task == 'reversal' and model == 'stack'").itertuples()
    assert got.verdict == "disagrees at convergence"


@pytest.mark.parametrize("ours, stop, improving, left, expected", [
    ((1.0, 1.0, 0.96, 0.99), "converged", False, True, "reproduced"),
    ((1.0, 1.0, 0.94, 0.99), "converged", False, True, "disagrees at convergence"),
    ((0.30, 0.60, 0.10, 0.40), "budget", True, True, "budget-limited"),
    ((0.30, 0.60, 0.10, 0.40), "budget", True, False, "budget-limited"),  # still falling: the cap decided
    # a cap ends no run at convergence, flat or not: the evidence says which
    ((0.30, 0.60, 0.10, 0.40), "budget", False, True, "budget-limited"),
    ((0.30, 0.60, 0.10, 0.40), "budget", False, False, "budget-limited"),
    ((0.30, 0.60, 0.10, 0.40), "pruned", False, True, "disagrees at convergence"),
    ((0.30, 0.60, 0.10, 0.40), "pruned", False, False, "stopped on its starting plateau"),
    ((0.30, 0.60, 0.10, 0.40), "plateau", True, True, "disagrees at convergence"),
    ((0.0, 0.0, 0.0, 0.0), "plateau", True, False, "stopped on its starting plateau"),
])
def test_verdict_against_a_perfect_paper_cell(ours, stop, improving, left, expected):
    values = dict(zip(("train_coarse", "train_fine", "test_coarse", "test_fine"), ours))
    assert verdict(values, PAPER_STACK_REVERSAL, stop, improving, left) == expected


def test_a_plateau_stop_says_when_its_perplexity_was_still_falling():
    """The plateau rule reads single 100-batch windows; the trend check reads 1,000-batch means. Where they differ
    the verdict is the rule's and the evidence shows both."""
    from pipeline.reports.table3 import evidence

    cell = runs(run(0, 4.09, 0.0, stop="plateau", improving=True, train=0.18, batches=33500))
    falling, flat = evidence(cell.iloc[0], cell), evidence(cell.assign(still_improving=False).iloc[0], cell)
    assert falling.startswith("perplexity plateaued: stopped at batch 33,500, training perplexity 4.09, though")
    assert flat == "perplexity plateaued: stopped at batch 33,500, training perplexity 4.09"


def test_the_evidence_gives_the_measured_fall_beside_flat_and_still_falling():
    """A reader checks "flat" against the tolerance without the run: the evidence gives the mean perplexity's fall
    over the last trend window (``trend_fall``), a rise as "above", and nothing where none was measured."""
    from pipeline.reports.table3 import evidence

    plateau = runs(run(0, 2.348, 0.0, stop="plateau", train=0.14, batches=85000))
    stopped = plateau.assign(trend_fall=0.0158, trend_batches=10000)
    assert evidence(stopped.iloc[0], stopped).startswith(
        "perplexity plateaued: stopped at batch 85,000, training perplexity 2.348 (mean perplexity of its last 10,000 "
        "batches 1.58% below the 10,000 before)")
    falling = stopped.assign(still_improving=True, trend_fall=0.0199)
    assert "though its last 10,000 batches were still 1.99% below the 10,000 before" in evidence(falling.iloc[0],
                                                                                                 falling)
    capped = plateau.assign(stop_reason="budget", still_improving=True, trend_fall=0.059, trend_batches=20000)
    assert "still falling (last 20,000 batches 5.90% below the 20,000 before: > 2% in perplexity" in evidence(
        capped.iloc[0], capped)
    risen = capped.assign(still_improving=False, trend_fall=-0.004)
    assert "flat (last 20,000 batches 0.40% above the 20,000 before: not by 2%" in evidence(risen.iloc[0], risen)
    unmeasured = plateau.assign(trend_fall=math.nan)
    assert evidence(unmeasured.iloc[0], unmeasured) == "perplexity plateaued: stopped at batch 85,000, training " \
        "perplexity 2.348"


def test_where_the_cross_entropy_decided_still_falling_the_evidence_quotes_its_fall():
    """Near perplexity 1 a run still halving its errors barely moves its perplexity: "still falling (0.50% below)"
    would read as flat against a 2% tolerance. The evidence quotes the cross-entropy's fall, which decided, with the
    perplexity's beside it; where the perplexity decided, its fall alone."""
    from pipeline.reports.table3 import _judged_at_continuation, evidence

    capped = runs(run(1, 1.015, 0.06, stop="budget", improving=True, train=0.95, batches=55000)).assign(
        trend_fall=0.005, trend_cross_entropy_fall=0.105, trend_batches=5500)
    text = evidence(capped.iloc[0], capped)
    assert ("still falling (last 5,500 batches' mean cross-entropy 10.5% below the 5,500 before's, beyond its noise; "
            "perplexity 0.50% below: > 2% in perplexity") in text
    by_perplexity = capped.assign(trend_fall=0.059, trend_cross_entropy_fall=math.nan)
    assert "still falling (last 5,500 batches 5.90% below the 5,500 before: > 2%" in evidence(by_perplexity.iloc[0],
                                                                                              by_perplexity)
    later = dict(name="copy-on", batches=55000, stop_reason="budget", train_perplexity=1.015, still_improving=True,
                 trend_batches=5500, trend_fall=0.005, trend_cross_entropy_fall=0.105, left_start=True,
                 train_coarse=0.95, train_fine=0.97, test_coarse=0.06, test_fine=0.07)
    _, said = _judged_at_continuation(later, PAPER_STACK_REVERSAL, "plateau", 47000)
    assert ("hit its cap, perplexity still falling (last 5,500 batches' mean cross-entropy 10.5% below the 5,500 "
            "before's, beyond its noise; perplexity 0.50% below)") in said


def test_a_run_stopped_on_its_starting_plateau_is_not_called_a_solution():
    """A deep LSTM has no pruning: the plateau rule (or its cap) can stop it before it left the perplexity it started
    at, near the uniform guess. Its evidence says so; a run that fell far below its start does not get the phrase."""
    from pipeline.reports.table3 import evidence

    stuck = runs(run(0, 117.8, 0.0, model="lstm4", task="copy", stop="plateau", train=0.0, batches=4000,
                     left_start_at=None) | {"start_perplexity": 127.3})
    assert ("never below 0.5 × its first window's 127.3: it did not leave the starting plateau"
            in evidence(stuck.iloc[0], stuck))
    learning = stuck.assign(train_perplexity=4.09, left_start_at=2500)
    assert "starting plateau" not in evidence(learning.iloc[0], learning)
    converged = stuck.assign(stop_reason="converged")  # only the plateau rule and the cap stop a run there
    assert "starting plateau" not in evidence(converged.iloc[0], converged)


def test_the_evidence_says_how_accuracy_holds_as_sentences_grow():
    from pipeline.reports.table3 import evidence, length_ends

    rows = [(65, 10, 1.0), (66, 30, 0.9), (72, 10, 0.8), (90, 5, 0.5), (121, 4, 0.5), (128, 4, 1.0)]
    assert length_ends(rows) == "0.90 at 65–72, 0.75 at 121–128"  # weighted by the sequences at each length
    assert length_ends([]) == ""
    cell = runs(run(0, 1.01, 0.84, task="svo_sov", model="queue") | {"test_coarse_by_length": length_ends(rows)})
    assert evidence(cell.iloc[0], cell).endswith("; test coarse by source length 0.90 at 65–72, 0.75 at 121–128")


def test_better_needs_none_below_and_some_above():
    paper = dict(train_coarse=0.89, train_fine=0.94, test_coarse=0.00, test_fine=0.22)  # Stack-LSTM on copy
    ours = dict(train_coarse=1.0, train_fine=1.0, test_coarse=0.60, test_fine=0.9)
    assert verdict(ours, paper, "converged", False) == "better"
    assert verdict(dict(ours, test_fine=0.1), paper, "converged", False) == "disagrees at convergence"


def test_a_cell_reports_its_seeds_spread_and_verdict():
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["reversal"], "models": ["stack"],
                                                           "lr": [1e-3, 5e-4], "seeds": [0, 1, 2]}]})
    table = runs(run(0, 1.01, 1.0, batches=1000), run(1, 1.02, 0.98, batches=2000),
                 run(2, 100.0, 0.0, state="pruned", stop="pruned", train=0.0, batches=2000),
                 run(0, 1.5, 1.0, lr=5e-4), run(1, math.nan, 0.0, lr=5e-4, state="failed"),
                 run(2, 2.0, 0.5, lr=5e-4, state="pending"))
    out = table3(table, sweep)
    assert len(out) == 35
    (cell,) = out[(out.task == "reversal") & (out.model == "stack")].itertuples()
    assert (cell.seed, cell.lr, cell.verdict) == (0, 1e-3, "reproduced")
    assert (cell.runs, cell.done, cell.learned, cell.pruned) == (6, 4, 3, 1)
    assert cell.seeds_at_selected == 3  # the done runs at the selected lr, the pruned one included
    assert cell.test_coarse_mean == pytest.approx((1.0 + 0.98 + 0.0) / 3)
    assert cell.test_coarse_std == pytest.approx(pd.Series([1.0, 0.98, 0.0]).std())
    assert cell.median_batches_to_converge == 1500  # the converged runs at 1000 and 2000 (lr 1e-3) and 1500
    assert "1 of 6 runs pruned" in cell.evidence
    assert summary_line(out) == ("1 of 35 cells reproduced, 0 better, 0 budget-limited, 0 stopped on their starting "
                                 "plateau, 0 disagree at convergence; 34 not in this profile.")


def test_a_cell_whose_run_never_left_its_start_does_not_disagree_at_convergence():
    """The cpu profile's 4-layer LSTM on copy: stopped by the plateau rule at perplexity 118 of a 128 start. The cell
    says it stopped on its starting plateau; the same run having fallen to 60 (half its start) disagrees."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy"], "models": ["lstm4"]}]})
    stuck = run(0, 117.8, 0.0, model="lstm4", task="copy", stop="plateau", train=0.0, batches=4000,
                left_start_at=None) | {"start_perplexity": 128.1}
    cell = table3(runs(stuck), sweep).set_index(["task", "model"]).loc[("copy", "lstm4")]
    assert cell.verdict == "stopped on its starting plateau"
    left = table3(runs(stuck | {"train_perplexity": 60.0, "left_start_at": 3000}), sweep)
    assert left.set_index(["task", "model"]).loc[("copy", "lstm4")].verdict == "disagrees at convergence"
    assert ", 1 disagrees at convergence;" in summary_line(left)  # one cell: the verb agrees with it
    # the same run at its cap: budget-limited first, and the summary still counts it as never having left its start
    capped = table3(runs(stuck | {"stop_reason": "budget"}), sweep)
    assert capped.set_index(["task", "model"]).loc[("copy", "lstm4")].verdict == "budget-limited"
    assert summary_line(capped) == ("0 of 35 cells reproduced, 0 better, 1 budget-limited, 0 stopped on their "
                                    "starting plateau, 0 disagree at convergence; 1 selected run never left its "
                                    "starting plateau (1 budget-limited); 34 not in this profile.")


def test_a_cell_that_falls_short_while_a_survivor_trains_is_counted_as_so_far(tmp_path, monkeypatch):
    """The SVO->SOV Stack of the cpu profile: one seed flat at perplexity 9.6 (disagrees), its twin still training.
    The headline counts the cell "so far"; with the twin done (whichever wins) or absent, it does not."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy"], "models": ["stack"]}]})
    flat = run(1, 9.58, 0.0, model="stack", task="copy", stop="plateau", train=0.0, batches=62500,
               left_start_at=3000) | {"start_perplexity": 128.0}
    training = run(0, 6.05, 0.0, model="stack", task="copy", state="running", train=0.0, batches=66700)
    so_far = ", 1 disagrees at convergence (1 so far: its cell still has runs to train)"
    cases = {"survivor running": (runs(flat, training), so_far),
             "survivor to go": (runs(flat, training | {"state": "pending"}), so_far),
             "alone": (runs(flat), ", 1 disagrees at convergence;"),
             "survivor done": (runs(flat, training | {"state": "finished", "stop_reason": "plateau"}),
                               ", 1 disagrees at convergence;")}
    from pipeline.reports import table3 as module

    figures = []
    monkeypatch.setattr(module, "save_figure", lambda fig, path: figures.append(fig))
    for case, (table, expected) in cases.items():
        out = table3(table, sweep)
        assert out.set_index(["task", "model"]).loc[("copy", "stack")].verdict == "disagrees at convergence", case
        assert expected in summary_line(out), (case, summary_line(out))
        if case not in ("survivor running", "survivor done"):
            continue
        # the Table 3 figure's cell says it too
        assert module.table3_figure(out, tmp_path / "table3.png", {t: t for t in out.task.unique()})
        words = {t.get_text() for ax in figures[-1].axes for t in ax.texts}
        assert ("disagrees, so far" in words) == ("so far" in expected), (case, words)
        assert ("disagrees" in words) == ("so far" not in expected), case
        key = any(w.startswith("“…, so far”: runs of the cell still train") for w in words)  # and its key says why
        assert key == ("so far" in expected), case
    # the same for a cell stopped on its starting plateau, and the plural
    stuck = flat | {"train_perplexity": 117.8, "left_start_at": None}
    other = {k: (v.replace("copy", "reversal") if isinstance(v, str) else v) for k, v in stuck.items()} | {
        "task": "reversal"}
    sweep2 = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy", "reversal"], "models": ["stack"]}]})
    line = summary_line(table3(runs(stuck, training, other, training | {"task": "reversal", "run_id": "r0"}), sweep2))
    assert "2 stopped on their starting plateau (2 so far: their cells still have runs to train), 0 disagree" in line


def test_the_evidence_says_where_a_run_was_read_when_its_selected_checkpoint_is_not_its_end():
    """The SVO->SOV Stack's seed 1: plateaued at 62,500 (perplexity 9.58 in its last window), read at batch 17,500,
    where its training accuracy peaked (perplexity 14.88): its evidence names both. A run read at its end, or one whose
    results predate the selected step, reads as before."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy"], "models": ["stack"]}]})
    flat = run(1, 14.88, 0.0, model="stack", task="copy", stop="plateau", train=0.0, batches=62500,
               left_start_at=3000) | {"start_perplexity": 128.0}
    for changes, expected in (
            ({"selected_step": 17500, "end_perplexity": 9.58},
             "stopped at batch 62,500, training perplexity 14.88 at its selected checkpoint (batch 17,500, the best "
             "training accuracy), 9.58 at its end"),
            ({"selected_step": 62500, "end_perplexity": 9.58}, "stopped at batch 62,500, training perplexity 14.88"),
            ({}, "stopped at batch 62,500, training perplexity 14.88")):
        evidence = table3(runs(flat | changes), sweep).set_index(["task", "model"]).loc[("copy", "stack")].evidence
        assert expected in evidence, evidence
        assert ("selected checkpoint" in evidence) == ("selected_step" in changes and changes["selected_step"] < 62500)


def test_a_budget_limited_cell_is_judged_where_its_continuation_ended(tmp_path):
    """Stack-LSTM on copy (the paper: 0.89 / 0.94 training, 0.00 / 0.22 test) hit its cap still improving; the same
    run continued outside the profile decides the verdict, and only when it went further."""
    import json

    from pipeline.reports.build import continuations_of, continuing_experiments
    from pipeline.reports.table3 import continuation

    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy"], "models": ["stack"], "seeds": [0]}]})
    capped = runs(run(0, 86.0, 0.0, task="copy", stop="budget", batches=8000, improving=True, train=0.0))
    (cell,) = table3(capped, sweep).query("task == 'copy' and model == 'stack'").itertuples()
    assert cell.verdict == "budget-limited" and pd.isna(cell.continued_batches)

    folder = tmp_path / "stack-copy-40k"
    folder.mkdir()
    results = dict(run_id="copy-stack-0.001-s0", task="copy", model="stack", batches=23500, stop_reason="plateau",
                   train_perplexity=30.5, train_coarse=0.10, train_fine=0.40, test_coarse=0.0, test_fine=0.05)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "metrics.csv").write_text("step,train/perplexity\n" + "".join(
        f"{100 * i},{240 - i}\n" for i in range(1, 236)))  # falling to the end: still improving
    later = continuation(folder)
    assert later["still_improving"] and later["stop_reason"] == "plateau"
    run_dir = tmp_path / "runs" / "copy-stack-0.001-s0"  # the profile's run: its log is the first 8,000 batches'
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.csv").write_text("step,train/perplexity\n" + "".join(
        f"{100 * i},{240 - i}\n" for i in range(1, 81)))
    other = tmp_path / "another-run"
    other.mkdir()
    (other / "results.json").write_text(json.dumps(dict(results, run_id="copy-stack-0.001-s9")))
    retrained = tmp_path / "the-same-config-trained-again"  # same run id, another path (older code, say)
    retrained.mkdir()
    (retrained / "metrics.csv").write_text((folder / "metrics.csv").read_text().replace("\n500,235\n", "\n500,234\n"))
    found = continuations_of(continuing_experiments(
        {("copy", "stack"): [(folder, results), (other, {**results, "run_id": "s9"}),
                             (retrained, {**results, "batches": 40000})],
         ("svo_sov", "lstm1"): [(tmp_path / "no-run-id", {"batches": 60000})]},
        {"copy-stack-0.001-s0": run_dir}))
    # only continuations of the profile's own runs, and only those whose log holds the run's own
    assert list(found) == ["copy-stack-0.001-s0"] and found["copy-stack-0.001-s0"]["batches"] == 23500

    (cell,) = table3(capped, sweep, found).query("task == 'copy' and model == 'stack'").itertuples()
    assert cell.verdict == "disagrees at convergence"  # plateaued below the paper: judged there, not at the cap
    assert cell.continued_batches == 23500 and cell.continued_in == "stack-copy-40k"
    assert "continued outside the profile (`stack-copy-40k`" in cell.evidence
    assert "training 0.10 / 0.40" in cell.evidence
    # 10% of 23,500; the mean of windows 212-235 (16.5) against 188-211's (40.5)
    assert "plateaued, though its last 2,400 batches were still 59.26% below the 2,400 before" in cell.evidence
    # the numbers beside the verdict are the ones it was judged on: the continuation's, the profile's in the evidence
    assert (cell.train_coarse, cell.train_fine, cell.test_fine, cell.train_perplexity) == (0.10, 0.40, 0.05, 30.5)
    assert cell.diff_train_coarse == pytest.approx(0.10 - 0.89)
    assert "the row's numbers are read there (the profile's run stood at training 0.00 / " in cell.evidence

    still = {"copy-stack-0.001-s0": dict(later, stop_reason="budget", still_improving=True)}
    (cell,) = table3(capped, sweep, still).query("task == 'copy' and model == 'stack'").itertuples()
    assert cell.verdict == "budget-limited" and "hit its raised cap, perplexity still falling" in cell.evidence
    shorter = {"copy-stack-0.001-s0": dict(later, batches=6000)}
    (cell,) = table3(capped, sweep, shorter).query("task == 'copy' and model == 'stack'").itertuples()
    assert cell.verdict == "budget-limited" and pd.isna(cell.continued_batches)
    learned = runs(run(0, 1.0, 1.0, task="copy", stop="budget", batches=8000, improving=True))
    (cell,) = table3(learned, sweep, found).query("task == 'copy' and model == 'stack'").itertuples()
    assert cell.verdict == "better" and pd.isna(cell.continued_batches)  # not budget-limited: nothing to judge


def test_a_stop_short_of_the_paper_is_judged_where_its_reopened_continuation_ended():
    """The copy Stack's seed 1 (the cpu profile, issue 78): the plateau rule stopped it at 47,000 by a hair (training
    coarse 0.95, test fine 0.02 against the paper's 0.22: "disagrees at convergence"); the same run reopened past that
    stop outside the profile was not stopped again. A continuation that went further judges the verdict, as it does for
    a capped run: still falling at its cap, budget-limited; flat again, a disagreement judged there. One that went no
    further changes nothing, nor does any continuation where the search cut a run that stands lower."""
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["copy"], "models": ["stack"], "seeds": [1]}]})
    stopped = run(1, 1.039, 0.02, lr=5e-4, task="copy", stop="plateau", batches=47000, train=0.95)
    later = dict(run_id=stopped["run_id"], name="stack-copy-past-plateau", batches=55000, stop_reason="budget",
                 train_perplexity=1.02, still_improving=True, trend_batches=5500, trend_fall=0.031, left_start=True,
                 train_coarse=0.97, train_fine=0.98, test_coarse=0.03, test_fine=0.04)

    def cell(table, continuations=None):
        (row,) = table3(table, sweep, continuations).query("task == 'copy' and model == 'stack'").itertuples()
        return row

    alone = cell(runs(stopped))
    assert alone.verdict == "disagrees at convergence" and pd.isna(alone.continued_batches)
    on = cell(runs(stopped), {stopped["run_id"]: later})
    assert on.verdict == "budget-limited" and on.continued_batches == 55000 and "continued" in on.note_kinds.split()
    assert ("continued outside the profile (`stack-copy-past-plateau`, same run, reopened past its plateau rule's stop "
            "at 47,000 batches) to 55,000 batches: hit its cap, perplexity still falling") in on.evidence
    assert (on.train_coarse, on.test_coarse) == (0.97, 0.03)  # the continuation's, as the verdict's
    assert "the profile's run stood at training 0.95 / " in on.evidence
    # the spread over the setting's seeds reads this seed where the verdict does (0.03, not its stop's 0.02)
    other_seed = run(0, 1.5, 0.01, lr=5e-4, task="copy", stop="plateau", batches=47000, train=0.9)
    two = cell(runs(stopped, other_seed), {stopped["run_id"]: later})
    assert two.seeds_at_selected == 2 and two.test_coarse_mean == pytest.approx((0.03 + 0.01) / 2)
    flat_again = dict(later, batches=60000, stop_reason="plateau", still_improving=False)
    again = cell(runs(stopped), {stopped["run_id"]: flat_again})
    assert again.verdict == "disagrees at convergence" and again.continued_batches == 60000
    assert "to 60,000 batches: perplexity plateaued" in again.evidence
    same = cell(runs(stopped), {stopped["run_id"]: dict(flat_again, batches=47000)})
    assert same.verdict == "disagrees at convergence" and pd.isna(same.continued_batches)
    cut = dict(run(0, 1.01, 0.0, lr=5e-3, task="copy", state="pruned", stop="budget", batches=30000), halved=True)
    searched = cell(runs(stopped, cut), {stopped["run_id"]: flat_again})
    assert searched.verdict == "budget-limited" and searched.continued_batches == 60000
    assert "cut-lower" in searched.note_kinds.split()


def test_batches_to_accuracy_makes_fig_2b_a_number(tmp_path):
    """Issue 34 item 4: the first evaluated batch at training coarse 0.5 and 0.99 per selected run, "not by N" where
    never, and how much earlier the fastest memory model got there than any deep LSTM."""
    from pipeline.reports.build import batches_to_accuracy, convergence_markdown

    logs = {"stack": [(500, 0.0), (1000, 0.6), (1500, 1.0)], "lstm1": [(500, 0.0), (1000, 0.2), (6000, 0.4)],
            "lstm2": [(1000, 0.1), (30000, 0.7), (45000, 0.995)]}
    selected = []
    for model, evals in logs.items():
        run_id = f"reversal-{model}"
        (tmp_path / run_id).mkdir()
        rows = "".join(f"{step},{coarse}\n" for step, coarse in evals)
        (tmp_path / run_id / "metrics.csv").write_text("step,train/coarse\n" + rows)
        selected.append(dict(task="reversal", model=model, run_id=run_id, batches=evals[-1][0]))
    table = batches_to_accuracy(pd.DataFrame(selected), tmp_path).set_index("model")
    assert table.loc["stack", "reached_0.5"] == 1000 and table.loc["stack", "reached_0.99"] == 1500
    assert math.isnan(table.loc["lstm1", "reached_0.5"]) and table.loc["lstm2", "reached_0.99"] == 45000
    text = "\n".join(convergence_markdown(table.reset_index()))
    assert "| Sequence reversal | not by 6,000 | 30,000 / 45,000 | 1,000 / 1,500 |" in text
    assert "Sequence reversal: a memory model at 1,500 batches, the fastest LSTM at 45,000 (30×)." in text
    no_lstm = table.drop(index="lstm2").reset_index()
    assert ("a memory model at 1,500 batches; no LSTM reached it in the batches it trained: 1-layer LSTM not by 6,000 "
            "(at least 4× later, if ever)." in "\n".join(convergence_markdown(no_lstm)))
    # each LSTM bounded by its own batches, rounded down; one that trained less than the memory needed bounds nothing
    capped = pd.concat([no_lstm, pd.DataFrame([dict(task="reversal", model="lstm8", batches=1000)])])
    text = "\n".join(convergence_markdown(capped))
    assert "1-layer LSTM not by 6,000 (at least 4× later, if ever); 8-layer LSTM not by 1,000." in text


def test_a_cell_whose_halving_survivors_still_train_says_it_is_not_its_result():
    """Successive halving stops a bracket's losers at a rung's budget; while its survivors train, the cell is chosen
    among the losers. The evidence must not call the rung the run's cap, and must say the cell is not done."""
    from pipeline.reports.table3 import evidence, notes

    loser = run(0, 100.7, 0.0, lr=5e-3, model="lstm2", task="copy", state="pruned", stop="budget", batches=5000,
                improving=True, train=0.0)
    survivor = run(0, 58.5, 0.0, lr=1e-3, model="lstm2", task="copy", state="pending", batches=10100, train=0.0)
    cell = runs(loser, survivor)
    text = evidence(cell.iloc[0], cell)
    assert text.startswith("stopped at its halving rung of 5,000 batches, training perplexity 100.7")
    assert "1 of 2 runs not done yet" in text
    failed = runs(loser, survivor | {"state": "failed"})  # not one the cell waits for
    assert "not done yet" not in evidence(failed.iloc[0], failed)
    done = runs(loser, survivor | {"state": "finished", "stop_reason": "budget", "batches": 200000})
    assert "not done yet" not in evidence(done.iloc[1], done)
    assert evidence(done.iloc[1], done).startswith("hit its cap of 200,000 batches")
    # a survivor that stands at its rung (waiting, or chosen while its bracket decides) has its cap still ahead: the
    # evidence and the note say rung, not cap (issue 78: "hit its cap of 30,000" of a run whose cap was 150,000)
    waiting = runs(loser, survivor | {"state": "finished", "stop_reason": "budget", "batches": 30000, "cap": 150000})
    assert evidence(waiting.iloc[1], waiting).startswith(
        "stands at 30,000 batches, short of its cap of 150,000 (successive halving: at or past its rung, waiting for "
        "the rung to be decided), training perplexity 58.5")
    assert notes(waiting.iloc[1], waiting)[0] == ("rung", "at 30,000")
    at_cap = runs(loser, survivor | {"state": "finished", "stop_reason": "budget", "batches": 150000, "cap": 150000})
    assert evidence(at_cap.iloc[1], at_cap).startswith("hit its cap of 150,000 batches")
    assert notes(at_cap.iloc[1], at_cap)[0][0] == "cap-flat"


def test_a_run_the_learning_rate_search_discarded_is_never_a_cells_result():
    """The gpu-lstm interim report selected rung-pruned runs (the halving's losers) as Table 3 cells while the
    survivors were still training: a discarded rate is never selected; the cell waits for its survivor."""
    loser = run(0, 90.0, 0.0, state="pruned", stop="budget", model="lstm2", train=0.0) | {"halved": True}
    survivor = run(0, 95.0, 0.0, lr=5e-3, state="running", model="lstm2") | {"halved": False}
    assert select_models(runs(loser, survivor)).empty
    done = survivor | {"state": "finished", "stop_reason": "budget"}
    (chosen,) = select_models(runs(loser, done)).itertuples()
    assert chosen.lr == 5e-3  # the survivor, though the loser's perplexity at its rung was lower


def test_a_run_training_on_past_results_it_reported_stands_at_them_and_is_budget_limited():
    """The cpu profile's SVO->SOV Stack: seed 1 plateaued at 62,500 (perplexity 14.9, disagrees), while seed 0, which
    won its bracket's 30,000 rung at 8.7, trains on (154,300 of 300,000). Until it is done, seed 0 stands at its rung's
    results: selected (lower perplexity), budget-limited, the notes say it trains on. Must not: the same run without
    reported results (training_on false), a discarded one, or one whose results lose to a done run."""
    from pipeline.reports.table3 import evidence, notes

    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["reversal"], "models": ["stack"]}]})
    flat = run(1, 14.9, 0.0, stop="plateau", train=0.0, batches=62500) | {"start_perplexity": 40.0}
    on = run(0, 8.7, 0.0, state="interrupted", train=0.0, batches=30000) | {
        "stop_reason": "budget", "training_on": True, "batches_now": 154300, "perplexity_now": 4.25, "cap": 300000,
        "start_perplexity": 40.0}

    def cell(*rows):
        (got,) = table3(runs(*rows), sweep).query("task == 'reversal' and model == 'stack'").itertuples()
        return got

    got = cell(flat, on)
    assert (got.seed, got.batches, got.verdict) == (0, 30000, "budget-limited")
    assert got.notes.startswith("training on from 30,000, at 154,300 now")
    chosen = select_models(runs(flat, on)).iloc[0]
    assert evidence(chosen, runs(flat, on)).startswith(
        "stands at the results it reported at 30,000 batches while it trains on toward its cap of 300,000 (at 154,300 "
        "now, training perplexity 4.25 over its last 10 windows): its numbers are those at 30,000, not where it ends, "
        "training perplexity 8.7")
    # where it stands now is said only where it has trained past its results, and only where its log says it
    not_past, unlogged = chosen.copy(), chosen.copy()
    not_past["batches_now"], unlogged["perplexity_now"] = 30000, math.nan
    assert "now" not in evidence(not_past, runs(flat, on)).split(": its numbers")[0]
    assert "(at 154,300 now):" in evidence(unlogged, runs(flat, on))
    assert notes(chosen, runs(flat, on))[0] == ("training-on", "from 30,000, at 154,300 now")
    assert cell(flat, on | {"training_on": False}).verdict == "disagrees at convergence"  # no results to stand at
    discarded = cell(flat, on | {"halved": True})  # the search discarded it: never the cell's run, but below it
    assert discarded.seed == 1 and discarded.note_kinds.split()[0] == "plateau"
    assert "cut-lower" in discarded.note_kinds.split() and discarded.verdict == "budget-limited"
    assert cell(flat | {"train_perplexity": 5.0}, on).seed == 1  # a done run that beats it is selected
    # a stop lifted by a revised rule: where it had stopped is not where it converges
    lifted = cell(flat, on | {"stop_reason": "plateau"})
    assert lifted.verdict == "budget-limited" and "where it had stopped (plateau)" in lifted.evidence
    stuck = cell(on | {"stop_reason": "pruned", "train_perplexity": 39.0, "left_start_at": None})
    assert stuck.verdict == "budget-limited"  # not "stopped on its starting plateau": it has not stopped
    # a rung's winner still on its starting plateau there is not said to have stopped: it trains on from there
    waiting = cell(on | {"train_perplexity": 39.0, "left_start_at": None})
    assert waiting.verdict == "budget-limited"
    assert "it had not left the starting plateau by those results, and trains on" in waiting.evidence
    assert "stopped before it had begun" not in waiting.evidence
    assert "stopped before it had begun" in cell(on | {"train_perplexity": 39.0, "left_start_at": None,
                                                        "training_on": False, "state": "finished"}).evidence
    # numbers that already match the paper's stand as reproduced, training on or not
    assert cell(flat, on | {"train_coarse": 1.0, "train_fine": 1.0, "test_coarse": 1.0, "test_fine": 1.0,
                            "train_perplexity": 1.0}).verdict == "reproduced"
    # the seeds column counts the run training on with the done seeds of its setting
    twin = on | {"seed": 2, "run_id": "reversal-stack-0.001-s2", "test_coarse": 0.2, "train_perplexity": 9.0}
    both = cell(flat, on, twin)
    assert both.seeds_at_selected == 3 and both.test_coarse_mean == pytest.approx(0.2 / 3)


def test_the_start_column_names_a_baseline_option_for_any_model():
    from pipeline.config import ModelConfig
    from pipeline.reports.table3 import start_of

    assert start_of(ModelConfig(name="lstm1")) == ""
    assert start_of(ModelConfig(name="lstm2", source_order="reversed")) == "source reversed"
    assert start_of(ModelConfig(name="lstm1", forget_bias=1.0)) == "forget bias 1"
    assert start_of(ModelConfig(name="stack", source_order="reversed")).endswith("; source reversed")


def test_a_retrained_run_shows_the_draws_it_replaced_and_each_run_its_machine(tmp_path):
    """A run trained again from batch 0 on another machine kind is another draw of one seed: the report lists every
    earlier draw beside the one it reports, and Table 3's selected runs name their machine."""
    import json

    from pipeline.reports.build import machine_lines
    from pipeline.reports.table3 import table3_markdown

    amd = "AMD EPYC, 2 usable cores"
    retrained = dict(run(2, 5.1, 0.0, model="deque", task="gender", stop="budget", batches=16000, train=0.0),
                     machine="Intel Xeon, AVX512", earlier_draws=1)
    learned = dict(run(0, 1.0, 1.0, model="deque", task="gender", stop="plateau", batches=9000),
                   machine="AMD EPYC, AVX2", earlier_draws=0)
    frame = runs(retrained, learned)
    run_dir = tmp_path / retrained["run_id"]
    run_dir.mkdir()
    (run_dir / "earlier_draws.json").write_text(json.dumps([dict(
        batches=10500, stopped_early=True, stop_reason="plateau", train_coarse=0.991, test_coarse=0.989,
        machine=amd, torch="torch 2.13.0+cpu, AVX2")]))
    lines = machine_lines(frame, tmp_path)
    assert lines[0].startswith("Machines the done runs trained on: Intel Xeon, AVX512 (1), AMD EPYC, AVX2 (1) (")
    table_rows = [line for line in lines if line.startswith(f"| `{retrained['run_id']}`")]
    assert table_rows == [f"| `{retrained['run_id']}` | 1 | AMD EPYC, AVX2 | 10,500 | plateau | 0.99 | 0.99 |",
                          f"| `{retrained['run_id']}` | 2, reported | Intel Xeon, AVX512 | 16,000 | budget | 0.00 | "
                          "0.00 |"]
    assert not any("trained again" in line for line in machine_lines(runs(learned), tmp_path))
    assert machine_lines(runs(dict(retrained, state="running")), tmp_path) == []  # nothing done: nothing to say

    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["gender"], "models": ["deque"],
                                                           "seeds": [0, 2]}]})
    text = table3_markdown(table3(frame, sweep), "header", "1000", {})
    (selected,) = [line for line in text.splitlines() if line.startswith("| gender | DeQue-LSTM | h256")]
    assert selected.endswith("| AMD EPYC, AVX2 |") and "seed 0" in selected


def test_evidence_says_what_the_papers_itg_numbers_would_require_with_the_tables_numbers():
    """Issue 78: the study log's argument (an ITG target at test lengths is a near-copy of 65-128 words, which the
    paper's own LSTMs fail on copy) is in the report, its numbers read off the table: here the committed cpu one."""
    import pandas as pd

    from pipeline.paths import REPORTS_DIR
    from pipeline.reports.table3 import itg_requirement_lines

    table = pd.read_csv(REPORTS_DIR / "cpu" / "table3.csv")
    text = " ".join(itg_requirement_lines(table, {}))
    assert text.startswith("## What the paper's ITG numbers would require")
    assert max(map(len, itg_requirement_lines(table, {}))) <= 120
    lstm = table[table.model.isin(["lstm1", "lstm2", "lstm4", "lstm8"])]
    paper_itg = lstm[lstm.task.isin(["svo_sov", "gender"])].paper_test_coarse
    assert f"score {paper_itg.min():.2f}–{paper_itg.max():.2f} test coarse on these tasks" in text
    assert "yet 0.00–0.01 on copying" in text  # the paper's copy LSTMs at test lengths (Table 3)
    assert itg_requirement_lines(table[table.task != "copy"], {}) == []  # no copy row: nothing to argue from
    untrained = table.assign(test_coarse=float("nan"))  # a profile with no ITG LSTM run done (gpu-lstm's today)
    assert itg_requirement_lines(untrained, {}) == []


# -- the read ablation (issue 78): never a cell's attempt; its curve against the run it ablates ------------------

def test_a_read_ablation_is_never_selected_nor_counted_among_its_cells_runs():
    from pipeline.config import RunConfig
    from pipeline.reports.table3 import ablated_run, attempts

    heard = run(0, 1.5, 0.2)
    zeroed = dict(run(0, 1.2, 0.3), run_id="reversal-stack-ablation", ablation_of=heard["run_id"])
    table = runs(heard, zeroed)
    assert list(attempts(table).run_id) == [heard["run_id"]]
    (chosen,) = select_models(table).itertuples()
    assert chosen.run_id == heard["run_id"]  # the lower perplexity is the ablation's: not the cell's model
    sweep = from_dict(SweepConfig, {"name": "t", "grid": [{"tasks": ["reversal"], "models": ["stack"]}]})
    (cell,) = table3(table, sweep).query("in_profile").itertuples()
    assert cell.runs == 1 and cell.run_id == heard["run_id"]
    # the run an ablation ablates is the same config with the memory heard: one run id, whatever the budgets
    config = from_dict(RunConfig, {"task": "reversal", "model": {"name": "stack", "probes": {"read_zeroed": True}},
                                   "training": {"max_batches": 3000}})
    twin = from_dict(RunConfig, {"task": "reversal", "model": {"name": "stack"}, "training": {"max_batches": 9000}})
    assert ablated_run(config) == twin.run_id() != config.run_id() and ablated_run(twin) == ""


def curve(levels, every=100, start=100):
    return [(start + every * k, p) for k, p in enumerate(levels)]


def test_an_ablation_matches_its_run_within_their_noise_and_not_beyond():
    from pipeline.reports.table3 import ablation_standing

    noisy = [11.0, 11.4, 10.8, 11.2, 11.1, 10.9, 11.3, 11.0, 10.7, 11.2, 11.1]
    # the same level, other noise: a memory whose reads changed nothing measurable
    match, heard, zeroed, noise = ablation_standing(curve(noisy), curve([p + 0.15 for p in reversed(noisy)]), 1100)
    assert match and abs(heard - zeroed) <= noise
    # the ablation sits well above: the reads carried something
    match, heard, zeroed, _ = ablation_standing(curve(noisy), curve([p + 2.0 for p in noisy]), 1100)
    assert not match and zeroed > heard
    # compared at the ablation's end only: the run's windows after it do not count
    later = curve(noisy + [3.0] * 10)
    assert ablation_standing(later, curve(noisy), 1100)[0]
    assert ablation_standing(curve(noisy), curve([12.0]), 1100) is None  # one window: no noise to judge by


def test_the_ablation_table_judges_a_done_ablation_and_shows_one_still_training_so_far(tmp_path):
    """The report's read-ablation table: a done ablation is judged (used / unused); one still training shows both
    levels at its last batch so far and is not judged (the SVO->SOV Stack's ablation stood 3.85 against its run's 6.00
    at 65,400 of its 150,000 batches, and the table said only "not compared yet"); one whose run is not in the profile
    says so."""
    from pipeline.reports.build import ablation_lines

    def log(folder, levels):
        folder.mkdir()
        rows = "".join(f"{100 * (k + 1)},{p}\n" for k, p in enumerate(levels))
        (folder / "metrics.csv").write_text("step,train/perplexity\n" + rows)

    log(tmp_path / "heard", [9.0 + 0.01 * (k % 2) for k in range(20)])
    log(tmp_path / "zeroed", [6.0 + 0.01 * (k % 2) for k in range(20)])
    base = dict(task="svo_sov", model="stack", batches=2000, cap=150000, stop_reason=None)
    runs = pd.DataFrame([dict(base, run_id="heard", ablation_of="", state="interrupted"),
                         dict(base, run_id="zeroed", ablation_of="heard", state="interrupted")])
    (row,) = [line for line in ablation_lines(runs, tmp_path) if "`heard`" in line]
    assert "| 2,000 so far | 9.00 / 6.00 |" in row and "not judged until both are at its end (interrupted)" in row
    assert "used" not in row
    runs.loc[1, "state"] = "finished"
    (row,) = [line for line in ablation_lines(runs, tmp_path) if "`heard`" in line]
    assert "| 2,000 | 9.00 / 6.00 |" in row
    assert "heard, to its cost: without its reads the same model stands 0.67×" in row
    log(tmp_path / "helped", [12.0 + 0.01 * (k % 2) for k in range(20)])
    helped = runs.assign(run_id=["heard", "helped"])
    (row,) = [line for line in ablation_lines(helped, tmp_path) if "`heard`" in line]
    assert "used: without its reads the run stands 1.33× as high" in row
    log(tmp_path / "same", [9.0 + 0.01 * (k % 2) for k in range(20)])
    (row,) = [line for line in ablation_lines(runs.assign(run_id=["heard", "same"]), tmp_path) if "`heard`" in line]
    assert "unused: the curves match" in row
    alone = runs[runs.run_id == "zeroed"]
    (row,) = [line for line in ablation_lines(alone, tmp_path) if "`heard`" in line]
    assert "the run it ablates is not in the profile" in row
    # done, but the run it ablates has not got that far (the gender Stack's, done at 150,000 while its run stood at
    # 30,000): compared at the run's end so far, not judged; a run still training is read where its log stands now
    log(tmp_path / "long", [6.0 + 0.01 * (k % 2) for k in range(40)])
    longer = runs.assign(run_id=["heard", "long"], batches=[2000, 4000], state=["interrupted", "finished"])
    (row,) = [line for line in ablation_lines(longer, tmp_path) if "`heard`" in line]
    assert "| 2,000 so far | 9.00 / 6.00 |" in row
    assert "not judged until both are at its end (the run it ablates is at 2,000 of the ablation's 4,000)" in row
    # ... the same at a halving rung the run reached, which may keep it (done at the rung's budget, below its cap)
    rung = longer.assign(state=["finished", "finished"], stop_reason=["budget", "budget"])
    (row,) = [line for line in ablation_lines(rung, tmp_path) if "`heard`" in line]
    assert "not judged until both are at its end (the run it ablates is at 2,000" in row
    # the run stopped for good first (the gender Stack's, flat at 123,000 under its 150,000-batch ablation): both
    # are judged at the run's end, where the ablation's log holds the same batch
    for stopped in (dict(stop_reason=["plateau", "budget"]), dict(cap=[2000, 4000], stop_reason=["budget", "budget"])):
        (row,) = [line for line in ablation_lines(rung.assign(**stopped), tmp_path) if "`heard`" in line]
        assert "| 2,000 | 9.00 / 6.00 |" in row and "heard, to its cost" in row and "not judged" not in row
    training = longer.assign(batches=[2000, 1000], batches_now=[2000, 1500], state=["interrupted", "interrupted"])
    (row,) = [line for line in ablation_lines(training, tmp_path) if "`heard`" in line]
    assert "| 1,500 so far |" in row
    # pruned (by the code before ablations were exempt): not at the batch it is to be compared at, so not judged
    runs.loc[1, "state"] = "pruned"
    (row,) = [line for line in ablation_lines(runs, tmp_path) if "`heard`" in line]
    assert "| 2,000 so far |" in row and "not judged until both are at its end (pruned before ablations were" in row
    assert "heard, to its cost" not in row


def test_each_memory_cell_that_disagrees_is_argued_in_evidence_from_its_trace_and_ablation(tmp_path):
    """Issue 78 item 5: evidence.md argues each memory cell that disagrees at convergence in sentences read off the
    report's tables: the values short of the paper's, the run's push and pop, and its read ablation's judgement (or
    that it has none); cells that do not disagree, and the LSTM rows, are not argued."""
    import json

    from pipeline.reports.build import disagreement_lines

    def folder(name, levels, memory=None):
        (tmp_path / name).mkdir()
        header = "step,train/perplexity" + ("".join(f",memory/{k}" for k in memory) if memory else "")
        rows = "".join(f"{100 * (k + 1)},{p}" + ("".join(f",{v}" for v in memory.values()) if memory else "") + "\n"
                       for k, p in enumerate(levels))
        (tmp_path / name / "metrics.csv").write_text(header + "\n" + rows)
        (tmp_path / name / "results.json").write_text(json.dumps(
            dict(batches=100 * len(levels), train_perplexity=levels[-1], train_coarse=0.95, test_coarse=0.06,
                 selected_step=100 * len(levels))))

    signals = {"push_source": 0.10, "push_target": 0.05, "pop_source": 0.03, "pop_target": 0.0}
    folder("copy-stack", [1.04 + 0.001 * (k % 2) for k in range(20)], signals)
    folder("copy-zeroed", [1.30 + 0.001 * (k % 2) for k in range(20)])
    values = dict(train_coarse=0.95, train_fine=0.97, test_coarse=0.06, test_fine=0.07)
    paper = dict(paper_train_coarse=0.89, paper_train_fine=0.94, paper_test_coarse=0.00, paper_test_fine=0.22)
    diffs = {f"diff_{m}": v - paper[f"paper_{m}"] for m, v in values.items()}  # as table3 puts them
    cell = dict(task="copy", model="stack", run_id="copy-stack", train_perplexity=1.04, hidden=256, lr=5e-4, seed=1,
                verdict="disagrees at convergence", note_kinds="plateau", **values, **paper, **diffs)
    table = pd.DataFrame([cell, dict(cell, model="queue", run_id="copy-queue", verdict="reproduced"),
                          dict(cell, model="lstm1", run_id="copy-lstm", verdict="disagrees at convergence")])
    base = dict(task="copy", model="stack", batches=2000, state="finished")
    runs = pd.DataFrame([dict(base, run_id="copy-stack", ablation_of=""),
                         dict(base, run_id="copy-zeroed", ablation_of="copy-stack")])
    lines = disagreement_lines(table, runs, tmp_path, {"copy": None})
    (argued,) = [line for line in lines if line.startswith("- ")]
    assert argued.startswith("- **Sequence copying, Stack-LSTM** (`copy-stack`): Short of the paper on test fine "
                             "0.07 against 0.22.")
    assert "pushed 0.10 / 0.05 and popped 0.03 / 0.00" in argued
    assert "Its read ablation at batch 2,000 (perplexity heard / zeroed 1.04 / 1.30): used: without its reads" \
        in argued
    assert "So far" not in argued  # no run of its cell still to train (no note "unfinished")
    # 0.95 against 1.00 agrees, as the verdict judges it (within_tolerance): not listed as short
    edge = table.assign(paper_train_coarse=1.00)
    (line,) = [x for x in disagreement_lines(edge, runs, tmp_path, {"copy": None}) if x.startswith("- ")]
    assert "Short of the paper on test fine 0.07 against 0.22." in line and "training coarse" not in line
    unfinished = table.assign(note_kinds=["plateau unfinished", "converged", "plateau"])
    assert "So far: runs of its cell still train, and one may turn the verdict." in \
        [line for line in disagreement_lines(unfinished, runs, tmp_path, {"copy": None}) if line.startswith("- ")][0]
    pending = disagreement_lines(table, runs.assign(batches=0, state="pending"), tmp_path, {"copy": None})
    assert "Its read ablation: not compared yet (pending)." in [line for line in pending if line.startswith("- ")][0]
    alone = disagreement_lines(table, runs[runs.run_id == "copy-stack"], tmp_path, {"copy": None})
    assert "No read ablation of it yet." in [line for line in alone if line.startswith("- ")][0]
    assert disagreement_lines(table.assign(verdict="reproduced"), runs, tmp_path, {"copy": None}) == []
    continued = table.assign(continued_in=["copy-on", None, None], continued_batches=[56000, None, None])
    assert "Judged where its continuation outside the profile ended (`copy-on`, 56,000 batches; evidence above)." in \
        [line for line in disagreement_lines(continued, runs, tmp_path, {"copy": None}) if line.startswith("- ")][0]
