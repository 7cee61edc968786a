"""A reward plug-in module written for a test, with the reward registry and import cache restored after."""

from __future__ import annotations

import contextlib
import sys


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
