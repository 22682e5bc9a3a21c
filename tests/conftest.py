import os
from pathlib import Path

import pytest
from unrendered import unrender_figures

from pipeline.provenance import ALLOW_DIRTY_ENV

# The suite trains runs on whatever checkout it is run from, committed or not (a run records "-dirty" there); the
# refusal itself is tested with the variable unset (tests/test_provenance.py).
os.environ[ALLOW_DIRTY_ENV] = "1"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """A private evaluation-set cache shared by the tests of one session, and by its xdist workers (a set is
    generated on first use, by whichever worker needs it first). Sharing is safe because a set is a function of the
    code alone and is written atomically, data file then manifest: a worker that finds a manifest finds its data, and
    two workers that generate the same set write the same bytes."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # xdist gives each worker <session root>/popen-gwN
    path = root / "data_cache"
    path.mkdir(exist_ok=True)
    return path


def pytest_collection_modifyitems(config, items):
    """Runs in each process that runs tests, before the first, not in xdist's controller (which only hands them out):
    torch is imported here, so that the controller starts its workers without importing it first.

    One torch thread per process: two threads in one process are unstable on the 2-core machines this runs on. Tests
    marked `cuda` skip where torch sees no CUDA device (this project's CPU machines and CI)."""
    import torch

    torch.set_num_threads(1)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device visible to torch")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture
def in_process_pool(monkeypatch):
    """The local pool with its workers' jobs run one after the other in this process (tests/in_process.py), for the
    tests whose property is the sweep's plan, archive or report, not its processes; the tests of processes (kills,
    SIGTERM, pool wake-ups, a worker held, populations' workers, GPUs) keep real workers."""
    from in_process import pool_in_process

    pool_in_process(monkeypatch)


@pytest.fixture
def figures_unrendered(monkeypatch):
    """Figures unrendered (`unrender_figures`): for the tests whose property is what a report writes where, its tables
    or its refusals, never its pixels. Rendering costs a second a figure; it keeps its own tests, which render real
    figures (tests/test_report_layout.py's first report, test_inspection.py, test_demo.py, test_cli.py)."""
    unrender_figures(monkeypatch)


@pytest.fixture(scope="session")
def _finished_tiny_original(tmp_path_factory, cache_dir):
    """``tiny(max_batches=20)`` trained to its end once per process (tests/tiny.py); copied by :func:`finished_tiny`."""
    from tiny import tiny

    from pipeline.training.run import train

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSDUCE_DATA_CACHE", str(cache_dir))
        folder = tmp_path_factory.mktemp("finished-tiny") / "run"
        train(tiny(max_batches=20), folder, progress=False)
    return folder


@pytest.fixture
def finished_tiny(tmp_path, _finished_tiny_original):
    """A finished 20-batch ``tiny()`` run of this test's own, at ``tmp_path / "run"``: a copy of one trained once, for
    the tests that damage or extend a finished run (what they hold is what is done to its files, not its training,
    which tests/test_faults.py's same-seed test holds for two runs trained afresh)."""
    import shutil

    return Path(shutil.copytree(_finished_tiny_original, tmp_path / "run"))
