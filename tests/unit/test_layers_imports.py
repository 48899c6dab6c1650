"""The layers of docs/architecture.md, read from the source: every import of every module, at module level and inside
functions, points down. core imports no other project package; the parts import core (and nemesis and workloads
`clusters.admin`, nemesis `clusters.reassign` and `clusters.quorum`); evidence imports only core; checkers import
evidence; reports import evidence and checkers; a workload's package composes its checker, explanation and report
section from those three; only harness/ (runner and command line) imports harness; and no two project packages
import each other, directly or in a longer circle."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "clusters", "nemesis", "workloads", "evidence", "checkers", "reports", "harness")
# What each package may import besides itself; a name ending in a module (clusters.admin) allows only that module.
ALLOWED = {
    "core": (),
    "clusters": ("core",),
    "nemesis": ("core", "clusters.admin", "clusters.reassign", "clusters.quorum"),
    "workloads": ("core", "clusters.admin", "evidence", "checkers", "reports"),
    "evidence": ("core",),
    "checkers": ("core", "evidence"),
    "reports": ("core", "evidence", "checkers"),
    "harness": PACKAGES,
}


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, dotted module) of every project import in `path`, wherever it stands (TYPE_CHECKING blocks and
    function bodies included); `from pkg import name` counts as `pkg.name`, which is a module or a name in pkg."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from .m import y
                parts = (package,) if path.name == "__init__.py" or node.level == 1 else ()
                base = ".".join([*parts, base]).strip(".")
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return [(line, name.removeprefix("kchaos.")) for line, name in out
            if name.startswith("kchaos.") or name.split(".")[0] in PACKAGES]


def _modules() -> list[tuple[str, Path]]:
    return [(pkg, p) for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def _allowed(package: str, name: str) -> bool:
    top = name.split(".")[0]
    return top == package or any(name == a or name.startswith(a + ".") if "." in a else top == a
                                 for a in ALLOWED[package])


def test_every_package_imports_only_the_layers_below_it():
    wrong = [f"{p.relative_to(ROOT)}:{line}: {name}" for pkg, p in _modules() for line, name in _imports(p, pkg)
             if not _allowed(pkg, name)]
    assert wrong == []


def test_the_project_packages_import_each_other_in_no_circle():
    edges = {pkg: set() for pkg in PACKAGES}
    for pkg, p in _modules():
        edges[pkg] |= {name.split(".")[0] for _, name in _imports(p, pkg)} - {pkg}
    state: dict[str, str] = {}
    circles: list[str] = []

    def visit(pkg: str, trail: list[str]) -> None:
        state[pkg] = "open"
        for dep in sorted(edges[pkg]):
            if state.get(dep) == "open":
                circles.append(" -> ".join(trail[trail.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, trail + [dep])
        state[pkg] = "done"

    for pkg in PACKAGES:
        if pkg not in state:
            visit(pkg, [pkg])
    assert circles == []


def test_the_layer_check_sees_imports_inside_functions(tmp_path):
    """The walk would miss what matters most if it read only module-level imports."""
    f = tmp_path / "m.py"
    f.write_text("import os\n\ndef f():\n    from kchaos.harness.runner import run\n"
                 "    if True:\n        import kchaos.core.config\n")
    assert _imports(f, "reports") == [(4, "harness.runner.run"), (6, "core.config")]
    assert not _allowed("reports", "harness.runner.run") and _allowed("reports", "core.config")
    assert _allowed("nemesis", "clusters.admin.topic_leaders") and not _allowed("nemesis", "clusters.docker")


def test_every_project_import_names_the_kchaos_package():
    """Product code, tests and benches import `kchaos.core`, never a bare `core`: the wheel installs only `kchaos`,
    so a bare name would work from a checkout and break for every user."""
    bare = []
    for top in ("kchaos", *PACKAGES, "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                bare += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert bare == []


def _module_graph() -> dict[str, set[str]]:
    """Every project module (dotted, below kchaos) and the project modules it imports, as `_imports` reads them.
    An imported name stands for the longest module it starts with: `from pkg import mod` is an edge to the module,
    not to the package (a module's parent package is imported first anyway, and is no circle), and
    `from pkg.mod import f` is an edge to pkg.mod."""
    modules = {".".join([pkg, *[x for x in p.relative_to(ROOT / pkg).with_suffix("").parts if x != "__init__"]]):
               (pkg, p) for pkg, p in _modules()}

    def module(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {name: {m for _, imported in _imports(path, pkg) if (m := module(imported)) not in (None, name)}
            for name, (pkg, path) in modules.items()}


def test_no_two_modules_import_each_other_in_a_circle():
    """Not even under TYPE_CHECKING or inside a function: a circle means two modules share an idea that belongs
    in a third, lower one."""
    import networkx as nx

    circles = sorted(" -> ".join(c) for c in nx.simple_cycles(nx.DiGraph(
        [(a, b) for a, deps in _module_graph().items() for b in deps])))
    assert circles == []
