"""Per-seed differences whose spread is far below any eval's resolution (here sd 5e-8 points: 1, 1, 1, 1.0000001)
count as no spread (gradprobe.study.stats.NO_SPREAD_ATOL, 1e-6 points), not only those equal to 1e-9 relative: a
paired t test over them said p = 3.4e-23 and PASSED. Every consumer treats them alike: no t test, no t interval in
the report's gains and hypotheses ("n/a (no spread)", which printed "[+1.00, +1.00]"), no lr-sweep interval, no
detectable effect, no seeds sized from such a pilot. The smallest real spread (one item of 10^6 on one of 100 seeds,
sd 1e-5 points) keeps its t test.

The study: tests/study_helpers.make_study (8 seeds, no per-item results) with grpo_2xlr edited to one held-out item
(2.5 points) above grpo on every seed at the matched tokens, seed 5 by 1e-9 more (1e-7 points), and the
double_lr hypothesis tested by a paired t."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from gradprobe.study import stats
from gradprobe.study.analysis import analyze
from gradprobe.study.hypothesis_tests import paired_t
from gradprobe.study.lr_sweep import _axis
from gradprobe.study.power import detectable_effects, format_power, power_analysis
from gradprobe.study.report import _gains, _hypotheses, format_rankings
from gradprobe.training.plan import parse_plan

from study_helpers import PLAN, make_study, set_runs_cells

NOISE = [1.0, 1.0, 1.0, 1.0000001]  # sd 5e-8 points
SD = float(np.std(NOISE, ddof=1))


def test_differences_below_any_eval_resolution_have_no_spread():
    assert stats.NO_SPREAD_ATOL == 1e-6 and SD == pytest.approx(5e-8)
    assert stats.paired_t(NOISE)["no_spread"] is True
    for alt in stats.ALTERNATIVES:
        pt = stats.paired_t_test(NOISE, alternative=alt)
        assert (pt["p_value"], pt["t"], pt["why"]) == (None, None, stats.NO_SPREAD)  # was p = 3.4e-23 two-sided
    d = paired_t(NOISE, stats.sign_flip_test(NOISE), min_effect=0.0, alternative="two-sided", alpha=0.05)
    assert (d["testable"], d["p_value"], d["why"]) == (False, None, stats.NO_SPREAD)
    assert stats.no_spread(9.99e-7, 0.0) is True and stats.no_spread(1e-6, 0.0) is False
    assert stats.no_spread(9.99e-7, 100.0) is True  # the relative rule alone gave 1e-7 at 100 points
    # the smallest real spread keeps its t test
    step = 100 / 10 ** 6  # one held-out item of 10^6, on one of 100 seeds: sd step / 10 = 1e-5 points
    diffs = [1.0] * 99 + [1.0 + step]
    assert float(np.std(diffs, ddof=1)) == pytest.approx(1e-5)
    assert stats.paired_t(diffs)["no_spread"] is False
    pt = stats.paired_t_test(diffs, alternative="two-sided")
    assert pt["why"] is None and pt["p_value"] == pytest.approx(ttest_1samp(diffs, 0.0).pvalue, rel=1e-9)


def _entry(gain, sd, ci):
    return {"accuracy": 76.8, "ci": [75.0, 78.0], "seeds": 4, "gap_exceeded": [], "gain_vs_grpo": gain, "gain_ci": ci,
            "gain_sd": sd, "gain_seeds": 4, "gain_vs_grpo_ci_two_way": None, "per_seed": {}}


def test_power_and_lr_sweep_give_no_number_on_it():
    t = stats.paired_t(NOISE)
    arms = {"grpo": {"seeds": 4, "generated_tokens": _entry(0.0, 0.0, [0.0, 0.0])},
            "half": {"seeds": 4, "generated_tokens": _entry(t["estimate"], t["sd"], t["ci"])},
            "double": {"seeds": 4, "generated_tokens": {**_entry(-4.0, 1.0, [-5.6, -2.4]), "accuracy": 71.8}}}
    d = detectable_effects(arms)
    assert (d["per_arm"]["half"]["effect"], d["per_arm"]["half"]["reason"]) == (
        None, f"not computed: half: {stats.NO_SPREAD}")  # was 1.1e-7 points "detectable"
    group = {"reference": "grpo", "arms": ["half", "grpo", "double"], "lr_scales": [0.5, 1.0, 2.0]}
    half = _axis(group, arms, "generated_tokens", 250000, "grpo", pair=None)["points"][0]
    assert (half["difference_ci"], half["difference_note"]) == (None, stats.NO_SPREAD)  # was an interval 1.6e-7 wide


def test_the_gains_say_no_spread_in_place_of_a_zero_width_interval():
    t = stats.paired_t(NOISE)
    result = {"control_arm": "grpo", "two_way": True, "arms": {
        "grpo": {"generated_tokens": _entry(0.0, 0.0, [0.0, 0.0])},
        "half": {"generated_tokens": _entry(t["estimate"], t["sd"], t["ci"])},
        "same": {"generated_tokens": _entry(1.0, 0.0, [1.0, 1.0])},
        "double": {"generated_tokens": _entry(-4.0, 1.0, [-5.59, -2.41])}}}
    assert _gains(result, ["generated_tokens"])[1] == (
        "  generated_tokens: half +1.00 n/a (no spread); same +1.00 n/a (no spread); double -4.00 [-5.59, -2.41]")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    old = 'test = "sign_flip"\narms = ["grpo_2xlr", "grpo"]'
    plan = PLAN.replace(old, old.replace("sign_flip", "paired_t"))
    assert plan != PLAN
    root = make_study(tmp_path_factory.mktemp("nospread"), items=False, plan=plan)
    set_runs_cells(root, {("grpo_2xlr", 2, 10, "accuracy"): repr(19 / 40),  # seed 2 had one item more: now 1 item
                          ("grpo_2xlr", 5, 10, "accuracy"): repr(19 / 40 + 1e-9),  # 1e-7 points of float noise
                          ("grpo_2xlr", 5, 5, "accuracy"): repr(14 / 40 + 1e-9)})
    return root


def test_a_study_with_such_differences_passes_nothing_on_them(study):
    result = analyze(study, write=False, figures=False, n_resamples=2000)
    g = result["arms"]["grpo_2xlr"]["generated_tokens"]
    assert g["gain_vs_grpo"] == pytest.approx(2.5, abs=1e-6) and 0 < g["gain_sd"] < 1e-7
    h = next(h for h in result["hypotheses"] if h["name"] == "double_lr")
    # was PASSED, p = 2.9e-56
    assert (h["status"], h["p_value"], h["passed"]) == ("not testable (8 seeds, no spread)", None, False)
    text = format_rankings(result)
    assert "grpo_2xlr +2.50 n/a (no spread)" in text  # was "+2.50 [+2.50, +2.50]"
    line = next(x for x in _hypotheses(result) if x.startswith("  double_lr:"))
    assert line.startswith("  double_lr: not testable (8 seeds, no spread)  estimate +2.50 points, t interval n/a "
                           "(no spread), two-way n/a, p n/a (the seeds' differences have no spread")
    assert result["detectable_effect"]["per_arm"]["grpo_2xlr"]["effect"] is None


def test_a_pilot_with_such_differences_sizes_no_study_on_them(study, tmp_path):
    text = PLAN.replace("seeds = SEEDS", "seeds = [0, 1]") + f'\n[power]\nmin_effect = 1.5\npilot = "{study}"\n'
    (tmp_path / "plan.toml").write_text(text)
    res = power_analysis(parse_plan(text, path=str(tmp_path / "plan.toml")), workers=2)
    assert not [r for r in res["rows"] if r["treatment"] == "grpo_2xlr"]  # was sized on an sd of 3.5e-8
    note = next(n for n in res["notes"] if n.startswith("grpo_2xlr vs grpo at generated_tokens"))
    assert note.startswith("grpo_2xlr vs grpo at generated_tokens: not sized, the pilot's per-seed differences have "
                           "no spread (sd ")
    assert note.endswith(f"points): {stats.NO_SPREAD}")
    assert [r for r in res["rows"] if (r["treatment"], r["control"]) == ("grpo", "mc_value")]  # the others sized
    assert f"note: {note}" in format_power(res)
