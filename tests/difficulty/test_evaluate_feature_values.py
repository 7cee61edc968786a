"""evaluate_estimator's features: a NaN (a missing value) is imputed, as designed, and now said in ``notes`` (a trial
user saw the AUC move with no word); an infinite feature is refused naming its cell."""

import numpy as np
import pytest

from gradprobe.difficulty.evaluate import evaluate_estimator


def _data(m=30):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(m, 3))
    y = (rng.random((m, 6)) < 0.5).astype(float)
    return [f"p{i}" for i in range(m)], x, y


def test_missing_features_are_counted_in_the_notes():
    ids, x, y = _data()
    clean = evaluate_estimator(ids, x, y, observed=2)
    assert not [n for n in clean["notes"] if "missing (NaN)" in n]
    x[[3, 3, 7], [0, 2, 1]] = np.nan
    res = evaluate_estimator(ids, x, y, observed=2)
    assert ("3 feature value(s) in 2 prompt(s) were missing (NaN) and imputed with the fit half's column mean "
            "(gradprobe.difficulty.estimator)") in res["notes"]


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_an_infinite_feature_is_refused_naming_its_cell(value):
    ids, x, y = _data()
    x[4, 1] = value
    with pytest.raises(ValueError, match=rf"features\[4, 1\] is {value}: a feature must be finite"):
        evaluate_estimator(ids, x, y, observed=2)
