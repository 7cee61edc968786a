"""``calib report --out`` refuses a ``gradprobe probe`` folder (its report.html would be replaced) and an existing
file (was ``[Errno 17] File exists``), each with one line naming the path, what is there and the fix."""

from __future__ import annotations

import numpy as np
import pytest

from calib.cli import main as calib_main
from calib.files import prepare_report_folder
from calib.report import write_report
from calib_helpers import default_arms, single_thread_blas, synthetic, synthetic_forecasts, write_study  # noqa: F401
from gradprobe.outputs import OutputDirError

_FIX = "choose another --out (a new or empty folder, or an earlier `calib report` folder)"


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path / "study", arms=default_arms(n_extra=2, rng=np.random.default_rng(3)))


@pytest.mark.parametrize("marker", ["probe.json", "arms.json"])
def test_a_probe_folder_is_refused(tmp_path, capsys, study, synthetic, marker):  # noqa: F811 (the fixture)
    probe = tmp_path / "probe"
    probe.mkdir()
    before = {marker: "{}", "report.html": "<html>the probe's report</html>", "tokens.jsonl": ""}
    for name, text in before.items():
        (probe / name).write_text(text)
    assert calib_main(["report", str(study), "--out", str(probe)]) == 2
    err = capsys.readouterr().err
    what = "a probe (`gradprobe probe`)" if marker == "probe.json" else "a study's probe folder"
    assert err == (f"calib report: error: --out {str(probe)!r} holds {what} ({marker}), not a calibration report; its "
                   f"files would mix with the report's: {_FIX}\n")
    assert {p.name: p.read_text() for p in probe.iterdir()} == before


def test_an_existing_file_is_refused(tmp_path, capsys, study, synthetic):  # noqa: F811
    path = tmp_path / "report.txt"
    path.write_text("mine")
    assert calib_main(["report", str(study), "--out", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"calib report: error: --out {str(path)!r} is a file; the report is a folder (report.html, "
                   f"metrics.json, figures, CSVs): {_FIX}\n")
    assert "Errno" not in err and path.read_text() == "mine"


def test_a_file_in_the_path_names_the_folder_and_the_fix(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputDirError) as info:
        prepare_report_folder(tmp_path / "f" / "rep")
    assert str(info.value).startswith(f"creating the report folder {str(tmp_path / 'f' / 'rep')!r} failed (")
    assert str(info.value).endswith("; choose another --out") and "Errno" not in str(info.value)


def test_an_earlier_report_folder_is_still_accepted(tmp_path, study):
    out = tmp_path / "rep"
    m1 = write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    m2 = write_report([study], out, forecast_fn=synthetic_forecasts, n_permutations=99)
    assert m1["rows"] == m2["rows"] == 24 and (out / "report.html").is_file() and not (out / ".write-test").exists()
