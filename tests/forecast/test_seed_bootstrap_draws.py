"""One seed-bootstrap draw generator (curve_fit.seed_bootstrap_draws) for the fit and the saved-curve check.

``fit_seed_replicates`` (which seeds each replicate refits) and ``curve_file._redrawn`` (which seeds a saved curve's
``replicate_seed_counts`` must be) both take their draws from it, so they cannot drift: pinned here on concrete
draws, including ones left out for too few distinct evals.
"""

from __future__ import annotations

import json
from itertools import islice

import numpy as np
import pandas as pd
import pytest

from gradprobe.forecast import curve_file, curve_fit, default_curve_path
from gradprobe.forecast.curve_fit import fit_seed_replicates, fit_sigmoid, seed_bootstrap_draws

# seed a: evals at updates 0, 2, 5; seed b: 0, 10, 20; seed c: update 0 only. R0 fixed, B fitted: a resample
# needs 3 distinct updates > 0, i.e. both a and b drawn.
POINTS = pd.DataFrame({"update": [0, 2, 5, 0, 10, 20, 0.0], "accuracy": [10, 20, 25, 11, 30, 33, 9.0],
                       "seed": list("aaabbbc")})
POSITIVE = [np.array([2.0, 5.0]), np.array([10.0, 20.0]), np.array([])]
# the first 10 draws of numpy PCG64(20251015).integers(0, 3, size=3), and whether each is refittable (need 3)
DRAWS = [[0, 0, 2], [0, 1, 2], [2, 2, 2], [1, 2, 1], [2, 1, 0], [1, 0, 0], [2, 1, 0], [0, 1, 1], [2, 2, 2], [0, 2, 1]]
REFITTABLE = [False, True, False, False, True, True, True, True, False, True]
KEPT = [d for d, ok in zip(DRAWS, REFITTABLE) if ok]
KEPT_COUNTS = [[1, 1, 1], [1, 1, 1], [2, 1, 0], [1, 1, 1], [1, 2, 0], [1, 1, 1]]


def test_the_shared_generator_draws_seeds_with_replacement_from_pcg64_of_the_replicate_seed():
    got = list(islice(seed_bootstrap_draws(POSITIVE, need=3), 10))
    assert [d.tolist() for d, _ in got] == DRAWS
    assert [ok for _, ok in got] == REFITTABLE
    assert all(d.dtype == np.int64 and d.shape == (3,) for d, _ in got)
    # need 2: seed a alone (2, 5) or b alone (10, 20) suffices; c alone (no update > 0) does not
    assert [ok for _, ok in islice(seed_bootstrap_draws(POSITIVE, need=2), 10)] == [
        True, True, False, True, True, True, True, True, False, True]


def test_the_generator_refuses_no_seeds():
    with pytest.raises(ValueError, match="positive is empty"):
        next(seed_bootstrap_draws([], need=2))


def test_fit_seed_replicates_refits_the_shared_generators_refittable_draws_in_order():
    fit = fit_sigmoid(POINTS["update"].to_numpy(float), POINTS["accuracy"].to_numpy(float), r0=10.0, b_fixed=None)
    reps, counts, notes = fit_seed_replicates(POINTS, ["a", "b", "c"], fit.params, r0_fixed=True, b_fixed=None,
                                              n_replicates=10)
    assert counts.tolist() == KEPT_COUNTS
    assert [np.bincount(d, minlength=3).tolist() for d in KEPT] == KEPT_COUNTS
    assert notes == ["4 of 10 seed-bootstrap replicates had too few distinct evals to refit and were left out"]
    # R0 re-read from each resample's evals at update 0 (a 10, b 11, c 9), in draw order
    np.testing.assert_allclose(reps[:, 0], [10.0, 10.0, 31 / 3, 10.0, 32 / 3, 10.0], rtol=0, atol=1e-12)


def test_the_saved_curve_check_redraws_the_same_seeds_as_the_fit():
    counts = np.array(KEPT_COUNTS, dtype=np.int64)
    draws = curve_file._redrawn("h", counts, POSITIVE, need=3)
    assert [d.tolist() for d in draws] == KEPT
    assert curve_file.seed_bootstrap_draws is curve_fit.seed_bootstrap_draws  # one generator, not a copy


def test_the_shipped_curves_counts_are_the_shared_generators_draws():
    d = json.loads(default_curve_path().read_text())
    n, seeds = np.array(d["points"]["update"], dtype=float), np.array(d["points"]["seed"])
    positive = [np.unique(n[(seeds == lab) & (n > 0)]) for lab in d["seed_labels"]]
    need = 2 + (d["b_fixed"] is None) + (not d["r0_fixed"])
    kept = (np.bincount(draw, minlength=4).tolist() for draw, ok in seed_bootstrap_draws(positive, need) if ok)
    want = list(islice(kept, len(d["replicate_seed_counts"])))
    assert want[:3] == [[3, 0, 0, 1], [0, 1, 2, 1], [0, 0, 3, 1]]
    assert want == d["replicate_seed_counts"]
