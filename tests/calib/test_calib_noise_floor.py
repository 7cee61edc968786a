"""The seed-noise floor of the run-level MAE and the errors on arm means (calib.noise_floor)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from calib.bootstrap import cluster_mean_interval
from calib.noise_floor import NO_SEEDS, arm_level_errors, arm_seed_noise, seed_noise_floor


def runs(seed: int = 5) -> pd.DataFrame:
    """3 studies; arms of 4, 3, 2 and 1 seeds; one run without a realized gain (NaN)."""
    rng = np.random.default_rng(seed)
    recs = []
    for study, arm, n in [("s1", "a", 4), ("s1", "b", 3), ("s2", "a", 2), ("s2", "c", 1), ("s3", "a", 4)]:
        for k in range(n):
            recs.append({"study": study, "arm": arm, "seed": k, "target": rng.normal(-2, 1.5),
                         "forecast": rng.normal(-1, 1)})
    recs.append({"study": "s3", "arm": "a", "seed": 9, "target": math.nan, "forecast": 0.0})
    return pd.DataFrame(recs)


def slow_floor(values) -> float:
    pairs = list(itertools.combinations([float(v) for v in values], 2))
    return sum(abs(x - y) for x, y in pairs) / len(pairs) / math.sqrt(2.0) if pairs else math.nan


def test_per_arm_floor_equals_a_loop_over_pairs_in_float64():
    d = runs()
    per = arm_seed_noise(d["target"], d["arm"], d["study"]).set_index(["study", "arm"])
    for (study, arm), g in d.groupby(["study", "arm"]):
        y = g["target"].dropna()
        assert per.loc[(study, arm), "seeds"] == len(y)
        assert per.loc[(study, arm), "realized"] == pytest.approx(y.mean(), rel=1e-15)
        if len(y) >= 2:
            assert per.loc[(study, arm), "floor"] == pytest.approx(slow_floor(y), rel=1e-14)
        else:
            assert math.isnan(per.loc[(study, arm), "floor"])


def test_run_level_floor_weights_arms_by_runs_and_leaves_single_seeds_out():
    d = runs()
    got = seed_noise_floor(d["target"], d["arm"], d["study"], resamples=400)
    per = [(slow_floor(g["target"].dropna()), g["target"].notna().sum(), s) for (s, _), g in d.groupby(["study", "arm"])]
    per = [p for p in per if p[1] >= 2]
    expect = sum(f * n for f, n, _ in per) / sum(n for _, n, _ in per)
    assert got["estimate"] == pytest.approx(expect, rel=1e-14)
    assert got["runs"] == 4 + 3 + 2 + 4 and got["arms"] == 4 and got["single_seed_arms"] == 1
    ref = cluster_mean_interval(np.repeat([f for f, _, _ in per], [n for _, n, _ in per]),
                                np.repeat([s for _, _, s in per], [n for _, n, _ in per]), resamples=400)
    assert got["interval"] == pytest.approx(list(ref.interval), rel=1e-14)


def test_floor_ignores_each_arms_mean_and_scales_with_the_noise():
    d = runs()
    shift = d["arm"].map({"a": 10.0, "b": -3.0, "c": 1.0}) + d["study"].map({"s1": 0.0, "s2": 5.0, "s3": -7.0})
    base = seed_noise_floor(d["target"], d["arm"], d["study"], resamples=200)["estimate"]
    moved = seed_noise_floor(d["target"] + shift, d["arm"], d["study"], resamples=200)["estimate"]
    scaled = seed_noise_floor(-2.5 * d["target"], d["arm"], d["study"], resamples=200)["estimate"]
    assert moved == pytest.approx(base, rel=1e-12) and scaled == pytest.approx(2.5 * base, rel=1e-12)


def test_floor_estimates_the_half_normal_mean_of_normal_seed_noise():
    rng = np.random.default_rng(0)
    arms = np.repeat(np.arange(3000), 4)
    y = rng.normal(0, 1, 3000)[arms] * 5 + rng.normal(0, 2.0, arms.size)  # arm means vary, seed sd 2
    got = seed_noise_floor(y, arms, arms % 7, resamples=50)["estimate"]
    assert got == pytest.approx(2.0 * math.sqrt(2 / math.pi), rel=0.03)


def test_arm_level_errors_by_hand():
    d = runs()
    got = arm_level_errors(d["forecast"], d["target"], d["arm"], d["study"], resamples=300)
    ok = d.dropna(subset=["target"])
    means = ok.groupby(["study", "arm"]).agg(p=("forecast", "mean"), y=("target", "mean"), n=("target", "size"))
    assert got["arms"] == 5 and got["floor_arms"] == 4
    assert got["mae"]["estimate"] == pytest.approx((means["p"] - means["y"]).abs().mean(), rel=1e-14)
    floors = [slow_floor(g["target"]) / math.sqrt(len(g)) for _, g in ok.groupby(["study", "arm"]) if len(g) >= 2]
    assert got["floor"]["estimate"] == pytest.approx(np.mean(floors), rel=1e-14)
    # a forecaster that is each arm's realized mean has no arm-level error at all
    exact = ok.groupby(["study", "arm"])["target"].transform("mean")
    assert arm_level_errors(exact, ok["target"], ok["arm"], ok["study"], resamples=50)["mae"]["estimate"] == \
        pytest.approx(0.0, abs=1e-12)


def test_mismatched_lengths_name_the_inputs():
    with pytest.raises(ValueError, match=r"realized \(3\), arms \(2\) and studies \(3\)"):
        arm_seed_noise([1.0, 2.0, 3.0], ["a", "a"], ["s", "s", "s"])
    with pytest.raises(ValueError, match=r"predicted \(2\) and realized \(3\)"):
        arm_level_errors([1.0, 2.0], [1.0, 2.0, 3.0], ["a"] * 3, ["s"] * 3)


def test_no_arm_with_two_seeds_gives_nan_and_a_reason():
    got = seed_noise_floor([1.0, 2.0], ["a", "b"], ["s1", "s2"])
    assert math.isnan(got["estimate"]) and got["interval"] is None
    assert got["reason"] == NO_SEEDS and "no arm has 2 or more seeds" in NO_SEEDS
    assert got["arms"] == 0 and got["single_seed_arms"] == 2
    a = arm_level_errors([0.0, 1.0], [1.0, 2.0], ["a", "b"], ["s1", "s2"])
    assert a["mae"]["estimate"] == 1.0 and a["floor"]["reason"] == NO_SEEDS and a["floor_arms"] == 0


def test_report_of_single_seed_studies_says_the_floor_cannot_be_estimated(tmp_path, capsys):
    from calib.cli import _print_floor
    from calib.report import write_report
    from calib_helpers import default_arms, synthetic_forecasts, write_study

    studies = [write_study(tmp_path / f"s{i}", arms=default_arms(n_extra=2, rng=np.random.default_rng(i)), seeds=(0,),
                           seed=i) for i in range(2)]
    m = write_report(studies, tmp_path / "rep", forecast_fn=synthetic_forecasts, cv="study", n_permutations=99)
    assert m["seed_noise_floor"]["reason"] == NO_SEEDS and m["seed_noise_floor"]["single_seed_arms"] > 0
    _print_floor(m, "study")
    assert capsys.readouterr().out == f"  seed-noise floor        n/a: {NO_SEEDS}\n"
    html = (tmp_path / "rep" / "report.html").read_text()
    assert f"Seed-noise floor of the run-level MAE: n/a, {NO_SEEDS}." in html
