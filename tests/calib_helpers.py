"""Synthetic study folders in the `gradprobe study` format, with forecasts of a known relation to the truth.

Forecasts follow the contract of ``gradprobe.forecast.study_forecasts`` (one row per arm at the token
budget) and are computed here by plain arithmetic on a saturating curve (no calib, no gradprobe code):

    f(n) = 30 (1 - exp(-n / 40))   accuracy points gained after n updates
    forecast_probe       = f(T / c_R * rho_R) - f(T / c_grpo)            (NaN for a learning-rate arm)
    forecast_cost_only   = f(T / c_R)         - f(T / c_grpo)            (NaN for a learning-rate arm)
    forecast_signal_proxy= f(T / c_R * (0.5 + 0.5 rho_R)) - f(T / c_grpo) (NaN for a learning-rate arm)
    forecast_first_order = 0.04 (T / c_R) rho_R s - 0.04 T / c_grpo      (no saturation, s = lr_scale)

The realized gain vs grpo of arm a, seed s (accuracy points) is
    target = bias + slope * forecast_probe(a) + arm_effect[a] + noise[a, s]
(a learning-rate arm: LR_ARM_GAIN + noise), so the probe is the forecaster a calibration can fix.
``synthetic_forecasts(study_dir)`` reads them back in the contract's form.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

TOKENS = 1_000_000.0
TASK_CONFIG = {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 1}
LR_ARM_GAIN = -4.0
C_GRPO = 6400.0
#: The shipped study's real probe folder (data/study_tiny/probe).
SHIPPED_PROBE = Path(__file__).resolve().parents[1] / "data" / "study_tiny" / "probe"
#: The note under the calibrated block when the shipped calibration (of cost only) is applied beside the verdicts of
#: ``--forecaster probe``.
COST_ONLY_NOTE = (
    "this calibration corrects cost_only (forecast_cost_only), not probe, the forecaster of the verdicts "
    "(--forecaster probe): the forecast and calibrated columns here are cost_only's gain and its calibration, not "
    "a calibration of the probe gains the verdicts quote (a calibration is valid only for the forecaster it was "
    "fitted on); to calibrate those, fit one with `calib fit ROWS.csv --forecaster forecast_probe --out "
    "FILE.json` and pass --calibration FILE.json")


def curve(n):
    return 30.0 * (1.0 - np.exp(-np.asarray(n, float) / 40.0))


def default_arms(n_extra: int = 0, rng=None) -> dict:
    """arm -> {"reward", "lr_scale", "c" (tokens per update), "rho" (per-update efficiency vs grpo)}."""
    arms = {"grpo": {"reward": "outcome", "lr_scale": 1.0, "c": C_GRPO, "rho": 1.0},
            "grpo_2xlr": {"reward": "outcome", "lr_scale": 2.0, "c": C_GRPO, "rho": 1.0},
            "mc_value": {"reward": "mc_value", "lr_scale": 1.0, "c": 60000.0, "rho": 3.0},
            "hybrid_0.5": {"reward": "hybrid_0.5", "lr_scale": 1.0, "c": 60000.0, "rho": 2.0},
            "mc_min": {"reward": "mc_min", "lr_scale": 1.0, "c": 30000.0, "rho": 1.5}}
    rng = rng or np.random.default_rng(0)
    for k in range(n_extra):
        arms[f"user{k}"] = {"reward": f"user{k}", "lr_scale": 1.0, "c": float(rng.choice([6400.0, 12800.0, 30000.0])),
                            "rho": float(rng.uniform(0.3, 3.0))}
    return arms


def forecasts_of(arms: dict) -> pd.DataFrame:
    """The contract's table for ``arms`` at :data:`TOKENS` (see the module docstring)."""
    base = curve(TOKENS / C_GRPO)
    rows = []
    for arm, a in arms.items():
        lr = a["lr_scale"] != 1.0
        n = TOKENS / a["c"]
        nan = math.nan
        rows.append({
            "arm": arm, "reward": a["reward"], "lr_scale": a["lr_scale"], "budget": "tokens", "budget_value": TOKENS,
            "tokens_per_update": a["c"], "rho": a["rho"], "snr": 3.0, "token_multiplier": a["c"] / C_GRPO,
            "forecast_probe": nan if lr else float(curve(n * a["rho"]) - base),
            "forecast_cost_only": nan if lr else float(curve(n) - base),
            "forecast_signal_proxy": nan if lr else float(curve(n * (0.5 + 0.5 * a["rho"])) - base),
            "forecast_first_order": 0.04 * n * a["rho"] * a["lr_scale"] - 0.04 * TOKENS / C_GRPO,
            "method": "outside_probe" if lr else "probe", "note": "", "curve_source": "synthetic curve",
            "in_sample": True})
    return pd.DataFrame(rows)


def synthetic_forecasts(study_dir, *, curve=None) -> pd.DataFrame:
    """``study_forecasts`` of a study written by :func:`write_study` (``curve``: recorded only)."""
    df = pd.read_json(Path(study_dir) / "forecasts.json", orient="records")
    if curve is not None:
        df["curve_source"] = f"given: {curve}"
    return df


def write_study(root, *, model="tiny", task="chain_sum", task_config=None, slope=0.6, bias=-1.0, noise=0.3,
                arm_sd=0.0, seeds=(0, 1, 2, 3), arms=None, seed=0, nan_runs=(), missing_grpo_seeds=(),
                runs_csv=True) -> Path:
    """Write a study folder; returns it. ``nan_runs``: (arm, seed) whose accuracy is missing (failed)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    arms = arms or default_arms()
    task_config = TASK_CONFIG if task_config is None else task_config
    (root / "probe").mkdir(parents=True, exist_ok=True)
    plan = (f'name = "synthetic"\nseeds = {list(seeds)}\n[model]\nname = "{model}"\ndtype = "float32"\n'
            f'[task]\nname = "{task}"\npool = 512\n[task.config]\n'
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in task_config.items())
            + "[budget]\ngenerated_tokens = 1000000\n"
            + "".join(f'[arms."{a}"]\nreward = "{s["reward"]}"\nlr_scale = {s["lr_scale"]}\n' for a, s in arms.items()))
    (root / "plan.toml").write_text(plan)
    sha = hashlib.sha256(plan.encode()).hexdigest()
    (root / "study.json").write_text(json.dumps({"plan_sha256": sha, "plan_path": "plan.toml", "runs": []}))
    fc = forecasts_of(arms)
    fc.to_json(root / "forecasts.json", orient="records")
    (root / "probe" / "arms.json").write_text(json.dumps({a: {"reward": s["reward"], "lr_scale": s["lr_scale"]}
                                                          for a, s in arms.items()}))
    (root / "probe" / "probe.json").write_text(json.dumps({"config": {"model": model, "task": task,
                                                                      "budget_tokens": TOKENS}, "rewards": []}))
    initial = 40.0
    effect = {a: (0.0 if a == "grpo" else float(rng.normal(0, arm_sd))) for a in arms}
    grpo_acc = {s: initial + 10.0 + float(rng.normal(0, noise)) for s in seeds}
    probe_fc = dict(zip(fc["arm"], fc["forecast_probe"]))
    out_arms, truth = {}, []
    for arm, a in arms.items():
        per_seed = {}
        for s in seeds:
            if arm == "grpo":
                acc = grpo_acc[s]
            else:
                mean = LR_ARM_GAIN if math.isnan(probe_fc[arm]) else bias + slope * probe_fc[arm]
                target = mean + effect[arm] + float(rng.normal(0, noise))
                acc = grpo_acc[s] + target
                truth.append((arm, s, target))
            if (arm, s) in nan_runs:
                acc = None
            if arm == "grpo" and s in missing_grpo_seeds:
                continue
            per_seed[str(s)] = acc
        vals = [v for v in per_seed.values() if v is not None]
        out_arms[arm] = {"reward": a["reward"], "lr_scale": a["lr_scale"], "seeds": len(seeds),
                         "tokens": {"accuracy": float(np.mean(vals)), "per_seed": per_seed}}
    analysis = {"plan_sha256": sha, "initial": {"accuracy": initial}, "matched": {"tokens": {"budget": TOKENS}},
                "arms": out_arms, "hypotheses": []}
    (root / "analysis.json").write_text(json.dumps(analysis))
    if runs_csv:
        lines = ["arm,seed,update,generated_tokens,device_seconds,accuracy"]
        for arm, a in arms.items():
            final = out_arms[arm]["tokens"]["accuracy"] / 100
            for s in seeds:
                for k in range(0, 6):
                    u = k * TOKENS / a["c"] / 5
                    acc = initial / 100 + (final - initial / 100) * k / 5
                    lines.append(f"{arm},{s},{u:.1f},{u * a['c']:.0f},{u:.3f},{acc:.4f}")
        (root / "runs.csv").write_text("\n".join(lines) + "\n")
    (root / "truth.json").write_text(json.dumps(truth))
    return root


@pytest.fixture()
def synthetic(monkeypatch):
    """Route calib's default forecaster (gradprobe.forecast.study_forecasts) to the synthetic one."""
    monkeypatch.setattr("calib.dataset.default_forecast_fn", lambda: synthetic_forecasts)


@pytest.fixture(autouse=True)
def single_thread_blas():
    """One BLAS thread (and one torch thread): the fits here are tiny, and the machine is shared."""
    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def edited_calibration(tmp_path, base: dict, edit, name: str = "calibration.json"):
    """A copy of the calibration file content ``base`` with ``edit(domain)`` applied to its ``domain`` block,
    written to ``tmp_path / name``; returns the path."""
    import copy

    d = copy.deepcopy(base)
    edit(d["domain"])
    path = tmp_path / name
    path.write_text(json.dumps(d))
    return path


def shipped_rows_copy(tmp_path, edit, name: str = "rows.csv") -> Path:
    """The shipped rows CSV (``data/calibration/rows.csv``) with ``edit(rows)`` applied to its list of row dicts,
    written to ``tmp_path / name``."""
    import csv

    with open(Path(__file__).resolve().parents[1] / "data" / "calibration" / "rows.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    edit(rows)
    path = Path(tmp_path) / name
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path
