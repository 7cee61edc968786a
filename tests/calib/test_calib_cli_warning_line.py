"""calib's command line prints calib's own warnings as one plain line; other warnings keep Python's format."""

from __future__ import annotations

import warnings

import pytest

import calib.cli
from calib.domain import CalibrationDomainWarning


def test_calib_warnings_are_one_plain_line_and_others_are_untouched(capsys, monkeypatch):
    def fake_rows(args):
        warnings.warn("reward 'x' is outside the calibration's domain", CalibrationDomainWarning)
        warnings.warn("a library's own warning", RuntimeWarning)
        return 0

    before = warnings.showwarning
    monkeypatch.setattr(calib.cli, "_rows", fake_rows)
    with pytest.warns(RuntimeWarning, match="a library's own warning"):  # passed on to Python's handling
        assert calib.cli.main(["rows", "somewhere", "--out", "x.csv"]) == 0
    err = capsys.readouterr().err
    assert err == "calib: warning: reward 'x' is outside the calibration's domain\n"
    assert warnings.showwarning is before  # restored after the command
