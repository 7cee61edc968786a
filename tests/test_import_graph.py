"""Data flows one way between gradprobe's parts (issue 15): no import cycle, not even one hidden
inside a function, and gradprobe never imports calib.

Every module of gradprobe and calib is parsed with :mod:`ast`; every ``import`` / ``from ... import``
anywhere in it (module level, inside functions, methods, ``try`` and ``if`` blocks) and every
``importlib.import_module("...")`` / ``__import__("...")`` with a literal name is an import. The graph's
nodes are gradprobe's top-level parts, ``gradprobe.X`` with X a subpackage (``gradprobe.probe``) or a
module (``gradprobe.models``); an edge A -> B says some module inside A imports some module inside B.
The package root ``gradprobe/__init__.py`` (the lazy front door, PEP 562, which names modules only as
strings for ``__getattr__``) is no node. Cycles are the graph's strongly connected components with
more than one node (Tarjan 1972); networkx is not a declared dependency, so the search is here.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

PACKAGES = ("gradprobe", "calib")

#: (importing module, imported module) -> why this import may close a cycle. Only these exact imports
#: are left out of the graph; any other import between the same two parts still counts.
ALLOWED = {
    # ``gradprobe.probe(model, task, ...)`` is the front-door function AND ``gradprobe.probe`` is the probe
    # subpackage (README, "Python API"): once ``gradprobe.probe.run`` is imported, Python binds the
    # attribute ``gradprobe.probe`` to the subpackage, so the subpackage itself must be callable, and its
    # ``__call__`` forwards to gradprobe.api.probe.probe, which is built on the probe (api -> probe).
    # Removing this edge means renaming the public ``gradprobe.probe(...)``; it is one function-level
    # import in probe/__init__.py, run only when ``gradprobe.probe`` is called.
    ("gradprobe.probe", "gradprobe.api.probe"):
        "the callable-module front door gradprobe.probe(...) (public API)",
}


# ----------------------------------------------------------------------------- the graph

def package_modules(package: str, root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``root / package`` (``__init__`` is the package)."""
    out = {}
    for f in sorted((root / package).rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _known(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules`` (``a.b.attr`` -> ``a.b``), or None."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in modules:
            return ".".join(parts[:k])
    return None


def imports_of(name: str, path: Path, modules) -> list[tuple[str, int]]:
    """(imported module of ``modules``, line) for every import anywhere in module ``name`` at ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if func in ("import_module", "__import__"):
                targets = [node.args[0].value]
        for t in targets:
            known = _known(t, modules)
            if known is not None:
                out.append((known, node.lineno))
    return out


def part(module: str, package: str) -> str | None:
    """The top-level part of ``package`` holding ``module`` (``gradprobe.probe.run`` -> ``gradprobe.probe``);
    None for the package root and for modules of other packages."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == package and len(parts) > 1 else None


def part_graph(package: str, root: Path, allowed=ALLOWED, others=PACKAGES):
    """Edges between the top-level parts of ``package``: {(A, B): ["importer:line -> imported", ...]}.

    Modules of ``others`` are parsed too (so an import of them is seen); imports in ``allowed`` are left out.
    """
    modules = {}
    for pkg in dict.fromkeys((package, *others)):
        if (root / pkg).is_dir():
            modules.update(package_modules(pkg, root))
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        a = part(name, package)
        if a is None:
            continue
        for target, line in imports_of(name, path, modules):
            b = part(target, package)
            if b is None or b == a or (name, target) in allowed:
                continue
            site = f"{path.relative_to(root)}:{line} imports {target}"
            if site not in edges.setdefault((a, b), []):  # `from m import x, y`: one site
                edges[(a, b)].append(site)
    return edges


def cycles(edges) -> list[list[str]]:
    """The strongly connected components of more than one node of the graph ``edges`` (Tarjan 1972), sorted."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _explain(edges, components) -> str:
    lines = []
    for comp in components:
        lines.append("cycle among " + ", ".join(comp) + ":")
        for (a, b), sites in sorted(edges.items()):
            if a in comp and b in comp:
                lines.append(f"  {a} -> {b}: " + "; ".join(sites))
    return "\n".join(lines)


def _root() -> Path:
    spec = importlib.util.find_spec("gradprobe")
    return Path(spec.submodule_search_locations[0]).parent


# ----------------------------------------------------------------------------- the project

def test_gradprobe_parts_import_each_other_one_way():
    edges = part_graph("gradprobe", _root())
    assert len(edges) > 50  # the parser sees the imports (about 100 edges): an empty graph would pass vacuously
    found = cycles(edges)
    assert not found, ("import cycles between gradprobe's parts (imports inside functions count; move the shared "
                       "piece to a lower module):\n" + _explain(edges, found))


def test_allowed_imports_still_exist():
    """Every allow-listed import is still there (else its entry is stale and must go)."""
    root = _root()
    modules = {**package_modules("gradprobe", root), **package_modules("calib", root)}
    for importer, imported in ALLOWED:
        assert imported in {t for t, _ in imports_of(importer, modules[importer], modules)}, (importer, imported)


#: The one gradprobe module that may import calib: the command line, the composition root that wires the
#: two packages together (``gradprobe probe --calibration default|PATH`` loads a calibration with
#: calib.model and applies it with calib.apply); no library module of gradprobe imports calib.
CALIB_USERS = ("gradprobe.cli.probe",)


def test_gradprobe_never_imports_calib():
    root = _root()
    modules = {**package_modules("gradprobe", root), **package_modules("calib", root)}
    bad = [f"{name}:{line} imports {t}" for name, path in modules.items()
           if name.split(".")[0] == "gradprobe" and name not in CALIB_USERS
           for t, line in imports_of(name, path, modules) if t.split(".")[0] == "calib"]
    assert bad == [], "gradprobe must not import calib (calib reads gradprobe's outputs):\n" + "\n".join(bad)
    for name in CALIB_USERS:  # the exemption is not stale
        assert any(t.split(".")[0] == "calib" for t, _ in imports_of(name, modules[name], modules)), name
    assert any(t.startswith("gradprobe") for name, path in modules.items() if name.startswith("calib")
               for t, _ in imports_of(name, path, modules))  # the direction calib -> gradprobe is seen


# ----------------------------------------------------------------------------- the checker itself

def _package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return root


@pytest.mark.parametrize("hidden", ["def f():\n    from ..low import x\n",
                                    "class C:\n    def m(self):\n        import pkg.low.y\n",
                                    "try:\n    from pkg.low.y import z\nexcept ImportError:\n    pass\n",
                                    "def f():\n    import importlib\n    importlib.import_module('pkg.low')\n"],
                         ids=["relative-in-function", "absolute-in-method", "in-try", "import_module"])
def test_a_cycle_hidden_inside_a_function_is_found(tmp_path, hidden):
    root = _package(tmp_path, {"pkg/__init__.py": "", "pkg/low/__init__.py": "", "pkg/low/y.py": "from ..top import t\n",
                               "pkg/top.py": "", "pkg/mid/__init__.py": "", "pkg/mid/z.py": hidden})
    assert cycles(part_graph("pkg", root, allowed={}, others=())) == []  # top <- low <- mid: one way
    (root / "pkg/top.py").write_text("from .mid.z import f\n")  # top -> mid closes top -> mid -> low -> top
    edges = part_graph("pkg", root, allowed={}, others=())
    assert cycles(edges) == [["pkg.low", "pkg.mid", "pkg.top"]]
    assert "pkg/low/y.py:1 imports pkg.top" in _explain(edges, cycles(edges))
    # an allow-listed import is left out, and only that one
    assert cycles(part_graph("pkg", root, allowed={("pkg.top", "pkg.mid.z"): "test"}, others=())) == []
    assert cycles(part_graph("pkg", root, allowed={("pkg.top", "pkg.mid"): "test"}, others=())) != []


def test_two_separate_cycles_are_two_components():
    edges = {("a", "b"): [], ("b", "a"): [], ("c", "d"): [], ("d", "e"): [], ("e", "c"): [], ("a", "c"): []}
    assert cycles(edges) == [["a", "b"], ["c", "d", "e"]]
    assert cycles({("a", "b"): [], ("b", "c"): []}) == []


def module_graph(package: str, root: Path) -> dict[tuple[str, str], list[str]]:
    """Edges between the modules of ``package`` (not its parts): {(A, B): ["importer:line", ...]}, every import
    anywhere in A (functions included, as :func:`imports_of` finds them); a package's ``__init__`` is a module."""
    modules = package_modules(package, root)
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        for target, line in imports_of(name, path, modules):
            if target != name:
                edges.setdefault((name, target), []).append(f"{path.relative_to(root)}:{line}")
    return edges


def test_calib_modules_import_each_other_one_way():
    """calib is a flat package, so part_graph sees each module as a part: here the modules themselves must form
    no cycle (calib.api and calib.apply once imported each other), with no allow-list."""
    edges = module_graph("calib", _root())
    assert ("calib.cli", "calib.report") in edges and len(edges) > 15  # the parser sees calib's imports
    found = cycles(edges)
    assert not found, "import cycles between calib's modules:\n" + _explain(edges, found)


def test_module_graph_finds_a_cycle_between_two_modules(tmp_path):
    root = _package(tmp_path, {"flat/__init__.py": "", "flat/a.py": "from . import b\n", "flat/b.py": "",
                               "flat/c.py": "def f():\n    from .a import x\n"})
    assert cycles(module_graph("flat", root)) == []
    (root / "flat/b.py").write_text("def g():\n    from flat.c import f\n")  # a -> b -> c -> a, two inside functions
    assert cycles(module_graph("flat", root)) == [["flat.a", "flat.b", "flat.c"]]


def test_gradprobe_modules_import_each_other_one_way():
    """Inside each part too, modules form no cycle (a package ``__init__`` that re-exports its modules counts as a
    module: a module that imports its own package closes a cycle); the front door's callable module is allowed."""
    edges = {e: s for e, s in module_graph("gradprobe", _root()).items() if e not in ALLOWED}
    assert ("gradprobe.cli", "gradprobe.cli.probe") in edges and len(edges) > 300  # the parser sees the imports
    found = cycles(edges)
    assert not found, "import cycles between gradprobe's modules:\n" + _explain(edges, found)
