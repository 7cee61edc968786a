"""Which files beside a plug-in reward are its helper modules (``plugin_identity``'s ``modules``): those its imports
would load. A package folder reached through a symbolic link records the same helpers as the folder itself (before,
the module's resolved ``__file__`` was matched against its unresolved name, so nothing was recorded); a file named
like a standard-library module or an installed module already imported (``json.py``, ``random.py``, ``numpy.py``)
is not one, since ``import json`` gets the standard library's (before, it was recorded, and editing it refused a
resume); an import under ``if TYPE_CHECKING:`` never runs and names no helper (before, it did)."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from gradprobe.rewards import plugin
from gradprobe.rewards.base import UnknownRewardError
from gradprobe.rewards.plugin import plugin_identity

from plugin_helpers import forget_modules, forget_reward as _forget, plugin_module, sha256_of as _sha

FN = "def fn(prompts, completions, **kwargs):\n    return [0.0 for c in completions]\n"


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """The registry, plug-in origins and sys.path restored after the test (:func:`plugin_module`), and every module
    imported from ``tmp_path`` (through a link or not), and the identities recorded here, forgotten."""
    identities = dict(plugin._IDENTITIES)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    with plugin_module(tmp_path, monkeypatch, "gphr_unused", ""):
        yield tmp_path
    plugin._IDENTITIES.clear()
    plugin._IDENTITIES.update(identities)
    forget_modules(tmp_path)


def _write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)


PACKAGE = {"__init__.py": "", "rw.py": "from .shared import K\nimport {pkg}.absolute\n" + FN,
           "shared.py": "K = 1\n", "absolute.py": "from . import chained\n", "chained.py": "C = 2\n",
           "unused.py": "U = 3\n"}


def test_a_package_folder_reached_through_a_symlink_records_the_helpers_the_folder_does(fresh):
    """``src/gphr1pkg -> checkouts/gphr1pkg-v2`` (a link to a folder of another name) records what a plain copy of
    the folder records."""
    real = fresh / "checkouts" / "gphr1pkg-v2"
    _write(real, {k: v.format(pkg="gphr1pkg") for k, v in PACKAGE.items()})
    (fresh / "src").mkdir()
    (fresh / "src" / "gphr1pkg").symlink_to(real, target_is_directory=True)
    expected = {name: _sha(real / name) for name in ("__init__.py", "absolute.py", "chained.py", "shared.py")}
    spec = "gphr1pkg.rw:fn"
    sys.path.insert(0, str(fresh / "src"))
    assert plugin_identity(spec) == {"spec": spec, "file": str((real / "rw.py").resolve()),
                                     "sha256": _sha(real / "rw.py"), "modules": expected,
                                     "package_root": str(fresh / "src")}
    _forget(spec, fresh)  # a new process that finds a plain copy of the folder: the same helpers
    shutil.copytree(real, fresh / "plain" / "gphr1pkg")
    sys.path[0] = str(fresh / "plain")
    assert plugin_identity(spec)["modules"] == expected
    assert plugin_identity(spec)["file"] == str((fresh / "plain/gphr1pkg/rw.py").resolve())


def test_a_sub_package_and_a_sys_path_entry_through_symlinks_record_their_helpers(fresh):
    """``pkg/sub -> elsewhere`` (the reward's own folder a link) and a ``sys.path`` entry that is a link; a file
    reward whose folder is a link records its helper too."""
    elsewhere = fresh / "elsewhere"
    _write(elsewhere, {"__init__.py": "", "rw.py": "from . import near\nfrom .. import top\n" + FN,
                       "near.py": "N = 1\n"})
    _write(fresh / "proj", {"gphr2pkg/__init__.py": "", "gphr2pkg/top.py": "T = 1\n"})
    (fresh / "proj" / "gphr2pkg" / "sub").symlink_to(elsewhere, target_is_directory=True)
    (fresh / "projlink").symlink_to(fresh / "proj", target_is_directory=True)
    sys.path.insert(0, str(fresh / "projlink"))
    assert plugin_identity("gphr2pkg.sub.rw:fn")["modules"] == {  # the parent package's files are not its folder's
        "__init__.py": _sha(elsewhere / "__init__.py"), "near.py": _sha(elsewhere / "near.py")}
    _write(fresh / "files", {"rw.py": "import gphr2_help\n" + FN, "gphr2_help.py": "H = 1\n"})
    (fresh / "fileslink").symlink_to(fresh / "files", target_is_directory=True)
    assert plugin_identity("fileslink/rw.py:fn")["modules"] == {"gphr2_help.py": _sha(fresh / "files/gphr2_help.py")}


def test_a_file_named_like_a_stdlib_or_imported_installed_module_is_not_a_helper(fresh):
    """``import json`` / ``random`` / ``numpy`` get the standard library's and the installed module (numpy is
    imported with torch), not the files beside the reward, which raise if run: the reward loads, and only its real
    helper is recorded; a package's own ``json.py`` (``from . import json``) is what that import loads: recorded."""
    assert "numpy" in sys.modules and "json" in sys.stdlib_module_names and "random" in sys.stdlib_module_names
    shadow = "raise SystemExit('a shadowing file ran')\n"
    _write(fresh, {"gphr3_rw.py": "import json\nimport random\nfrom numpy import float64\nimport gphr3_help\n" + FN,
                   "json.py": shadow, "random.py": shadow, "numpy.py": shadow, "gphr3_help.py": "H = 1\n",
                   "gphr3pkg/__init__.py": "", "gphr3pkg/rw.py": "from . import json\n" + FN,
                   "gphr3pkg/json.py": "J = 1\n"})
    assert plugin_identity("gphr3_rw:fn")["modules"] == {"gphr3_help.py": _sha(fresh / "gphr3_help.py")}
    assert sys.modules["gphr3_rw"].json is sys.modules["json"] and "gphr3pkg" not in sys.modules
    assert plugin_identity("gphr3pkg.rw:fn")["modules"] == {
        "__init__.py": _sha(fresh / "gphr3pkg/__init__.py"), "json.py": _sha(fresh / "gphr3pkg/json.py")}


def test_a_users_module_imported_from_elsewhere_first_is_refused_and_a_fresh_process_records_the_helper(fresh):
    """A notebook's ``helper`` of the user's imported from another folder before: the reward beside its own
    ``gphr4_help.py`` would run the other file's code, so loading it is refused (naming both files); in a fresh
    process the helper beside the reward is recorded, and a stdlib-named file is not."""
    _write(fresh, {"gphr4_rw.py": "import gphr4_help\nimport json\n" + FN, "gphr4_help.py": "H = 1\n",
                   "json.py": "raise SystemExit('a shadowing file ran')\n"})
    before = sys.modules.get("gphr4_help")
    sys.modules["gphr4_help"] = types.ModuleType("gphr4_help")  # the user's, from elsewhere (no file)
    sys.modules["gphr4_help"].__file__ = str(fresh / "other" / "gphr4_help.py")
    try:
        with pytest.raises(UnknownRewardError, match=r"imports 'gphr4_help', and this process has already imported "
                                                     r"'gphr4_help' from .*other/gphr4_help\.py, not "):
            plugin_identity(str(fresh / "gphr4_rw.py") + ":fn")
    finally:
        sys.modules.pop("gphr4_help")
        if before is not None:
            sys.modules["gphr4_help"] = before
    _forget(str(fresh / "gphr4_rw.py") + ":fn", fresh)
    fresh_process = plugin_identity(str(fresh / "gphr4_rw.py") + ":fn")["modules"]
    assert fresh_process == {"gphr4_help.py": _sha(fresh / "gphr4_help.py")}


def test_imports_under_type_checking_are_not_helpers(fresh):
    """``if TYPE_CHECKING:`` and ``if typing.TYPE_CHECKING:`` bodies never run (their ``else:`` does), in the reward
    and in its helpers; ``if not TYPE_CHECKING:`` runs."""
    _write(fresh, {
        "gphr5_rw.py": "from __future__ import annotations\nimport typing\nimport typing as t\n"
                       "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import gphr5_a\n"
                       "if typing.TYPE_CHECKING:\n    from gphr5_b import B\nelse:\n    import gphr5_else\n"
                       "if not TYPE_CHECKING:\n    import gphr5_not\n\n"
                       "def fn(prompts, completions, **kwargs):\n    if t.TYPE_CHECKING:\n        import gphr5_c\n"
                       "    import gphr5_lazy\n    return [0.0 for c in completions]\n",
        "gphr5_else.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gphr5_d\n",
        **{f"gphr5_{n}.py": "X = 1\n" for n in ("a", "b", "c", "d", "not", "lazy")}})
    assert plugin_identity("gphr5_rw:fn")["modules"] == {
        name: _sha(fresh / name) for name in ("gphr5_else.py", "gphr5_lazy.py", "gphr5_not.py")}
