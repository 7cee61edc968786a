"""``calib report --validation-out`` never overwrites a file that is no earlier validation record (a study's
analysis.json it reads, a rows CSV, a calibration), nor the report's own metrics.json; an earlier record is replaced."""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
from pathlib import Path

import pytest

import calib.cli
from calib.report import write_report
from calib_helpers import single_thread_blas, synthetic_forecasts, write_study  # noqa: F401 (fixture)

DATA = Path(__file__).resolve().parents[2] / "data"


def _report(tmp_path, out, validation_out, capsys, study=None):
    study = study or tmp_path / "study_tiny"
    if not study.exists():
        shutil.copytree(DATA / "study_tiny", study)
    status = calib.cli.main(["report", str(study), "--out", str(out), "--validation-out", str(validation_out)])
    return status, capsys.readouterr()


def test_a_study_input_file_is_not_overwritten(tmp_path, capsys):
    analysis = tmp_path / "study_tiny" / "analysis.json"
    status, io = _report(tmp_path, tmp_path / "report", analysis, capsys)
    assert status == 2
    assert (f"--validation-out {str(analysis)!r} exists and is no forecaster validation record but a JSON document "
            "of another tool") in io.err
    assert analysis.read_bytes() == (DATA / "study_tiny" / "analysis.json").read_bytes()
    assert not (tmp_path / "report").exists()  # refused before any work


def test_a_rows_csv_is_not_overwritten(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    shutil.copyfile(DATA / "calibration" / "rows.csv", rows)
    status, io = _report(tmp_path, tmp_path / "report", rows, capsys)
    assert status == 2
    assert "is no forecaster validation record but calibration rows (a CSV of `calib rows`)" in io.err
    assert f"choose another --validation-out (e.g. {str(tmp_path / 'forecast_validation.json')!r})" in io.err
    assert rows.read_bytes() == (DATA / "calibration" / "rows.csv").read_bytes()


def test_the_reports_own_metrics_json_is_refused(tmp_path, capsys):
    out = tmp_path / "report"
    status, io = _report(tmp_path, out, out / "metrics.json", capsys)
    assert status == 2
    assert f"--validation-out {str(out / 'metrics.json')!r} is the report's own metrics.json" in io.err
    assert not out.exists()


def test_an_earlier_record_is_replaced(tmp_path, capsys, monkeypatch):
    record = tmp_path / "forecast_validation.json"
    record.write_text(json.dumps({k: "old" for k in ("best", "mae", "cv", "rows", "studies", "evidence", "source")}))
    monkeypatch.setattr(calib.cli, "write_report", functools.partial(write_report, forecast_fn=synthetic_forecasts,
                                                                       n_permutations=99))
    status, io = _report(tmp_path, tmp_path / "report", record, capsys, study=write_study(tmp_path / "s"))
    assert status == 0, io.err
    assert f"calib report: replaced the earlier forecaster validation record {record}" in io.err
    new = json.loads(record.read_text())
    assert new["source"].startswith("calib report ") and new["cv"] == "arm"


def test_a_record_in_a_new_folder_is_written_as_rows_and_apply_outputs_are(tmp_path, capsys, monkeypatch):
    record = tmp_path / "new" / "sub" / "forecast_validation.json"
    monkeypatch.setattr(calib.cli, "write_report", functools.partial(write_report, forecast_fn=synthetic_forecasts,
                                                                       n_permutations=99))
    status, io = _report(tmp_path, tmp_path / "report", record, capsys, study=write_study(tmp_path / "s"))
    assert status == 0, io.err  # not refused after the whole report was made
    assert json.loads(record.read_text())["best"] in ("probe", "cost_only", "signal_proxy")
    assert f"wrote {record}: --forecaster auto uses " in io.out


@pytest.fixture
def refusing(tmp_path, monkeypatch) -> Path:
    """A folder that refuses a new file even to root (chmod does not bind root): ``/sys`` where it does, else a
    folder whose ``tempfile.mkstemp`` (the write test of calib.cli) fails with EACCES, as a read-only mount's does."""
    folder = Path("/sys")
    try:
        fd = os.open(folder / ".gradprobe-write-test", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return folder
    os.close(fd)
    os.unlink(folder / ".gradprobe-write-test")
    folder = tmp_path / "read-only"
    folder.mkdir()
    real = calib.cli.tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == folder:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, dir=dir, **kwargs)
    monkeypatch.setattr(calib.cli.tempfile, "mkstemp", mkstemp)
    return folder


def test_an_unwritable_folder_is_refused_before_the_report(tmp_path, capsys, monkeypatch, refusing):
    record = refusing / "forecast_validation.json"
    monkeypatch.setattr(calib.cli, "write_report", functools.partial(write_report, forecast_fn=synthetic_forecasts,
                                                                       n_permutations=99))
    out = tmp_path / "report"
    status, io = _report(tmp_path, out, record, capsys, study=write_study(tmp_path / "s"))
    assert status == 2
    assert not out.exists()  # refused before the report, not after it was written
    assert io.err.startswith(f"calib report: error: --validation-out {str(record)!r}: the forecaster validation "
                             f"record cannot be written there, as its folder {str(refusing)!r} refuses a new file (")
    assert io.err.rstrip().endswith(f"nothing was made: make {str(refusing)!r} writable, or choose another "
                                    "--validation-out (a file in a writable folder)")
    assert io.out == ""


def test_a_missing_folder_under_an_unwritable_one_is_refused_before_the_report(tmp_path, capsys, monkeypatch,
                                                                                 refusing):
    record = refusing / "gradprobe-new" / "forecast_validation.json"
    monkeypatch.setattr(calib.cli, "write_report", functools.partial(write_report, forecast_fn=synthetic_forecasts,
                                                                       n_permutations=99))
    out = tmp_path / "report"
    status, io = _report(tmp_path, out, record, capsys, study=write_study(tmp_path / "s"))
    assert status == 2
    assert not out.exists() and not record.parent.exists()
    assert (f"--validation-out {str(record)!r}: the forecaster validation record cannot be written there, as its "
            f"folder {str(record.parent)!r} would be created in {str(refusing)!r}, which refuses a new entry (") \
        in io.err
