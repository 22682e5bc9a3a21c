"""The environment is locked like a paper's artefact: `make venv` installs requirements.lock, the lock pins every
installed package exactly (torch apart, so that a GPU node keeps its CUDA build), and reports name the lock."""

import re
from importlib import metadata

from pipeline.paths import REPO_ROOT
from pipeline.provenance import lock_hash, provenance


def locked() -> dict[str, str]:
    pins = {}
    for line in (REPO_ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned exactly"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_the_lock_pins_every_installed_package_but_torch_to_what_is_installed():
    pins = locked()
    assert "torch" not in pins and not any(name.startswith("nvidia-") for name in pins)
    installed = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in metadata.distributions()}
    unlocked = ("torch", "transduce-pipeline", "pip", "setuptools", "wheel")
    installed = {n: v for n, v in installed.items() if n not in unlocked and not n.startswith("nvidia")}
    assert {n: installed.get(n) for n in pins} == pins  # every pin is what runs the tests
    assert set(installed) <= set(pins), f"installed but not locked: {sorted(set(installed) - set(pins))}"
    assert metadata.version("torch").split("+")[0] == "2.13.0"  # the exact pin kept outside the lock


def test_make_venv_installs_from_the_lock_and_reports_name_it():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("$(STAMP):"):makefile.index("venv: $(STAMP)")]
    assert "requirements.lock" in recipe.splitlines()[0]  # a new lock re-installs the environment
    assert "-r requirements.lock" in recipe and "--no-deps -e" in recipe
    assert re.fullmatch(r"[0-9a-f]{12}", lock_hash())
    assert f"environment lock `{lock_hash()}`" in provenance("pytest")


def test_outside_git_the_commit_is_the_declared_one_marked_as_declared(monkeypatch, tmp_path):
    """A copy sent to a cluster or GPU machine without its .git: reports name the commit its sender declares."""
    from pipeline import provenance as prov

    monkeypatch.setattr(prov, "REPO_ROOT", tmp_path)  # no repository here: git fails
    monkeypatch.delenv("TRANSDUCE_CODE_COMMIT", raising=False)
    assert prov.code_commit() == "unknown"
    monkeypatch.setenv("TRANSDUCE_CODE_COMMIT", "abc123")
    assert prov.code_commit() == "abc123 (declared; no git here)"


def test_a_report_names_the_last_commit_that_changed_what_it_is_made_from(monkeypatch, tmp_path):
    """Fault 7 of issue 35: a report regenerated on a clone of a later commit (one that only adds reports, docs or
    another profile) names the same commit, so `make report` leaves it byte for byte as committed."""
    import subprocess

    from pipeline import provenance as prov

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "pipeline" / "code.py").write_text("x = 1\n")
    (tmp_path / "configs" / "cpu.yaml").write_text("name: cpu\n")
    git("add", ".")
    git("commit", "-qm", "code and profile")
    made = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(prov, "REPO_ROOT", tmp_path)
    profile = tmp_path / "configs" / "cpu.yaml"
    for later in ("docs.md", "configs/other.yaml", "reports/README.md"):
        (tmp_path / later).parent.mkdir(exist_ok=True)
        (tmp_path / later).write_text("later\n")
        git("add", ".")
        git("commit", "-qm", f"add {later}")
        assert prov.code_commit(inputs=(profile,)) == made
    profile.write_text("name: cpu\nworkers: 2\n")  # the report's own profile does count
    assert prov.code_commit(inputs=(profile,)) == made + "-dirty"
    assert prov.code_commit(inputs=(tmp_path.parent / "elsewhere.yaml",)) == made  # outside the repository: ignored
