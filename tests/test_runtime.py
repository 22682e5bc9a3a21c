"""The CPU process setup shared by training, evaluation and the benchmark (pipeline.runtime)."""

import platform
import subprocess
import sys

import pytest
import torch

from pipeline.runtime import configure_cpu_process

FAULTS_PER_BATCH = """
import resource, sys, torch
from pipeline.runtime import configure_cpu_process
torch.set_num_threads(1)
from pipeline.bench import TrainingStep
step = TrainingStep("stack", 128, 60)
def per_batch():
    step(); step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 4
plain = per_batch()
assert configure_cpu_process()
print(plain, per_batch())
"""


def faults_per_batch() -> tuple[float, float]:
    """New pages a batch in one fresh process, first as it starts (plain), then once configured: glibc's malloc reads
    its thresholds at each allocation, so the second measurement is what a process configured from its start gets."""
    out = subprocess.run([sys.executable, "-c", FAULTS_PER_BATCH], capture_output=True, text=True, check=True)
    plain, kept = map(float, out.stdout.split()[-2:])
    return plain, kept


def test_configure_cpu_process_sets_one_thread():
    threads = torch.get_num_threads()
    try:
        configure_cpu_process()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="configures glibc's malloc only")
def test_a_configured_process_reuses_its_freed_buffers_instead_of_taking_new_pages():
    """Without the setup, every training batch of a memory model maps its large buffers afresh from the kernel
    (about a thousand page faults a batch at hidden 128, 60 positions); with it, they are reused."""
    plain, kept = faults_per_batch()
    assert plain > 300, f"the plain process took only {plain} new pages a batch: the test would be vacuous"
    assert kept < plain / 4, (plain, kept)
