"""A reward plug-in module written for a test, with the reward registry and import cache restored after."""

from __future__ import annotations

import contextlib
import os
import sys

import pytest


@contextlib.contextmanager
def source_module(tmp_path, monkeypatch, module: str, source: str, reward: str):
    """The module ``module`` of ``source``, written to and imported from ``tmp_path`` (no bytecode written); on
    exit it, ``sys.path`` and the reward registered as ``reward`` (registry and rollout-only set) are forgotten."""
    import importlib

    from gradprobe.rewards import REWARDS
    from gradprobe.rewards.base import ROLLOUT_ONLY

    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        yield importlib.import_module(module)
    finally:
        sys.modules.pop(module, None)
        REWARDS.pop(reward, None)
        ROLLOUT_ONLY.discard(reward)


@contextlib.contextmanager
def plugin_module(tmp_path, monkeypatch, module: str, source: str):
    """``MODULE.py`` holding ``source`` in a fresh working directory (``tmp_path``); yields ``get(name)``, the
    reward ``MODULE:name``; on exit the rewards it registered, the plug-in origins and the module are removed."""
    from gradprobe.rewards import REWARDS, get_reward
    from gradprobe.rewards import plugin

    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    get_reward("outcome")
    before, origins = dict(REWARDS), dict(plugin._ORIGINS)
    try:
        yield lambda name: get_reward(f"{module}:{name}")
    finally:
        for name in set(REWARDS) - set(before):
            del REWARDS[name]
        plugin._ORIGINS.clear()
        plugin._ORIGINS.update(origins)
        sys.modules.pop(module, None)


def forget_modules(folder) -> None:
    """Drop every module imported from ``folder`` (its ``__file__`` under it, through a symbolic link or not), as a
    new process would not know them."""
    import importlib
    import os

    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if isinstance(file, str) and os.path.isabs(file) and (
                file.startswith(str(folder)) or os.path.realpath(file).startswith(os.path.realpath(folder))):
            del sys.modules[name]
    importlib.invalidate_caches()


def forget_reward(spec: str, folder) -> None:
    """Forget reward ``spec`` (registry, plug-in origins, identity) and the modules imported from ``folder``: the
    next load is a new process's."""
    from gradprobe.rewards import REWARDS
    from gradprobe.rewards import plugin

    REWARDS.pop(spec, None)
    for origin in [o for o, name in plugin._ORIGINS.items() if name == spec]:
        del plugin._ORIGINS[origin]
    plugin._IDENTITIES.pop(spec, None)
    forget_modules(folder)


@contextlib.contextmanager
def plugin_records_restored(monkeypatch, folder):
    """The reward registry, ``sys.path`` and the plug-in's records (origins, identities) restored on exit, and the
    modules imported from ``folder`` forgotten; no bytecode written meanwhile (an edit within a second must not run
    a stale .pyc)."""
    from gradprobe.rewards import REWARDS, get_reward
    from gradprobe.rewards import plugin

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    get_reward("outcome")  # built-ins registered first
    before, origins, identities = dict(REWARDS), dict(plugin._ORIGINS), dict(plugin._IDENTITIES)
    try:
        yield
    finally:
        for name in set(REWARDS) - set(before):
            del REWARDS[name]
        plugin._ORIGINS.clear()
        plugin._ORIGINS.update(origins)
        plugin._IDENTITIES.clear()
        plugin._IDENTITIES.update(identities)
        forget_modules(folder)


def sha256_of(path) -> str:
    """The sha256 (hex) of the file at ``path``'s bytes."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


#: The tests of file names holding a byte that is not UTF-8 run where the file system keeps such a name: Linux (CI's
#: machine), which names files by bytes; macOS (APFS) and Windows name files in Unicode and refuse or re-encode it, so
#: no such name reaches gradprobe there.
UNDECODABLE_NAMES = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                       reason="only Linux file systems keep a file name's non-UTF-8 byte")


def undecodable_file(folder, raw: bytes, source: str) -> str:
    """The file ``folder``/``raw`` (a name given as bytes, e.g. ``b"r\\xff.py"``) holding ``source``; returns its name
    as Python sees it (``os.fsdecode``: each undecodable byte a lone surrogate, ``r\\udcff.py``)."""
    with open(os.path.join(os.fsencode(folder), raw), "w") as f:
        f.write(source)
    return os.fsdecode(raw)


@contextlib.contextmanager
def undecodable_plugin_folder(tmp_path, monkeypatch, source: str):
    """``tmp_path`` as the working directory, holding the reward file ``r\\xff.py`` (a byte that is not UTF-8: its
    name as Python sees it, ``os.fsdecode``, is ``r\\udcff.py``) with ``source`` (:func:`undecodable_file`; the tests
    using it are marked :data:`UNDECODABLE_NAMES`); the reward registry, sys.path and the modules imported from the
    folder restored after (:func:`plugin_records_restored`)."""
    undecodable_file(tmp_path, b"r\xff.py", source)
    monkeypatch.chdir(tmp_path)
    with plugin_records_restored(monkeypatch, tmp_path):
        yield tmp_path
