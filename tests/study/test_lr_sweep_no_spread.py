"""The learning-rate sweep's report (gradprobe.study.lr_sweep_report.format_lr_sweep) prints an arm whose seeds'
accuracies have no spread (gradprobe.study.stats.no_spread) as "n/a (no spread)", not as a zero-width t interval;
an interval of a real spread (one held-out item of 40 on one seed of four) is printed as before."""

from __future__ import annotations

import copy
import math

import numpy as np
from scipy.stats import t as student_t

from gradprobe.study.analysis import analyze
from gradprobe.study.lr_sweep_report import format_lr_sweep

from test_lr_sweep import make_lr_study


def _point(sweep: dict, axis: str, arm: str) -> dict:
    group = next(g for g in sweep["groups"] if arm in g["arms"])
    return next(p for p in group["axes"][axis]["points"] if p["arm"] == arm)


def test_an_arm_whose_seeds_agree_prints_no_spread_in_place_of_a_zero_width_interval(tmp_path):
    sweep = analyze(make_lr_study(tmp_path / "s"), n_resamples=2000)["lr_sweep"]
    axis = next(iter(next(g for g in sweep["groups"] if "grpo_2xlr" in g["arms"])["axes"]))
    before = format_lr_sweep(sweep)
    p = _point(sweep, axis, "grpo_2xlr")
    assert p["seeds"] >= 2 and p["ci"][1] - p["ci"][0] > 1.0
    old_cell = f"2x {p['accuracy']:.2f} [{p['ci'][0]:+.2f}, {p['ci'][1]:+.2f}]"
    assert any(old_cell in line for line in before)

    agree = copy.deepcopy(sweep)
    q = _point(agree, axis, "grpo_2xlr")
    q["ci"] = [q["accuracy"], q["accuracy"]]  # every seed read the same accuracy: sd 0
    after = format_lr_sweep(agree)
    assert any(f"2x {q['accuracy']:.2f} n/a (no spread)" in line for line in after)
    assert not any(old_cell in line for line in after)
    assert [a for a, b in zip(before, after) if a != b] == [line for line in before if old_cell in line]

    # the least real spread of four seeds on 40 items: one seed one item off (sd 2.5 / 2 points): an interval
    x = np.array([50.0, 50.0, 50.0, 52.5])
    half = float(student_t.ppf(0.975, 3)) * x.std(ddof=1) / math.sqrt(4)
    q["accuracy"], q["ci"], q["seeds"] = float(x.mean()), [x.mean() - half, x.mean() + half], 4
    assert any(f"2x 50.62 [{x.mean() - half:+.2f}, {x.mean() + half:+.2f}]" in line for line in format_lr_sweep(agree))
