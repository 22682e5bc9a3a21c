"""The SLURM route: one array task per unfinished run through submitit, the same run directories and worker, so the
same resume. A task cut off by its time limit (or preempted) is requeued and continues from its checkpoint."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import SweepConfig
from pipeline.sweep.grid import prepare
from pipeline.sweep.status import summary, sweep_root, sweep_status
from pipeline.sweep.worker import run_one


class SubmititRun:
    """The SLURM array task: one run. Checkpointable, so that a task hitting its time limit (or preempted) is
    requeued by submitit and continues from the run's last checkpoint."""

    def __call__(self, run_dir: str) -> str:
        from pipeline.runtime import configure_cpu_process

        configure_cpu_process()
        return run_one(run_dir)

    def checkpoint(self, run_dir: str):
        import submitit

        return submitit.helpers.DelayedSubmission(SubmititRun(), run_dir)


def submit_slurm(sweep: SweepConfig, runs_root: Path | None = None, retry_failed: bool = False,
                 partition: str | None = None, time_min: int | None = None, array_parallelism: int | None = None,
                 cluster: str = "slurm", wait: bool = False, echo=print, retry_pruned: bool = False,
                 only=()) -> list:
    """Submit every unfinished run as one SLURM job array (``cluster='local'`` runs the same jobs through
    submitit's local executor, which is how the route is tested without a cluster). Returns the jobs."""
    import submitit

    todo = prepare(sweep, runs_root, retry_failed, retry_pruned, only)
    root = sweep_root(sweep, runs_root)
    if not todo:
        echo(f"sweep {sweep.name}: nothing to submit; " + summary(sweep_status(sweep, runs_root), 1))
        return []
    slurm = sweep.slurm
    executor = submitit.AutoExecutor(folder=root / ".submitit" / "%j", cluster=cluster)
    executor.update_parameters(timeout_min=time_min or slurm.time_min, cpus_per_task=slurm.cpus_per_task,
                               mem_gb=slurm.mem_gb, name=f"transduce-{sweep.name}")
    if cluster == "slurm":
        executor.update_parameters(slurm_array_parallelism=array_parallelism or slurm.array_parallelism,
                                   slurm_additional_parameters={"partition": partition or slurm.partition}
                                   if (partition or slurm.partition) else {})
    jobs = executor.map_array(SubmititRun(), [str(d) for d in todo])
    echo(f"sweep {sweep.name}: submitted {len(jobs)} run(s) as job array {jobs[0].job_id.split('_')[0]}; "
         f"logs in {root / '.submitit'}. Rerun the same command at any time: finished runs are skipped.")
    if wait:
        for job in jobs:
            job.result()
        echo(f"sweep {sweep.name}: " + summary(sweep_status(sweep, runs_root), 1))
    return jobs
