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
  :class:`~gradprobe.rewards.base.RewardFunctionError` naming the reward, as the TRL-style wrapper's errors do.

A module name is looked up with the working directory first on ``sys.path``, as ``python -m`` does; a file's
folder is put on ``sys.path`` as ``python FILE.py`` does, so the file may import modules beside it (each one's
sha256 is recorded with the file's, :func:`plugin_identity`'s ``modules``); a
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

import hashlib
import importlib
import importlib.util
import inspect
import os
import site
import sys
import sysconfig
import types
from functools import lru_cache, wraps
from pathlib import Path

import torch

from .base import REWARDS, RESOLVERS, Reward, RewardFunctionError, RewardOutput, UnknownRewardError
from .sequence import sequence_reward

__all__ = ["load_reward_plugin", "is_plugin_name", "checked_native", "plugin_identity"]

#: (module file, attribute) -> the first name it was loaded under, so a second name for it is refused
_ORIGINS: dict[tuple[str, str], str] = {}
#: name -> {"spec", "file", "sha256", "modules"} of each reward loaded here (:func:`plugin_identity`)
_IDENTITIES: dict[str, dict] = {}
#: module name -> (the module object, the sha256 of its file when a reward was first taken from it)
_MODULE_SHAS: dict[str, tuple[object, str | None]] = {}
#: plug-in module name -> (the module object, the names its import added to sys.modules: its helper modules)
_IMPORTED: dict[str, tuple[object, frozenset[str]]] = {}

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
            raise UnknownRewardError(f"reward {spec!r}: {module} is a folder, not a Python file; name the file that "
                                     f"defines the function ({module.rstrip('/' + os.sep)}/FILE.py:FUNCTION), or "
                                     f"write it as {_FORMS}")
        if not path.is_file():
            raise UnknownRewardError(f"reward {spec!r}: no file {module} (from {Path.cwd()}); write it as {_FORMS}")
        name = f"gradprobe_user_rewards.{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
        if name in sys.modules:
            return sys.modules[name]
        if str(path.parent) not in sys.path:  # as `python FILE.py` does: the file's modules beside it import
            sys.path.insert(0, str(path.parent))
        loader = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(loader)
        sys.modules[name] = mod
        try:
            loader.loader.exec_module(mod)
        except (Exception, SystemExit) as e:  # sys.exit() at import: one line, as from the function itself
            del sys.modules[name]
            raise UnknownRewardError(f"reward {spec!r}: importing {path} raised {_raised(e)}") from e
        return mod
    cwd = os.getcwd()
    if cwd not in sys.path:  # a console script's sys.path lacks the working directory `python -m` puts first
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise UnknownRewardError(f"reward {spec!r}: no module named {e.name!r} (from {cwd}); write it as "
                                     f"{_FORMS}") from None
        raise UnknownRewardError(f"reward {spec!r}: importing {module} raised ModuleNotFoundError: {e}") from e
    except (Exception, SystemExit) as e:
        sys.modules.pop(module, None)  # a module stopped part-way is not kept for a later lookup
        raise UnknownRewardError(f"reward {spec!r}: importing {module} raised {_raised(e)}") from e


def _raised(e: BaseException) -> str:
    """``TYPE: MESSAGE`` of an exception raised by a plug-in's import; a SystemExit shows its code (``sys.exit()``:
    ``SystemExit: None``, where its text would be empty)."""
    return f"{type(e).__name__}: {e.code if isinstance(e, SystemExit) else e}"


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
    before = set(sys.modules)
    mod = _import_module(module.strip(), spec)
    if _IMPORTED.get(mod.__name__, (None,))[0] is not mod:  # a module imported before its first reward: none here
        _IMPORTED[mod.__name__] = (mod, frozenset(set(sys.modules) - before))
    fn = getattr(mod, attr.strip(), None)
    if fn is None:
        found = sorted(n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == mod.__name__)
        raise UnknownRewardError(f"reward {spec!r}: {module} has no {attr.strip()!r}; its functions: "
                                 f"{', '.join(found) or 'none'}")
    if not callable(fn):
        raise UnknownRewardError(f"reward {spec!r}: {module}.{attr.strip()} is a {type(fn).__name__}, not a function")
    origin = (getattr(mod, "__file__", None) or mod.__name__, attr.strip())
    other = _ORIGINS.get(origin)
    if other is not None and other != spec:
        raise UnknownRewardError(f"reward {spec!r} is the function {other!r} already names ({origin[0]}); use one "
                                 "name for it (two names would probe and train it as two rewards)")
    reward = sequence_reward(fn, name=spec) if _takes_completions(fn) else _native(fn, spec)
    REWARDS[spec] = reward
    _ORIGINS[origin] = spec
    _IDENTITIES[spec] = _identity(spec, mod)
    return reward


def _identity(spec: str, mod) -> dict:
    """``{"spec", "file", "sha256", "modules"}`` of the module ``mod`` a reward named ``spec`` comes from: its file,
    resolved (None without one), the sha256 (hex) of the file's bytes the first time a reward was taken from this
    module object (a module imported again, e.g. after ``del sys.modules[...]``, is hashed again; None: unreadable),
    and its helper modules (:func:`_helper_modules`)."""
    file = getattr(mod, "__file__", None)
    path = str(Path(file).resolve()) if file else None
    return {"spec": spec, "file": path, "sha256": _module_sha(mod, path),
            "modules": _helper_modules(mod, Path(path)) if path else {}}


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


def _helper_modules(mod, file: Path) -> dict[str, str]:
    """``{path relative to file's folder ('/'-separated): sha256}`` of each module under ``file``'s folder (its
    subfolders too) that the plug-in module ``mod`` brought into ``sys.modules`` when it was imported or refers to
    (a module, or a function or class of one, in its namespace, and so on through those modules; with their
    packages' ``__init__.py``), ``file`` itself excluded: the code beside the reward file that runs with it.

    Other modules under the folder are not the reward's (the script that called :func:`gradprobe.train`, another
    reward's helpers), and neither are installed packages (a ``site-packages`` folder, the standard library) nor
    gradprobe's own code, should a virtual environment or a gradprobe checkout lie inside the folder. A module whose
    file cannot be read (a zip import) is left out."""
    folder = file.parent
    imported = {n: sys.modules[n] for n in _IMPORTED.get(mod.__name__, (None, ()))[1] if n in sys.modules}
    imported.pop(mod.__name__, None)
    seen, todo, found = {mod.__name__, *imported}, [mod, *imported.values()], {}
    while todo:
        m = todo.pop()
        path = _module_file(m)
        if m is not mod and (path is None or path == file or not path.is_relative_to(folder) or _installed(path)):
            continue
        sha = _module_sha(m, str(path)) if m is not mod else None
        if sha is not None:
            found[path.relative_to(folder).as_posix()] = sha
        for ref in _referred(m):
            if ref.__name__ not in seen:
                seen.add(ref.__name__)
                todo.append(ref)
    return dict(sorted(found.items()))


def _referred(m) -> list:
    """The modules module ``m`` refers to: its package, and the modules (or the modules of the functions and
    classes) in its namespace; a package's own submodules there are left out (the import system puts each one
    imported there, whichever module imported it: another reward's file beside this one)."""
    names = [m.__name__.rpartition(".")[0]]
    own = m.__name__ + "." if hasattr(m, "__path__") else None
    for value in list(vars(m).values()):
        if isinstance(value, types.ModuleType):
            if own is None or not value.__name__.startswith(own):
                names.append(value.__name__)
            continue
        try:
            names.append(getattr(value, "__module__", None))
        except Exception:  # an object whose attributes raise (a lazy proxy): not a reference to a helper
            continue
    found = (sys.modules.get(n) for n in names if isinstance(n, str))
    return [x for x in found if isinstance(x, types.ModuleType)]


def _module_file(m) -> Path | None:
    """Module ``m``'s file, resolved (None: none, e.g. a built-in or namespace package)."""
    file = getattr(m, "__file__", None)
    return Path(file).resolve() if isinstance(file, str) else None


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
        module file under F's folder (its subfolders too) that is loaded once the reward is: those its import
        brought in or that it refers to, F itself excluded (``{}``: none; a ``pkg.mod:fn`` reward's folder is
        ``pkg/``, so ``pkg/__init__.py`` is one). None for a built-in reward (no ``:``) or a name registered in code
        rather than imported here.

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
    if names[:1] == ["prompts"]:
        raise UnknownRewardError(f"reward {spec!r}: {fn.__name__}{sig} looks like a TRL-style reward, which is "
                                 "called by keyword: name its second parameter completions (or add **kwargs)")
    return checked_native(fn, spec)


def checked_native(fn, name: str) -> Reward:
    """``fn``, a native reward ``reward(batch, ctx) -> RewardOutput`` of a plug-in, called through checks.

    Returns
    -------
    Reward
        Calls ``fn(batch, ctx)`` and returns its :class:`~gradprobe.rewards.base.RewardOutput` unchanged.

    Raises
    ------
    RewardFunctionError
        (when called) ``fn`` raised (chained as ``__cause__``; ``SystemExit`` too, which would otherwise end
        the command without a word), or returned something other than a ``RewardOutput`` whose
        ``advantages`` is a tensor of shape (N, T) = ``batch.completion_mask.shape`` and ``valid`` one of
        shape (N,); the message names the reward and what a native reward returns.
    """
    form = ("a gradprobe reward(batch, ctx) returns gradprobe.rewards.RewardOutput(name, advantages (N, T), "
            "valid (N,), generated_tokens, stats); or write it TRL-style, fn(prompts, completions, **kwargs) -> "
            "one float or None per completion")

    @wraps(fn)
    def reward(batch, ctx=None):
        try:
            out = fn(batch, ctx)
        except (Exception, SystemExit) as e:
            raise RewardFunctionError(f"reward {name!r} raised {type(e).__name__}: {e}") from e
        if not isinstance(out, RewardOutput):
            raise RewardFunctionError(f"reward {name!r} returned {type(out).__name__}: {form}")
        shapes = {"advantages": tuple(batch.completion_mask.shape), "valid": (batch.num_rows,)}
        for field, shape in shapes.items():
            value = getattr(out, field)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise RewardFunctionError(f"reward {name!r} returned {field} of shape {got}, expected {shape} "
                                          f"(N = B * G completions x T completion tokens): {form}")
        return out

    return reward


def _resolve(name: str) -> Reward | None:
    """:data:`gradprobe.rewards.base.RESOLVERS` hook: plugin names only, else None."""
    return load_reward_plugin(name) if is_plugin_name(name) else None


RESOLVERS.append(_resolve)
