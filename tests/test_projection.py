"""The projection of a profile's sweep (pipeline/projection.py): its fit, its plan of populations, and the model
against the gpu-lstm profile's two recorded GPU stints."""

import dataclasses
import json
import math

import pytest

from pipeline.projection import Phase, StepTime, evaluation_rows, phase_seconds, plan, project, step_times
from pipeline.sweep import load_sweep


def records(model, launch, per_member, sizes=(1, 16, 64, 256), **extra):
    return [dict(model=model, population=p, member_batches_per_s=p / (launch + per_member * p), **extra)
            for p in sizes]


def test_the_fit_recovers_a_step_that_is_a_fixed_cost_plus_a_share_per_member():
    step = StepTime.fit((r["population"], r["member_batches_per_s"]) for r in records("m", 0.030, 0.00125))
    assert step.launch == pytest.approx(0.030) and step.per_member == pytest.approx(0.00125)
    assert StepTime.fit([(8, 100.0)]) == StepTime(0.0, 0.01)  # one size: all of it per member
    # a step that does not grow with P (pure launch), and one that grows faster than linearly: neither part < 0
    flat = StepTime.fit([(1, 10.0), (16, 160.0), (64, 640.0)])
    assert flat.per_member == 0 and flat.launch == pytest.approx(0.1)
    steep = StepTime.fit([(1, 100.0), (64, 6400 / 80), (256, 256 / 1.5)])
    assert steep.launch >= 0 and steep.per_member > 0
    with pytest.raises(ValueError, match="no measurement"):
        StepTime.fit([])


def test_the_fit_is_close_on_the_committed_h100_records():
    """On the H100's bench every model's step, P = 1 to 256, is within 6% of launch + per_member x P."""
    measured = json.load(open("reports/bench-population-cuda.json"))
    for (model, _), step in step_times(measured).items():
        for r in (r for r in measured if r["model"] == model):
            seconds = r["population"] / r["member_batches_per_s"]
            assert step(r["population"]) == pytest.approx(seconds, rel=0.06), (model, r["population"])


def test_the_plan_is_the_sweeps_populations_through_every_rung():
    """gpu-lstm: per row, the five tasks' brackets share one population (their vocabularies padded to the largest):
    25 runs to the first rung, 10 to the second, 5 to the cap; every bracket trains 5 x 5,000 + 2 x 15,000 + 1 x
    180,000 batches."""
    phases = [p for p in plan(load_sweep("configs/gpu-lstm.yaml")) if p.model == "lstm2"]
    assert [(p.width, p.steps) for p in phases] == [(25, 5000), (10, 15000), (5, 180000)]
    assert sum(p.member_batches for p in phases) == 5 * (5 * 5000 + 2 * 15000 + 180000)
    assert sum(p.finals for p in phases) == 25  # each run's final evaluation counted once, where it stops
    # the paper's memory runs: one job per model and size (tasks, rates, seeds and starts share it), 64 at a time, a
    # stopped member's place taken by the next: stepped until its longest member's cap or its work / 64
    paper = [p for p in plan(load_sweep("configs/paper.yaml"), cpu_runs=None) if p.hidden == 256]
    stack = [p for p in paper if p.model == "stack"]
    assert [(p.runs, p.width, p.steps) for p in stack] == [(75, 64, 75 * 50000 / 64)]
    deque = [p for p in paper if p.model == "deque"]  # its two starts, one job
    assert [(p.runs, p.width) for p in deque] == [(150, 64)]
    halved = load_sweep("configs/gpu-lstm.yaml")
    halved = dataclasses.replace(halved, population=4)  # fewer slots than runs: the rung's work spread over 4
    first = plan(halved)[0]
    assert (first.width, first.steps) == (4, 5000 * math.ceil(25 / 4))


def stint_phase(model, members, start, end, finals, run):
    during, final = evaluation_rows(run)
    return Phase(job=model, model=model, hidden=256, runs=members, width=members,
                 member_batches=members * (end - start),
                 steps=end - start, eval_every=run.training.eval_every, eval_rows=during, final_rows=final,
                 finals=finals)


def test_the_projection_against_the_gpu_lstm_profiles_recorded_stints():
    """reports/gpu/lstm/study-log.md: the first stint (an H100) trained the 2-layer row 582 s: the synthetic tasks'
    population of 15 to the rung at 5,000 (9 stopped there) and its 6 on to 10,100; SVO->SOV's 5 to 5,000 and 2 on
    to 10,200; gender's 5 to 1,900 (150,500 member-batches). The second (an H200), 525 s, three populations side by
    side: the 2-layer gender bracket from 0 to its rung (3 stopped) and 2 on to 9,750 (34,500), the 4-layer SVO->SOV
    and gender brackets to 4,300 and 4,400 (43,500). The model (one population at a time; data generation and process
    starts not counted) is within 15% of both."""
    run = load_sweep("configs/gpu-lstm.yaml").runs()[0]
    h100 = step_times(json.load(open("reports/bench-population-cuda.json")))
    h200 = step_times(json.load(open("reports/gpu/bench-population-h200.json")))
    first = [stint_phase("lstm2", 15, 0, 5000, 9, run), stint_phase("lstm2", 6, 5000, 10100, 0, run),
             stint_phase("lstm2", 5, 0, 5000, 3, run), stint_phase("lstm2", 2, 5000, 10200, 0, run),
             stint_phase("lstm2", 5, 0, 1900, 0, run)]
    second = [stint_phase("lstm2", 5, 0, 5000, 3, run), stint_phase("lstm2", 2, 5000, 9750, 0, run),
              stint_phase("lstm4", 5, 0, 4300, 0, run), stint_phase("lstm4", 5, 0, 4400, 0, run)]
    assert sum(p.member_batches for p in first) == 150500 and sum(p.member_batches for p in second) == 78000
    for phases, times, recorded in ((first, h100, 582), (second, h200, 525)):
        seconds = sum(sum(phase_seconds(p, times[p.model, 256])) for p in phases)
        assert 0.85 <= seconds / recorded <= 1.15, (recorded, seconds)


def test_more_devices_take_the_longest_job_at_least_and_the_sum_at_most():
    measured = [r for m in ("lstm2", "lstm4", "lstm8") for r in records(m, 0.016 * int(m[-1]), 0.001 * int(m[-1]))]
    sweep = load_sweep("configs/gpu-lstm.yaml")
    one, eight = project(sweep, measured, 1), project(sweep, measured, 8)
    assert one.hours == one.hours_one_device == eight.hours_one_device
    assert one.hours / 8 <= eight.hours < one.hours
    # a model the records lack is named, not priced; a size they lack is scaled from the nearest and marked
    partial = project(sweep, [r for r in measured if r["model"] != "lstm8"], 1)
    assert partial.unmeasured == ["lstm8"] and {r.model for r in partial.rows} == {"lstm2", "lstm4"}
    wide = project(load_sweep("configs/paper.yaml"), measured, 1)
    rows = {(r.model, r.hidden): r for r in wide.rows}
    assert not rows["lstm2", 256].estimated and rows["lstm2", 512].estimated
    assert rows["lstm2", 512].train_s > rows["lstm2", 256].train_s
    # the floor prices an estimated size at the measured size's step: below the estimate, equal where none is
    # estimated, and at least the measured sizes' share alone
    assert one.floor_hours_one_device == one.hours_one_device and eight.floor_hours == eight.hours
    measured_only = sum(r.train_s + r.eval_s for r in wide.rows if not r.estimated) / 3600
    assert measured_only < wide.floor_hours_one_device < wide.hours_one_device
    assert wide.floor_hours_one_device == pytest.approx(2 * measured_only)  # every size at 256's step: twice it


def test_transduce_project_prints_the_table_and_refuses_records_that_are_not_a_bench(tmp_path):
    from typer.testing import CliRunner

    from pipeline.cli import app

    out = CliRunner().invoke(app, ["project", "configs/gpu-lstm.yaml", "--devices", "2"])
    assert out.exit_code == 0, out.output
    assert "| 2-layer LSTM | 256 | 25 | 25→10→5 | 1,175,000 |" in out.output
    assert "hours** on 2." in out.output
    # a CPU's records price each run at its own step (the bench's "one after another"), as a CPU sweep trains it
    cpu = [dict(model="lstm2", population=1, device="cpu", mode="batched", member_batches_per_s=1.0),
           dict(model="lstm2", population=1, device="cpu", mode="one after another", member_batches_per_s=4.0),
           dict(model="lstm2", population=8, device="cpu", mode="one after another", member_batches_per_s=4.0)]
    hours = {}
    for name, records in (("cpu", cpu), ("batched", cpu[:1])):
        (tmp_path / f"{name}.json").write_text(json.dumps(records))
        out = CliRunner().invoke(app, ["project", "configs/gpu-lstm.yaml", "--records", str(tmp_path / f"{name}.json")])
        assert out.exit_code == 0, out.output
        row = next(line for line in out.output.splitlines() if line.startswith("| 2-layer LSTM | 256 |"))
        hours[name] = float(row.split(" | ")[5])
        assert ("one after another, each run its own step" in out.output) == (name == "cpu")
    assert hours["cpu"] == pytest.approx(hours["batched"] / 4, rel=0.02)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": "lstm2"}))
    out = CliRunner().invoke(app, ["project", "configs/gpu-lstm.yaml", "--records", str(bad)])
    assert out.exit_code != 0 and f"--records {bad}: not a `transduce bench --population` JSON" in out.output
