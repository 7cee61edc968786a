"""Reading a run's curve at a point has one implementation (:mod:`gradprobe.forecast.read_rule`): the study analysis
(:func:`gradprobe.study.reading.read_runs`, which writes ``analysis.json``'s reads) and the check of a study folder
(:mod:`gradprobe.forecast.analysis_reads`, which re-does those reads from ``runs.csv``) read by the same function, so
they agree on every case and a change of the rule in one place changes both.

Before, each had its own copy (``read_point`` in gradprobe.study.reading, ``_point`` in analysis_reads): an edit of
one (a tolerance, the gap limit) would have made the check refuse studies the analysis had read right.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from gradprobe.forecast import analysis_reads
from gradprobe.study import reading

AXIS, COL = "generated_tokens", "generated_tokens"
PROMISED = [0.0, 1000.0, 2000.0, 3000.0]  # promised eval points on the axis (tokens): promised gap 1000
X = [0.0, 1000.0, 2012.0, 3000.0]  # a run's evals (tokens), at the first update at or after each promised point
U = [0.0, 5.0, 10.0, 15.0]
ACC = [0.25, 0.5, 0.625, 0.75]


def _plan(points):
    """A plan stand-in whose promised points on :data:`AXIS` are ``points`` (what :func:`reading._promised` reads),
    with no eval every run makes at fixed updates but update 0 (``reading._plan_eval_updates``)."""
    return SimpleNamespace(eval=SimpleNamespace(promised_points=lambda budget: {AXIS: list(points)}, at_updates=(),
                                                at_fractions=()),
                           budget=SimpleNamespace(updates=None))


def _both(x, u, acc, at, points=PROMISED):
    """(the analysis's read, the study-folder check's read) of one run at ``at``: :func:`reading.read_runs` of the run
    as ``runs.csv`` rows, and :func:`analysis_reads._run_read` with the promised gap ``analysis.json`` records
    (``matched.AXIS.promised_gap``: :func:`reading.promised_gap`, written by ``json_safe``, read by ``_gap``)."""
    df = pd.DataFrame({"arm": "a", "seed": 0, "update": np.asarray(u, dtype=np.float64),
                       COL: np.asarray(x, dtype=np.float64), "accuracy": np.asarray(acc, dtype=np.float64)})
    analysis = reading.read_runs(reading._runs(df), AXIS, at, plan=_plan(points))[("a", 0)]
    gap = reading.promised_gap(points, at)
    recorded = analysis_reads._gap({"promised_gap": "inf" if math.isinf(gap) else gap})
    g = {c: df[c].to_numpy(np.float64) for c in ("update", "accuracy", COL)}
    return analysis, analysis_reads._run_read(g, COL, at, gap=recorded, final=False)


def _interp(x, acc, lo, hi, at):
    """The value (points, float64) read between evals lo and hi at ``at``: (1 - w) y_lo + w y_hi."""
    w = (at - np.float64(x[lo])) / (np.float64(x[hi]) - np.float64(x[lo]))
    return float((1.0 - w) * (100.0 * np.float64(acc[lo])) + w * (100.0 * np.float64(acc[hi])))


def test_the_analysis_and_the_study_folder_check_read_by_one_function():
    from gradprobe.forecast import read_rule
    from gradprobe.study import analysis

    for module in (reading, analysis):
        assert module.read_point is read_rule.read_point
        assert module.promised_gap is read_rule.promised_gap
    assert reading._at_tol is read_rule._at_tol and reading.AT_TOL == read_rule.AT_TOL == 1e-9
    assert analysis_reads.read_point is read_rule.read_point
    assert not hasattr(analysis_reads, "_AT_TOL")  # no second tolerance


def test_a_change_of_the_rule_in_one_place_changes_both(monkeypatch):
    """Widening :data:`read_rule.AT_TOL` (one place) makes the analysis's read at 1000.5 tokens, and the check's read
    by the analysis's tolerance (``_point``), the eval at 1000; the check of the folder then accepts that read."""
    from gradprobe.forecast import read_rule

    y = [100.0 * a for a in ACC]
    a, c = _both(X, U, ACC, 1000.5)
    p = analysis_reads._point(np.array(X), np.array(y), np.array(U), 1000.5, 1000.0)
    assert a["status"] == p["status"] == c["status"] == "interpolated"
    assert a["value"] == p["value"] == c["value"] == _interp(X, ACC, 1, 2, 1000.5)
    assert not analysis_reads._accepts(c["accepted"], 50.0)
    monkeypatch.setattr(read_rule, "AT_TOL", 1e-3)  # tol 1.0005 tokens at 1000.5
    a, c = _both(X, U, ACC, 1000.5)
    p = analysis_reads._point(np.array(X), np.array(y), np.array(U), 1000.5, 1000.0)
    assert a["status"] == p["status"] == "exact" and a["value"] == p["value"] == 50.0
    assert a["updates"] == [5, 5] and p["updates"] == (5, 5)
    assert analysis_reads._accepts(c["accepted"], a["value"])


def test_the_reads_agree_at_an_eval():
    """At 2012 tokens (an eval): 62.5 points; the check also accepts its reads within RESAVE_REL of the point."""
    a, c = _both(X, U, ACC, 2012.0)
    assert a["status"] == c["status"] == "exact" and a["value"] == c["value"] == 62.5
    assert a["updates"] == [10, 10] and c["updates"] == (10, 10)
    d = analysis_reads.RESAVE_REL * 2012.0
    assert c["accepted"] == [62.5, _interp(X, ACC, 1, 2, 2012.0 - d), _interp(X, ACC, 2, 3, 2012.0 + d), 62.5]


def test_the_reads_agree_between_evals_within_the_promised_gap():
    """At 1500 tokens: 1000 to 2012 is 1012 wide, within 1000 + one update's cost 1012 / 5."""
    a, c = _both(X, U, ACC, 1500.0)
    assert a["status"] == c["status"] == "interpolated"
    assert a["value"] == c["value"] == _interp(X, ACC, 1, 2, 1500.0)
    assert a["value"] == pytest.approx(50.0 + 12.5 * 500.0 / 1012.0, rel=1e-15)
    assert a["updates"] == [5, 10] and c["updates"] == (5, 10)
    assert a["gap"] == 1012.0 and a["allowed"] == 1000.0 + 1012.0 / 5.0


@pytest.mark.parametrize("at", [3500.0, -1.0])
def test_the_reads_agree_outside_the_evals(at):
    a, c = _both(X, U, ACC, at)
    assert a["status"] == c["status"] == "outside"
    assert a["value"] is None and c["value"] is None and c["accepted"] == [None, None, None]


def test_a_read_across_a_lost_eval_is_refused_by_both():
    """An eval lost at 2012 tokens: 1000 to 3000 is 2000 wide, over 1000 + 2000 / 10 = 1200."""
    x, u, acc = [0.0, 1000.0, 3000.0], [0.0, 5.0, 15.0], [0.25, 0.5, 0.75]
    a, c = _both(x, u, acc, 1500.0)
    assert a["status"] == c["status"] == "gap_exceeded"
    assert a["value"] is None and c["value"] is None and c["updates"] == (5, 15) and a["updates"] == [5, 15]
    assert a["gap"] == 2000.0 and a["allowed"] == 1200.0


def test_nothing_promised_refuses_every_read_between_evals_in_both():
    """Past the last promised point the promised gap is inf (recorded "inf"): no interpolation; an eval still reads."""
    a, c = _both(X, U, ACC, 2500.0, points=[0.0, 1000.0])
    assert reading.promised_gap([0.0, 1000.0], 2500.0) == math.inf
    assert a["status"] == c["status"] == "gap_exceeded" and a["value"] is None and c["value"] is None
    a, c = _both(X, U, ACC, 3000.0, points=[0.0, 1000.0])
    assert a["status"] == c["status"] == "exact" and a["value"] == c["value"] == 75.0


def test_a_resave_that_moves_the_width_across_the_limit_is_the_same_read():
    """Device-seconds 100 and 225.0001234 at updates 5 and 10, gap 100: width 125.0001234 is over the limit
    100 + 125.0001234 / 5 (the analysis refused the read); re-saved at 6 significant digits (225) it is at the limit
    (read). The check of each file reads as the analysis of that file does, and accepts the other file's read."""
    x_old, x_new, u, acc = [0.0, 100.0, 225.0001234], [0.0, 100.0, 225.0], [0.0, 5.0, 10.0], [0.25, 0.5, 0.625]
    points = [0.0, 100.0, 200.0, 300.0]
    a_old, c_old = _both(x_old, u, acc, 150.0, points)
    a_new, c_new = _both(x_new, u, acc, 150.0, points)
    assert a_old["status"] == c_old["status"] == "gap_exceeded" and a_old["value"] is None and c_old["value"] is None
    assert a_new["status"] == c_new["status"] == "interpolated"
    assert a_new["value"] == c_new["value"] == _interp(x_new, acc, 1, 2, 150.0) == 55.0
    assert analysis_reads._accepts(c_new["accepted"], math.nan)  # the old file's no read
    assert None in c_old["accepted"] and analysis_reads._accepts(c_old["accepted"], _interp(x_old, acc, 1, 2, 150.0))


def test_read_point_options_of_the_check():
    """``hit_tol``: the nearest eval within it; ``gap=None``: any width; bad shapes and tolerances are refused."""
    from gradprobe.forecast.read_rule import read_point

    x, u = [0.0, 999.99, 1000.004, 3000.0], [0.0, 5.0, 6.0, 15.0]
    assert read_point(x, u, 1000.0, gap=1000.0)["status"] == "interpolated"  # 1e-9 relative: no eval at 1000
    r = read_point(x, u, 1000.0, gap=1000.0, hit_tol=0.02)
    assert r == {"status": "exact", "rows": (2, 2), "w": 0.0, "gap": 0.0, "allowed": 1000.0}
    r = read_point([0.0, 1000.0, 3000.0], [0.0, 5.0, 15.0], 1500.0, gap=None)
    assert r == {"status": "interpolated", "rows": (1, 2), "w": 0.25, "gap": 2000.0, "allowed": None}
    with pytest.raises(ValueError, match=r"shape \(evals,\).*\(3,\) and \(2,\)"):
        read_point([0.0, 1.0, 2.0], [0.0, 1.0], 1.5, gap=1.0)
    with pytest.raises(ValueError, match="hit_tol = -1.0 is no distance"):
        read_point([0.0, 1.0], [0.0, 1.0], 0.5, gap=1.0, hit_tol=-1.0)
