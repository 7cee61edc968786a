"""``gradprobe probe --trl-config FILE`` without TRL installed: one line naming the install command."""

from __future__ import annotations

import sys

import pytest

from gradprobe import cli
from gradprobe.integrations.trl_config_file import TrlConfigError, TrlMissingError, read_trl_config, require_trl

NEEDS_TRL = "--trl-config needs TRL: pip install -e '.[trl]' (or pip install trl)"


@pytest.fixture
def no_trl(monkeypatch):
    """``import trl`` fails as it does after a plain ``pip install -e .``."""
    monkeypatch.setitem(sys.modules, "trl", None)


def test_require_trl_names_the_extra(no_trl):
    with pytest.raises(TrlMissingError) as info:
        require_trl()
    assert str(info.value) == NEEDS_TRL
    assert isinstance(info.value, TrlConfigError) and isinstance(info.value, ValueError)


def test_read_refuses_before_reading_the_file(no_trl, tmp_path):
    with pytest.raises(TrlMissingError) as info:  # the file does not exist: TRL is checked first
        read_trl_config(tmp_path / "missing.yaml")
    assert str(info.value) == NEEDS_TRL


def test_a_broken_trl_install_shows_the_import_error(monkeypatch):
    def broken(name, *a, **k):
        raise ImportError("cannot import name 'Foo' from 'transformers'", name="transformers")

    monkeypatch.setattr("gradprobe.integrations.trl_config_file.importlib.import_module", broken)
    with pytest.raises(TrlMissingError, match=r"TRL is installed but importing it failed: cannot import name 'Foo'"):
        require_trl()


def test_cli_refuses_in_one_line_before_any_compute(no_trl, tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("loss_type: dapo\n")
    out = tmp_path / "probe-out"
    rc = cli.main(["probe", "--trl-config", str(cfg), "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err == f"gradprobe probe: error: {NEEDS_TRL}\n"
    assert not out.exists()
