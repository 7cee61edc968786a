"""``calib fit ... | head``: a standard output closed early is not reported as an error; ``--cv model`` is explained.

The command runs in a subprocess whose stdout is a pipe closed before it prints (what ``head`` does
once it has its lines), buffered and unbuffered: it must write the calibration file and print nothing
on stderr (before: ``calib fit: error: [Errno 32] Broken pipe``, or Python's "Exception ignored ...
BrokenPipeError" at exit), exiting with status 1 as Python's note on SIGPIPE does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from calib.cli import build_parser
from calib.model import load_calibration

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data" / "calibration" / "rows.csv"


@pytest.mark.parametrize("unbuffered", ["0", "1"])
def test_fit_into_a_closed_pipe_writes_the_file_and_reports_no_error(tmp_path, unbuffered):
    out = tmp_path / "cal.json"
    read, write = os.pipe()
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered, "OMP_NUM_THREADS": "1"}
    if unbuffered == "0":
        env.pop("PYTHONUNBUFFERED")
    proc = subprocess.Popen([sys.executable, "-m", "calib.cli", "fit", str(ROWS), "--forecaster", "forecast_cost_only",
                             "--out", str(out)], stdout=write, stderr=subprocess.PIPE, cwd=REPO, env=env)
    os.close(write)
    os.close(read)  # the reader is gone before the command prints anything
    _, err = proc.communicate(timeout=300)
    assert err.decode() == ""
    assert proc.returncode == 1
    assert load_calibration(out).forecaster == "forecast_cost_only"  # the file is written, and whole


def test_fit_into_an_open_pipe_still_prints_and_exits_0(tmp_path):
    out = tmp_path / "cal.json"
    proc = subprocess.run([sys.executable, "-m", "calib.cli", "fit", str(ROWS), "--forecaster", "forecast_cost_only",
                           "--out", str(out)], capture_output=True, cwd=REPO, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0 and proc.stderr.decode() == ""
    assert proc.stdout.decode().startswith(f"wrote {out}: linear correction of forecast_cost_only")


def test_fit_help_explains_every_cv_choice():
    fit = build_parser()._subparsers._group_actions[0].choices["fit"]
    [cv] = [a for a in fit._actions if "--cv" in a.option_strings]
    assert cv.choices == ["auto", "study", "arm", "model"]
    assert "leave one study out, one arm out within its study, or one model out (each fold holds out every row " \
           "of one model" in cv.help
    assert "needs rows of 2+ models" in cv.help
    report = build_parser()._subparsers._group_actions[0].choices["report"]
    [cv] = [a for a in report._actions if "--cv" in a.option_strings]
    assert "model" not in cv.choices and "one model out" not in cv.help  # report does not offer it
