"""Every interval ``difficulty-eval`` prints as n/a is explained, for every estimator and baseline, not the posterior's
alone (tester: ``model`` and ``pool_mean`` printed ``0.005 [n/a, n/a]`` with the reason only in metrics.json);
identical reasons are said once. And the bootstrap of prompts none of which has a finite outcome gives no interval,
with that reason (it raised IndexError in the rank computation of Spearman rho)."""

from __future__ import annotations

import warnings

import numpy as np

from gradprobe.cli.difficulty import _print_eval
from gradprobe.difficulty.evaluate import evaluate_estimator, split_halves
from gradprobe.difficulty.metrics import bootstrap_metrics

NO_SPREAD = ("every resample gives the same Brier score (the sample's) up to rounding: the prompts do not differ in "
             "it, so the bootstrap cannot measure its sampling error (a width of 0 would claim a precision the data do "
             "not give)")


def _all_succeeded() -> dict:
    """The tester's run: 6 prompts, 2 samples each, every completion correct (every Brier interval is n/a)."""
    x = np.random.default_rng(0).normal(size=(6, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_estimator([f"p{i}" for i in range(6)], x, np.ones((6, 2)), observed=1, resamples=300)


def test_every_row_with_an_na_interval_has_its_note_once(capsys):
    r = _all_succeeded()
    rows = {**r["estimators"], **r["baselines"]}
    assert list(rows) == ["model", "posterior", "pool_mean", "posterior_pool_mean"]
    for name, s in rows.items():  # each row's Brier is a number whose interval is n/a, for one reason
        assert s["brier"] is not None and s["brier_interval"] is None and s["brier_interval_reason"] == NO_SPREAD, name
    said = [n for n in r["notes"] if NO_SPREAD in n]
    assert said == [f"the model's, posterior's, pool_mean's and posterior_pool_mean's Brier intervals are None: "
                    f"{NO_SPREAD}"]  # was the posterior's alone, its Brier value in the reason
    _print_eval("tiny-qwen2", None, r, 0)
    out = capsys.readouterr().out.splitlines()
    assert [x.split()[:4] for x in out if x.startswith(("model ", "pool_mean "))] == [
        ["model", "0.005", "[", "n/a,"], ["pool_mean", "0.000", "[", "n/a,"]]
    assert f"note: {said[0]}" in out


def test_different_reasons_and_scores_are_said_apart():
    """One eval prompt: every row's Brier and AUC interval is n/a for one reason, said once for all four rows."""
    x = np.array([[0.3, 1.0], [-0.2, 2.0]])
    y = np.array([[1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, 1.0]])
    r = evaluate_estimator(["a", "b"], x, y, observed=1, resamples=300)
    said = [n for n in r["notes"] if "interval" in n and "flat-group" not in n]
    assert said == ["the model's, posterior's, pool_mean's and posterior_pool_mean's Brier and AUC intervals are None: "
                    "only 1 prompt with an outcome: every resample draws that prompt alone, so the bootstrap cannot "
                    "measure the sampling error; an interval needs at least 2 prompts"]


def test_no_finite_outcome_gives_no_interval_and_says_why():
    got = bootstrap_metrics(np.array([0.5]), np.array([[np.nan]]), resamples=50)  # raised IndexError
    assert (got["brier"], got["auc"], got["spearman_rho"]) == (None, None, None)
    assert got["reason"] == {"brier": "the Brier score is undefined: no prompt has a finite outcome",
                             "auc": "the AUC is undefined: no prompt has a finite outcome",
                             "spearman_rho": "the Spearman rho is undefined: no prompt has a finite outcome"}
    assert got["undefined"] == {"brier": 50, "auc": 50, "spearman_rho": 50}
    flat = bootstrap_metrics(np.array([0.5, 0.2]), np.full((2, 4), np.nan), resamples=20, group_size=2)
    assert flat["flat_auc"] == {"all_correct": None, "all_wrong": None, "flat": None}
    assert set(flat["flat_auc_reason"].values()) == {"the AUC is undefined: no prompt has a finite outcome"}


def test_an_eval_half_without_target_outcomes_is_scored_none_and_said():
    """Upstream: outcomes exist (the fit half, the observed ones) but no eval prompt has a finite target; the evaluation
    raised IndexError from the bootstrap, and now scores None with one note naming the fix."""
    m, s = 8, 4
    _, ev = split_halves(m, 0, None)
    y = np.zeros((m, s))
    y[::2] = 1.0
    y[np.asarray(ev)[:, None], np.arange(1, s)[None, :]] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = evaluate_estimator([f"p{i}" for i in range(m)], np.random.default_rng(0).normal(size=(m, 3)), y,
                               observed=1, seed=0, resamples=50)
    post = r["estimators"]["posterior"]
    assert post["brier"] is None and post["brier_interval"] is None
    assert post["brier_interval_reason"] == "the Brier score is undefined: no prompt has a finite outcome"
    assert r["notes"][0] == ("no eval prompt has a finite target outcome (its last 3 completions): every score and "
                             "interval is None; sample_outcomes gives NaN where the task's scorer failed (its warnings "
                             "name the prompts): fix the scorer or the task")
    assert not any(n.startswith("flat-group") for n in r["notes"])
