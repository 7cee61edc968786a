"""What the notebooks in notebooks/ can get wrong silently, beyond tests/test_notebooks.py (outputs, execution counts,
running from notebooks/) and tests/test_notebooks_public_api.py (submodule imports, names outside ``__all__``).

- The file is in the form nbformat (and so Jupyter) writes: key order, indent 1, a final newline. A hand-edited
  notebook in another key order is rewritten wholesale by the next save in Jupyter, a diff of every cell.
- The public-API rule also holds through an alias or a dynamic import: ``import gradprobe as gp; gp.tiers``,
  ``importlib.import_module("gradprobe.tiers")``, ``getattr(gradprobe, "tiers")`` and ``__import__`` reach a
  submodule that the ``gradprobe.X`` check of test_notebooks_public_api never sees.
- No residue of a run: cell metadata ``execution`` (nbclient's timings) or ``ExecuteTime`` (a Jupyter extension's),
  notebook metadata ``widgets`` (widget state).
- No path that only exists on the machine that wrote it: absolute folders (``/work/``, ``/tmp/``, ``/home/``,
  ``/root/``) or the sibling ``shared`` checkout (``../shared``), which a user's clone does not have.

Every check is a function run on the committed notebooks and on a deliberately broken copy of one (which it refuses).
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path

import nbformat
import pytest

import calib
import gradprobe

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
PUBLIC = {"gradprobe": set(gradprobe.__all__) | {"__version__"}, "calib": set(calib.__all__)}
RUN_KEYS = ("execution", "ExecuteTime")
LOCAL_PATH = re.compile(r"(?<![\w.])(/work/|/tmp/|/home/|/root/)|(\.\./)+shared\b")


def canonical_text(nb) -> str:
    """The notebook as nbformat writes it (what Jupyter saves): ``nbformat.writes`` plus the final newline."""
    return nbformat.writes(nb) + "\n"


def _code(nb) -> str:
    """Code cells joined, IPython magics (``%``) and shell lines (``!``) commented out."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines += [("# " + ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in cell.source.splitlines()]
            lines.append("")
    return "\n".join(lines)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> package, for ``import gradprobe as gp`` / ``import calib as c`` (the bare names included)."""
    names = {package: package for package in PUBLIC}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in PUBLIC:
                    names[alias.asname or alias.name] = alias.name
    return names


def _dynamic(node: ast.Call, names: dict[str, str]) -> str | None:
    """What a call reaches past the public API with, or None: ``importlib.import_module("gradprobe.x")``,
    ``__import__("gradprobe.x")``, ``getattr(gp, "name")`` with a name outside ``__all__``."""
    func, args = node.func, node.args
    text = args[0].value if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str) else None
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called in ("import_module", "__import__") and text and text.partition(".")[0] in PUBLIC and "." in text:
        return f"{called}({text!r})"
    if (called == "getattr" and len(args) >= 2 and isinstance(args[0], ast.Name) and args[0].id in names
            and isinstance(args[1], ast.Constant) and args[1].value not in PUBLIC[names[args[0].id]]):
        return f"getattr({args[0].id}, {args[1].value!r})"
    return None


def aliased_private_uses(source: str) -> list[str]:
    """Uses of a non-public ``gradprobe``/``calib`` name through an alias or a dynamic import, as ``line N: what``."""
    tree = ast.parse(source)
    names = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names
                and node.value.id not in PUBLIC and node.attr not in PUBLIC[names[node.value.id]]):
            found.append((node.lineno, f"{node.value.id}.{node.attr} ({names[node.value.id]}.{node.attr})"))
        elif isinstance(node, ast.Call) and (what := _dynamic(node, names)):
            found.append((node.lineno, what))
    return [f"line {n}: {what}" for n, what in sorted(found)]


def run_residue(nb) -> list[str]:
    """Metadata a run leaves behind: per-cell ``execution``/``ExecuteTime``, notebook ``widgets``."""
    found = [f"cell {i} metadata {key!r}" for i, cell in enumerate(nb.cells) for key in RUN_KEYS
             if key in cell.get("metadata", {})]
    return found + (["notebook metadata 'widgets'"] if "widgets" in nb.metadata else [])


def local_paths(nb) -> list[str]:
    """Cells naming a path that exists only where the notebook was written (absolute folders, ``../shared``)."""
    return [f"cell {i}: {m.group(0)!r}" for i, cell in enumerate(nb.cells)
            for m in LOCAL_PATH.finditer(cell.source)]


def problems(path: Path, text: str | None = None) -> list[str]:
    """Everything this module refuses in the notebook at ``path`` (or in ``text``, a copy of it)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    nb = nbformat.reads(text, as_version=4)
    found = [] if text == canonical_text(nb) else [
        "not in the form nbformat writes (rewrite it: nbformat.write(nbformat.read(path, 4), path))"]
    return found + aliased_private_uses(_code(nb)) + run_residue(nb) + local_paths(nb)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_canonical_public_and_portable(path):
    assert problems(path) == [], f"{path.name}: {problems(path)}"


def _broken(nb, *, code: str = "", metadata: dict | None = None, markdown: str = ""):
    """A copy of ``nb`` with ``code`` appended to its first code cell, ``metadata`` to that cell's metadata and
    ``markdown`` to its first cell."""
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.source += code
    cell.metadata.update(metadata or {})
    nb.cells[0].source += markdown
    return canonical_text(nb)


def test_a_broken_copy_of_a_notebook_is_refused_for_each_defect():
    path = REPO / "notebooks" / "02_matched_compute_study.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert problems(path, canonical_text(nb)) == []
    alias = _broken(nb, code="\nimport gradprobe as gp\nimport calib as cb\ngp.tiers.tier_path('tiny')\ncb.model\n"
                              "gp.load_study\n")
    assert [p.split(": ", 1)[1] for p in problems(path, alias)] == [
        "gp.tiers (gradprobe.tiers)", "cb.model (calib.model)"]
    dynamic = _broken(nb, code="\nimport importlib\nimportlib.import_module('gradprobe.tiers')\n"
                                "getattr(gradprobe, '_LAZY')\n__import__('calib.model')\ngetattr(gradprobe, 'probe')\n")
    assert [p.split(": ", 1)[1] for p in problems(path, dynamic)] == [
        "import_module('gradprobe.tiers')", "getattr(gradprobe, '_LAZY')", "__import__('calib.model')"]
    timed = _broken(nb, metadata={"execution": {"iopub.execute_input": "2026-12-07T19:00:00Z"}})
    assert problems(path, timed) == ["cell 1 metadata 'execution'"]
    paths = _broken(nb, code="\nDATA = Path('../shared/data/gsm8k')\nOUT = Path('/work/main/runs')\n",
                    markdown="\nsee ../../shared/DESIGN.md")
    assert problems(path, paths) == ["cell 0: '../../shared'", "cell 1: '../shared'", "cell 1: '/work/'"]
    reordered = canonical_text(nb).replace('"execution_count": null,\n   "id": "cell-01",\n',
                                           '"id": "cell-01",\n   "execution_count": null,\n', 1)
    assert reordered != canonical_text(nb)
    assert problems(path, reordered)[0].startswith("not in the form nbformat writes")


def test_the_old_public_api_check_misses_what_this_one_finds():
    """The gap this module closes: tests/test_notebooks_public_api.private_uses accepts an alias's submodule."""
    from test_notebooks_public_api import private_uses

    source = "import gradprobe as gp\ngp.tiers.tier_path('tiny')\n"
    assert private_uses(source) == []
    assert aliased_private_uses(source) == ["line 2: gp.tiers (gradprobe.tiers)"]
