"""An accuracy's t interval lies within [0, 100] points (gradprobe.study.stats.accuracy_interval): seeds near the
ceiling (98, 99.5, 100) or the floor (0, 0.5, 2) gave a Student-t bound past 100 or below 0. The analysis writes the
clipped interval as ``ci`` of an arm's axis entry, of the initial policy and of a learning-rate point, with the t
interval as ``ci_unclipped`` beside it only where a bound moved; a gain (a difference) keeps its t interval; the
learning-rate sweep's report clips an older analysis.json's interval and says so after it."""

from __future__ import annotations

import copy
import json

import pytest

from gradprobe.study import stats
from gradprobe.study.analysis import analyze
from gradprobe.study.lr_sweep_report import format_lr_sweep

from study_helpers import make_study, set_runs_cells
from test_lr_sweep import make_lr_study

CLIPPED = "(t interval clipped to [0, 100])"  # what the report writes after a clipped accuracy interval


def test_a_ceiling_accuracy_interval_is_clipped_at_100_and_keeps_its_lower_t_bound():
    raw = stats.paired_t([98.0, 99.5, 100.0])
    assert raw["ci"][1] == pytest.approx(101.75224, abs=1e-4)  # the defect: a mean accuracy above 100
    got = stats.accuracy_interval([98.0, 99.5, 100.0])
    assert got["ci"] == [raw["ci"][0], 100.0] and got["ci_unclipped"] == raw["ci"]
    assert got["estimate"] == pytest.approx(99.1666667) and got["sd"] == raw["sd"]
    low = stats.accuracy_interval([0.0, 0.5, 2.0])
    assert low["ci"][0] == 0.0 and low["ci"][1] == stats.paired_t([0.0, 0.5, 2.0])["ci"][1]
    inside = stats.accuracy_interval([40.0, 42.5, 45.0])
    assert inside["ci"] == stats.paired_t([40.0, 42.5, 45.0])["ci"] and inside["ci_unclipped"] is None
    assert stats.accuracy_interval([100.0])["ci"] is None  # one seed: no interval, nothing to clip


def test_the_analysis_clips_arm_and_initial_accuracy_intervals_but_not_gains(tmp_path):
    root = make_study(tmp_path / "s", seeds=3, items=False)
    cells = {}
    for s, acc in enumerate(("0.98", "0.995", "1.0")):
        cells.update({("grpo_2xlr", s, u, "accuracy"): acc for u in (2, 5, 10)})
    for s, acc in enumerate(("0.0", "0.005", "0.02")):  # the initial policy (update 0), the same in every arm
        cells.update({(arm, s, 0, "accuracy"): acc for arm in ("grpo", "mc_value", "grpo_2xlr")})
    set_runs_cells(root, cells)
    result = analyze(root, write=True, figures=False, n_resamples=2000)

    init = result["initial"]
    assert init["ci"][0] == 0.0 and init["ci_unclipped"] == pytest.approx(stats.paired_t([0.0, 0.5, 2.0])["ci"])
    assert init["ci"][1] == pytest.approx(init["ci_unclipped"][1])
    e = result["arms"]["grpo_2xlr"]["updates"]
    t = stats.paired_t([98.0, 99.5, 100.0])
    assert e["accuracy"] == pytest.approx(99.1666667) and e["ci"] == pytest.approx([t["ci"][0], 100.0])
    assert e["ci_unclipped"] == pytest.approx(t["ci"])
    diffs = [98.0 - 0.0, 99.5 - 0.5, 100.0 - 2.0]  # a gain keeps its t interval
    assert e["gain_vs_initial_ci"] == pytest.approx(stats.paired_t(diffs)["ci"])
    for arm in ("grpo", "mc_value"):  # inside [0, 100]: written as before, no ci_unclipped
        for axis in ("updates", "generated_tokens", "flops"):
            cell = result["arms"][arm][axis]
            assert "ci_unclipped" not in cell and cell["ci"] == pytest.approx(
                stats.paired_t([v for v in cell["per_seed"].values() if v is not None])["ci"])
    on_disk = json.loads((root / "analysis.json").read_text())
    assert on_disk["arms"]["grpo_2xlr"]["updates"]["ci"][1] == 100.0


def _point(sweep: dict, arm: str) -> tuple[str, dict]:
    group = next(g for g in sweep["groups"] if arm in g["arms"])
    axis = next(iter(group["axes"]))
    return axis, next(p for p in group["axes"][axis]["points"] if p["arm"] == arm)


def test_the_lr_sweep_prints_a_clipped_interval_and_says_so(tmp_path):
    sweep = analyze(make_lr_study(tmp_path / "s"), n_resamples=2000, figures=False)["lr_sweep"]
    _, p = _point(sweep, "grpo_2xlr")
    assert "ci_unclipped" not in p and not any(CLIPPED in line for line in format_lr_sweep(sweep))

    old = copy.deepcopy(sweep)  # an analysis.json written before accuracy intervals were clipped
    _, q = _point(old, "grpo_2xlr")
    t = stats.paired_t([98.0, 99.5, 100.0])
    q["accuracy"], q["ci"], q["seeds"] = t["estimate"], t["ci"], 3
    text = "\n".join(format_lr_sweep(old))
    assert f"2x 99.17 [{t['ci'][0]:+.2f}, +100.00] {CLIPPED}" in text
    assert "+101.75" not in text

    new = copy.deepcopy(old)  # as this analysis writes it: clipped, with the t interval beside it
    _, r = _point(new, "grpo_2xlr")
    r["ci"], r["ci_unclipped"] = [t["ci"][0], 100.0], t["ci"]
    assert f"2x 99.17 [{t['ci'][0]:+.2f}, +100.00] {CLIPPED}" in "\n".join(format_lr_sweep(new))


def test_the_figures_band_is_seaborns_inside_the_range_and_clipped_at_its_ends():
    import numpy as np
    import pandas as pd
    import seaborn as sns
    from seaborn._statistics import EstimateAggregator

    from gradprobe.figures import subplots
    from gradprobe.study.report import accuracy_band

    def seaborns(v):
        agg = EstimateAggregator("mean", ("se", 2))(pd.DataFrame({"y": v}), "y")
        return float(agg["ymin"]), float(agg["ymax"])

    inside = [40.0, 45.0, 50.0, 47.5]
    assert accuracy_band(inside) == pytest.approx(seaborns(inside), rel=1e-15)
    assert seaborns([98.0, 99.5, 100.0])[1] > 100 and accuracy_band([98.0, 99.5, 100.0])[1] == 100.0
    assert seaborns([1.0, 0.0, 0.5])[0] < 0 and accuracy_band([1.0, 0.0, 0.5])[0] == 0.0
    assert all(x != x for x in accuracy_band([30.0]))  # one seed: no band
    rows = pd.DataFrame({"x": [0, 0, 0, 1, 1, 1], "y": [98.0, 99.5, 100.0, 99.0, 100.0, 100.0]})
    tops = []
    for errorbar in (("se", 2), accuracy_band):
        fig, ax = subplots()
        sns.lineplot(data=rows, x="x", y="y", errorbar=errorbar, ax=ax)
        tops.append(max(float(np.max(p.vertices[:, 1])) for c in ax.collections for p in c.get_paths()))
    assert tops[0] > 100 and tops[1] == 100.0
