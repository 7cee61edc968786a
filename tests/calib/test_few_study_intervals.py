"""No study-cluster bootstrap interval under 5 studies in the calibration report (MAEs, differences, floors).

A percentile bootstrap over 2 studies has 3 distinct resamples (both studies, one twice, the other twice): the
trial user's 2-study report printed ``forecast_probe 1.52 [1.51, 1.53]`` and ``forecast_probe - cost only +0.44
[+0.08, +0.81]`` (read as a significant difference) while withholding the tau's interval under 5 studies. The MAE
intervals now follow the tau's rule (:data:`calib.bootstrap.MIN_INTERVAL_STUDIES`).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from calib.bootstrap import (MIN_INTERVAL_STUDIES, cluster_mean_interval, few_studies_reason, mae_difference_interval,
                             mae_interval, pooled_interval)
from calib.cli import main as calib_main
from calib.dataset import build_rows_many
from calib.noise_floor import pool_heldout_floors
from calib.report import compute
from calib_helpers import (default_arms, single_thread_blas, synthetic, synthetic_forecasts,  # noqa: F401
                           write_study)

REASON_2 = ("2 studies: no study-cluster bootstrap interval under 5 (a percentile bootstrap over few clusters "
            "undercovers: Cameron & Miller 2015)")


def frame(k: int, seed: int = 1):
    """k studies of 3 runs each: (study labels, realized, forecast a, forecast b), points, float64."""
    rng = np.random.default_rng(seed)
    study = np.repeat([f"s{i}" for i in range(k)], 3)
    y = rng.normal(0, 3, study.size)
    return study, y, y + rng.normal(0.5, 2, study.size), y + rng.normal(-1, 1, study.size)


def test_under_min_studies_no_interval_the_estimate_kept_and_the_reason_said():
    study, y, a, b = frame(4)
    got = cluster_mean_interval(np.abs(a - y), study, min_studies=5)
    assert got.interval is None and got.n_clusters == 4 and got.rows == 12
    assert got.estimate == pytest.approx(np.mean(np.abs(a - y)), rel=1e-15)
    assert got.reason == ("4 studies: no study-cluster bootstrap interval under 5 (a percentile bootstrap over few "
                          "clusters undercovers: Cameron & Miller 2015)")
    s2, y2, a2, b2 = frame(2)
    assert mae_interval(a2, y2, s2, min_studies=MIN_INTERVAL_STUDIES).reason == REASON_2
    d = mae_difference_interval(a2, b2, y2, s2, min_studies=MIN_INTERVAL_STUDIES)
    assert d.interval is None and d.reason == REASON_2
    assert d.estimate == pytest.approx(np.mean(np.abs(a2 - y2)) - np.mean(np.abs(b2 - y2)), rel=1e-12)
    # one study: still the "at least 2 studies" reason (the study-to-study variation cannot be estimated at all)
    assert "at least 2 studies" in cluster_mean_interval(y2[:3], s2[:3], min_studies=5).reason


def test_at_or_above_min_studies_the_interval_is_the_same_as_before():
    study, y, a, _ = frame(5)
    with_min = mae_interval(a, y, study, min_studies=5)
    plain = mae_interval(a, y, study)  # the default minimum, 2: the interval as it always was
    assert with_min.interval == plain.interval and with_min.reason is None
    assert with_min.interval[0] < with_min.estimate < with_min.interval[1]
    # and with 2 studies the default still gives one: the generic function is unchanged for other callers
    s2, y2, a2, _ = frame(2)
    assert mae_interval(a2, y2, s2).interval is not None


@pytest.mark.parametrize("bad", [1, 0, 2.5, True, "5"])
def test_bad_min_studies_is_refused_with_its_name(bad):
    study, y, a, _ = frame(3)
    with pytest.raises(ValueError, match="min_studies must be an integer of at least 2"):
        cluster_mean_interval(a, study, min_studies=bad)


def test_the_tau_reason_is_unchanged():
    assert MIN_INTERVAL_STUDIES == 5
    assert pooled_interval([0.1, 0.2], [1.0, 1.0], ["a", "b"]) == (None, (
        "2 ranked studies: no study-level bootstrap interval under 5 (a percentile bootstrap over few clusters "
        "undercovers: Cameron & Miller 2015)"))
    assert few_studies_reason(2, 5) == REASON_2


def test_held_out_floors_follow_min_studies():
    """The held-out split's floors (calib.noise_floor) are study-cluster intervals too: none under the minimum."""
    arms = [{"study": s, "arm": a, "seeds": 4, "items": 100, "seed_var": 1.0, "interaction_var": 50.0,
             "heldout_share": 0.3, "floor": {1.0: 1.0 + 0.1 * i, 4.0: 0.8 + 0.1 * i}}
            for i, (s, a) in enumerate([("s0", "x"), ("s0", "y"), ("s1", "x"), ("s1", "y")])]
    few = pool_heldout_floors([{"arms": arms, "skipped": []}], multiples=(1.0, 4.0), min_studies=5)
    assert [f["interval"] for f in few["floors"]] == [None, None]
    assert [f["reason"] for f in few["floors"]] == [REASON_2, REASON_2]
    assert few["floors"][0]["estimate"] == pytest.approx(1.15, rel=1e-12)  # mean of 1.0..1.3 over 4 seeds each
    plain = pool_heldout_floors([{"arms": arms, "skipped": []}], multiples=(1.0, 4.0))
    assert all(f["interval"] is not None for f in plain["floors"])


def test_the_report_passes_the_minimum_to_the_held_out_floor(monkeypatch, studies):
    seen = {}

    def fake(study_dirs, *, keep=None, **settings):
        seen.update(settings)
        return {"floors": [], "arms": [], "runs": 0, "heldout_share": math.nan, "skipped": [], "method": "x"}

    monkeypatch.setattr("calib.report.heldout_floor", fake)
    rows = build_rows_many(studies[:2], forecast_fn=synthetic_forecasts)
    compute(rows, cv="study", n_permutations=9, study_dirs=studies[:2])
    assert seen == {"resamples": 5000, "level": 0.95, "seed": 0, "min_studies": 5}


# ----------------------------------------------------------------------------- the report

@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    root = tmp_path_factory.mktemp("few")
    return [write_study(root / f"s{i}", arms=default_arms(n_extra=1, rng=np.random.default_rng(30 + i)),
                        slope=0.6, bias=-1.5, noise=0.3, seed=i) for i in range(5)]


def intervals(m: dict) -> list:
    """(where, interval, reason) of every study-cluster interval of ``m`` (MAEs, differences, floors)."""
    out = []
    for cv in m["cv_modes"]:
        for f, e in m["errors"][cv].items():
            for kind in ("raw", "calibrated"):
                for part, r in ((kind, e[kind]), (kind + "/common", e[kind].get("common", {}))):
                    if "mae_interval" in r:
                        out.append((f"{cv}/{f}/{part}", r["mae_interval"], r["mae_interval_reason"]))
                d = e[kind].get("common", {}).get("mae_difference_vs_cost_only")
                if d:
                    out.append((f"{cv}/{f}/{kind}/difference", d["interval"], d["reason"]))
                a = e[kind].get("common", {}).get("arm_level")
                if a:
                    out += [(f"{cv}/{f}/{kind}/arm_level/{k}", a[k]["interval"], a[k]["reason"])
                            for k in ("mae", "floor")]
    fl = m["seed_noise_floor"]
    out.append(("seed_noise_floor", fl["interval"], fl["reason"]))
    return out


@pytest.mark.parametrize("k", [2, 4])
def test_compute_under_5_studies_gives_no_interval_anywhere(studies, k):
    rows = build_rows_many(studies[:k], forecast_fn=synthetic_forecasts)
    m, _, _ = compute(rows, n_permutations=99)
    assert m["bootstrap"]["min_studies"] == 5 and m["bootstrap"]["n_clusters"] == k
    got = intervals(m)
    assert len(got) > 30, got  # MAEs (own and common rows), differences, arm-level MAEs and floors, the floor
    reason = few_studies_reason(k, 5)
    assert all(iv is None and why == reason for _, iv, why in got), [g for g in got if g[1] is not None]
    assert m["mae_interval"] is None and m["raw_mae_interval"] is None
    d = m["errors"]["study"]["forecast_probe"]["raw"]["common"]["mae_difference_vs_cost_only"]
    assert math.isfinite(d["estimate"]) and d["n_clusters"] == k  # the estimate is still given
    assert m["kendall_tau_interval"] is None  # as the tau


def test_compute_with_5_studies_keeps_every_interval(studies):
    rows = build_rows_many(studies, forecast_fn=synthetic_forecasts)
    m, _, _ = compute(rows, n_permutations=99)
    got = intervals(m)
    assert all(iv is not None and why is None for _, iv, why in got), [g for g in got if g[1] is None]
    assert m["kendall_tau_interval"] is not None
    c = m["errors"]["study"]["forecast_probe"]["raw"]["common"]
    held = c["mae_interval"]
    assert held[0] <= c["mae"] <= held[1]


def test_cli_and_html_of_a_2_study_report_show_no_interval_and_why(studies, tmp_path, capsys, synthetic):  # noqa: F811
    out = tmp_path / "rep"
    assert calib_main(["report", *map(str, studies[:2]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    m = json.loads((out / "metrics.json").read_text())
    raw = m["errors"]["study"]["forecast_cost_only"]["raw"]["common"]
    assert raw["mae_interval"] is None and raw["mae_interval_reason"] == REASON_2
    assert f"forecast_cost_only      {raw['mae']:.2f} [no interval] -> " in printed
    d = m["errors"]["study"]["forecast_probe"]["raw"]["common"]["mae_difference_vs_cost_only"]
    assert f"forecast_probe - cost only          {d['estimate']:+.2f} [no interval] -> " in printed
    assert f"  no interval: {REASON_2}\n" in printed
    assert f"seed-noise floor        {m['seed_noise_floor']['estimate']:.2f} [no interval]" in printed
    html = (out / "report.html").read_text()
    title = REASON_2.replace("&", "&amp;")
    assert f'{raw["mae"]:.2f} <span title="{title}">[no interval]</span>' in html
    assert f'{d["estimate"]:+.2f} <span title="{title}">[no interval]</span>' in html
    assert "under 5 studies none is given" in html and "with fewer than 2 studies none is given" not in html
    assert "arms besides grpo (distinct arm names over the 2 studies" in html
