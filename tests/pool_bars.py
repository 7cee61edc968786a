"""The fixture the pool-progress tests of tests/difficulty share, imported by name as ``calib_helpers`` is (a
conftest.py in tests/difficulty would shadow tests/conftest.py, which other test files import as ``conftest``)."""

from __future__ import annotations

import io

import pytest


@pytest.fixture
def captured(monkeypatch):
    """Every tqdm bar pool_problems opens writes to one StringIO; the bars themselves are kept."""
    import tqdm.auto

    err, bars = io.StringIO(), []
    real = tqdm.auto.tqdm

    def make(*args, **kwargs):
        bar = real(*args, **{**kwargs, "file": err, "mininterval": 0, "miniters": 1})
        bars.append(bar)
        return bar

    monkeypatch.setattr(tqdm.auto, "tqdm", make)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    return err, bars
