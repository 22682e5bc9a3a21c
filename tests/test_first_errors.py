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
    import pandas as pd

    from pipeline.reports.build import first_error_lines

    recorded, old = tmp_path / "svo-run", tmp_path / "gender-run"
    rows = [dict(split="test", where=str(w), n=n, mean_target_length="") for w, n in
            [(0, 50), (1, 10), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 20), (9, 0), ("none", 20)]]
    RunDir(recorded).write_first_errors(rows)
    table = pd.DataFrame([dict(task="svo_sov", model="lstm1", run_id=recorded.name),
                          dict(task="gender", model="queue", run_id=old.name),
                          dict(task="copy", model="stack", run_id="copy-run")])  # not an ITG task: not shown
    text = "\n".join(first_error_lines(table, tmp_path))
    assert "| SVO to SOV | 1-layer LSTM | 60% | 0% | 0% | 0% | 20% | 20% | 100 |" in text
    assert "| Gender conjugation | Queue-LSTM | not recorded" in text and "Sequence copying" not in text
