"""Synthetic study folders in the `gradprobe study` format (notes: study_format), with a known truth.

The realized gain vs grpo of arm a, seed s, budget b is
    target = bias + slope * predicted_gain(a, b) + arm_effect[a] + noise[a, s, b]
where predicted_gain is computed here from the probe numbers written to probe.json, independently
of calib.dataset (plain arithmetic of the formulas in DESIGN.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

BUDGETS = {"tokens": 1_000_000.0, "time": 600.0, "updates": 150.0}


def probe_entry(name, gain_per_update, tokens_per_update, seconds_per_update, *, snr=3.0, cosine=None):
    return {"name": name, "inner_product": gain_per_update / (100 * 1e-4), "interval": [0.0, 1.0], "snr": snr,
            "predicted_gain_per_update": gain_per_update, "gain_interval_per_update": None,
            "tokens_per_update": tokens_per_update,
            "predicted_gain_at_budget": 1e6 / tokens_per_update * gain_per_update, "gain_interval_at_budget": None,
            "seconds_per_update": seconds_per_update, "predicted_gain_at_time_budget": None, "cosine": cosine,
            "per_group": [], "loss_type": "grpo", "num_groups": 8, "n_bootstrap": 100, "lr": 1e-4,
            "budget_tokens": 1e6, "budget_seconds": None, "seed": 0}


def default_arms(n_extra: int = 0, rng=None) -> tuple[dict, dict]:
    """(arms: arm -> (reward, lr_scale), rewards: reward -> (gain/update, tokens/update, seconds/update))."""
    arms = {"grpo": ("outcome", 1.0), "grpo_2xlr": ("outcome", 2.0), "mc_value": ("mc_value", 1.0),
            "hybrid_0.5": ("hybrid_0.5", 1.0), "mc_min": ("mc_min", 1.0)}
    rewards = {"outcome": (0.04, 6400, 4.0), "mc_value": (0.10, 60000, 30.0), "hybrid_0.5": (0.07, 60000, 30.0),
               "mc_min": (0.05, 60000, 30.0)}
    rng = rng or np.random.default_rng(0)
    for k in range(n_extra):
        name = f"user{k}"
        arms[name] = (name, 1.0)
        rewards[name] = (float(rng.uniform(0.0, 0.12)), float(rng.choice([6400, 12800, 60000])),
                         float(rng.uniform(4.0, 30.0)))
    return arms, rewards


def predicted_vs_grpo(arms, rewards, arm, budget):
    def at(reward, scale):
        g, c, d = rewards[reward]
        g = g * scale
        return {"tokens": BUDGETS["tokens"] / c * g, "time": BUDGETS["time"] / d * g,
                "updates": BUDGETS["updates"] * g}[budget]
    return at(*arms[arm]) - at(*arms["grpo"])


def write_study(root, *, model="tiny", task="chain_sum", slope=0.6, bias=-1.0, noise=0.3, arm_sd=0.0,
                seeds=(0, 1, 2, 3), arms=None, rewards=None, seed=0, nan_runs=(), missing_grpo_seeds=(),
                runs_csv=True) -> Path:
    """Write a study folder; returns it. ``nan_runs``: (arm, seed) whose accuracy is missing (failed)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    if arms is None:
        arms, rewards = default_arms()
    (root / "probe").mkdir(parents=True, exist_ok=True)
    probe = {"config": {"model": model, "task": task, "lr": 1e-4, "budget_tokens": 1_000_000, "budget_seconds": None},
             "versions": {}, "rewards": [probe_entry(r, *v) for r, v in rewards.items()]}
    (root / "probe" / "probe.json").write_text(json.dumps(probe))
    (root / "probe" / "arms.json").write_text(json.dumps({a: {"reward": r, "lr_scale": s} for a, (r, s) in arms.items()}))
    initial = 40.0
    arm_effect = {a: (0.0 if a == "grpo" else float(rng.normal(0, arm_sd))) for a in arms}
    grpo_gain = {"tokens": 5.0, "time": 4.0, "updates": 6.0}
    out_arms, truth = {}, []
    grpo_acc = {b: {s: initial + grpo_gain[b] + float(rng.normal(0, noise)) for s in seeds} for b in BUDGETS}
    for arm, (reward, scale) in arms.items():
        res = {"reward": reward, "lr_scale": scale, "seeds": len(seeds), "sigmoid": None}
        for b in BUDGETS:
            per_seed = {}
            for s in seeds:
                if arm == "grpo":
                    acc = grpo_acc[b][s]
                else:
                    pred = predicted_vs_grpo(arms, rewards, arm, b)
                    target = bias + slope * pred + arm_effect[arm] + float(rng.normal(0, noise))
                    acc = grpo_acc[b][s] + target
                    truth.append((arm, s, b, pred, target))
                if (arm, s) in nan_runs:
                    acc = None
                if arm == "grpo" and s in missing_grpo_seeds:
                    continue
                per_seed[str(s)] = acc
            vals = [v for v in per_seed.values() if v is not None]
            res[b] = {"accuracy": float(np.mean(vals)), "ci": [0, 0], "gain_vs_grpo": None, "gain_ci": None,
                      "gain_vs_initial": float(np.mean(vals)) - initial, "gain_vs_initial_ci": [0, 0],
                      "per_seed": per_seed}
        out_arms[arm] = res
    analysis = {"plan_sha256": "0" * 64, "initial": {"accuracy": initial},
                "matched": {b: {"budget": v} for b, v in BUDGETS.items()}, "arms": out_arms,
                "rankings": {b: sorted(out_arms, key=lambda a: -out_arms[a][b]["accuracy"]) for b in BUDGETS},
                "hypotheses": []}
    (root / "analysis.json").write_text(json.dumps(analysis))
    (root / "study.json").write_text(json.dumps({"plan_sha256": "0" * 64, "plan_path": "plan.toml", "runs": []}))
    (root / "plan.toml").write_text(f'name = "synthetic"\n[model]\nname = "{model}"\n')
    if runs_csv:
        lines = ["arm,seed,update,generated_tokens,device_seconds,accuracy,accuracy_sampled,reward,lr_scale"]
        for arm, (reward, scale) in arms.items():
            g, c, d = rewards[reward]
            final = out_arms[arm]["updates"]["accuracy"] / 100
            for s in seeds:
                for u in range(0, 151, 25):
                    acc = initial / 100 + (final - initial / 100) * u / 150 + float(rng.normal(0, 0.002))
                    lines.append(f"{arm},{s},{u},{u * c},{u * d:.3f},{acc:.4f},{acc - 0.05:.4f},{reward},{scale}")
        (root / "runs.csv").write_text("\n".join(lines) + "\n")
    (root / "truth.json").write_text(json.dumps(truth))
    return root


@pytest.fixture(autouse=True)
def single_thread_blas():
    """One BLAS thread (and one torch thread): the fits here are tiny, and the machine is shared."""
    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="blas"):
        yield
