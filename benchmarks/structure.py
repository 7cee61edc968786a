"""The structure of gradprobe and calib in numbers (issue 15): import cycles, upward imports, module and
function sizes, imports inside functions.

    python benchmarks/structure.py [ROOT]      # ROOT: a checkout (default: this one)

Prints one block of figures; compare two checkouts (e.g. a ``git archive`` of an older commit) by running
it on each. Read with :mod:`ast` only (nothing is imported), with the import parser of
``tests/test_import_graph.py`` (every ``import`` anywhere in a module counts, also inside functions).

- **cycles**: strongly connected components of more than one node (Tarjan 1972) of the graph between
  gradprobe's top-level parts (``gradprobe.probe``, ``gradprobe.models``, ...) and between the modules of
  each package (module granularity, imports inside functions included).
- **upward imports**: imports from a part to a part of a higher layer of :data:`LAYERS` (the layering
  README's "Layout" describes: foundations, tasks, models, rollout and losses, rewards, probe, training,
  studies, the public API, the command line).
- **sizes**: modules over :data:`MODULE_LINES` lines and functions (``def`` to its last line, nested
  functions included in their parent) over :data:`FUNCTION_LINES` lines.
- **imports inside functions**: internal imports (of gradprobe or calib, by line) that are not at module
  level, each classed: *defers a heavy library* when the imported module loads one of :data:`HEAVY`
  (torch, transformers, pandas, ...) at import and the importing module does not (the deferral keeps the
  importer light: ``import gradprobe.cli``, plans, the public API load no torch), else *other* (listed:
  each is a place to look).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import test_import_graph as graph  # noqa: E402  (the one import parser; tests/ is not a package)

MODULE_LINES = 400
FUNCTION_LINES = 80
#: libraries whose import costs seconds or pulls a large stack; a module that imports one at module level
#: (or imports, at module level, a module that does) is heavy
HEAVY = ("torch", "transformers", "vllm", "ray", "matplotlib", "seaborn", "sklearn", "scipy", "statsmodels",
         "pandas", "datasets", "reasoning_gym", "trl", "safetensors")

#: gradprobe's parts from the lowest layer to the highest; a part may import parts of its own or a lower
#: layer only. The package root (the lazy front door) is no part.
LAYERS = [
    # foundations: no model, no task
    ["gradprobe.errors", "gradprobe.outputs", "gradprobe.layout", "gradprobe.config", "gradprobe.memory",
     "gradprobe.tables", "gradprobe.figures", "gradprobe.probe_keys", "gradprobe.streams", "gradprobe.ledger",
     "gradprobe.logprobs", "gradprobe.attention", "gradprobe.char_tokenizer", "gradprobe.tracking",
     "gradprobe.token_counts", "gradprobe.caller"],
    ["gradprobe.tasks", "gradprobe.forecast"],   # prompts and verifiers; forecasts are arithmetic on curves
    ["gradprobe.types", "gradprobe.tiers"],
    ["gradprobe.models"],
    ["gradprobe.rollout", "gradprobe.grpo"],
    ["gradprobe.rewards"],
    ["gradprobe.probe", "gradprobe.probe_settings", "gradprobe.difficulty", "gradprobe.warmstart"],
    ["gradprobe.training", "gradprobe.integrations"],
    ["gradprobe.study"],
    ["gradprobe.api"],
    ["gradprobe.cli"],
]


def _layer(part: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if part in names:
            return i
    return None


def _function_sizes(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []

    def walk(node, outer: str | None):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name if outer is None else f"{outer}.{child.name}"
                if outer is None or "." not in outer:  # top-level functions and methods
                    out.append((child.end_lineno - child.lineno + 1, name))
                walk(child, name)
            elif isinstance(child, ast.ClassDef):
                walk(child, child.name if outer is None else f"{outer}.{child.name}")
            else:
                walk(child, outer)

    walk(tree, None)
    return out


def _module_level(tree) -> list:
    """The import statements that run when the module is imported (module body, its try/if blocks)."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, (ast.Try, ast.If)):
            out += [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return out


def _imports_inside_functions(name: str, path: Path, modules) -> tuple[int, list[tuple[str, str]]]:
    """(internal imports in total, (site, imported module) of those inside a function)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {node.lineno for node in _module_level(tree)}
    found = graph.imports_of(name, path, modules)
    lines = sorted({line for _, line in found})
    inside = [(f"{path}:{line}", target) for target, line in sorted(set(found), key=lambda t: t[1])
              if line not in top]
    return len(lines), inside


def heavy_libraries(modules: dict) -> dict[str, set[str]]:
    """Module -> the :data:`HEAVY` libraries its import loads: directly at module level, or through a
    module-level import of another module (or of a package, whose ``__init__`` runs first)."""
    loads, edges = {}, {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        libs = set()
        for node in _module_level(tree):
            roots = [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else \
                [(node.module or "").split(".")[0]] if not node.level else []
            libs |= {r for r in roots if r in HEAVY}
        loads[name] = libs
        top = {n.lineno for n in _module_level(tree)}
        targets = {t for t, line in graph.imports_of(name, path, modules) if line in top}
        parts = name.split(".")
        targets |= {".".join(parts[:k]) for k in range(1, len(parts)) if ".".join(parts[:k]) in modules}
        for t in list(targets):  # importing a.b.c imports the packages a.b and a first
            tp = t.split(".")
            targets |= {".".join(tp[:k]) for k in range(1, len(tp)) if ".".join(tp[:k]) in modules}
        edges[name] = targets - {name}
    changed = True
    while changed:
        changed = False
        for name, targets in edges.items():
            more = set().union(*(loads[t] for t in targets)) - loads[name] if targets else set()
            if more:
                loads[name] |= more
                changed = True
    return loads


def measure(root: Path) -> dict:
    """Every figure of the module docstring for the checkout at ``root``."""
    modules = {}
    for pkg in graph.PACKAGES:
        modules.update(graph.package_modules(pkg, root))
    edges = graph.part_graph("gradprobe", root)
    part_cycles = graph.cycles(edges)
    module_edges = {}
    for name, path in modules.items():
        for target, _ in graph.imports_of(name, path, modules):
            if target != name:
                module_edges.setdefault((name, target), []).append(name)
    module_cycles = graph.cycles(module_edges)
    upward = [f"{a} -> {b}: " + "; ".join(sites) for (a, b), sites in sorted(edges.items())
              if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a)]
    unlayered = sorted({p for e in edges for p in e if _layer(p) is None})
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules.items()}
    functions = [(n, f"{name}.{fn}") for name, path in modules.items() for n, fn in _function_sizes(path)]
    heavy = heavy_libraries(modules)
    total_imports, deferring, other = 0, [], []
    for name, path in modules.items():
        n, sites = _imports_inside_functions(name, path, modules)
        total_imports += n
        for site, target in sites:
            site = site.replace(str(root) + "/", "") + f" -> {target}"
            spared = sorted(heavy[target] - heavy[name])
            (deferring if spared else other).append(site + (f" (spares {', '.join(spared)})" if spared else ""))
    return {"modules": len(modules), "part_edges": len(edges), "part_cycles": part_cycles,
            "module_cycles": module_cycles, "upward": upward, "unlayered": unlayered,
            "big_modules": sorted(((n, m) for m, n in sizes.items() if n > MODULE_LINES), reverse=True),
            "long_functions": sorted((f for f in functions if f[0] > FUNCTION_LINES), reverse=True),
            "internal_imports": total_imports, "inside_deferring_heavy": deferring, "inside_other": other}


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else HERE.parent
    m = measure(root)
    print(f"structure of {root}: {m['modules']} modules, {m['part_edges']} edges between gradprobe's parts")
    print(f"import cycles between parts: {len(m['part_cycles'])}  {m['part_cycles'] or ''}")
    print(f"import cycles between modules: {len(m['module_cycles'])}  {m['module_cycles'] or ''}")
    print(f"upward imports (between parts, against LAYERS): {len(m['upward'])}")
    for line in m["upward"]:
        print("  " + line)
    if m["unlayered"]:
        print(f"parts not in LAYERS (add them): {m['unlayered']}")
    print(f"modules over {MODULE_LINES} lines: {len(m['big_modules'])}; largest: "
          + ", ".join(f"{name} {n}" for n, name in m["big_modules"][:8]))
    print(f"functions over {FUNCTION_LINES} lines: {len(m['long_functions'])}; longest: "
          + ", ".join(f"{name} {n}" for n, name in m["long_functions"][:8]))
    print(f"internal imports (lines): {m['internal_imports']}; inside functions: "
          f"{len(m['inside_deferring_heavy']) + len(m['inside_other'])} imports, of which "
          f"{len(m['inside_deferring_heavy'])} defer a heavy library from a light module and "
          f"{len(m['inside_other'])} other:")
    for site in m["inside_other"]:
        print("  " + site)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
