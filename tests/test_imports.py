"""The package's import structure: no import cycle, `transduce train` does not load the sweep's pool or SLURM, and
`transduce --help` loads no torch.

Every ``import`` of a ``pipeline`` module counts, at the top of a file or inside a function (a lazy import still
ties two modules together), and so does a module named by a string where the code imports it by name
(``importlib.import_module``, the registries' ``LazyNames`` and ``LazyField``); those under ``if TYPE_CHECKING:`` do
not (they never run). A cycle makes each module of it
depend on all the others: the review behind issue 35 found one through four folders (config, rundir, sweep/locks,
training/results), the run lock then living in the sweep.
"""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"
BY_NAME = ("import_module", "LazyNames", "LazyField")  # calls that import the module their first argument names


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The pipeline modules ``path`` imports, outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
               for node in ast.walk(block)}
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and getattr(
                node.func, "id", getattr(node.func, "attr", None)) in BY_NAME:
            out.add(str(node.args[0].value))
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return {m for m in out if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imported(path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle_it_is_shown():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_takes_part_in_an_import_cycle():
    graph = import_graph()
    assert "pipeline.rundir" in graph and "pipeline.runlock" in graph["pipeline.rundir"]  # the scan sees imports
    assert "pipeline.models" in graph["pipeline.config.settings"]  # ... and the lazy ones (MODEL_NAMES)
    assert cycles(graph) == []


def test_a_training_run_loads_neither_the_pool_nor_slurm():
    code = ("import sys, pipeline.training.run, pipeline.cli; print(sorted(m for m in sys.modules "
            "if m in ('pipeline.sweep.local', 'pipeline.sweep.slurm', 'submitit')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_commands_list_loads_no_torch():
    code = ("import sys\nsys.argv = ['transduce', '--help']\ntry:\n    import pipeline.cli.__main__\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in ('torch', 'lightning', 'pandas', 'wandb') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's run on the package under ``root``, with ``root``'s pyproject.toml (the contract)."""
    import os

    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_layers_of_the_architecture_map_are_kept_and_an_upward_import_breaks_them(tmp_path):
    """`make lint` runs import-linter on the layers of docs/ARCHITECTURE.md (pyproject.toml [tool.importlinter]):
    the package keeps them, and the same package with one upward import (the files layer importing training's
    engine) does not, the import named in the report."""
    import shutil

    assert lint_imports(PACKAGE.parent).returncode == 0
    shutil.copytree(PACKAGE, tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path)
    with open(tmp_path / "pipeline" / "files.py", "a") as f:
        f.write("\nfrom pipeline.training import engine  # noqa: E402,F401\n")
    broken = lint_imports(tmp_path)
    assert broken.returncode != 0 and "BROKEN" in broken.stdout
    assert "pipeline.files -> pipeline.training.engine" in broken.stdout


def test_the_architecture_map_lists_the_contracts_layers_in_its_order():
    """docs/ARCHITECTURE.md is the one map: its layers, top to bottom, name the contract's modules in the contract's
    order."""
    import re

    contract = (PACKAGE.parent / "pyproject.toml").read_text().split("[tool.importlinter]", 1)[1]
    layers = re.findall(r'^    "([^"]+)",$', contract.split("layers = [", 1)[1].split("]", 1)[0], re.MULTILINE)
    text = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    named = [m.removesuffix(".py").replace("/", ".") for m in re.findall(r"pipeline/[\w/]*\w(?:\.py)?", section)]
    expected = [module.strip() for layer in layers for module in re.split(r"[|:]", layer)]
    assert [m for m in named if m in expected] == expected
