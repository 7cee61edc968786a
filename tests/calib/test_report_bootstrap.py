"""Study-cluster bootstrap intervals of the MAE (calib.bootstrap) and their place in the calibration report."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from calib.bootstrap import (LEVEL, RESAMPLES, SEED, cluster_counts, cluster_mean_interval, mae_difference_interval,
                             mae_interval)
from calib.cli import main as calib_main
from calib.dataset import FORECASTERS, build_rows_many
from calib.report import compute
from calib_helpers import (default_arms, single_thread_blas, synthetic, synthetic_forecasts,  # noqa: F401
                           write_study)


def small_frame(seed: int = 3) -> pd.DataFrame:
    """4 studies of 2, 3, 1 and 4 runs; two forecasters of one realized gain (points, float64)."""
    rng = np.random.default_rng(seed)
    study = np.repeat(["s_b", "s_d", "s_a", "s_c"], [2, 3, 1, 4])  # labels out of order on purpose
    y = rng.normal(0, 3, study.size)
    return pd.DataFrame({"study": study, "target": y, "a": y + rng.normal(0.5, 2, study.size),
                         "b": y + rng.normal(-1, 1, study.size)})


def reference_intervals(df: pd.DataFrame, stat, *, resamples: int, level: float, seed: int):
    """The slow loop: draw K study labels per resample, stack their rows, compute ``stat``, take percentiles."""
    labels = sorted(set(df["study"]))
    k = len(labels)
    draws = np.random.default_rng(seed).integers(0, k, size=(resamples, k))
    by_study = {s: {c: df.loc[df["study"] == s, c].to_numpy(np.float64) for c in ("a", "b", "target")} for s in labels}
    values = []
    for b in range(resamples):
        resample = {c: np.concatenate([by_study[labels[j]][c] for j in draws[b]]) for c in ("a", "b", "target")}
        values.append(stat(resample))
    a = (1 - level) / 2
    return tuple(np.quantile(np.array(values, dtype=np.float64), [a, 1 - a]))


def test_defaults_are_5000_resamples_95_percent_seed_0():
    assert (RESAMPLES, LEVEL, SEED) == (5000, 0.95, 0)
    labels, codes, counts = cluster_counts(small_frame()["study"])
    assert list(labels) == ["s_a", "s_b", "s_c", "s_d"] and counts.shape == (5000, 4)
    assert (counts.sum(axis=1) == 4).all() and codes.tolist() == [1, 1, 3, 3, 3, 0, 2, 2, 2, 2]


def test_mae_interval_equals_the_reference_loop_in_float64():
    df = small_frame()
    got = mae_interval(df["a"], df["target"], df["study"])
    ref = reference_intervals(df, lambda r: np.mean(np.abs(r["a"] - r["target"])), resamples=5000, level=0.95, seed=0)
    assert got.interval == pytest.approx(ref, rel=1e-12, abs=1e-12)
    assert got.estimate == pytest.approx(np.mean(np.abs(df["a"] - df["target"])), rel=1e-15)
    assert got.n_clusters == 4 and got.rows == 10 and got.reason is None
    assert got.interval[0] < got.estimate < got.interval[1]
    # another seed and level: other resamples, still the reference's
    got = mae_interval(df["b"], df["target"], df["study"], resamples=700, level=0.8, seed=11)
    ref = reference_intervals(df, lambda r: np.mean(np.abs(r["b"] - r["target"])), resamples=700, level=0.8, seed=11)
    assert got.interval == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_paired_difference_equals_the_reference_loop_and_the_difference_of_maes():
    df = small_frame()
    got = mae_difference_interval(df["a"], df["b"], df["target"], df["study"])
    def diff(r):
        return np.mean(np.abs(r["a"] - r["target"])) - np.mean(np.abs(r["b"] - r["target"]))

    ref = reference_intervals(df, diff, resamples=5000, level=0.95, seed=0)
    assert got.interval == pytest.approx(ref, rel=1e-12, abs=1e-12)
    ma = mae_interval(df["a"], df["target"], df["study"]).estimate
    mb = mae_interval(df["b"], df["target"], df["study"]).estimate
    assert got.estimate == pytest.approx(ma - mb, rel=1e-13)


def test_permuting_rows_leaves_the_interval_unchanged():
    df = small_frame()
    shuffled = df.sample(frac=1.0, random_state=7)
    assert not (shuffled.index == df.index).all()
    for f in (lambda d: mae_interval(d["a"], d["target"], d["study"]),
              lambda d: mae_difference_interval(d["a"], d["b"], d["target"], d["study"])):
        assert f(shuffled).interval == pytest.approx(f(df).interval, rel=1e-12, abs=1e-12)


def test_equal_errors_give_a_zero_width_interval():
    df = small_frame()
    # every |error| exactly 0.75 (exact in binary): predicted = realized + 0.75 on a grid of realized gains
    y = np.arange(len(df), dtype=np.float64)
    got = mae_interval(y + 0.75, y, df["study"])
    assert got.interval == (0.75, 0.75) and got.estimate == 0.75
    got = cluster_mean_interval(np.full(len(df), 0.3), df["study"])
    assert got.interval[1] - got.interval[0] == pytest.approx(0.0, abs=1e-15)


def test_identical_forecasters_differ_by_exactly_zero():
    df = small_frame()
    got = mae_difference_interval(df["a"], df["a"].copy(), df["target"], df["study"])
    assert got.estimate == 0.0 and got.interval == (0.0, 0.0)


def test_fewer_than_two_studies_give_no_interval_and_a_reason():
    df = small_frame()
    one = df[df["study"] == "s_c"]
    got = mae_interval(one["a"], one["target"], one["study"])
    assert got.interval is None and "at least 2 studies" in got.reason and got.n_clusters == 1
    assert got.estimate == pytest.approx(np.mean(np.abs(one["a"] - one["target"])))
    got = mae_difference_interval(one["a"], one["b"], one["target"], one["study"])
    assert got.interval is None and "at least 2 studies" in got.reason
    got = mae_interval([], [], [])
    assert got.interval is None and got.reason == "no rows" and np.isnan(got.estimate)
    assert got.as_dict() == {"estimate": got.estimate, "interval": None, "reason": "no rows", "n_clusters": 0,
                             "rows": 0}


def test_bad_input_names_the_problem():
    df = small_frame()
    with pytest.raises(ValueError, match="resamples must be a positive integer"):
        mae_interval(df["a"], df["target"], df["study"], resamples=0)
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        mae_interval(df["a"], df["target"], df["study"], level=95)
    with pytest.raises(ValueError, match="not finite"):
        mae_interval(df["a"].where(df.index != 2), df["target"], df["study"])
    with pytest.raises(ValueError, match="one entry per row"):
        mae_interval(df["a"], df["target"], df["study"][:-1])
    with pytest.raises(ValueError, match="no study"):
        cluster_counts([None, "s"])


# ----------------------------------------------------------------------------- the report

@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    root = tmp_path_factory.mktemp("boot")
    return [write_study(root / f"s{i}", arms=default_arms(n_extra=1, rng=np.random.default_rng(20 + i)),
                        slope=0.6, bias=-1.5, noise=0.3, seed=i) for i in range(5)]


def test_compute_records_intervals_and_differences_of_the_held_out_predictions(studies):
    rows = build_rows_many(studies, forecast_fn=synthetic_forecasts)
    m, cv_rows, _ = compute(rows, cv="study", n_permutations=99)  # leave one arm out: the CLI test below
    assert m["cv_modes"] == ["study"]
    assert m["bootstrap"]["resamples"] == 5000 and m["bootstrap"]["level"] == 0.95 and m["bootstrap"]["seed"] == 0
    assert m["bootstrap"]["clusters"] == "study" and m["bootstrap"]["n_clusters"] == 5
    assert m["mae_interval"] == m["errors"]["study"]["forecast_probe"]["calibrated"]["mae_interval"]
    common = rows.loc[np.isfinite(rows[m["compared_forecasters"]].astype(float)).all(axis=1)
                      & ~rows["is_reference"].astype(bool) & np.isfinite(rows["target"]), ["study", "arm", "seed"]]
    key = ["study", "arm", "seed"]
    for cv in m["cv_modes"]:
        for kind, method in (("raw", "none"), ("calibrated", "linear")):
            held = {f: cv_rows[(cv_rows["cv"] == cv) & (cv_rows["forecaster"] == f) & (cv_rows["method"] == method)]
                    .merge(common, on=key).sort_values(key).reset_index(drop=True) for f in m["compared_forecasters"]}
            base = held["forecast_cost_only"]
            for f in m["compared_forecasters"]:
                c = m["errors"][cv][f][kind]["common"]
                expect = mae_interval(held[f]["cv_pred"], held[f]["target"], held[f]["study"])
                assert c["mae"] == pytest.approx(expect.estimate)
                assert c["mae_interval"] == pytest.approx(expect.interval, rel=1e-12)
                assert c["mae_interval_reason"] is None
                own = m["errors"][cv][f][kind]
                assert own["mae_interval"][0] < own["mae"] < own["mae_interval"][1]
                if f == "forecast_cost_only":
                    assert "mae_difference_vs_cost_only" not in c
                    continue
                d = c["mae_difference_vs_cost_only"]
                ref = mae_difference_interval(held[f]["cv_pred"], base["cv_pred"], base["target"], base["study"])
                assert (held[f]["target"] == base["target"]).all()
                cost = m["errors"][cv]["forecast_cost_only"][kind]["common"]["mae"]
                assert d["estimate"] == pytest.approx(c["mae"] - cost, rel=1e-12)
                assert d["interval"] == pytest.approx(ref.interval, rel=1e-12, abs=1e-12)
                assert d["n_clusters"] == 5 and d["rows"] == len(base)
    # the truth is linear in the probe's forecast: calibrated, it beats cost only on every resample's study set
    d = m["errors"]["study"]["forecast_probe"]["calibrated"]["common"]["mae_difference_vs_cost_only"]
    assert d["interval"][1] < 0
    assert "_common" not in cv_rows.columns


def test_compute_with_one_study_gives_no_interval_and_says_why(studies):
    rows = build_rows_many(studies[:1], forecast_fn=synthetic_forecasts)
    m, _, _ = compute(rows, n_permutations=99)
    c = m["errors"]["arm"]["forecast_probe"]["raw"]["common"]
    assert c["mae_interval"] is None and "at least 2 studies" in c["mae_interval_reason"]
    d = c["mae_difference_vs_cost_only"]
    assert d["interval"] is None and "at least 2 studies" in d["reason"] and np.isfinite(d["estimate"])
    assert m["bootstrap"]["n_clusters"] == 1 and m["mae_interval"] is None


def test_bad_bootstrap_settings_fail_before_any_fit(studies):
    rows = build_rows_many(studies[:2], forecast_fn=synthetic_forecasts)
    with pytest.raises(ValueError, match="resamples"):
        compute(rows, bootstrap_resamples=0)


def test_report_files_and_cli_summary_carry_the_intervals(studies, tmp_path, capsys, synthetic):  # noqa: F811
    out = tmp_path / "rep"
    assert calib_main(["report", *map(str, studies), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    m = json.loads((out / "metrics.json").read_text())
    raw = m["errors"]["study"]["forecast_cost_only"]["raw"]["common"]
    lo, hi = raw["mae_interval"]
    assert f"forecast_cost_only      {raw['mae']:.2f} [{lo:.2f}, {hi:.2f}]" in printed
    d = m["errors"]["study"]["forecast_probe"]["raw"]["common"]["mae_difference_vs_cost_only"]
    assert re.search(rf"forecast_probe - cost only\s+{d['estimate']:+.2f} \[{d['interval'][0]:+.2f}, "
                     rf"{d['interval'][1]:+.2f}\]", printed)
    assert "5000 resamples of 5 studies" in printed
    html = (out / "report.html").read_text()
    assert f"{raw['mae']:.2f} [{lo:.2f}, {hi:.2f}]" in html
    assert f"{d['estimate']:+.2f} [{d['interval'][0]:+.2f}, {d['interval'][1]:+.2f}]" in html
    assert "probe - cost only" in html and "study-cluster bootstrap (5000 resamples of the 5 studies" in html
    assert m["cv_modes"] == ["study", "arm"] and "Leave one arm out" in html
    for f in FORECASTERS:
        for kind in ("raw", "calibrated"):
            arm = m["errors"]["arm"][f][kind]["common"]
            assert arm["mae_interval"][0] <= arm["mae"] <= arm["mae_interval"][1]
            assert ("mae_difference_vs_cost_only" in arm) == (f != "forecast_cost_only")
    assert m["bootstrap"]["n_clusters"] == 5
