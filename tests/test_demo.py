"""`make demo`'s library function, shortened: a tiny Stack-LSTM, a few batches, the whole report (seconds)."""

from pipeline.demo import demo_config, exact_to, run_demo


def test_exact_to_counts_lengths_then_bands_up_to_the_first_miss():
    lengths = [(8, 3, 1.0), (9, 2, 1.0), (10, 4, 0.5), (11, 1, 1.0)]
    assert exact_to(lengths, []) == 9
    bands = [dict(low=129, high=192, coarse=1.0), dict(low=193, high=256, coarse=0.9)]
    assert exact_to([(64, 1, 1.0), (128, 1, 1.0)], bands) == 192
    assert exact_to([(8, 1, 0.0)], bands) == 0


def test_a_shortened_demo_writes_its_report_and_prints_its_lines(tmp_path, cache_dir):
    config = demo_config(hidden=8, memory_width=4, embedding=4, max_batches=20, eval_every=10, eval_size=10,
                         final_eval_size=10)
    demo = run_demo(tmp_path / "demo", config, per_band=2, cache_dir=cache_dir, progress=False, trace_split="train")
    assert demo.results["batches"] == 20 and demo.exact_to >= 0
    for name in ("README.md", "convergence.png", "trace.png", "lengths.png"):
        assert (tmp_path / "demo" / name).stat().st_size > 0
    assert (demo.run_dir / "far_lengths.csv").is_file()
    lines = demo.lines()
    assert lines[0].startswith("Stack-LSTM on reversal, hidden 8, lr 0.001, seed 0: 20 batches")
    assert any(line.startswith("test lengths (65-128):") for line in lines)
    report = (tmp_path / "demo" / "README.md").read_text()
    assert "![memory trace](trace.png)" in report and "exact to source length" in report
