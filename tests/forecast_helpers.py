"""Synthetic reference curves, eval logs (TRL trainer states, metrics.jsonl) and probe results with known
parameters, for the forecast tests."""

from __future__ import annotations

import json

import numpy as np

from gradprobe.forecast import ReferenceCurve, scalerl_sigmoid

TRUE = {"R0": 60.0, "A": 85.0, "n_mid": 20.0, "B": 1.5}
EVALS = (0, 2, 5, 10, 20, 40, 80, 160)


def synthetic_points(params=TRUE, evals=EVALS, seeds=3, noise=0.0, rng_seed=0):
    """(updates, accuracy, seeds) of ``seeds`` runs of the ScaleRL sigmoid, plus N(0, noise^2) points.
    The n = 0 evals are exactly R0 (the same initial policy in every run)."""
    rng = np.random.default_rng(rng_seed)
    n, y, s = [], [], []
    for seed in range(seeds):
        for e in evals:
            n.append(float(e))
            eps = 0.0 if e == 0 else rng.normal(0.0, noise)
            y.append(float(scalerl_sigmoid(e, **params)) + eps)
            s.append(seed)
    return np.array(n), np.array(y), np.array(s)


def synthetic_curve(params=TRUE, seeds=3, noise=0.0, **kw) -> ReferenceCurve:
    n, y, s = synthetic_points(params, seeds=seeds, noise=noise)
    return ReferenceCurve(updates=n, accuracy=y, seeds=s, source="synthetic", **kw)


def probe_result(per_group: dict, tokens: dict, *, budget_tokens=250_000, prompts=16, group=8, lr=1e-4,
                 signal: dict | None = None, model="tiny", task="chain_sum", draw=0, gain_per_update=None) -> dict:
    """A probe.json-like dict: per reward its per-group contributions (they sum to the inner product)."""
    rewards = []
    for name, pg in per_group.items():
        ip = float(np.sum(pg))
        rewards.append({"name": name, "inner_product": ip, "per_group": [float(x) for x in pg],
                        "tokens_per_update": tokens[name],
                        "predicted_gain_per_update": (gain_per_update or {}).get(name, 100.0 * lr * ip),
                        "signal_proxy_per_group": None if signal is None else [float(x) for x in signal[name]]})
    return {"config": {"model": model, "task": task, "prompts": prompts, "group": group, "update_prompts": None,
                       "update_group": None, "budget_tokens": budget_tokens, "lr": lr},
            "rewards": rewards, "reference": {"draw": draw, "norm": 1.0},
            "ledger": {"charged_generated_tokens": 1000, "flops": {"generation": 2.0e9}}}


def eval_fraction(step) -> float:
    """The accuracy of ``TRUE``'s curve at ``step`` updates, as a fraction (0-1), as eval logs write it."""
    return float(scalerl_sigmoid(step, **TRUE)) / 100.0


def _eval_value(step, nan_at, null_at):
    return None if step in null_at else float("nan") if step in nan_at else eval_fraction(step)


def trl_state(path, steps=EVALS, *, nan_at=(), null_at=(), extra=()):
    """Write a TRL ``trainer_state.json`` at ``path``: per step a training line, then an eval entry whose
    ``eval_accuracy`` is ``eval_fraction(step)``, NaN at the steps in ``nan_at``, JSON null at those in ``null_at``;
    the entries of ``extra`` are appended to ``log_history``. Returns ``path``."""
    hist = []
    for s in steps:
        hist.append({"step": s, "loss": 1.0, "learning_rate": 1e-5})
        hist.append({"step": s, "eval_accuracy": _eval_value(s, nan_at, null_at), "eval_loss": 0.5})
    path.write_text(json.dumps({"global_step": steps[-1], "log_history": hist + list(extra)}))
    return path


def metrics_log(path, updates=EVALS, *, nan_at=(), null_at=(), metric="greedy_accuracy"):
    """Write a run's ``metrics.jsonl`` at ``path``: per update a training line, then an eval line whose ``metric`` is
    ``eval_fraction(update)``, NaN at the updates in ``nan_at``, null at those in ``null_at``; eval line k (0-based)
    is line 2 + 2k of the file. Returns ``path``."""
    lines = []
    for u in updates:
        lines.append(json.dumps({"update": u, "loss": 0.3}))
        lines.append(json.dumps({"eval": True, "update": u, metric: _eval_value(u, nan_at, null_at), "kl_init": 0.0}))
    path.write_text("\n".join(lines) + "\n")
    return path
