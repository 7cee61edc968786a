"""``--resamples`` of ``rank-prompts`` and ``difficulty-eval`` (and ``resamples`` of their Python calls) is at least 10,
the minimum of ``gradprobe probe --bootstrap``.

Before, any count >= 1 was accepted and its "90% intervals" printed: with one bootstrap refit a prompt's interval was
that refit's values (``p_hat 0.050 [0.524, 0.893]``, the pool's mean p_hat 0.422 beside ``[0.555, 0.555]``), and
``difficulty-eval --resamples 1`` gave every interval as n/a "because the prompts do not differ in it", which was
false: one resample cannot differ from itself. The note now says the prompts do not differ only when the resamples
drew them in more than one set of proportions; identical draws (by chance, with two eval prompts) are said as such.
"""

from __future__ import annotations

import numpy as np
import pytest
from difficulty_calls import argv, refuse_loaders

import gradprobe
from gradprobe.cli import main
from gradprobe.difficulty.estimator import EstimatorConfig
from gradprobe.difficulty.evaluate import evaluate_estimator
from gradprobe.difficulty.fit_quality import heldout_fit_quality
from gradprobe.difficulty.intervals import bootstrap_fit, chunk_intervals
from gradprobe.difficulty.metrics import bootstrap_metrics
from gradprobe.difficulty.rank import RankSettings

from helpers_rollout import one_thread

_one_thread = pytest.fixture(autouse=True, scope="module")(one_thread)  # tiny models: one thread


def _rank_message(n) -> str:
    return ("resamples (--resamples) must be at least 10 bootstrap refits (default 200: a 90% percentile interval "
            "needs enough bootstrap refits in each 5% tail; with fewer its bounds are single bootstrap refits, which "
            f"need not contain p_hat), got {n}")


def _eval_message(n, default=1000, where="resamples (--resamples)") -> str:
    return (f"{where} must be at least 10 resamples (default {default}: a 90% percentile interval needs enough "
            "resamples in each 5% tail; with fewer its bounds are single resamples, which need not contain the "
            f"score), got {n}")


def _data(m=40, k=8, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, size=m)
    x = np.c_[np.log(p / (1 - p)) + rng.normal(0, 0.3, m), rng.normal(size=m)]
    y = (rng.uniform(size=(m, k)) < p[:, None]).astype(float)
    return [f"p{i}" for i in range(m)], x, y


@pytest.mark.parametrize("n", [1, 2, 9])
def test_rank_settings_and_the_api_refuse_fewer_than_ten_refits_and_accept_ten(n, monkeypatch):
    with pytest.raises(ValueError) as e:
        RankSettings(resamples=n)
    assert str(e.value) == _rank_message(n)
    assert RankSettings(resamples=10).resamples == 10  # the minimum is accepted
    calls = refuse_loaders(monkeypatch, "the resamples were refused")
    with pytest.raises(ValueError) as e:
        gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, fit_prompts=2, probe_samples=1, resamples=n)
    assert str(e.value) == _rank_message(n) and calls == []


def test_rank_prompts_on_the_command_line_refuses_before_anything_is_built(tmp_path, capsys, monkeypatch):
    calls = refuse_loaders(monkeypatch, "the resamples were refused")
    out = tmp_path / "rank"
    args = argv("rank-prompts", out)
    args[args.index("--resamples") + 1] = "1"
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gradprobe rank-prompts: error: {_rank_message(1)}\n"
    assert captured.out == "" and calls == [] and not out.exists()


def test_rank_prompts_at_the_minimum_runs_and_records_ten_refits(tmp_path):
    table = gradprobe.rank_prompts("tiny-qwen2", "chain_sum", 4, fit_prompts=2, probe_samples=1, max_new_tokens=4,
                                   resamples=10, progress=False)
    assert table.attrs["intervals"]["resamples"] == 10 and len(table) == 4
    assert (table["p_lo"] <= table["p_hi"]).all() and (table["p_model_lo"] <= table["p_model_hi"]).all()
    with pytest.raises(ValueError) as e:  # a 1-refit bootstrap is no interval, wherever it comes from
        chunk_intervals(bootstrap_fit(EstimatorConfig(), np.eye(3), [1, 0, 1], [2, 2, 2], resamples=1), np.eye(3),
                        np.zeros(3), np.zeros(3), prior_strength=8.0, rng=np.random.default_rng(0))
    assert str(e.value) == _rank_message(1)


@pytest.mark.parametrize("n", [1, 2, 9])
def test_evaluate_estimator_refuses_fewer_than_ten_resamples_and_accepts_ten(n):
    ids, x, y = _data()
    for call in (evaluate_estimator, gradprobe.evaluate_difficulty):
        with pytest.raises(ValueError) as e:
            call(ids, x, y, observed=2, resamples=n)
        assert str(e.value) == _eval_message(n)
    with pytest.raises(ValueError) as e:
        bootstrap_metrics(np.full(40, 0.5), y, resamples=n)
    assert str(e.value) == _eval_message(n)
    with pytest.raises(ValueError) as e:
        heldout_fit_quality(EstimatorConfig(), x, y.sum(axis=1), np.full(40, 8.0), resamples=n)
    assert str(e.value) == _eval_message(n, where="resamples")
    r = evaluate_estimator(ids, x, y, observed=2, resamples=10)  # the minimum: intervals, each holding its score
    assert r["bootstrap"]["resamples"] == 10
    head = r["estimators"]["posterior"]
    for name in ("brier", "auc", "spearman_rho"):
        lo, hi = head[f"{name}_interval"]
        assert lo <= head[name] <= hi and lo < hi, name


def test_difficulty_eval_on_the_command_line_refuses_two_resamples(tmp_path, capsys, monkeypatch):
    calls = refuse_loaders(monkeypatch, "the resamples were refused")
    out = tmp_path / "eval"
    assert main([*argv("difficulty-eval", out), "--resamples", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.err.endswith(f"gradprobe difficulty-eval: error: {_eval_message(2)}\n")
    assert not out.exists()
    assert calls == []  # refused before any model is loaded or sampled


def test_identical_draws_of_two_prompts_are_not_said_to_show_the_prompts_do_not_differ():
    # seed 1050 draws each of two prompts once in all of its 10 resamples: every resample is the sample
    p, y = np.array([0.2, 0.7]), np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])
    got = bootstrap_metrics(p, y, resamples=10, seed=1050)
    same = ("every one of the 10 resamples drew the 2 prompts with an outcome in the same proportions (by chance: so "
            "few prompts have few ways to be drawn), so each gives the same {} and the bootstrap cannot measure its "
            "sampling error; give more resamples (--resamples) or more eval prompts")
    assert got["brier"] is None and got["reason"]["brier"] == same.format("Brier score")
    assert got["auc"] is None and got["reason"]["auc"] == same.format("AUC")
    assert got["point"]["brier"] == pytest.approx((0.04 * 4 + 0.09 * 3 + 0.49) / 8)
    other = bootstrap_metrics(p, y, resamples=10, seed=0)  # draws that vary: the prompts' losses differ
    lo, hi = other["brier"]
    assert lo < hi and other["reason"]["brier"] is None
    copies = bootstrap_metrics(np.full(2, 0.3), np.tile([[1.0, 0.0]], (2, 1)), resamples=10, seed=0)
    assert copies["brier"] is None and copies["reason"]["brier"] == (
        "every resample gives the same Brier score (the sample's) up to rounding: the prompts do not differ in it, so "
        "the bootstrap cannot measure its sampling error (a width of 0 would claim a precision the data do not give)")


def test_the_minimum_is_the_probe_bootstraps():
    from gradprobe.difficulty.metrics import MIN_RESAMPLES
    from gradprobe.probe_settings.stages import MIN_BOOTSTRAP

    assert MIN_RESAMPLES == MIN_BOOTSTRAP == 10
    assert RankSettings.defaults()["resamples"] == 200
