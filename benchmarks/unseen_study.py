"""How the forecasters did on one study when it was held out: its runs' errors beside its own noise floor.

Reads a `calib report` folder's ``cv_predictions.csv`` (rows with ``cv = study``: each study predicted with
every other study's calibration, never its own) for the study named by ``--study`` (a folder-name prefix),
on the runs every forecaster covers, and prints:

- per forecaster, the mean absolute error of the gain vs grpo at the token budget (points) as forecast and
  calibrated (``method = linear``: the calibration fitted on the other studies), with a 95% percentile
  interval from resampling each arm's seeds (5000 resamples, seed 0). That interval is the seed noise of
  this study's runs only: one study cannot say how a forecaster would fare on another.
- per arm, the mean forecast and mean realized gain (arm means, what a study reports);
- the study's seed-noise floor of the run-level MAE (:func:`calib.noise_floor.seed_noise_floor`) and its
  split into training randomness and held-out error (:func:`calib.noise_floor.heldout_floor`), read from
  the study folder under ``--studies-root``.

The figures for ``data/study_tiny_heldout4k`` (``data/study_tiny_heldout4k/README.md``) come from::

    calib report data/study_tiny data/study_tiny_sparse data/study_tiny_hard_rewards data/study_tiny_lr \\
        data/study_reward_granularity data/study_tiny_llama data/study_tiny_losses data/study_tiny_greso \\
        data/study_tiny_guided data/study_tiny_heldout4k --out runs/report_heldout4k
    python benchmarks/unseen_study.py runs/report_heldout4k --study study_tiny_heldout4k
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from calib.noise_floor import heldout_floor, heldout_label, seed_noise_floor

FORECASTERS = ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy"]
RESAMPLES, SEED = 5000, 0


def seed_resampled_mae(errors: pd.Series, arms: pd.Series, *, resamples: int = RESAMPLES, seed: int = SEED):
    """Mean of ``errors`` and its 95% percentile interval, resampling each arm's runs with replacement."""
    rng = np.random.default_rng(seed)
    groups = [errors[arms == a].to_numpy(np.float64) for a in sorted(set(arms))]
    n = sum(g.size for g in groups)
    boot = np.zeros(resamples)
    for g in groups:
        boot += g[rng.integers(0, g.size, (resamples, g.size))].sum(axis=1)
    boot /= n
    return float(errors.mean()), (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="a `calib report` folder (holds cv_predictions.csv) made with the study among its studies")
    p.add_argument("--study", required=True, help="the held-out study's folder name (or a prefix of it)")
    p.add_argument("--studies-root", default="data", help="the folder holding the study folders (default: data)")
    args = p.parse_args(argv)
    path = Path(args.report) / "cv_predictions.csv"
    if not path.is_file():
        print(f"unseen_study: error: {path} not found: REPORT must be a `calib report` folder; make one with "
              f"`calib report STUDY_DIR... --out {args.report}`", file=sys.stderr)
        return 2
    d = pd.read_csv(path)
    d = d[(d["cv"] == "study") & d["study"].str.startswith(args.study)]
    studies = sorted(set(d["study"]))
    if len(studies) != 1:
        print(f"unseen_study: error: --study {args.study!r} names {len(studies)} studies of the report "
              f"({', '.join(studies) or 'none'}); give a prefix that names one", file=sys.stderr)
        return 2
    shown = [f for f in FORECASTERS if f in set(d["forecaster"])]
    raw = d[(d["method"] == "none") & d["forecaster"].isin(shown)]
    per_run = raw.groupby(["arm", "seed"])["forecaster"].nunique()
    covered = set(per_run[per_run == len(shown)].index)
    d = d[[(a, s) in covered for a, s in zip(d["arm"], d["seed"])]]
    print(f"{studies[0]} held out: {len(covered)} runs of {d['arm'].nunique()} arms; MAE of the gain vs grpo "
          "(points) [95% interval over each arm's seeds: this study's seed noise only]")
    for f in shown:
        line = f"  {f:<24}"
        for method, label in (("none", "as forecast"), ("linear", "calibrated on the other studies")):
            x = d[(d["forecaster"] == f) & (d["method"] == method)]
            if len(x):
                m, (lo, hi) = seed_resampled_mae((x["cv_pred"] - x["target"]).abs(), x["arm"])
                line += f"   {label} {m:.2f} [{lo:.2f}, {hi:.2f}]"
        print(line)
    x = raw[raw["forecaster"] == shown[0]]
    means = raw.pivot_table(index="arm", columns="forecaster", values="cv_pred")
    means.insert(0, "realized", x.groupby("arm")["target"].mean())
    means.insert(0, "seeds", x.groupby("arm").size())
    print("per arm (mean over seeds, points):")
    print(means[["seeds", "realized", *shown]].round(2).to_string())
    fl = seed_noise_floor(x["target"], x["arm"], x["study"])
    print(f"seed-noise floor of the run-level MAE: {fl['estimate']:.2f} (Gini mean difference, {fl['arms']} arms; one "
          "study: no interval)")
    folder = Path(args.studies_root) / studies[0].rsplit("@", 1)[0]
    h = heldout_floor([folder], keep=set(zip(x["study"], x["arm"])))
    if h["arms"]:
        items = ", ".join(map(str, sorted({a["items"] for a in h["arms"]})))
        print("two-way split on N = " + items + " held-out items: " + "   ".join(
            f"{heldout_label(f['multiple'])} {f['estimate']:.2f}" for f in h["floors"])
              + f"   (held-out share of the seeds' variance {h['heldout_share']:.2f})")
    for why in h["skipped"]:
        print(f"not split: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
