"""Where the first error falls in the target: the final evaluation's first_errors.csv, checked against a literal
count over the per-sequence results."""

import torch

from pipeline.evaluation import Scores
from pipeline.rundir import RunDir


def test_first_errors_bin_each_wrong_sequence_by_the_tenth_of_its_target_where_it_first_fails(tmp_path):
    # targets of 10 symbols (</s> included): prefix 0 fails on the first symbol (tenth 0), 5 in tenth 5, 9 on </s>
    # (tenth 9), 10 is right; a target of 20 failing at 3 falls in tenth 1
    scores = Scores(correct_prefix=torch.tensor([0, 5, 9, 10, 10, 3]),
                    target_lengths=torch.tensor([10, 10, 10, 10, 10, 20]),
                    source_lengths=torch.tensor([9, 9, 9, 9, 9, 19]))
    rows = scores.first_errors()
    counts = {row["where"]: row["n"] for row in rows}
    assert counts == {0: 1, 1: 1, 2: 0, 3: 0, 4: 0, 5: 1, 6: 0, 7: 0, 8: 0, 9: 1, "none": 2}
    assert sum(counts.values()) == 6
    literal = {}
    for prefix, length in zip(scores.correct_prefix.tolist(), scores.target_lengths.tolist()):
        key = "none" if prefix == length else prefix * 10 // length
        literal[key] = literal.get(key, 0) + 1
    assert {k: v for k, v in counts.items() if v} == literal
    assert rows[1]["mean_target_length"] == "20.0" and rows[2]["mean_target_length"] == ""
    folder = RunDir(tmp_path)
    folder.write_first_errors([dict(split="test", **row) for row in rows])
    assert folder.read_first_errors("test")[0] == ("0", 1) and folder.read_first_errors("test")[-1] == ("none", 2)
    assert folder.read_first_errors("train") == []


def test_the_report_shows_where_the_itg_cells_first_errors_fall(tmp_path):
    import json

    import pandas as pd

    from pipeline.reports.build import first_error_lines

    runs, out = tmp_path / "runs", tmp_path / "report"
    recorded, old, learned = runs / "svo-run", runs / "gender-run", runs / "gender-deque-run"
    rows = [dict(split="test", where=str(w), n=n, mean_target_length="") for w, n in
            [(0, 50), (1, 10), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 20), (9, 0), ("none", 20)]]
    RunDir(recorded).write_first_errors(rows)
    table = pd.DataFrame([dict(task="svo_sov", model="lstm1", run_id=recorded.name, test_coarse=0.0),
                          dict(task="gender", model="queue", run_id=old.name, test_coarse=1.0),
                          dict(task="gender", model="deque", run_id=learned.name, test_coarse=0.99),
                          dict(task="copy", model="stack", run_id="copy-run", test_coarse=0.0)])  # not ITG: not shown
    text = "\n".join(first_error_lines(table, runs, out))
    assert "| SVO to SOV | 1-layer LSTM | 60% | 0% | 0% | 0% | 20% | 20% | 100 |" in text
    assert "| Gender conjugation | Queue-LSTM | not recorded (the run finished before" in text
    assert "Sequence copying" not in text

    # a run that finished before the file existed is read from its twin (the same run trained again by a study kept
    # under the report), named as such, where the twin learned what the run learned; not where it did not
    def twin(run, test_coarse, where):
        path = out / "far-lengths" / "finished_runs" / run.name
        RunDir(path).write_first_errors([dict(split="test", where=w, n=n, mean_target_length="") for w, n in where])
        (path / "results.json").write_text(json.dumps(dict(batches=8000, train_perplexity=1.0, train_coarse=test_coarse,
                                                          test_coarse=test_coarse, machine="Intel Xeon")))

    twin(learned, 1.0, [("9", 3), ("none", 97)])
    twin(old, 0.0, [("0", 100)])
    text = "\n".join(first_error_lines(table, runs, out))
    assert "| Gender conjugation | DeQue-LSTM, its twin (Intel Xeon) | 0% | 0% | 0% | 0% | 3% | 97% | 100 |" in text
    assert ("| Gender conjugation | Queue-LSTM | not recorded (the run finished before first_errors.csv existed; its "
            "twin (Intel Xeon) reached test coarse 0.00, not the run's 1.00)") in text
    assert "| 100% |" not in text  # the twin that did not learn gives no row of numbers
