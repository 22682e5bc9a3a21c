"""A run records the commit that trained it: a checkout with uncommitted changes is refused before anything is
written, unless allowed (and then the commit says -dirty)."""

import pytest

from pipeline import provenance
from pipeline.config import ConfigError, RunConfig, from_dict
from pipeline.provenance import ALLOW_DIRTY_ENV, check_committed
from pipeline.training.run import train


def test_a_dirty_checkout_is_refused_unless_allowed(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "git_commit", lambda: "abc123-dirty")
    monkeypatch.delenv(ALLOW_DIRTY_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"uncommitted changes .* \(abc123-dirty\) .* --allow-dirty"):
        check_committed()
    config = from_dict(RunConfig, {"model": {"name": "lstm1", "hidden": 8}, "tracking": {"wandb": "off"}})
    with pytest.raises(ConfigError, match="uncommitted changes"):
        train(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()  # refused before any folder was made
    monkeypatch.setenv(ALLOW_DIRTY_ENV, "0")  # "0" does not allow
    with pytest.raises(ConfigError):
        check_committed()
    monkeypatch.setenv(ALLOW_DIRTY_ENV, "1")
    check_committed()
    # a clean checkout, or none (an unpacked release), is never refused
    monkeypatch.delenv(ALLOW_DIRTY_ENV)
    for commit in ("abc123", "unknown"):
        monkeypatch.setattr(provenance, "git_commit", lambda commit=commit: commit)
        check_committed()


@pytest.mark.parametrize("results, label", [
    (dict(machine="AMD EPYC, 2 usable cores", torch="torch 2.13.0+cpu, AVX2"), "AMD EPYC, AVX2"),
    (dict(machine="Intel(R) Xeon(R) Processor, 2 usable cores", torch="torch 2.13.0+cpu, AVX512"),
     "Intel Xeon, AVX512"),
    (dict(machine="AMD EPYC, 2 usable cores", torch="2.13.0+cpu"), "AMD EPYC"),  # kernels not recorded then
    (dict(machine="Intel(R) Xeon(R) Processor, 16 usable cores, GPU NVIDIA H200", torch="2.11.0+cu130"),
     "Intel Xeon, GPU NVIDIA H200"),
    (dict(torch="torch 2.13.0+cpu, AVX2"), "not recorded"),
])
def test_a_runs_machine_kind_reads_in_a_few_words(results, label):
    """The report labels each run with the machine kind it trained on: two kinds are two draws of one seed."""
    from pipeline.provenance import machine_label

    assert machine_label(results) == label
