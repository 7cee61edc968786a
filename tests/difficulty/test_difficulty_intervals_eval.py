"""``difficulty-eval``'s Brier score, AUC and Spearman rho each carry a 90% interval from a seeded bootstrap over the
eval prompts (resamples, level and seed recorded), and its note about a small eval set gives the intervals' widths
instead of words only ("an AUC's standard error is ~0.1 with 20 prompts")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gradprobe.cli import main
from gradprobe.difficulty.evaluate import evaluate_estimator
from gradprobe.difficulty.metrics import (_resampled_scores, auc_score, bootstrap_metrics, brier_score, spearman_rho,
                                          success_rate)

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def test_each_resample_scores_as_scikit_learn_and_scipy_score_the_resampled_arrays():
    rng = np.random.default_rng(1)
    p = np.round(rng.uniform(size=15), 1)  # ties in p
    y = (rng.uniform(size=(15, 6)) < p[:, None]).astype(float)
    y[rng.uniform(size=y.shape) < 0.15] = np.nan  # missing outcomes
    y[3] = np.nan  # a prompt without any: no empirical success, left out of rho
    e = np.array([np.nan if success_rate(r) is None else success_rate(r) for r in y])
    undefined = 0
    for _ in range(300):
        pick = rng.integers(0, 15, 15)
        got = _resampled_scores(p, y, np.bincount(pick, minlength=15)[None].astype(float))
        for name, ref in (("brier", brier_score(p[pick], y[pick])), ("auc", auc_score(p[pick], y[pick])),
                          ("spearman_rho", spearman_rho(p[pick], e[pick]))):
            if ref is None:
                undefined += 1
                assert np.isnan(got[name][0]), name
            else:
                assert got[name][0] == pytest.approx(ref, abs=1e-12), name
    assert undefined < 30  # nearly every resample defines all three


def test_bootstrap_metrics_are_seeded_paired_and_undefined_when_most_resamples_are():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=40)
    y = (rng.uniform(size=(40, 12)) < p[:, None]).astype(float)
    a = bootstrap_metrics(p, y, resamples=500, seed=3)
    assert a == bootstrap_metrics(p, y, resamples=500, seed=3) and a != bootstrap_metrics(p, y, resamples=500, seed=4)
    assert a["brier"][0] < brier_score(p, y) < a["brier"][1] and a["auc"][0] < auc_score(p, y) < a["auc"][1]
    assert a["undefined"] == {"brier": 0, "auc": 0, "spearman_rho": 0}
    one = bootstrap_metrics(p[:3], np.zeros((3, 4)), resamples=200)  # every target failed: no AUC, no rho
    assert one["auc"] is None and one["spearman_rho"] is None and one["undefined"]["auc"] == 200
    assert one["brier"][0] <= one["brier"][1]
    with pytest.raises(ValueError, match=r"^resamples \(--resamples\) must be at least 10 resamples .*, got 0$"):
        bootstrap_metrics(p, y, resamples=0)


def test_evaluate_estimator_records_each_interval_and_the_bootstrap():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(80, 3))
    p_true = 1 / (1 + np.exp(-2 * x[:, 0]))
    y = (rng.uniform(size=(80, 8)) < p_true[:, None]).astype(float)
    r = evaluate_estimator([f"p{i}" for i in range(80)], x, y, observed=2, seed=1, resamples=300)
    assert r["bootstrap"] == {"resamples": 300, "level": 0.9, "seed": 1, "unit": "eval prompt", "method": "percentile"}
    post = r["estimators"]["posterior"]
    for key in ("brier", "auc", "spearman_rho"):
        lo, hi = post[f"{key}_interval"]
        assert lo < post[key] < hi and hi - lo < 0.5
    assert post["auc_interval"][0] > 0.6  # the model tells the prompts apart, with its sampling error
    assert r["baselines"]["pool_mean"]["auc_interval"] == [0.5, 0.5]  # a constant: every resample ties
    assert r["baselines"]["pool_mean"]["spearman_rho_interval"] is None


def test_difficulty_eval_prints_the_intervals_and_the_small_eval_note_gives_their_widths(tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["difficulty-eval", "--model", "tiny", "--task", "chain_sum:min_terms=2,max_terms=3,max_digits=1",
                 "--pool", "12", "--samples", "4", "--max-new-tokens", "24", "--resamples", "200", "--no-progress",
                 "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    m = json.loads((out / "metrics.json").read_text())
    assert m["bootstrap"]["resamples"] == 200 and m["brier_interval"] == m["estimators"]["posterior"]["brier_interval"]
    assert m["model_weights"]["source"] == "tier" and shown.startswith("model: tiny = the ")
    post = m["estimators"]["posterior"]
    width = lambda iv: "no interval" if iv is None else f"{iv[1] - iv[0]:.2f}"  # noqa: E731
    note = (f"only 6 eval prompts: the posterior's 90% bootstrap intervals are this wide: Brier "
            f"{width(post['brier_interval'])}, AUC {width(post['auc_interval'])}, rho "
            f"{width(post['spearman_rho_interval'])}; use --pool >= 100 for a comparison between estimators")
    assert note in m["notes"] and f"note: {note}" in shown
    lo, hi = post["brier_interval"]
    assert f"posterior            {post['brier']:.3f} [{lo:.3f}, {hi:.3f}] " in shown
    assert "intervals: percentile bootstrap over the 6 eval prompts, 200 resamples, seed 0" in shown
    read = m["feature_tokens_read"]
    assert read == m["ledger"]["generated_tokens"]["selection"] > 0
    assert f"feature forward: {read:,} prompt tokens read, counted in the ledger's generated_tokens.selection" in shown
