"""Rewards named by import path, so a new reward can be probed, trained and studied from the command line.

``--rewards outcome,my_rewards:brevity`` (a module on ``sys.path`` or in the working directory) or
``--rewards outcome,rewards/brevity.py:brevity`` (a Python file), and the same strings as a plan's
``reward = "..."``. The part after the last ``:`` names an attribute of the module:

- a TRL-style reward function ``fn(prompts, completions, **columns) -> list[float | None]`` (one that takes
  ``completions`` or ``**kwargs``) is wrapped by :func:`gradprobe.rewards.sequence.sequence_reward`, with
  GRPO's group normalisation, exactly as ``gradprobe.probe(rewards=[fn])`` does from Python;
- a native :data:`gradprobe.rewards.base.Reward` ``reward(batch, ctx) -> RewardOutput`` is called as it is,
  through a check (:func:`checked_native`): an exception it raises, or a return that is not a
  :class:`~gradprobe.rewards.base.RewardOutput` with advantages (N, T) and valid (N,), becomes a
  :class:`~gradprobe.rewards.base.RewardFunctionError` naming the reward, as the TRL-style wrapper's errors do
  (its ``stats``, which must be what gradprobe can write, advantages too large for the probe's statistics
  (:func:`gradprobe.rewards.output.advantage_overflow`) and the detach of its advantages from any autograd graph
  are checked where every reward's output enters: :func:`gradprobe.rewards.base.checked_output`).

A module name is looked up with the working directory first on ``sys.path``, as ``python -m`` does; a file's
folder is put on ``sys.path`` as ``python FILE.py`` does, so the file may import modules beside it (each one's
sha256 is recorded with the file's, :func:`plugin_identity`'s ``modules``, found by reading the import
statements of the files, not by what was imported: a file beside it named like a standard-library module, or an
installed one already imported, is not one, since ``import json`` gets the standard library's; nor is an import
under ``if TYPE_CHECKING:``); a
function that fits neither form is refused when the reward is loaded, before any rollout. A plan's rewards
by import path are imported when a run or study starts, not when the plan is read, so reading or analysing
a study needs none of their code.

The reward is registered under the whole string (``my_rewards:brevity``), which is its name in
``probe.json``, tables and plans, so a study's worker processes resolve it the same way. A module is
imported once per process (Python's import cache; a file under a name derived from its resolved path).
Importing runs the module's code, as ``python -m`` would: name only files you trust.

A name says where to look, not which code it finds: ``rw.py:brevity`` from another working directory, or
after the file was edited, is another function. :func:`plugin_identity` gives the code a name runs in this
process (the module's file, resolved, and the sha256 of its bytes when the module was first used, and the same of
each helper module it imports from its own folder: an edited ``helper.py`` beside ``rw.py`` is other code too),
which a training run records in its ``config.json`` and checks when it resumes
(:mod:`gradprobe.training.run_folder`), and a study in its ``study.json`` (:mod:`gradprobe.study.freeze`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import site
import sys
import sysconfig
from functools import lru_cache, wraps
from pathlib import Path

import torch

from ..tables import shown
from .base import REWARDS, RESOLVERS, Reward, RewardFunctionError, RewardOutput, SameObject, UnknownRewardError
from .sequence import call_reward, one_line, sequence_reward

__all__ = ["load_reward_plugin", "is_plugin_name", "checked_native", "plugin_identity"]

#: (module file, attribute), and each function object (:class:`~gradprobe.rewards.base.SameObject`), -> the first
#: name it was loaded under, so a second name for it is refused: ``two:f`` and ``two.py:f`` (one file), ``two.py:g``
#: where the file says ``g = f`` or two files import one function (one object)
_ORIGINS: dict[tuple[str, str] | SameObject, str] = {}
#: name -> {"spec", "file", "sha256", "modules"[, "package_root"]} of each reward loaded here
#: (:func:`plugin_identity`)
_IDENTITIES: dict[str, dict] = {}
#: module name -> (the module object, the sha256 of its file when a reward was first taken from it)
_MODULE_SHAS: dict[str, tuple[object, str | None]] = {}

_FORMS = ("MODULE:FUNCTION (a module importable from the working directory or sys.path) or "
          "path/to/file.py:FUNCTION")


def is_plugin_name(name: str) -> bool:
    """True for ``MODULE:ATTR`` / ``FILE.py:ATTR`` names (a ``:`` with text on both sides)."""
    module, _, attr = name.rpartition(":")
    return bool(module.strip()) and bool(attr.strip())


def _import_module(module: str, spec: str):
    """The module named by ``module`` (a dotted name or a ``.py`` path); UnknownRewardError naming ``spec``."""
    if module.endswith(".py") or os.sep in module or "/" in module:
        path = Path(module).expanduser().resolve()
        if path.is_dir():
            folder = shown(module.rstrip("/" + os.sep))
            raise UnknownRewardError(f"reward {spec!r}: {shown(module)} is a folder, not a Python file; name the file "
                                     f"that defines the function ({folder}/FILE.py:FUNCTION), or "
                                     f"write it as {_FORMS}")
        if not path.is_file():
            raise UnknownRewardError(f"reward {spec!r}: no file {shown(module)} (from {shown(str(Path.cwd()))}); write "
                                     f"it as {_FORMS}")
        name = _file_module_name(path)
        if name in sys.modules:
            return sys.modules[name]
        _refuse_cached_neighbour(spec, path)
        if str(path.parent) not in sys.path:  # as `python FILE.py` does: the file's modules beside it import
            sys.path.insert(0, str(path.parent))
        loader = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        try:
            loader.loader.exec_module(mod)
        except (Exception, SystemExit) as e:  # sys.exit() at import: one line, as from the function itself
            del sys.modules[name]
            raise UnknownRewardError(f"reward {spec!r}: importing {shown(str(path))} raised {_raised(e)}") from e
        return mod
    cwd = os.getcwd()
    if cwd not in sys.path:  # a console script's sys.path lacks the working directory `python -m` puts first
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise UnknownRewardError(f"reward {spec!r}: no module named {e.name!r} (from {shown(cwd)}); write it as "
                                     f"{_FORMS}") from None
        raise UnknownRewardError(f"reward {spec!r}: importing {shown(module)} raised {_raised(e)}") from e
    except (Exception, SystemExit) as e:
        sys.modules.pop(module, None)  # a module stopped part-way is not kept for a later lookup
        raise UnknownRewardError(f"reward {spec!r}: importing {shown(module)} raised {_raised(e)}") from e


def _refuse_cached_neighbour(spec: str, path: Path) -> None:
    """Refuse the reward file ``path`` when it imports a module of its own folder (``helper.py`` beside it) whose
    name this process has already imported from another file of the user's (another plug-in folder's
    ``helper.py``, in a notebook): Python imports a module name once per process, so the reward would run the other
    file's code (or fail to import a name it lacks) while its record (:func:`plugin_identity`) names the file beside
    it. Standard-library and installed modules are not the user's: ``import json`` beside a ``json.py`` gets the
    standard library's, as :func:`_loads_local` says.

    Raises
    ------
    UnknownRewardError
        Naming the reward, the module, both files and the fix (rename one of the two, or a fresh process).
    """
    folder = path.parent
    for top in dict.fromkeys(name.split(".")[0] for name in _imported_names(path, "")):
        mod = sys.modules.get(top)
        if mod is None or top in sys.stdlib_module_names or not _module_files(top, folder):
            continue
        there = _locations(getattr(mod, "__file__", None), getattr(mod, "__path__", None))
        if not there or _module_places(folder, top) & there or all(_installed(Path(p)) for p in there):
            continue
        mine = _module_files(top, folder)[0]
        raise UnknownRewardError(f"reward {spec!r}: {shown(str(path))} imports {top!r}, and this process has already "
                                 f"imported {top!r} from {shown(sorted(there)[0])}, not {shown(str(mine))} beside it "
                                 "(Python imports a module name once per process, so the reward would run the other "
                                 "file's code); rename one of the two modules, or load this reward in a fresh "
                                 "process (a new kernel)")


def _file_module_name(path: Path) -> str:
    """The module name a ``FILE.py`` reward at ``path`` (resolved) is imported under: its stem and a hash of the
    path's bytes (``os.fsencode``), so two files of one stem in different folders are two modules. The stem's
    control characters and lone surrogates (an undecodable byte of the file name, as ``os.fsdecode`` gives it) are
    escaped (:func:`gradprobe.tables.shown`: ``\\udcff``), so the name is text that UTF-8 can encode (a
    traceback, a log) while the file is read from its path as it is on the OS."""
    return f"gradprobe_user_rewards.{shown(path.stem)}_{hashlib.sha256(os.fsencode(path)).hexdigest()[:10]}"


def _shadowed(module: str, mod, attr: str) -> str:
    """``"; ..."``: the module ``module`` was imported from elsewhere than the file of that name in the working
    directory (a standard-library or installed module of the same name, ``random``, ``utils``, comes first once
    imported), with the fix (name the file: ``random.py:f``); ``""`` otherwise."""
    local = Path(os.getcwd(), *module.split(".")).with_suffix(".py")
    found = getattr(mod, "__file__", None)
    if not local.is_file() or (found and Path(found).resolve() == local.resolve()):
        return ""
    return (f"; this {shown(module)} is {shown(found or 'a built-in module')}, not {shown(str(local))}: a module of "
            f"that name (Python's own, or installed) is found first, so name the file instead: "
            f"{shown(module.replace('.', '/'))}.py:{shown(attr)}")


def _raised(e: BaseException) -> str:
    """``TYPE: MESSAGE`` of an exception raised by a plug-in's import, on one line (:func:`one_line`); a SystemExit
    shows its code (``sys.exit()``: ``SystemExit: None``, where its text would be empty); control characters and
    lone surrogates (a file name's undecodable byte) escaped (:func:`gradprobe.tables.shown`)."""
    return shown(one_line(e))


def _takes_completions(fn) -> bool:
    """Whether ``fn`` is called like a TRL reward (a ``completions`` parameter or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "completions" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def load_reward_plugin(spec: str) -> Reward:
    """Import and register the reward named ``MODULE:ATTR`` or ``FILE.py:ATTR`` (module docstring).

    Parameters
    ----------
    spec : str
        The import path, e.g. ``"my_rewards:brevity"`` or ``"rewards/brevity.py:brevity"``.

    Returns
    -------
    Reward
        Registered under ``spec`` in :data:`gradprobe.rewards.base.REWARDS`.

    Raises
    ------
    UnknownRewardError
        ``spec`` is not of that form, the module or file is missing or raised on import (named, with the
        exception), or it has no such attribute (its public callables are listed), or that is not callable.
    """
    if not is_plugin_name(spec):
        raise UnknownRewardError(f"reward {spec!r} is not {_FORMS}")
    if spec in REWARDS:
        return REWARDS[spec]
    module, _, attr = spec.rpartition(":")
    if ":" in module:
        raise UnknownRewardError(f"reward {spec!r} has more than one ':'; write it as {_FORMS}")
    if "\\" in module:
        raise UnknownRewardError(f"reward {spec!r}: write the file's path with '/' (as path/to/file.py:FUNCTION)")
    mod = _import_module(module.strip(), spec)
    fn = getattr(mod, attr.strip(), None)
    if fn is None:
        if getattr(mod, "__file__", None) is None and hasattr(mod, "__path__"):  # a folder imported as a namespace
            where = shown(", ".join(dict.fromkeys(map(str, mod.__path__))))
            raise UnknownRewardError(f"reward {spec!r}: {shown(module.strip())} is a folder (found as {where}), not a "
                                     f"Python module; name the file that defines the function "
                                     f"({shown(module.strip())}/FILE.py:FUNCTION), or write it as {_FORMS}")
        found = sorted(n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == mod.__name__)
        raise UnknownRewardError(f"reward {spec!r}: {shown(module)} has no {attr.strip()!r}; its functions: "
                                 f"{', '.join(found) or 'none'}{_shadowed(module.strip(), mod, attr.strip())}")
    if not callable(fn):
        raise UnknownRewardError(f"reward {spec!r}: {shown(module)}.{shown(attr.strip())} is a {type(fn).__name__}, "
                                 "not a function")
    origin = (getattr(mod, "__file__", None) or mod.__name__, attr.strip())
    _refuse_second_name(spec, origin, fn)
    reward = sequence_reward(fn, name=spec) if _takes_completions(fn) else _native(fn, spec)
    REWARDS[spec] = reward
    _ORIGINS[origin] = _ORIGINS[SameObject(fn)] = spec
    _IDENTITIES[spec] = _identity(spec, mod)
    return reward


def _refuse_second_name(spec: str, origin: tuple[str, str], fn) -> None:
    """Refuse ``spec`` when another name already loaded the same reward: the same attribute of the same module file
    (``origin``: ``two:f`` and ``two.py:f``), or the same function object ``fn`` under another attribute or file
    (``g = f`` in the file, one function imported into two files), which would be probed and trained as two rewards.

    Raises
    ------
    UnknownRewardError
        Naming both names, where the function is, and the fix (one name)."""
    other = _ORIGINS.get(origin)
    where = shown(origin[0])
    if other is None:
        other = _ORIGINS.get(SameObject(fn))
        code = getattr(inspect.unwrap(fn), "__code__", None)  # a callable object, a partial: none
        defined = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        where = (f"the same function object: {shown(defined)}, defined in "
                 f"{shown(code.co_filename if code else origin[0])}")
    if other is not None and other != spec:
        raise UnknownRewardError(f"reward {spec!r} is the function {other!r} already names ({where}); use one name "
                                 "for it (two names would probe and train it as two rewards)")


def _identity(spec: str, mod) -> dict:
    """``{"spec", "file", "sha256", "modules"}`` of the module ``mod`` a reward named ``spec`` comes from: its file,
    resolved (None without one), the sha256 (hex) of the file's bytes the first time a reward was taken from this
    module object (a module imported again, e.g. after ``del sys.modules[...]``, is hashed again; None: unreadable),
    and its helper modules (:func:`_helper_modules`: the files its imports name, read from disk); with
    ``"package_root"`` when a ``pkg.mod:fn`` reward's root cannot be read from the resolved file
    (:func:`_linked_package_root`)."""
    file = getattr(mod, "__file__", None)
    path = str(Path(file).resolve()) if file else None
    identity = {"spec": spec, "file": path, "sha256": _module_sha(mod, path),
                "modules": _helper_modules(spec, Path(os.path.abspath(file))) if path else {}}
    root = _linked_package_root(spec, file) if path else None
    return {**identity, "package_root": root} if root is not None else identity


def _module_parts(spec: str) -> list[str]:
    """The dotted module name's parts of a ``pkg.mod:fn`` reward ``spec`` (``["pkg", "mod"]``); ``[]`` for a
    ``FILE.py:fn`` reward (a name ending in ``.py`` or holding a path separator)."""
    module = spec.rpartition(":")[0].strip()
    return [] if module.endswith(".py") or os.sep in module or "/" in module else module.split(".")


def _root_of(path: Path, parts: list[str]) -> Path | None:
    """The ``sys.path`` entry under which the module of dotted name parts ``parts`` is the file ``path``
    (``src/pkg/mod.py`` or ``src/pkg/mod/__init__.py`` for ``["pkg", "mod"]`` -> ``src``), read from the path's
    folder names as given (not resolved); None when the path does not end in those parts."""
    tail = path.parent.parts if path.name == "__init__.py" else path.with_suffix("").parts
    return Path(*tail[:-len(parts)]) if parts and len(tail) > len(parts) and list(tail[-len(parts):]) == parts \
        else None


def _linked_package_root(spec: str, file: str) -> str | None:
    """The package root (the ``sys.path`` entry: absolute, not resolved) that the ``pkg.mod:fn`` reward ``spec``'s
    module file ``file`` (its ``__file__``) was imported under, when the file's resolved path does not end in the
    module name's parts, so that the root cannot be read from the recorded (resolved) file: a package folder reached
    through a symbolic link (``src/pkg -> realpkg``, ``src/pkg/rw.py`` resolving to ``src/realpkg/rw.py``: ``src``).
    :func:`plugin_identity` records it as ``package_root``, for a resume that cannot import the module to name the
    root to put back on ``PYTHONPATH`` (:func:`gradprobe.training.run_folder.refuse_unimportable_reward`). None
    otherwise (a ``FILE.py:fn`` reward, a root the resolved path gives: nothing more is recorded)."""
    parts = _module_parts(spec)
    imported = _root_of(Path(os.path.abspath(file)), parts)
    return str(imported) if imported is not None and _root_of(Path(os.path.realpath(file)), parts) is None else None


def _module_sha(mod, path: str | None) -> str | None:
    """The sha256 (hex) of module ``mod``'s file ``path`` when it was first hashed for this module object (None:
    no file, or unreadable)."""
    held = _MODULE_SHAS.get(mod.__name__)
    if held is None or held[0] is not mod:
        try:
            sha = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
        except OSError:
            sha = None
        held = _MODULE_SHAS[mod.__name__] = (mod, sha)
    return held[1]


def _helper_modules(spec: str, file: Path) -> dict[str, str]:
    """``{path relative to file's folder ('/'-separated): sha256}`` of each helper module of the plug-in module
    file ``file`` (its ``__file__``, absolute, as imported: not resolved; loaded for the reward ``spec``): the
    ``.py`` files under ``file``'s folder (its subfolders too) that its import statements name and would load, and
    theirs in turn (:func:`_static_helpers`), ``file`` itself excluded. Read from the files on disk (nothing is
    imported), so the same reward gives the same record in any process whatever of the user's code that process
    imported before (another reward sharing a helper, the user's script, a notebook); what a name resolves to
    (:func:`_loads_local`) depends only on the standard library's names, ``sys.path`` and the installed modules
    already imported.

    Names are resolved against one root folder: for a ``FILE.py:fn`` reward, the file's folder (put first on
    ``sys.path`` when it is loaded); for a ``pkg.mod:fn`` reward, the ``sys.path`` entry the package was found under
    (the file's path less the module name's parts: ``src/`` for ``src/pkg/mod.py``), so that ``import pkg.shared``
    and ``from .shared import x`` find ``src/pkg/shared.py``. Only files under the reward file's own folder are
    recorded, and followed (``pkg/`` for ``pkg.mod``, whose ``__init__.py`` is one; a parent package's is not):
    the code beside the reward's that runs with it. The root and the folder are taken from the path the module was
    imported by, ``file``, and the path resolved when that does not end in the module's name, so that a folder
    reached through a symbolic link (``src/pkg -> /elsewhere/pkg``, a ``sys.path`` entry that is a link) gives the
    same record as the folder itself; the files are compared with their folders resolved."""
    module, parts = spec.rpartition(":")[0].strip(), _module_parts(spec)
    for path in dict.fromkeys([file, Path(os.path.realpath(file))]):  # as imported first, then resolved
        root = _root_of(path, parts)
        if root is not None:
            return _static_helpers(path, root, path.parent, [module])
    return _static_helpers(file, file.parent, file.parent, [])


def _static_helpers(file: Path, root: Path, folder: Path, names: list[str]) -> dict[str, str]:
    """``{path relative to folder: sha256}`` of the ``.py`` files under ``folder`` that the import statements of
    ``file`` name, and those of each file found, recursively (:func:`_imported_names`, :func:`_module_files`; names
    resolved against ``root``), ``file`` excluded: module level and inside function and class bodies alike (a lazy
    ``import helper`` in the reward function counts, and one in a ``try:``), but not under ``if TYPE_CHECKING:``
    (``typing.TYPE_CHECKING``: never run). ``names``: the dotted names ``file`` itself is imported under (its
    packages' ``__init__.py`` run with it). A file is under ``folder`` when its folder, resolved, is under
    ``folder`` resolved (symbolic links on either side give the same answer).

    A file is a helper only when the import would load that file (:func:`_loads_local`): a file named as a
    standard-library module (``json.py``, ``random.py`` beside a reward doing ``import json``) is not, nor one named
    as an installed module already imported (``numpy.py``: ``import numpy`` gets the cached numpy), nor one that the
    path finder finds elsewhere first on ``sys.path``. Names found nowhere under ``root`` are not helpers: installed
    packages, the standard library, gradprobe; nor is installed code that lies under the folder (:func:`_installed`:
    a virtual environment, a gradprobe checkout). A dynamic import (``importlib.import_module(name)``,
    ``__import__(name)``, a ``sys.path`` changed in code) names no module in the source, so it cannot be seen, and
    neither can a compiled module (``.so``, ``.pyc``); a file that cannot be read or parsed is recorded (if
    readable) but not followed."""
    inside, local = Path(os.path.realpath(folder)), {}
    seen, todo, found = {os.path.realpath(file), os.path.join(os.path.realpath(file.parent), file.name)}, [file], {}
    while todo:
        path = todo.pop()
        package = ".".join(path.relative_to(root).parent.parts) if path.is_relative_to(root) else ""
        for name in (names if path == file else []) + _imported_names(path, package):
            deps = _module_files(name, root)
            top = name.split(".")[0]
            if deps and top not in local:
                local[top] = _loads_local(top, root)
            for dep in deps if deps and local[top] else []:
                real = Path(os.path.realpath(dep.parent)) / dep.name
                if str(real) in seen:
                    continue
                seen.add(str(real))
                if not real.is_relative_to(inside) or _installed(dep) or _installed(real):
                    continue
                try:
                    found[real.relative_to(inside).as_posix()] = hashlib.sha256(dep.read_bytes()).hexdigest()
                except OSError:  # unreadable: not recorded, as a module that could not be imported
                    continue
                todo.append(dep)
    return dict(sorted(found.items()))


def _loads_local(top: str, root: Path) -> bool:
    """Whether ``import top`` (a top-level module name) in this process would load the module or package of that
    name under ``root`` (``root/top.py``, ``root/top/__init__.py`` or the namespace folder ``root/top``), as the
    import system decides, in this order: already imported from there (``sys.modules``): yes; a standard-library
    name (``sys.stdlib_module_names``, built-in modules): no, the standard library's module is what a reward gets
    (most are imported before any reward, built-in and frozen ones are found first; a file shadowing one is not
    recorded even where it would be found first); already imported from installed code, or without a file
    (``sys.modules``; :func:`_installed`): no, the cached module is returned; else what Python's path finder finds
    first on ``sys.path``, with ``root`` first when it is not on it (as a ``FILE.py`` reward's folder is put):
    that file or folder. A module of the user's own imported from elsewhere is not consulted (so that the record
    does not depend on what else the process imported); the path finder decides for it."""
    here = _module_places(root, top)
    mod = sys.modules.get(top)
    if mod is not None and here & _locations(getattr(mod, "__file__", None), getattr(mod, "__path__", None)):
        return True
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return False
    if mod is not None and all(_installed(Path(p)) for p in _locations(getattr(mod, "__file__", None),
                                                                        getattr(mod, "__path__", None))):
        return False
    search = sys.path if str(root) in sys.path else [str(root), *sys.path]
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, search)
    except (ImportError, OSError, ValueError):  # a broken path entry or hook: the file found on disk is taken
        return True
    return spec is not None and bool(here & _locations(spec.origin, spec.submodule_search_locations))


def _module_places(root: Path, top: str) -> set[str]:
    """The resolved paths the top-level module ``top`` has when it is ``root``'s (``root/top.py``, the package
    ``root/top/__init__.py`` or the namespace folder ``root/top``), to intersect with :func:`_locations`."""
    return {os.path.realpath(root / top), os.path.realpath(root / f"{top}.py"),
            os.path.realpath(root / top / "__init__.py")}


def _locations(file, folders) -> set[str]:
    """The resolved paths of a module's (or module spec's) file ``file`` and package folders ``folders`` (either may
    be None; a namespace package's origin is not a file)."""
    paths = [file] if isinstance(file, str) and os.path.isabs(file) else []
    try:
        paths += [p for p in (folders or []) if isinstance(p, str)]
    except TypeError:  # a __path__ that is not iterable
        pass
    return {os.path.realpath(p) for p in paths}


def _imported_names(path: Path, package: str) -> list[str]:
    """The absolute dotted module names the import statements anywhere in the file ``path`` may import (its
    package ``package``, dotted, ``""`` at the top level, resolves relative imports): ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a submodule), ``from .m import y`` in package ``p``
    gives ``p.m`` and ``p.m.y``. A relative import above the top level is left out (it fails when run), and so is
    an import in the body of ``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:`` (it never runs; its ``else:``
    does, and is read); a file that cannot be read or parsed gives none."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    names, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            todo += node.orelse  # the body runs only under a type checker
            continue
        todo += ast.iter_child_nodes(node)
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".") if package else []
                if node.level > len(up):  # above the top level: `from . import x` in a top-level module
                    continue
                base = ".".join(up[:len(up) - (node.level - 1)] + ([base] if base else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``TYPE_CHECKING`` or ``<name>.TYPE_CHECKING`` (``typing.TYPE_CHECKING``, ``t.``
    for ``import typing as t``, ``typing_extensions.``): true only under a static type checker."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING" and isinstance(test.value, ast.Name))


def _module_files(name: str, root: Path) -> list[Path]:
    """The files under ``root`` that importing the dotted module ``name`` from ``root`` runs, as Python's path
    finder would find them there: each package's ``__init__.py`` on the way and the module's own file (a package,
    ``a/__init__.py``, before a module, ``a.py``, before a namespace folder, ``a/`` without one); ``[]`` or a part
    when it is not found there (a stdlib or installed name, or ``b`` a function of ``a`` rather than a module)."""
    files, folder = [], root
    for part in name.split("."):
        if not part.isidentifier():
            return files
        if (folder / part / "__init__.py").is_file():
            files.append(folder / part / "__init__.py")
        elif (folder / f"{part}.py").is_file():
            files.append(folder / f"{part}.py")
            return files  # a plain module has no submodules
        elif not (folder / part).is_dir():
            return files
        folder = folder / part
    return files


def _installed(path: Path) -> bool:
    """Whether ``path`` is installed code rather than a plug-in's: in a ``site-packages``/``dist-packages`` folder,
    the standard library, or gradprobe itself."""
    return bool({"site-packages", "dist-packages"} & set(path.parts)) or any(map(path.is_relative_to, _roots()))


@lru_cache(maxsize=1)
def _roots() -> tuple[Path, ...]:
    """The folders of installed code (:func:`_installed`): the standard library's, site-packages', gradprobe's."""
    roots = [sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")] + [str(Path(__file__).parents[1])]
    roots += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    return tuple(Path(r).resolve() for r in roots if r)


def plugin_identity(spec: str) -> dict | None:
    """Which code the reward named ``spec`` runs in this process, so a run can tell on resume whether its reward
    is still the one it was trained with (the same name from another directory, or an edited file, is not).

    Parameters
    ----------
    spec : str
        A reward name, e.g. ``"rw.py:brevity"``, ``"my_rewards:brevity"`` or ``"outcome"``.

    Returns
    -------
    dict or None
        ``{"spec": spec, "file": F, "sha256": H, "modules": M}``: ``F`` the absolute, resolved path of the module
        file that the name imports (a ``.py`` path, or the module's ``__file__``; None for a module without a file),
        ``H`` the sha256 (64 hex digits) of that file's bytes when the module was first used for a reward here
        (None when unreadable), and ``M`` ``{path relative to F's folder, '/'-separated: sha256}`` of every helper
        module file under F's folder (its subfolders too) that F's import statements name and would load (not a
        file named like a standard-library module or an installed module already imported, nor one imported only
        under ``if TYPE_CHECKING:``), and theirs in turn, read from the files on disk without importing anything,
        so the same in every process whatever of the user's code it imported before (:func:`_helper_modules`: the
        root names are resolved against, a folder reached through a symbolic link, and what cannot be seen, a
        dynamic import; :func:`_loads_local`: which file an import loads); F itself excluded (``{}``: none; a
        ``pkg.mod:fn`` reward's folder is ``pkg/``, so ``pkg/__init__.py`` is one). A ``pkg.mod:fn`` reward whose
        package folder was reached through a symbolic link (``src/pkg -> realpkg``: F ends in ``realpkg/mod.py``,
        not in the name's parts) has one key more, ``"package_root"``: the ``sys.path`` entry it was imported under,
        absolute and not resolved (``.../src``; :func:`_linked_package_root`), which a resume that cannot import it
        names. None for a built-in reward (no ``:``) or a name registered in code rather than imported here.

    Raises
    ------
    UnknownRewardError
        As :func:`load_reward_plugin` (the reward is loaded if it was not yet).
    """
    if not is_plugin_name(spec):
        return None
    load_reward_plugin(spec)
    found = _IDENTITIES.get(spec)
    return dict(found) if found is not None else None


#: Parameter names of a TRL-style reward written per completion or with a column's name (``fn(prompt, completion)``):
#: a two-parameter function so named is not taken for a native ``reward(batch, ctx)``.
_TRL_NAMES = frozenset({"prompt", "completion", "prompts", "completion_ids", "answer", "answers", "solution",
                        "solutions", "response", "responses", "text", "texts", "problem_id"})


def _native(fn, spec: str) -> Reward:
    """``fn`` (checked, :func:`checked_native`) when it can be called as ``reward(batch, ctx)``; else
    UnknownRewardError naming both forms."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): leave it to the call
        return checked_native(fn, spec)
    try:
        sig.bind(None, None)
    except TypeError:
        raise UnknownRewardError(f"reward {spec!r}: {getattr(fn, '__name__', 'it')}{sig} is neither a TRL-style "
                                 "reward fn(prompts, completions, **kwargs) (called by keyword: it needs a parameter "
                                 "named completions, or **kwargs) nor a gradprobe reward(batch, ctx)") from None
    names = list(sig.parameters)
    shown = getattr(fn, "__name__", type(fn).__name__)  # a callable object or functools.partial has no __name__
    if names[:1] == ["prompts"]:
        raise UnknownRewardError(f"reward {spec!r}: {shown}{sig} looks like a TRL-style reward, which is "
                                 "called by keyword: name its second parameter completions (or add **kwargs)")
    column_like = [n for n in names if n in _TRL_NAMES]
    if column_like and names[:1] != ["batch"]:
        raise UnknownRewardError(f"reward {spec!r}: {shown}{sig} names {column_like}, like a TRL-style reward, "
                                 "but TRL-style rewards are called by keyword with lists, one item per completion: "
                                 "write it fn(prompts, completions, **kwargs) (plural names) returning one float or "
                                 "None per completion; a gradprobe reward is reward(batch, ctx)")
    return checked_native(fn, spec)


def checked_native(fn, name: str) -> Reward:
    """``fn``, a native reward ``reward(batch, ctx) -> RewardOutput`` of a plug-in, called through checks.

    Returns
    -------
    Reward
        Calls ``fn(batch, ctx)`` and returns its :class:`~gradprobe.rewards.base.RewardOutput` once its type and
        shapes are checked; its ``stats`` (:func:`~gradprobe.rewards.output.writable_stats`) and the detach of its
        ``advantages`` from any autograd graph are :func:`~gradprobe.rewards.base.checked_output`'s, where every
        reward's output enters the probe and training. Its ``native_source`` is ``fn``: the same reward as ``fn``
        (:func:`gradprobe.rewards.base.same_reward`), so ``fn`` registered under another name is refused beside it.

    Raises
    ------
    RewardFunctionError
        (when called) ``fn`` raised (chained as ``__cause__``; ``SystemExit`` too, which would otherwise end
        the command without a word, and a KeyboardInterrupt no SIGINT caused: :func:`~.sequence.call_reward`),
        or returned something other than a ``RewardOutput`` whose
        ``advantages`` is a tensor of shape (N, T) = ``batch.completion_mask.shape`` and ``valid`` one of
        shape (N,); the message names the reward, the field and what a native reward returns.
    """
    form = ("a gradprobe reward(batch, ctx) returns gradprobe.rewards.RewardOutput(name, advantages (N, T), "
            "valid (N,), generated_tokens, stats); or write it TRL-style, fn(prompts, completions, **kwargs) -> "
            "one float or None per completion")

    @wraps(fn)
    def reward(batch, ctx=None):
        out = call_reward(fn, name, batch, ctx)
        if not isinstance(out, RewardOutput):
            raise RewardFunctionError(f"reward {name!r} returned {type(out).__name__}: {form}")
        shapes = {"advantages": tuple(batch.completion_mask.shape), "valid": (batch.num_rows,)}
        for field, shape in shapes.items():
            value = getattr(out, field)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise RewardFunctionError(f"reward {name!r} returned {field} of shape {got}, expected {shape} "
                                          f"(N = B * G completions x T completion tokens): {form}")
        return out  # its stats, its size and the detach: checked_output, where every reward's output enters

    reward.native_source = fn  # what it checks: the reward's identity (gradprobe.rewards.base._where)
    return reward


def _resolve(name: str) -> Reward | None:
    """:data:`gradprobe.rewards.base.RESOLVERS` hook: plugin names only, else None."""
    return load_reward_plugin(name) if is_plugin_name(name) else None


RESOLVERS.append(_resolve)
