"""Training batches: length-regrouped, resumable at any index, and made of the stream's own sequences."""

from collections import Counter

from pipeline.data.encoding import JointVocabulary
from pipeline.data.stream import TrainingBatches, TrainingStream, padding_fraction
from pipeline.files import read_complete_rows
from pipeline.tasks import get_task
from pipeline.training.metrics_log import ResumableCSVLogger


def batches(pool, start=0, seed=3):
    task = get_task("reversal")
    return TrainingBatches(task, JointVocabulary.for_task(task), seed=seed, batch_size=10, pool=pool, start=start)


def test_regrouping_uses_exactly_the_stream_sequences_of_each_pool():
    grouped = batches(pool=5)
    stream = TrainingStream(get_task("reversal"), seed=3, batch_size=10)
    for p in range(3):
        ours = Counter(pair for i in range(5 * p, 5 * p + 5) for pair in grouped.pairs(i))
        theirs = Counter(pair for i in range(5 * p, 5 * p + 5) for pair in stream.batch(i))
        assert ours == theirs


def test_pool_of_one_is_the_plain_stream():
    stream = TrainingStream(get_task("reversal"), seed=3, batch_size=10)
    plain = batches(pool=1)
    assert all(plain.pairs(i) == stream.batch(i) for i in range(4))


def test_batches_are_random_access_and_resume_where_asked():
    a = batches(pool=4)
    b = batches(pool=4, start=6)
    first_of_b = next(iter(b))
    expected = a.batch(6)
    assert first_of_b.inputs.equal(expected.inputs) and first_of_b.targets.equal(expected.targets)
    assert batches(pool=4).pairs(9) == a.pairs(9)  # a fresh object agrees (no hidden state)
    assert batches(pool=4, seed=4).pairs(9) != a.pairs(9)


def test_regrouping_cuts_padding():
    plain = [batches(pool=1).batch(i) for i in range(40)]
    grouped = [batches(pool=10).batch(i) for i in range(40)]
    assert padding_fraction(grouped) < 0.5 * padding_fraction(plain)


def test_csv_logger_keeps_rows_up_to_the_checkpoint_and_drops_a_torn_line(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,a\n100,1.0\n200,2.0\n300,3.0\n40")  # torn by a crash
    logger = ResumableCSVLogger(tmp_path, keep_through_step=200)
    logger.log_metrics({"a": 2.5}, step=300)
    logger.log_metrics({"b": 7.0}, step=400)  # a new column: the file is rewritten with the wider header
    logger.save()
    header, rows = read_complete_rows(tmp_path / "metrics.csv")
    assert set(header) == {"step", "a", "b"}
    assert [(r["step"], r["a"], r["b"]) for r in rows] == [("100", "1.0", ""), ("200", "2.0", ""),
                                                           ("300", "2.5", ""), ("400", "", "7.0")]


def test_csv_logger_starts_afresh_when_not_resuming(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,a\n100,1.0\n")
    logger = ResumableCSVLogger(tmp_path)
    logger.log_metrics({"a": 9.0}, step=1)
    logger.save()
    assert read_complete_rows(tmp_path / "metrics.csv")[1] == [{"step": "1", "a": "9.0"}]
