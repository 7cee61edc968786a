"""``rank-prompts`` gives every predicted success its 90% interval (a tester found ``--pool 1`` printing "p_hat 0.867"
from 2 completions, a bare number), names the model it ranked with as a training run records it (rank.json had only
``"model": "tiny"``), scores the logistic model on prompts it was not fitted on, and says that its token count holds
the prompt tokens the feature forward read (the ledger's ``selection``: tokens a selection rule generated or read)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta as beta_dist

import gradprobe
from gradprobe.cli import main
from gradprobe.difficulty.estimator import DifficultyEstimator, EstimatorConfig
from gradprobe.difficulty.fit_quality import heldout_fit_quality
from gradprobe.difficulty.intervals import bootstrap_fit, jeffreys_interval
from gradprobe.difficulty.rank import RankSettings, rank_prompts
from gradprobe.models import load_policy
from gradprobe.tasks import load_task
from gradprobe.tasks.prompts import encode_prompt
from gradprobe.training.run_folder import model_weights_identity

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread

COLUMNS = ["rank", "prompt_id", "p_hat", "p_lo", "p_hi", "distance", "attempts", "successes", "rate_lo", "rate_hi",
           "p_model", "p_model_lo", "p_model_hi"]


def test_jeffreys_interval_of_an_observed_rate():
    lo, hi = jeffreys_interval([0, 1, 2, 0, 7], [2, 2, 2, 0, 20])
    # 0 of 2 (the tester's prompt): the lower bound is 0 and the upper the 95% quantile of Beta(1/2, 5/2)
    assert lo[0] == 0 and hi[0] == pytest.approx(beta_dist.ppf(0.95, 0.5, 2.5), rel=1e-10) and round(hi[0], 3) == 0.569
    assert (lo[1], hi[1]) == pytest.approx((beta_dist.ppf(0.05, 1.5, 1.5), beta_dist.ppf(0.95, 1.5, 1.5)), rel=1e-10)
    assert hi[2] == 1 and lo[2] == pytest.approx(beta_dist.ppf(0.05, 2.5, 0.5), rel=1e-10)
    assert math.isnan(lo[3]) and math.isnan(hi[3])  # nothing observed: no interval
    assert (round(lo[4], 3), round(hi[4], 3)) == (0.197, 0.533)  # 7 of 20


def _data(n, width=4, seed=0, missing=True):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, width))
    p = 1 / (1 + np.exp(-(1.5 * x[:, 0] - 0.5)))
    if missing:
        x[::5, 2] = np.nan  # a metadata value a prompt lacks: imputed
        x[:, 3] = np.nan    # a key no prompt holds: imputed with 0
    attempts = np.full(n, 8)
    return x, rng.binomial(attempts, p), attempts, p


def test_the_linear_form_of_the_fit_reproduces_its_predictions():
    x, s, a, _ = _data(40)
    est = DifficultyEstimator()
    est.observe([str(i) for i in range(40)], x, s, a)
    w, c, fill = est.fit().linear_predictor()
    z = np.where(np.isnan(x), fill, x) @ w + c
    np.testing.assert_allclose(np.clip(1 / (1 + np.exp(-z)), 1e-3, 1 - 1e-3), est.predict_model(x), rtol=1e-10)
    boot = bootstrap_fit(EstimatorConfig(), x, s, a, resamples=1, seed=5)  # one refit: the same form, resampled
    assert boot.weights.shape == (4, 1) and boot.constant == 0
    assert DifficultyEstimator().linear_predictor() is None  # nothing fitted: no form


def test_a_refit_of_equal_outcomes_draws_its_constant_from_the_jeffreys_posterior():
    x = np.zeros((1, 3))
    boot = bootstrap_fit(EstimatorConfig(), x, [0], [2], resamples=4000, seed=0)  # one prompt, 0 of 2
    p = boot.predict(x)[0]
    assert boot.constant == 4000 and p.shape == (4000,)
    lo, mid, hi = np.quantile(p, [0.05, 0.5, 0.95])
    # Beta(1/2, 5/2): 5% 0.0009 (clipped to p_clip 0.001), median 0.096, 95% 0.569; the bootstrap alone gives 0 width.
    # Standard errors of 4000 draws: 0.011 at the 95% quantile, 0.004 at the median (sqrt(q (1 - q) / B) / density)
    assert lo == pytest.approx(1e-3, abs=1e-4)
    assert mid == pytest.approx(beta_dist.ppf(0.5, 0.5, 2.5), abs=0.012)
    assert hi == pytest.approx(beta_dist.ppf(0.95, 0.5, 2.5), abs=0.035)
    again = bootstrap_fit(EstimatorConfig(), x, [0], [2], resamples=4000, seed=0)
    np.testing.assert_array_equal(again.offsets, boot.offsets)  # seeded


def test_bootstrap_intervals_of_p_model_cover_the_truth_where_the_model_is_right():
    x, s, a, p_true = _data(60, missing=False)
    est = DifficultyEstimator()
    est.observe([str(i) for i in range(60)], x, s, a)
    point = est.fit().predict_model(x)
    refits = bootstrap_fit(EstimatorConfig(), x, s, a, resamples=200, seed=0).predict(x)  # (60, 200)
    lo, hi = np.quantile(refits, [0.05, 0.95], axis=1)
    assert np.all(hi - lo > 0.01)  # the fit's uncertainty, never a bare number
    assert np.mean((lo <= point) & (point <= hi)) > 0.95
    assert np.mean((lo <= p_true) & (p_true <= hi)) >= 0.8  # 90% intervals of a well-specified model


def test_the_held_out_fit_beats_the_base_rate_only_when_the_features_carry_signal():
    x, s, a, _ = _data(60, missing=False)
    good = heldout_fit_quality(EstimatorConfig(), x, s, a, seed=0)
    assert good["folds"] == 5 and good["prompts"] == 60 and good["completions"] == 480 and good["reason"] is None
    assert good["brier"] < good["base_rate_brier"] and good["difference_interval"][1] < 0
    assert good["brier_interval"][0] < good["brier"] < good["brier_interval"][1]
    noise = heldout_fit_quality(EstimatorConfig(), np.random.default_rng(1).normal(size=(60, 4)), s, a, seed=0)
    assert noise["difference"] > good["difference"] and noise["difference_interval"][1] > 0
    few = heldout_fit_quality(EstimatorConfig(), x[:3], s[:3], a[:3])
    assert few["brier"] is None and few["reason"].startswith("3 probed prompt(s) with an outcome: at least 4")
    flat = heldout_fit_quality(EstimatorConfig(), x, np.zeros(60), a)
    assert flat["brier"] is None and flat["reason"].startswith("every probed completion failed")


def _line(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_rank_prompts_writes_and_prints_each_interval_the_model_and_what_its_tokens_hold(tmp_path, capsys):
    out, task = tmp_path / "rank", "chain_sum:min_terms=2,max_terms=3,max_digits=1"
    assert main(["rank-prompts", "--model", "tiny", "--task", task, "--pool", "12", "--fit-prompts", "8",
                 "--probe-samples", "2", "--max-new-tokens", "24", "--resamples", "50", "--no-progress",
                 "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    table = pd.read_csv(out / "ranking.csv")
    info = json.loads((out / "rank.json").read_text())
    assert list(table.columns) == COLUMNS and len(table) == 12
    probed = table.attempts > 0
    assert probed.sum() == 8 and table.rate_lo[~probed].isna().all() and table.rate_hi[~probed].isna().all()
    lo, hi = jeffreys_interval(table.successes[probed], table.attempts[probed])
    np.testing.assert_allclose(table.rate_lo[probed], lo)
    np.testing.assert_allclose(table.rate_hi[probed], hi)
    assert ((0 <= table.p_lo) & (table.p_lo <= table.p_hi) & (table.p_hi <= 1)).all()
    assert (table.p_model_lo <= table.p_model_hi).all() and (table.p_hi - table.p_lo > 0).all()
    iv = info["intervals"]
    assert (iv["level"], iv["resamples"], iv["seed"]) == (0.9, 50, 0) and info["settings"]["resamples"] == 50
    mean_lo, mean_hi = info["verdict"]["mean_p_hat_interval"]
    assert mean_lo <= mean_hi and f"mean p_hat 90% interval [{mean_lo:.3f}, {mean_hi:.3f}]" in shown
    # the model as a training run records it: tier, path, files, method, digest
    weights = model_weights_identity("tiny")
    assert info["model_weights"] == json.loads(json.dumps(weights)) and weights["source"] == "tier"
    assert _line(shown, "model: ").startswith(f"model: tiny = the {weights['build']} build {weights['path']} ")
    assert f"model.safetensors sha256 {weights['digest'][:12]})" in shown
    top = table.iloc[0]
    assert _line(shown, "nearest 1/2: ").startswith(
        f"nearest 1/2: {top.prompt_id}: p_hat {top.p_hat:.3f} [{top.p_lo:.3f}, {top.p_hi:.3f}], p_model "
        f"{top.p_model:.3f} [{top.p_model_lo:.3f}, {top.p_model_hi:.3f}], ")
    fit = info["fit_quality"]
    if fit["brier"] is None:  # every probed completion equal
        assert _line(shown, "held-out fit") == f"held-out fit: not scored: {fit['reason']}"
    else:
        assert _line(shown, "held-out fit").startswith(
            f"held-out fit (5-fold CV over the 8 probed prompts, 16 completions): Brier {fit['brier']:.3f} "
            f"[{fit['brier_interval'][0]:.3f}, {fit['brier_interval'][1]:.3f}] vs base rate ")
    # the tokens: the prompt tokens of the feature forward are read, not generated, and said so
    tok = load_policy("tiny").tokenizer
    read = sum(len(encode_prompt(tok, p.question)) for p in load_task(task).problems("train", 12))
    counted = info["ledger"]["generated_tokens"]["selection"]
    assert info["selection_tokens"]["read_by_feature_pass"] == read
    assert info["selection_tokens"]["sampled"] == counted - read > 0
    assert f"selection cost: {counted:,} tokens generated or read ({counted - read:,} sampled, {read:,} prompt " \
           "tokens read by the feature forward)" in shown


def test_the_api_records_the_model_too_and_a_generated_model_is_said_to_have_no_weight_file(tmp_path):
    table = gradprobe.rank_prompts("tiny", "chain_sum", 3, fit_prompts=3, probe_samples=1, max_new_tokens=4,
                                   resamples=10, progress=False)
    assert table.attrs["model_weights"]["digest"] == model_weights_identity("tiny")["digest"]
    assert table.attrs["intervals"]["resamples"] == 10 and {"p_lo", "p_model_hi", "rate_lo"} <= set(table.columns)
    lines = []
    settings = RankSettings(fit_prompts=2, probe_samples=1, max_new_tokens=4, resamples=10, no_progress=True)
    rank_prompts("tiny-qwen2", "chain_sum", 2, say=lines.append, settings=settings)
    assert lines[0] == "model: tiny-qwen2 (no weight file identifies it: a model generated from the seed, or not " \
                       "identified)"
    assert re.search(r"^nearest 1/2: \S+: p_hat \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\], .*observed 0/1 successes, "
                     r"Jeffreys \[0\.000, 0\.771\] \(90% intervals\)$", "\n".join(lines), re.M)
