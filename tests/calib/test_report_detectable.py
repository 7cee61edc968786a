"""The calibration report gives the smallest detectable paired MAE difference beside the difference itself.

A trial user read ``forecast_probe - cost only +0.09 [-0.16, +0.39]`` in ``calib report`` with no way to tell
whether the studies could have seen a difference of a given size; ``benchmarks/unseen_study.py`` prints one
("detectable 0.49"). The report now reuses that function (moved to :func:`calib.bootstrap.detectable_difference`)
on the same study-cluster resamples as the interval: metrics.json's ``detectable_difference``, the printed
``detectable X.XX`` and report.html.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from calib.bootstrap import cluster_mean_interval, detectable_difference, mae_difference_interval
from calib.cli import main as calib_main
from calib.dataset import build_rows_many
from calib.report import compute
from calib_helpers import (default_arms, single_thread_blas, synthetic, synthetic_forecasts,  # noqa: F401
                           write_study)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    root = tmp_path_factory.mktemp("mde")
    return [write_study(root / f"s{i}", arms=default_arms(n_extra=1, rng=np.random.default_rng(20 + i)),
                        slope=0.6, bias=-1.5, noise=0.3, seed=i) for i in range(5)]


def test_the_detectable_difference_is_2_80_standard_deviations_of_the_resamples():
    resampled = np.random.default_rng(0).normal(0.3, 0.25, 4000)
    sd = np.std(resampled, ddof=1)
    assert detectable_difference(resampled) == pytest.approx(2.8016 * sd, rel=1e-4)  # z_0.975 + z_0.8
    assert detectable_difference(resampled, alpha=0.1, power=0.9) == pytest.approx((1.6449 + 1.2816) * sd, rel=1e-4)


def test_the_interval_keeps_its_resamples_and_none_without_an_interval():
    study = np.repeat([f"s{i}" for i in range(5)], 3)
    v = np.random.default_rng(2).normal(0, 1, study.size)
    got = cluster_mean_interval(v, study, resamples=300)
    assert got.resampled.shape == (300,)
    a = (1 - 0.95) / 2
    assert got.interval == pytest.approx(tuple(np.quantile(got.resampled, [a, 1 - a])), rel=1e-12)
    assert "resampled" not in got.as_dict()  # metrics.json keys of every interval unchanged
    assert cluster_mean_interval(v, study, min_studies=6).resampled is None


def test_the_benchmark_uses_calibs_function():
    spec = importlib.util.spec_from_file_location("unseen_study_mde", REPO / "benchmarks" / "unseen_study.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["unseen_study_mde"] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop("unseen_study_mde", None)
    assert mod.detectable_difference is detectable_difference


def test_metrics_record_the_detectable_difference_of_the_paired_resamples(studies):
    rows = build_rows_many(studies, forecast_fn=synthetic_forecasts)
    m, cv_rows, _ = compute(rows, cv="study", n_permutations=99)
    common = ["study", "arm", "seed"]
    for kind, method in (("raw", "none"), ("calibrated", "linear")):
        held = {f: cv_rows[(cv_rows["cv"] == "study") & (cv_rows["forecaster"] == f) & (cv_rows["method"] == method)]
                .sort_values(common).reset_index(drop=True) for f in ("forecast_probe", "forecast_cost_only")}
        a, b = held["forecast_probe"], held["forecast_cost_only"]
        both = a.merge(b[common + ["cv_pred"]], on=common, suffixes=("", "_base"))
        ref = mae_difference_interval(both["cv_pred"], both["cv_pred_base"], both["target"], both["study"])
        d = m["errors"]["study"]["forecast_probe"][kind]["common"]["mae_difference_vs_cost_only"]
        assert d["interval"] == pytest.approx(ref.interval, rel=1e-12)  # unchanged
        assert d["detectable_difference"] == pytest.approx(detectable_difference(ref.resampled), rel=1e-12)
        assert 0 < d["detectable_difference"] < 10
        assert set(d) == {"estimate", "interval", "reason", "n_clusters", "rows", "detectable_difference"}


def test_under_five_studies_there_is_no_detectable_difference(studies):
    rows = build_rows_many(studies[:2], forecast_fn=synthetic_forecasts)
    m, _, _ = compute(rows, cv="study", n_permutations=99)
    d = m["errors"]["study"]["forecast_probe"]["raw"]["common"]["mae_difference_vs_cost_only"]
    assert d["interval"] is None and d["detectable_difference"] is None and "2 studies" in d["reason"]


def test_printed_text_and_page_show_the_detectable_difference(studies, tmp_path, capsys, synthetic):  # noqa: F811
    out = tmp_path / "rep"
    assert calib_main(["report", *map(str, studies), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    m = json.loads((out / "metrics.json").read_text())
    raw, cal = (m["errors"]["study"]["forecast_probe"][k]["common"]["mae_difference_vs_cost_only"]
                for k in ("raw", "calibrated"))
    line = next(x for x in printed.splitlines() if "forecast_probe - cost only" in x)
    assert re.search(rf"{raw['estimate']:+.2f} \[{raw['interval'][0]:+.2f}, {raw['interval'][1]:+.2f}\] detectable "
                     rf"{raw['detectable_difference']:.2f} -> {cal['estimate']:+.2f} \[{cal['interval'][0]:+.2f}, "
                     rf"{cal['interval'][1]:+.2f}\] detectable {cal['detectable_difference']:.2f}   \(paired MAE "
                     "difference", line)
    assert "(detectable: the smallest difference these studies could detect, 80% power at two-sided 5%" in printed
    html = (out / "report.html").read_text()
    assert (f"{raw['estimate']:+.2f} [{raw['interval'][0]:+.2f}, {raw['interval'][1]:+.2f}], detectable "
            f"{raw['detectable_difference']:.2f}") in html
    assert "smallest difference these studies could detect" in html


def test_the_page_gives_the_conformal_level_with_its_digits(studies, tmp_path, synthetic):  # noqa: F811
    out = tmp_path / "rep999"
    assert calib_main(["report", *map(str, studies), "--out", str(out), "--confidence", "0.999"]) == 0
    html = (out / "report.html").read_text()
    assert "conformal (MAPIE) at 99.9%, nested inside each held-out fold" in html and "at 100%," not in html
