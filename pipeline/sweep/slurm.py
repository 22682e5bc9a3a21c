"""The SLURM route: one array task per unfinished run (or per population of runs, where the profile's
``population`` packs them) through submitit, the same run directories and worker, so the same resume. A task cut off
by its time limit (or preempted) is requeued and continues from its checkpoints."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import ConfigError, SweepConfig
from pipeline.sweep.grid import pack, prepare
from pipeline.sweep.status import planned_runs, summary, sweep_root, sweep_status
from pipeline.sweep.worker import run_job


class SubmititRun:
    """The SLURM array task: one run, or the runs of one population. Checkpointable, so that a task hitting its time
    limit (or preempted) is requeued by submitit and continues from the runs' last checkpoints."""

    def __init__(self, width: int | None = None) -> None:
        self.width = width  # a population's members at a time

    def __call__(self, run_dirs: str | list[str]) -> str | list[str]:
        from pipeline.runtime import configure_cpu_process

        configure_cpu_process()
        states = run_job(run_dirs, self.width)
        return states[0] if isinstance(run_dirs, str) else states

    def checkpoint(self, run_dirs: str | list[str]):
        import submitit

        return submitit.helpers.DelayedSubmission(SubmititRun(self.width), run_dirs)


SLURM_COMMANDS = ("sbatch", "srun")  # what submitit calls to submit an array and start its tasks


def check_slurm() -> None:
    """Refuse ``--executor slurm`` on a machine without SLURM's commands, in one line (submitit said only "Could not
    detect srun", after the run folders were prepared)."""
    import shutil

    missing = [command for command in SLURM_COMMANDS if shutil.which(command) is None]
    if missing:
        raise ConfigError(f"--executor slurm needs SLURM's {' and '.join(missing)} on the PATH, and this machine has "
                          "none: run it on a cluster's login node, or use --executor local (the default)")


def submit_slurm(sweep: SweepConfig, runs_root: Path | None = None, retry_failed: bool = False,
                 partition: str | None = None, time_min: int | None = None, array_parallelism: int | None = None,
                 cluster: str = "slurm", wait: bool = False, echo=print, retry_pruned: bool = False,
                 only=(), population: int | None = None) -> list:
    """Submit every unfinished run as one SLURM job array: a task per run, or per model whose runs train as one
    population, ``population`` at a time (default: the profile's; :func:`~pipeline.sweep.grid.pack`).
    ``cluster='local'`` runs the same jobs through submitit's local executor, which is how the route is tested
    without a cluster. Returns the jobs."""
    import submitit

    if cluster == "slurm":
        check_slurm()  # before any run folder is prepared
    todo = prepare(sweep, runs_root, retry_failed, retry_pruned, only)
    root = sweep_root(sweep, runs_root)
    if not todo:
        echo(f"sweep {sweep.name}: nothing to submit; " + summary(sweep_status(sweep, runs_root, only=only), 1))
        return []
    slurm = sweep.slurm
    executor = submitit.AutoExecutor(folder=root / ".submitit" / "%j", cluster=cluster)
    executor.update_parameters(timeout_min=time_min or slurm.time_min, cpus_per_task=slurm.cpus_per_task,
                               mem_gb=slurm.mem_gb, name=f"transduce-{sweep.name}")
    if slurm.gpus_per_task:  # without it a task lands on a node's CPUs, whatever the profile trains
        executor.update_parameters(gpus_per_node=slurm.gpus_per_task)
    if cluster == "slurm":
        executor.update_parameters(slurm_array_parallelism=array_parallelism or slurm.array_parallelism,
                                   slurm_additional_parameters={"partition": partition or slurm.partition}
                                   if (partition or slurm.partition) else {})
    configs = {root / run.run_id(): run for run, _ in planned_runs(sweep, runs_root)}
    width = population or sweep.population
    packed = pack(todo, configs, width)
    tasks = [str(job[0]) if len(job) == 1 else [str(d) for d in job] for job in packed]
    jobs = executor.map_array(SubmititRun(width), tasks)
    what = f"{len(todo)} run(s)" + (f" in {len(jobs)} population(s)" if len(jobs) < len(todo) else "")
    echo(f"sweep {sweep.name}: submitted {what} as job array {jobs[0].job_id.split('_')[0]}; "
         f"logs in {root / '.submitit'}. Rerun the same command at any time: finished runs are skipped.")
    if wait:
        for job in jobs:
            job.result()
        echo(f"sweep {sweep.name}: " + summary(sweep_status(sweep, runs_root, only=only), 1))
    return jobs
