"""``calib report --out D`` took any D holding a ``cv_predictions.csv`` for an earlier report and overwrote the
report's files there: a user's own ``cv_predictions.csv`` (predictions from another tool) beside their own
``report.html`` and ``metrics.json`` were replaced without a word. The report now records ``"command": "calib report"``
in its ``metrics.json``, and only a folder whose ``metrics.json`` records it (or a complete report written before it
was recorded, as the shipped ``data/calibration/report``) is replaced; any other is refused, naming the files and
the fix, deleting nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from calib.cli import main as calib_main
from calib.files import REPORT_COMMAND, REPORT_FILES, prepare_report_folder
from calib.report import write_report
from calib_helpers import default_arms, single_thread_blas, synthetic, synthetic_forecasts, write_study  # noqa: F401
from gradprobe.outputs import OutputDirError

SHIPPED_REPORT = Path(__file__).resolve().parents[2] / "data" / "calibration" / "report"
_FIX = "choose another --out (a new or empty folder, or an earlier `calib report` folder)"
_NOT_OURS = 'metrics.json was not written by `calib report` (it records no "command": "calib report")'
_MINE = {"cv_predictions.csv": "id,pred\n1,0.93\n2,0.41\n", "report.html": "<p>my own page</p>",
         "notes.txt": "kept"}


def _folder(path: Path, files: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def _tree(path: Path) -> dict:
    return {p.name: p.read_text() for p in sorted(path.iterdir())}


def _refusal(out: Path, shown: str, why: str) -> str:
    return (f"--out {str(out)!r} holds {shown} but {why}, so they are no earlier calibration report's: the report "
            f"would overwrite them. Move {shown} out of {str(out)!r} (delete them if left by a `calib report` that was "
            f"killed), or {_FIX}")


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path / "study", arms=default_arms(n_extra=2, rng=np.random.default_rng(3)))


@pytest.mark.parametrize("metrics, why", [
    ('{"my_auc": 0.91}', _NOT_OURS),
    ("my notes, not JSON", _NOT_OURS),
    ('["calib report"]', _NOT_OURS),
    ('{"command": "my-tool", "headline_cv": "study"}', _NOT_OURS),
    (None, "no metrics.json"),
])
def test_a_users_own_cv_predictions_is_no_earlier_report(tmp_path, metrics, why):
    mine = {**_MINE, **({} if metrics is None else {"metrics.json": metrics})}
    out = _folder(tmp_path / "mine", mine)
    with pytest.raises(OutputDirError) as info:
        prepare_report_folder(out)
    shown = "cv_predictions.csv, report.html" if metrics is None else "cv_predictions.csv, metrics.json, report.html"
    assert str(info.value) == _refusal(out, shown, why)
    assert _tree(out) == dict(sorted(mine.items()))


def test_calib_report_into_a_users_predictions_refuses_and_keeps_them(tmp_path, capsys, study, synthetic):  # noqa: F811
    mine = {**_MINE, "metrics.json": '{"my_auc": 0.91}'}
    out = _folder(tmp_path / "mine", mine)
    assert calib_main(["report", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    shown = "cv_predictions.csv, metrics.json, report.html"
    assert err == f"calib report: error: {_refusal(out, shown, _NOT_OURS)}\n"
    assert _tree(out) == dict(sorted(mine.items()))


def test_the_report_records_its_command_and_replaces_its_own_folder(tmp_path, study, capsys):
    out = tmp_path / "rep"
    m1 = write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    assert "replacing" not in capsys.readouterr().err  # a new folder: nothing replaced
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["command"] == m1["command"] == REPORT_COMMAND == "calib report"
    (out / "notes.txt").write_text("kept")
    m2 = write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    assert re.search(rf"^replacing the calibration report in {re.escape(str(out))} \(written "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)$", capsys.readouterr().err, re.M)
    assert m1["rows"] == m2["rows"] == 24 and (out / "notes.txt").read_text() == "kept"
    assert sorted(p.name for p in out.iterdir()) == sorted([*REPORT_FILES, "notes.txt"])


def test_a_marked_metrics_json_beside_cv_predictions_is_an_earlier_report(tmp_path):
    out = _folder(tmp_path / "killed", {"cv_predictions.csv": "cv\n", "rows.csv": "a\n",
                                        "metrics.json": '{"command": "calib report"}'})
    assert prepare_report_folder(out) == out  # a report killed before its report.html: its own files
    assert _tree(out) == {"cv_predictions.csv": "cv\n", "metrics.json": '{"command": "calib report"}',
                          "rows.csv": "a\n"}


def test_the_shipped_report_is_still_an_earlier_report(tmp_path):
    """data/calibration/README.md regenerates it in place (``--out data/calibration/report``)."""
    copy = shutil.copytree(SHIPPED_REPORT, tmp_path / "report")
    assert prepare_report_folder(copy) == copy
    assert sorted(p.name for p in copy.iterdir()) == sorted(REPORT_FILES)


def test_a_complete_report_from_before_the_command_was_recorded_is_accepted_an_incomplete_one_refused(tmp_path):
    """Written before this change: no "command", but every file a report writes and a report's metrics.json keys."""
    old = shutil.copytree(SHIPPED_REPORT, tmp_path / "old")
    metrics = json.loads((old / "metrics.json").read_text())
    metrics.pop("command", None)
    (old / "metrics.json").write_text(json.dumps(metrics))
    assert prepare_report_folder(old) == old
    (old / "accuracy_vs_tokens.png").unlink()
    with pytest.raises(OutputDirError) as info:
        prepare_report_folder(old)
    shown = ", ".join(name for name in REPORT_FILES if name != "accuracy_vs_tokens.png")
    why = 'metrics.json records no "command": "calib report" and accuracy_vs_tokens.png of a report\'s files is missing'
    assert str(info.value) == _refusal(old, shown, why)
    assert sorted(p.name for p in old.iterdir()) == sorted(set(REPORT_FILES) - {"accuracy_vs_tokens.png"})


def test_a_report_stopped_part_way_is_replaced_by_its_rerun(tmp_path, study, monkeypatch):
    """A report that stops after its first files (here its figures fail) leaves metrics.json marked as the command's,
    so the same command run again replaces the folder (a reviewer's case: it was refused, naming no metrics.json)."""
    import calib.report as report

    out = tmp_path / "rep"

    def broken(*args, **kwargs):
        raise RuntimeError("a figure failed")

    with monkeypatch.context() as mp:
        mp.setattr(report, "draw_figures", broken)
        with pytest.raises(RuntimeError, match="a figure failed"):
            write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    assert json.loads((out / "metrics.json").read_text()) == {"command": "calib report", "complete": False}
    assert (out / "cv_predictions.csv").is_file() and prepare_report_folder(out) == out
    m = write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    assert json.loads((out / "metrics.json").read_text())["rows"] == m["rows"] == 24
