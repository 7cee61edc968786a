"""Shared by the tests of a leading ``~`` in paths (``tests/test_home_paths*.py``): a HOME and a working folder of
their own, and the check that nothing was written into the working folder (where a folder literally named ``~``
would land)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """HOME set to ``tmp_path/home`` and the working folder ``tmp_path/cwd`` (both restored by monkeypatch)."""
    folder, cwd = tmp_path / "home", tmp_path / "cwd"
    folder.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(cwd)
    return folder


def nothing_in_cwd() -> None:
    """Assert that the working folder is still empty."""
    assert sorted(p.name for p in Path.cwd().iterdir()) == [], "something was written into the working folder"
