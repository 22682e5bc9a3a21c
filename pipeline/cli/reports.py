"""Commands that write reports: `report` (Table 3 and the rest), `params` (Table 2), `bench`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pipeline.cli.app import app, at_least, choices, existing_runs_dir, fail, load_profile, remaking

ParamsFormat = choices("ParamsFormat", "table", "json")


@app.command()
def params(
    format: ParamsFormat = typer.Option(ParamsFormat.table, "--format", help="table (markdown) or json."),
    output: Path = typer.Option(None, "--output", help="Also write the markdown table to this file."),
) -> None:
    """Trainable parameters of every (model, hidden) beside the paper's Table 2; the modern baselines, which it has
    no row for, beside the Stack-LSTM's."""
    from pipeline.models import MODEL_NAMES
    from pipeline.provenance import provenance
    from pipeline.reports.table2 import parameter_table, table2_markdown

    table = parameter_table(models=MODEL_NAMES)
    markdown = table2_markdown(table, provenance("transduce params" + (f" --output {output}" if output else "")))
    if format is ParamsFormat.json:
        rows = [{"model": r.model, "hidden": int(r.hidden), "params": int(r.params)} for r in table.itertuples()]
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(markdown)
    if output is not None:
        from pipeline.files import atomic_write_text

        atomic_write_text(output, markdown)


@app.command()
def report(
    profile: Path = typer.Argument(..., help="The profile whose finished runs to report, e.g. configs/cpu.yaml."),
    runs_dir: Path = typer.Option(None, "--runs-dir", help="Where its run directories are (default: runs/<profile>)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/<profile>, or the folder the "
                                                 "profile's reports: key names)."),
    force: bool = typer.Option(False, "--force", help="Write the report even from no done runs, or from fewer than "
                                                      "the report already there counted while some of the "
                                                      "profile's runs are not done."),
) -> None:
    """Write Table 3 (beside the paper's), Table 2 and the figures from finished runs; trains nothing."""
    from pipeline.reports.profile import write_profile_report

    config = load_profile(profile, reports=out is None and not force)
    existing_runs_dir(runs_dir)
    command = remaking("report", profile, runs_dir, out, force)
    typer.echo(f"wrote {write_profile_report(config, profile, runs_dir, out, command, force=force)}")


@app.command()
def bench(
    rounds: int = typer.Option(11, "--rounds", callback=at_least(7),  # pipeline.bench.DEFAULT_ROUNDS (tested)
                               help="Timing rounds, at least 7 (the median is reported)."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: reports/)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda on a GPU machine (writes bench-cuda.*)."),
    profile: bool = typer.Option(False, "--profile", help="Instead: where the time of one training batch of the "
                                                          "Stack- and DeQue-LSTM goes (reports/bench-profile.md); "
                                                          "with --population, of one population step of each model "
                                                          "at the largest --size and first --hidden "
                                                          "(bench-population-profile[-cuda].md)."),
    population: bool = typer.Option(False, "--population", help="Instead: member-batches per second of populations "
                                    "of 1-256 runs trained as one model (reports/bench-population.{md,json}; "
                                    "-cuda on a GPU)."),
    hidden: list[int] = typer.Option(None, "--hidden", help="With --population: a hidden size to measure (default "
                                     "256), repeated for several (--hidden 256 --hidden 512)."),
    sizes: list[int] = typer.Option(None, "--size", help="With --population: a population size to measure (default "
                                    "1, 16, 64 and 256), repeated for several (--size 1 --size 5 --size 64)."),
    models: list[str] = typer.Option(None, "--model", help="With --population: a model to measure (default the "
                                     "paper's seven), repeated for several (--model jm_stack --model transformer)."),
) -> None:
    """Time and memory of a training batch of each model beside a plain nn.LSTM; writes reports/bench.{md,json}."""
    from pipeline.bench import DEFAULT_ROUNDS, run_benchmark, write_profile

    if profile and not population:
        typer.echo(f"wrote {write_profile(out, echo=typer.echo)}")
        return
    if population:
        from pipeline.bench_population import HIDDEN, SIZES, run_population_benchmark
        from pipeline.config import MAX_POPULATION, MAX_WIDTH

        for width in hidden or ():
            if not 1 <= width <= MAX_WIDTH:
                fail(f"--hidden {width}: must be a width in 1-{MAX_WIDTH:,}")
        for size in sizes or ():
            if not 1 <= size <= MAX_POPULATION:
                fail(f"--size {size}: must be a population size in 1-{MAX_POPULATION:,}")
        from pipeline.bench_population import POPULATION_MODELS
        from pipeline.training.population import POPULATION_CLASSES

        stacked = list(POPULATION_CLASSES)
        for name in models or ():
            if name not in stacked:
                fail(f"--model {name}: must be a model that stacks as a population, one of {', '.join(stacked)}")
        command = ("transduce bench --population" + (" --profile" if profile else "")
                   + (f" --device {device}" if device != "cpu" else "")
                   + "".join(f" --hidden {width}" for width in hidden or ())
                   + "".join(f" --size {size}" for size in sizes or ())
                   + "".join(f" --model {name}" for name in models or ()))
        chosen = tuple(dict.fromkeys(models)) if models else POPULATION_MODELS
        if profile:
            from pipeline.bench_population import profile_population

            path = profile_population(device, out, models=chosen, size=max(sizes) if sizes else 64,
                                      hidden=hidden[0] if hidden else HIDDEN, echo=typer.echo, command=command)
            typer.echo(f"wrote {path}")
            return
        readme = run_population_benchmark(device, out, models=chosen,
                                          sizes=tuple(sorted(set(sizes))) if sizes else SIZES,
                                          hidden=tuple(dict.fromkeys(hidden)) if hidden else HIDDEN, echo=typer.echo,
                                          command=command)
        typer.echo(f"wrote {readme}")
        return

    command = ("transduce bench" + (f" --rounds {rounds}" if rounds != DEFAULT_ROUNDS else "")
               + (f" --out {out}" if out else "")
               + (f" --device {device}" if device != "cpu" else ""))
    try:
        result = run_benchmark(rounds, out, echo=typer.echo, command=command, device=device)
    except ValueError as error:
        fail(error)
    for check in result["targets"]:
        typer.echo(f"{'met' if check['met'] else 'NOT MET'}: {check['what']} = {check['measured']:g} "
                   f"(limit {check['limit']:g})")


@app.command()
def project(
    profile: Path = typer.Argument(..., help="The profile to project, e.g. configs/paper.yaml."),
    records: Path = typer.Option(Path("reports/bench-population-cuda.json"), "--records",
                                 help="`transduce bench --population`'s JSON for the device (default: the committed "
                                      "H100's)."),
    devices: int = typer.Option(1, "--devices", callback=at_least(1),
                                help="Devices like that one the sweep spreads its populations over."),
) -> None:
    """How long a profile's sweep takes from batch 0: its populations rung by rung, each priced by the measured step
    time of its size (pipeline/projection.py says what is measured and what estimated). Trains nothing."""
    from pipeline.paths import REPORTS_DIR
    from pipeline.projection import project as projected
    from pipeline.projection import projection_table

    config = load_profile(profile)
    try:
        measured = json.loads(records.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        fail(f"--records {records}: not a readable `transduce bench --population` JSON ({error})")
    if not isinstance(measured, list) or not all(isinstance(r, dict) and {"model", "population",
                                                 "member_batches_per_s"} <= set(r) for r in measured):
        fail(f"--records {records}: not a `transduce bench --population` JSON (a list of records with model, "
             "population and member_batches_per_s)")
    where = {r.get("device") for r in measured} - {None}
    # a CPU's sweep trains each run with its own step (fused LSTM, C memory step), as the bench's "one after another"
    # records do; its batched step at P=1 takes about twice as long (reports/bench-population.md)
    mode = "one after another" if where == {"cpu"} and any(r.get("mode") == "one after another" for r in measured) \
        else None
    result = projected(config, measured, devices, cpu_runs=REPORTS_DIR / "cpu" / "all_runs.csv", mode=mode)
    typer.echo(f"{profile} from batch 0, step times from {records} ({', '.join(sorted(where)) or 'device unnamed'}"
               + (f"; {mode}, each run its own step" if mode else "") + "):")
    typer.echo("\n".join(projection_table(result)))
