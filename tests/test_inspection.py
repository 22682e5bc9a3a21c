"""`transduce inspect` and `transduce runs` on short real runs: the traces' numbers are the model's own (signals
from its batch forward pass, strengths and read weights from the literal oracle fed the same signals), figures are
drawn for every kind of model, and runs are listed and filtered."""

import json

import pytest
import torch
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import RunConfig, from_dict
from pipeline.memory.reference import ReferenceDeQue, ReferenceQueue, ReferenceStack
from pipeline.models.jm_stack import jm_stack_update
from pipeline.training.run import load_run, train


@pytest.fixture(autouse=True)
def private_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir):
    """A 20-batch run of every memory model, of the JM stack and of a 1-layer LSTM, on reversal."""
    import os

    os.environ["TRANSDUCE_DATA_CACHE"] = str(cache_dir)
    root = tmp_path_factory.mktemp("inspect-runs")
    dirs = {}
    for name in ("stack", "queue", "deque", "jm_stack", "lstm1"):
        config = from_dict(RunConfig, {"task": "reversal", "model": {"name": name, "hidden": 12, "memory_width": 6,
                                                                     "embedding": 6},
                                       "training": dict(max_batches=20, eval_every=10, eval_size=10,
                                                        test_eval_size=10, final_eval_size=10, perplexity_every=10),
                                       "tracking": {"wandb": "off"}})
        dirs[name] = root / name
        train(config, dirs[name], progress=False)
    return dirs


def oracle_strengths_and_reads(model: str, push, pop):
    """Strengths and read weights from the literal oracle (pipeline.memory.reference) given the trace's signals:
    every pushed value is a one-hot vector of its own, so a read returns its weights over the rows."""
    steps = len(push)
    two = model == "deque"
    width = 2 * steps if two else steps
    oracle = {"stack": ReferenceStack, "queue": ReferenceQueue, "deque": ReferenceDeQue}[model]()
    strengths, reads = [], []
    t64 = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    for t in range(steps):
        if two:
            top, bottom = torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64)
            top[steps + t], bottom[steps - 1 - t] = 1.0, 1.0  # deque order: bottom pushes, then top pushes
            r_top, r_bot = oracle.step(top, bottom, t64(push[t]["top"]), t64(push[t]["bottom"]),
                                       t64(pop[t]["top"]), t64(pop[t]["bottom"]))
            rows = slice(steps - 1 - t, steps + t + 1)
            reads.append({"top": r_top[rows].tolist(), "bottom": r_bot[rows].tolist()})
        else:
            value = torch.zeros(width, dtype=torch.float64)
            value[t] = 1.0
            (d,), (u,) = push[t].values(), pop[t].values()  # one end each: where the trace says it acts
            r = oracle.step(value, t64(d), t64(u))
            reads.append({"bottom" if model == "queue" else "top": r[: t + 1].tolist()})
        strengths.append([float(x) for x in oracle.s[1:]])
    return strengths, reads


@pytest.mark.parametrize("name", ["stack", "queue", "deque"])
def test_a_trace_holds_the_models_own_signals_and_the_memorys_state(trained, tmp_path, name):
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(app, ["inspect", str(trained[name]), "--split", "train", "--index", "2",
                                      "--format", "json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    trace = json.loads(out.read_text())
    steps = trace["steps"]
    assert steps[0]["token"] == "<s>" and steps[trace["source_length"] + 1]["token"] == "<|>"
    # where each signal acts and each read starts from: a queue pushes at the top, pops and reads at the bottom
    expected = {"stack": (["top"], ["top"], ["top"]), "queue": (["top"], ["bottom"], ["bottom"]),
                "deque": (["top", "bottom"],) * 3}[name]
    assert (trace["push_ends"], trace["pop_ends"], trace["read_ends"]) == expected
    push_ends, pop_ends, read_ends = expected

    # push and pop: what the model's batch forward pass gives for the same tokens
    module = load_run(trained[name])
    vocab, k = module.vocab, trace["source_length"]
    ids = [vocab.BOS] + [vocab.source_offset + module.task.source_vocab.index(s["token"]) for s in steps[1 : k + 1]]
    ids += [vocab.SEP] + [vocab.target_offset + module.task.target_vocab.index(s["token"]) for s in steps[k + 2 :]]
    inputs = torch.tensor([ids])
    d, u = module.model.memory_signals_over(inputs)
    for e, (push_end, pop_end) in enumerate(zip(push_ends, pop_ends)):
        assert torch.allclose(torch.tensor([s["push"][push_end] for s in steps]), d[0, :, e], atol=1e-6)
        assert torch.allclose(torch.tensor([s["pop"][pop_end] for s in steps]), u[0, :, e], atol=1e-6)

    # strengths and read weights: the literal oracle fed those signals
    strengths, reads = oracle_strengths_and_reads(name, [s["push"] for s in steps], [s["pop"] for s in steps])
    for t, step in enumerate(steps):
        assert step["strengths"] == pytest.approx(strengths[t], abs=1e-5)
        assert list(step["read_weights"]) == read_ends
        for end in read_ends:
            assert step["read_weights"][end] == pytest.approx(reads[t][end], abs=1e-5)

    # the predictions are greedy decoding's: right up to the first error exactly as the evaluation counts it
    from pipeline.data.cache import load_eval_set
    from pipeline.evaluation import greedy_correct_prefix

    pair = load_eval_set("reversal", "train").pairs[2]
    prefix = int(greedy_correct_prefix(module.model, [pair], module.vocab)[0])
    marks = [s.get("correct") for s in steps if "correct" in s]
    assert marks[:prefix] == [True] * prefix and (prefix == len(pair.target) + 1 or marks[prefix] is False)


def test_a_jm_stack_trace_holds_its_own_actions_and_the_rows_its_update_gives(trained, tmp_path):
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(app, ["inspect", str(trained["jm_stack"]), "--split", "train", "--index", "2",
                                      "--format", "json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    steps = json.loads(out.read_text())["steps"]
    k = json.loads(out.read_text())["source_length"]

    # the actions and the pushed values of the model's batch forward pass over the same tokens, caught as computed
    module = load_run(trained["jm_stack"])
    model, vocab = module.model, module.vocab
    ids = [vocab.BOS] + [vocab.source_offset + module.task.source_vocab.index(s["token"]) for s in steps[1 : k + 1]]
    ids += [vocab.SEP] + [vocab.target_offset + module.task.target_vocab.index(s["token"]) for s in steps[k + 2 :]]
    caught = {"actions": [], "value": []}
    hooks = [getattr(model, name).register_forward_hook(lambda _m, _i, output, name=name: caught[name].append(output))
             for name in caught]
    with torch.no_grad():
        model(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    actions = torch.softmax(torch.cat(caught["actions"]), dim=-1)
    values = torch.tanh(torch.cat(caught["value"]))
    assert [list(s["actions"]) for s in steps] == [["push", "pop", "no-op"]] * len(steps)
    assert torch.allclose(torch.tensor([list(s["actions"].values()) for s in steps]), actions, atol=1e-6)

    # the rows: the stack's update (tested against its equations in test_baseline_models) replayed over the whole depth
    stack = torch.zeros(1, model.depth, model.width)
    for t, step in enumerate(steps):
        stack = jm_stack_update(stack, actions[t : t + 1], values[t : t + 1])
        kept = step["stack_rows"]
        assert 1 <= len(kept) <= min(t + 2, model.depth)  # a step reaches at most one row deeper
        assert kept == pytest.approx(stack[0, : len(kept)].pow(2).mean(-1).sqrt().tolist(), abs=1e-6)


@pytest.mark.parametrize("name", ["stack", "deque", "jm_stack", "lstm1"])
def test_a_trace_figure_is_drawn_for_every_kind_of_model(trained, tmp_path, name):
    out = tmp_path / f"{name}.png"
    result = CliRunner().invoke(app, ["inspect", str(trained[name]), "--source", "a1 a2 a3 a4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    assert ("no memory to draw" in result.output) == (name == "lstm1")


def test_inspect_refuses_bad_input_in_one_line(trained):
    result = CliRunner().invoke(app, ["inspect", str(trained["stack"]), "--source", "a1 zz"])
    assert result.exit_code == 2 and "source token 'zz' is not in reversal's source vocabulary" in result.output
    result = CliRunner().invoke(app, ["inspect", str(trained["stack"]), "--index", "1000"])
    assert result.exit_code == 2 and "index must lie in [0, 999]" in result.output


def test_runs_lists_and_filters_a_folder(trained):
    result = CliRunner().invoke(app, ["runs", str(next(iter(trained.values())).parent), "--format", "json"])
    rows = json.loads(result.output)
    assert {r["model"] for r in rows} == {"stack", "queue", "deque", "jm_stack", "lstm1"}
    assert all(r["status"] == "finished" and r["batches"] == 20 for r in rows)
    result = CliRunner().invoke(app, ["runs", str(trained["stack"].parent), "--model", "deque", "--format", "csv"])
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("id,task,model,hidden,lr,seed,status,batches,train_perplexity") and len(lines) == 2
    result = CliRunner().invoke(app, ["runs", str(trained["stack"].parent), "--status", "pruned"])
    assert result.output.strip() == "no runs"


def test_a_kept_trace_is_used_only_for_the_checkpoint_it_was_drawn_from(trained, tmp_path):
    """The report keeps each selected memory run's trace beside it. A run reopened past its results (a rung it won, a
    raised cap) kept the trace of its earlier checkpoint, and the report drew that one for its final results (the
    SVO->SOV Stack's cell showed a trace drawn two results earlier). Must: a trace names its checkpoint's batch and is
    redrawn where that is not the batch the results report; must not: a stale trace, or a legacy one (no batch) in a
    run reopened since, stands for a checkpoint that is not at hand."""
    import dataclasses
    import shutil

    from pipeline.inspection import load_trace, run_trace, save_trace, trace_file
    from pipeline.rundir import RunDir

    run_dir = tmp_path / "stack"
    shutil.copytree(trained["stack"], run_dir)
    folder = RunDir(run_dir)
    step = int(folder.read_results()["selected_step"])
    trace = run_trace(run_dir)
    assert trace.step == step and load_trace(trace_file(run_dir)).step == step  # drawn, kept, naming its batch

    save_trace(dataclasses.replace(trace, step=step - 10, predicted=["stale"] * len(trace.predicted)),
               trace_file(run_dir))
    redrawn = run_trace(run_dir)  # an earlier checkpoint's trace: drawn again from the one the results report
    assert redrawn.step == step and redrawn.predicted == trace.predicted
    assert run_trace(run_dir, step=step - 10) is None  # asked for a checkpoint that is not at hand: none, not a guess

    legacy = dataclasses.replace(trace, step=None, predicted=["legacy"] * len(trace.predicted))
    save_trace(legacy, trace_file(run_dir))
    assert run_trace(run_dir).predicted == legacy.predicted  # never reopened: its only checkpoint is the reported one
    reported = folder.results_file.read_text()
    folder.results_file.unlink()
    assert run_trace(run_dir) is None  # no results: no reported checkpoint for a kept trace to stand for
    folder.results_file.write_text(reported)
    shutil.rmtree(folder.checkpoints)
    (run_dir / "results.10.json").write_text(folder.results_file.read_text())  # reopened once, before these results
    assert run_trace(run_dir) is None  # the legacy trace may be the earlier checkpoint's, and none can be drawn

    save_trace(trace, trace_file(run_dir))
    folder.clear()  # trained again from batch 0: its traces were drawn from the replaced draw's checkpoints
    assert not trace_file(run_dir).exists()
