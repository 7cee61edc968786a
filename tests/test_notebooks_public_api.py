"""The notebooks in notebooks/ use only the public API: names of ``gradprobe`` and ``calib`` at the top level.

The project's rule (README, "Python API"): notebooks are thin and import only what ``gradprobe.__all__`` and
``calib.__all__`` export (the lazy ``_LAZY`` tables), so that a user can copy a cell and a refactor of a
submodule cannot silently break them. Each notebook's code cells are parsed with :mod:`ast` (nothing is
executed; IPython magics and shell lines are dropped first) and three things are refused:

- ``import gradprobe.X`` / ``import calib.X`` and ``from gradprobe.X import ...`` / ``from calib.X import ...``
  (a submodule, whatever the name);
- ``from gradprobe import name`` / ``from calib import name`` for a name outside the package's ``__all__``;
- ``gradprobe.name`` / ``calib.name`` (attribute access on the package) for a name outside ``__all__``
  (``__version__`` is allowed), which would reach a submodule without importing it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import calib
import gradprobe

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
PACKAGES = {"gradprobe": set(gradprobe.__all__) | {"__version__"}, "calib": set(calib.__all__)}


def _code(path: Path) -> str:
    """The notebook's code cells joined, magics (``%``) and shell lines (``!``) commented out."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        lines += [("# " + line) if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
        lines.append("")
    return "\n".join(lines)


def private_uses(source: str) -> list[str]:
    """Every use of a ``gradprobe``/``calib`` name that is not public, as ``line N: what``, in source order."""
    found = []

    def check(node, what: str, package: str, name: str | None) -> None:
        if name is None or name not in PACKAGES[package]:
            found.append((node.lineno, what))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root, _, rest = alias.name.partition(".")
                if root in PACKAGES and rest:
                    check(node, f"import {alias.name}", root, None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            root, _, rest = node.module.partition(".")
            if root in PACKAGES:
                for alias in node.names:
                    check(node, f"from {node.module} import {alias.name}", root, None if rest else alias.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in PACKAGES:
            check(node, f"{node.value.id}.{node.attr}", node.value.id, node.attr)
    return [f"line {n}: {what}" for n, what in sorted(found)]


def test_the_checker_refuses_submodules_and_private_names_and_accepts_the_public_ones():
    bad = ("import gradprobe.tasks\nfrom gradprobe.tasks.verify import extract_answer\n"
           "from calib.report import compute\nfrom gradprobe import tiers\nx = calib.model.fit_calibration\n"
           "import calib.apply as a\nfrom calib import dataset\n")
    assert private_uses(bad) == [
        "line 1: import gradprobe.tasks", "line 2: from gradprobe.tasks.verify import extract_answer",
        "line 3: from calib.report import compute", "line 4: from gradprobe import tiers",
        "line 5: calib.model", "line 6: import calib.apply", "line 7: from calib import dataset"]
    good = ("import calib\nimport gradprobe\nfrom gradprobe import load_study, probe\nfrom calib import fit\n"
            "gradprobe.rank_prompts, calib.apply, calib.build_rows, gradprobe.__version__\nimport gradprobe as gp\n")
    assert private_uses(good) == []


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4, f"expected the notebooks in {REPO / 'notebooks'}, found {NOTEBOOKS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_uses_only_the_public_api(path):
    uses = private_uses(_code(path))
    assert not uses, (f"{path.name} reaches past the public API of gradprobe/calib (their __all__): {uses}; "
                      "use the top-level names, or export what a user needs in the package's _LAZY table")


@pytest.mark.parametrize("package", [gradprobe, calib], ids=lambda m: m.__name__)
def test_every_public_name_resolves(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, f"{package.__name__}.{name} is listed in __all__ but is None"
