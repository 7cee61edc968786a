"""Per-seed differences with no spread (equal up to float rounding) give no paired t test: no p, not PASSED, out of
the Holm family, no detectable effect and no lr-sweep "excludes 0" resting on a zero-width interval."""

from __future__ import annotations

import pytest
from scipy.stats import ttest_1samp

from gradprobe.study import stats
from gradprobe.study.hypothesis_tests import paired_t
from gradprobe.study.lr_sweep import _axis
from gradprobe.study.power import detectable_effects

# what a +0.010 accuracy edit of every seed gives in points: equal differences up to float rounding
ROUNDED = [100 * (0.786 + 0.01) - 100 * 0.786, 100 * (0.776 + 0.01) - 100 * 0.776,
           100 * (0.801 + 0.01) - 100 * 0.801, 100 * (0.758 + 0.01) - 100 * 0.758]


@pytest.mark.parametrize("diffs", [ROUNDED, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
def test_no_spread_gives_no_p_and_says_why(diffs):
    assert stats.paired_t(diffs)["no_spread"] is True
    for alt in stats.ALTERNATIVES:
        pt = stats.paired_t_test(diffs, alternative=alt)
        assert (pt["p_value"], pt["t"], pt["why"]) == (None, None, stats.NO_SPREAD)
    d = paired_t(diffs, stats.sign_flip_test(diffs), min_effect=0.0, alternative="two-sided", alpha=0.05)
    assert (d["testable"], d["p_value"], d["p_text"], d["why"]) == (False, None, None, stats.NO_SPREAD)
    assert stats.NO_SPREAD == "the seeds' differences have no spread: a t test is undefined"


def test_a_real_spread_keeps_the_t_test():
    diffs = [1.0, 1.1, 0.9, 1.05]
    pt = stats.paired_t_test(diffs, alternative="two-sided")
    assert pt["why"] is None and pt["p_value"] == pytest.approx(ttest_1samp(diffs, 0.0).pvalue, rel=1e-12)
    assert stats.paired_t(diffs)["no_spread"] is False
    assert stats.no_spread(0.1, 1.0) is False and stats.no_spread(None, 1.0) is False


def _entry(gain, sd):
    return {"accuracy": 76.8, "ci": [75.0, 78.0], "seeds": 4, "gap_exceeded": [], "gain_vs_grpo": gain,
            "gain_ci": [gain - 1e-14, gain + 1e-14] if sd < 1e-9 else [gain - 1.0, gain + 1.0], "gain_sd": sd,
            "gain_seeds": 4, "gain_vs_grpo_ci_two_way": None}


def test_detectable_effect_is_not_computed_on_no_spread():
    arms = {"grpo": {"generated_tokens": _entry(0.0, 0.0)}, "half": {"generated_tokens": _entry(1.0, 4e-15)},
            "double": {"generated_tokens": _entry(-4.0, 1.0)}}
    d = detectable_effects(arms)
    assert d["per_arm"]["half"]["effect"] is None
    assert d["per_arm"]["half"]["reason"] == f"not computed: half: {stats.NO_SPREAD}"
    assert d["largest"] == pytest.approx(d["per_arm"]["double"]["effect"]) and d["largest"] > 0


def test_lr_sweep_does_not_say_excludes_0_on_no_spread():
    group = {"reference": "grpo", "arms": ["half", "grpo", "double"], "lr_scales": [0.5, 1.0, 2.0]}
    arms = {"half": {"seeds": 4, "generated_tokens": _entry(1.0, 4e-15)},
            "grpo": {"seeds": 4, "generated_tokens": {**_entry(0.0, 0.0), "accuracy": 75.8}},
            "double": {"seeds": 4, "generated_tokens": {**_entry(-4.0, 1.0), "accuracy": 71.8}}}
    out = _axis(group, arms, "generated_tokens", 250000, "grpo", pair=None)
    half = out["points"][0]
    assert (half["difference"], half["difference_ci"], half["difference_note"]) == (1.0, None, stats.NO_SPREAD)
    assert out["reference_within_best"] is None
    assert out["reference_within_best_note"] == f"no t interval for half - grpo ({stats.NO_SPREAD})"
