"""A report over 2 studies says why its leave-one-study-out coverage is n/a (each fold trains on 1 study: no
conformal interval), in metrics.json, report.html and the printed summary, instead of a bare n/a."""

from __future__ import annotations

import json
import math

import calib.cli
from calib.report import write_report
from calib_helpers import single_thread_blas, synthetic_forecasts, write_study  # noqa: F401 (fixture)


def test_two_study_report_gives_the_reason_for_no_study_out_coverage(tmp_path, capsys, monkeypatch):
    studies = [write_study(tmp_path / n, seed=i) for i, n in enumerate("ab")]
    out = tmp_path / "out"
    m = write_report(studies, out, forecast_fn=synthetic_forecasts, n_permutations=99)
    cal = m["errors"]["study"]["forecast_probe"]["calibrated"]
    assert cal["coverage_rows"] == 0 and math.isnan(cal["coverage"])
    why = cal["coverage_reason"]
    assert why.startswith(f"{cal['rows']} of {cal['rows']} held-out runs have no conformal interval: holding out "
                          "their study (2 fold(s)) leaves under 2 studies")
    assert "so 3+ studies in all" in why and "add studies" in why
    assert "coverage_reason" not in m["errors"]["arm"]["forecast_probe"]["calibrated"]  # every arm-out run has one
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["errors"]["study"]["forecast_probe"]["calibrated"]["coverage_reason"] == why
    assert f'<span title="{why}">n/a (0)</span>' in (out / "report.html").read_text()

    monkeypatch.setattr(calib.cli, "write_report", lambda *a, **k: m)
    assert calib.cli.main(["report", *map(str, studies), "--out", str(tmp_path / "out2")]) == 0
    printed = capsys.readouterr().out
    common = m["errors"]["study"]["forecast_probe"]["calibrated"]["common"]["coverage_reason"]
    assert f"  coverage: {common}\n" in printed
    assert printed.index("coverage: ") < printed.index("leave one arm out")
