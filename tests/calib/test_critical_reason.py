"""Where no pooled Kendall tau can be significant ("significant from n/a"), the rank agreement says why
(``critical_reason``): the smallest p the permutation test can give, how many orderings reach the largest tau, ties,
too few Monte Carlo draws, or no study to rank; ``calib report`` prints it under the ranking and its page gives it as
the cell's title and in the text. It printed "significant from n/a" with no word (data/study_tiny, cost only)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from calib.cli import main as calib_main
from calib.metrics import pooled_rank_agreement

STUDY = Path(__file__).resolve().parents[2] / "data" / "study_tiny"


def _table(forecasts, realized, study="s"):
    return pd.DataFrame({"study": study, "arm": [f"a{i}" for i in range(len(forecasts))],
                         "f": [float(v) for v in forecasts], "realized": [float(v) for v in realized]})


def test_the_reason_gives_the_smallest_attainable_p_and_what_limits_it():
    tie = pooled_rank_agreement(_table([1, 1, 2, 3], [0, 1, 2, 3]), "f")
    assert math.isnan(tie["critical_kendall_tau"])
    assert tie["critical_reason"] == (
        "no pooled tau is significant at one-sided 5% on these arms: the smallest p the permutation test can give is "
        "0.0833 > 0.05 (all 24 orderings of 4 arms in 1 study enumerated, 2 of them reach the largest tau; ties (1 "
        "forecast or realized value(s) repeat another of their study) let several orderings share a tau); more arms "
        "or studies would be needed")
    three = pooled_rank_agreement(_table([1, 2, 3], [0, 1, 2]), "f")
    assert three["critical_reason"] == (
        "no pooled tau is significant at one-sided 5% on these arms: the smallest p the permutation test can give is "
        "0.167 > 0.05 (all 6 orderings of 3 arms in 1 study enumerated, 1 of them reaches the largest tau); more arms "
        "or studies would be needed")
    drawn = pooled_rank_agreement(_table(range(8), range(8)), "f", n_permutations=5)  # 8! > 5: Monte Carlo
    assert not drawn["exact"] and math.isnan(drawn["critical_kendall_tau"])
    assert drawn["critical_reason"].endswith("the smallest p the permutation test can give is 0.167 > 0.05 (5 Monte "
                                             "Carlo permutations drawn, p cannot go below 1/(1 + 5)); more "
                                             "permutations (n_permutations) would be needed")
    none = pooled_rank_agreement(_table([1], [0]), "f")
    assert none["critical_reason"] == ("no study has 2 or more arms with distinct forecasts and realized gains to "
                                       "rank, so there is no permutation test")
    four = pooled_rank_agreement(_table([1, 2, 3, 4], [0, 1, 2, 3]), "f")  # 1/24 <= 5%: a critical tau, no reason
    assert four["critical_kendall_tau"] == 1.0 and four["critical_reason"] is None


def test_calib_report_says_why_cost_only_has_no_significance_threshold(tmp_path, capsys):
    assert calib_main(["report", str(STUDY), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    m = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    r = m["ranking"]["forecast_cost_only"]
    assert r["critical_kendall_tau"] is None and r["critical_reason"].startswith(
        "no pooled tau is significant at one-sided 5% on these arms: the smallest p the permutation test can give is "
        "0.25 > 0.05 (all 24 orderings of 4 arms in 1 study enumerated, 6 of them reach the largest tau")
    assert ", significant from n/a\n" in out  # the ranking line as before, its reason below
    assert f"\nsignificant from n/a for forecast_cost_only: {r['critical_reason']}\n" in out
    assert m["ranking"]["forecast_probe"]["critical_reason"] is None
    assert "significant from n/a for forecast_probe" not in out
    page = (tmp_path / "rep" / "report.html").read_text()
    shown = r["critical_reason"].replace(">", "&gt;")
    assert f' title="{shown}">n/a</td>' in page and f"No significance for cost only: {shown}." in page


def test_calib_report_says_why_for_the_common_arms_ranking_too_and_each_line_once(tmp_path, capsys, monkeypatch):
    """The page's second ranking (on the arms all compared forecasters cover) had its reasons on the page only; the
    console now prints them too, naming that ranking, and a score whose reason is the same in both once."""
    import calib.cli as cli

    real = cli.write_report
    reason = "no study has 2 or more arms with distinct forecasts and realized gains to rank, so there is no test"

    def report(*args, **kwargs):  # study_tiny's report, its common-arms first-order tau without a threshold
        m = real(*args, **kwargs)
        m["ranking_common_arms"]["forecast_first_order"].update(critical_kendall_tau=math.nan, critical_reason=reason)
        return m

    monkeypatch.setattr(cli, "write_report", report)
    assert calib_main(["report", str(STUDY), "--out", str(tmp_path / "rep")]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("significant from n/a for ")]
    m = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    same = m["ranking"]["forecast_cost_only"]["critical_reason"]
    assert m["ranking_common_arms"]["forecast_cost_only"]["critical_reason"] == same  # in both: said once
    assert lines == [f"significant from n/a for forecast_cost_only: {same}",
                     "significant from n/a for forecast_first_order on the arms all compared forecasters cover: "
                     f"{reason}"]
