import pytest
import torch

# One torch thread per process: two threads in one process are unstable on the 2-core machines this runs on.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """A private evaluation-set cache shared by the tests of one session (generated on first use per task)."""
    return tmp_path_factory.mktemp("data_cache")
