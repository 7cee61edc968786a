"""``gradprobe probe --out`` refuses a ``calib report`` folder (``cv_predictions.csv``): the probe would replace the
report's ``report.html``. One line names the folder, what it holds and the fix; nothing in the folder changes."""

from __future__ import annotations

import pytest

import gradprobe.probe.batches as probe_batches
from gradprobe.cli import main
from gradprobe.forecast import default_curve_path

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)

_PROBE = ["probe", "--model", "tiny-qwen2", "--task", "chain_sum", "--rewards", "outcome", "--prompts", "2",
          "--group", "2", "--heldout-prompts", "2", "--heldout-group", "2", "--max-new-tokens", "8", "--bootstrap",
          "20", "--no-progress", "--reference-curve", str(default_curve_path())]
_REPORT = {"metrics.json": '{"rows": 6}', "cv_predictions.csv": "cv,forecaster\nstudy,forecast_probe\n",
           "rows.csv": "arm\nx\n", "report.html": "<html>the calibration report</html>"}


@pytest.fixture
def no_compute(monkeypatch):
    monkeypatch.setattr(probe_batches, "run_probe_batches", lambda *a, **k: pytest.fail("the probe ran"))


def test_a_calib_report_folder_is_refused(tmp_path, capsys, no_compute):
    report = tmp_path / "report"
    report.mkdir()
    for name, text in _REPORT.items():
        (report / name).write_text(text)
    assert main(_PROBE + ["--out", str(report)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"gradprobe probe: error: --out {str(report)!r} holds a calibration report (`calib report`) "
        "(cv_predictions.csv), not a probe's output; a probe there would mix its files into it: "
        "choose another --out (an empty folder, or an earlier probe's)")
    assert len(err.strip().splitlines()) == 1
    assert {p.name: p.read_text() for p in report.iterdir()} == _REPORT


def test_the_python_api_refuses_it_too(tmp_path, no_compute):
    from gradprobe.outputs import OutputDirError
    from gradprobe.probe.output import replacing_earlier_probe

    (tmp_path / "cv_predictions.csv").write_text("cv\n")
    with pytest.raises(OutputDirError, match=r"holds a calibration report .*choose another --out"):
        with replacing_earlier_probe(tmp_path):
            pytest.fail("entered")
