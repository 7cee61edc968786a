"""The registry of hypothesis tests (gradprobe.study.hypothesis_tests): one object per test, its names
equal to the torch-free tuple the plan checks read, each deciding from per-seed differences."""

from __future__ import annotations

import pytest

from gradprobe.study.hypothesis_tests import HYPOTHESIS_TESTS, hypothesis_test
from gradprobe.study.stats import sign_flip_test
from gradprobe.training.plan import TESTS
from gradprobe.training.specs import TEST_ALIASES, TEST_NAMES


def test_plan_names_equal_the_registry():
    assert TEST_NAMES == tuple(HYPOTHESIS_TESTS) == ("sign_flip", "paired_t")
    assert TEST_ALIASES == {a: t.name for t in HYPOTHESIS_TESTS.values() for a in t.aliases}
    assert TESTS == ("sign_flip", "paired_t", "paired_bootstrap")
    for name in TESTS:
        assert hypothesis_test(name).name == TEST_ALIASES.get(name, name)
    with pytest.raises(ValueError, match="'t' is not one of sign_flip, paired_bootstrap, paired_t"):
        hypothesis_test("t")
    for t in HYPOTHESIS_TESTS.values():  # each states its test and its source
        assert "gradprobe.study.stats" in t.doc and "19" in t.doc


def _decide(name, d, alpha=0.05, alternative="greater"):
    sf = sign_flip_test(d, alternative=alternative)
    return hypothesis_test(name).decide(d, sf, min_effect=0.0, alternative=alternative, alpha=alpha)


def test_sign_flip_decides_by_its_exact_p_and_floor():
    four = _decide("paired_bootstrap", [1.0, 2.0, 3.0, 4.0])  # floor 1/16 > 0.05: not testable
    assert (four["p_value"], four["testable"], four["method"]) == (1 / 16, False, "exact sign-flip, 16 patterns")
    assert four["why"] == "with 4 seeds the smallest attainable p is 1/16, above alpha 0.05; it needs >= 5 seeds"
    five = _decide("sign_flip", [1.0, 2.0, 3.0, 4.0, 5.0])
    assert (five["p_value"], five["testable"], five["why"]) == (1 / 32, True, None)
    assert _decide("sign_flip", [2.0])["why"] == "one paired seed: no spread, no test"


def test_paired_t_decides_by_the_t_p_value():
    got = _decide("paired_t", [1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd 1.29: t = 3.873 on 3 df (scipy.stats.ttest_1samp)
    assert got["testable"] and got["method"] == "paired t"
    assert got["p_value"] == pytest.approx(0.0152331458, abs=1e-9)
    assert got["p_text"] == "p = 0.0152 (paired t, 3 df)"
    one = _decide("paired_t", [2.0])
    assert (one["p_value"], one["p_text"], one["testable"]) == (None, None, False)
