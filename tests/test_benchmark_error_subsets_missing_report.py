"""``python benchmarks/forecast_error_subsets.py REPORT`` without ``REPORT/cv_predictions.csv`` (a missing folder,
an empty one, a file) prints one line naming the missing file and the ``calib report`` command that makes it, and
exits with status 2 (was a pandas FileNotFoundError traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_benchmark

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "forecast_error_subsets.py"


@pytest.fixture(scope="module")
def subsets():
    return load_benchmark("forecast_error_subsets")


def test_a_missing_folder_from_the_command_line(tmp_path):
    report = tmp_path / "nonexistent"
    done = subprocess.run([sys.executable, str(SCRIPT), str(report)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"forecast_error_subsets: error: {report}/cv_predictions.csv not found ({report} does not "
                           f"exist): REPORT must be a `calib report` folder; make one with `calib report "
                           f"STUDY_DIR... --out {report}`\n")


@pytest.mark.parametrize("kind", ["empty folder", "file"])
def test_an_empty_folder_or_a_file(tmp_path, capsys, subsets, kind):
    report = tmp_path / "report"
    if kind == "file":
        report.write_text("x")
        where = f" ({report} is a file)"
    else:
        report.mkdir()
        where = ""
    assert subsets.main([str(report)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"forecast_error_subsets: error: {report}/cv_predictions.csv not found{where}: REPORT must be a `calib "
        f"report` folder; make one with `calib report STUDY_DIR... --out {report}`\n")
