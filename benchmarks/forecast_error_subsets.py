"""The forecasters' held-out errors on parts of the calibration rows, from a `calib report` folder.

Prints, from ``REPORT/cv_predictions.csv`` (rows with ``cv = study`` and ``method = none``: the raw
forecasts, each study held out), on the runs every forecaster covers:

- the mean absolute error of each forecaster per held-out study;
- the same errors without the arms named by ``--leave-out STUDY_PREFIX/ARM`` (default: the label-free
  majority vote of the Llama study, which collapses and no forecaster foresees), with 95% study-cluster
  bootstrap intervals (:func:`calib.bootstrap.mae_interval`, 5000 resamples, seed 0) and the paired
  difference of each forecaster from cost only (:func:`calib.bootstrap.mae_difference_interval`);
- on both sets of runs, the seed-noise floor of the run-level MAE (:func:`calib.noise_floor.seed_noise_floor`)
  and each forecaster's error on arm means beside their floor (:func:`calib.noise_floor.arm_level_errors`);
- on the same runs, read from the study folders under ``--studies-root`` (default ``data``), that floor as
  the two-way model of seeds x held-out items puts it, on the studies' own held-out sets, on four times
  as many items and on infinitely many (:func:`calib.noise_floor.heldout_floor`): how much of a run's
  noise a larger held-out set would remove.

All errors in accuracy points (gain vs grpo at the token budget). The figures in
``data/calibration/README.md`` come from::

    python benchmarks/forecast_error_subsets.py data/calibration/report
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from calib.bootstrap import mae_difference_interval, mae_interval
from calib.noise_floor import arm_level_errors, heldout_floor, heldout_label, seed_noise_floor

FORECASTERS = ["forecast_cost_only", "forecast_probe", "forecast_signal_proxy", "forecast_first_order"]
RUN = ["study", "arm", "seed"]


def common_rows(report: str) -> pd.DataFrame:
    """The raw leave-one-study-out predictions on the runs every forecaster covers (long format)."""
    d = pd.read_csv(f"{report}/cv_predictions.csv")
    d = d[(d["cv"] == "study") & (d["method"] == "none")]
    present = [f for f in FORECASTERS if f in set(d["forecaster"])]
    runs = d.groupby(RUN)["forecaster"].nunique()
    covered = runs[runs == len(present)].index
    return d.set_index(RUN).loc[lambda x: x.index.isin(covered)].reset_index()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="a `calib report` folder (holds cv_predictions.csv)")
    p.add_argument("--leave-out", action="append", default=None, metavar="STUDY_PREFIX/ARM",
                   help="arms left out of the second table (default: study_tiny_llama/majority_vote)")
    p.add_argument("--studies-root", default="data",
                   help="the folder holding the study folders the report was made from (default: data)")
    args = p.parse_args(argv)
    path = Path(args.report) / "cv_predictions.csv"
    if not path.is_file():
        report = Path(args.report)
        where = "" if report.is_dir() else f" ({report} {'is a file' if report.exists() else 'does not exist'})"
        print(f"forecast_error_subsets: error: {path} not found{where}: REPORT must be a `calib report` folder; "
              f"make one with `calib report STUDY_DIR... --out {args.report}`", file=sys.stderr)
        return 2
    d = common_rows(args.report)
    d["error"] = (d["forecast"] - d["target"]).abs()
    shown = [f for f in FORECASTERS[:3] if f in set(d["forecaster"])]
    per_study = d[d["forecaster"].isin(shown)].pivot_table(index="study", columns="forecaster", values="error")
    per_study.insert(0, "runs", d[d["forecaster"] == shown[0]].groupby("study").size())
    print(f"MAE per held-out study on the {per_study['runs'].sum()} common runs (points):")
    print(per_study[["runs", *shown]].round(2).to_string())
    print_floor(d[d["forecaster"] == shown[0]], "all common runs", d, shown, args.studies_root)
    out = [x.split("/", 1) for x in (args.leave_out or ["study_tiny_llama/majority_vote"])]
    drop = pd.Series(False, index=d.index)
    for study, arm in out:
        drop |= d["study"].str.startswith(study) & (d["arm"] == arm)
    kept = d[~drop]
    by = {f: kept[kept["forecaster"] == f].sort_values(RUN) for f in shown}
    base = by["forecast_cost_only"]
    print(f"\nwithout {', '.join('/'.join(x) for x in out)}: {len(base)} runs, MAE [95% study-cluster bootstrap]")
    for f, x in by.items():
        ci = mae_interval(x["forecast"].to_numpy(), x["target"].to_numpy(), x["study"].to_numpy())
        line = f"  {f:<24} {ci.estimate:.2f} [{ci.interval[0]:.2f}, {ci.interval[1]:.2f}]"
        if f != "forecast_cost_only":
            dd = mae_difference_interval(x["forecast"].to_numpy(), base["forecast"].to_numpy(),
                                         x["target"].to_numpy(), x["study"].to_numpy())
            line += f"   minus cost only {dd.estimate:+.2f} [{dd.interval[0]:+.2f}, {dd.interval[1]:+.2f}]"
        print(line)
    print_floor(base, f"without {', '.join('/'.join(x) for x in out)}", kept, shown, args.studies_root)
    return 0


def _iv(c: dict) -> str:
    return "[no interval]" if c["interval"] is None else f"[{c['interval'][0]:.2f}, {c['interval'][1]:.2f}]"


def print_floor(runs: pd.DataFrame, label: str, d: pd.DataFrame, shown: list, studies_root: str) -> None:
    """The seed-noise floor of ``runs`` and each shown forecaster's arm-mean error on ``d`` (points), then the
    floor on larger held-out sets from the study folders under ``studies_root``."""
    fl = seed_noise_floor(runs["target"], runs["arm"], runs["study"])
    print(f"\n{label}: seed-noise floor of the run-level MAE {fl['estimate']:.2f} {_iv(fl)} ({fl['arms']} arms); "
          "on arm means (MAE, floor):")
    for f in shown:
        x = d[d["forecaster"] == f]
        a = arm_level_errors(x["forecast"], x["target"], x["arm"], x["study"])
        print(f"  {f:<24} {a['mae']['estimate']:.2f} {_iv(a['mae'])}   floor {a['floor']['estimate']:.2f} "
              f"{_iv(a['floor'])}   ({a['arms']} arms)")
    dirs = sorted({Path(studies_root) / s.rsplit("@", 1)[0] for s in runs["study"]})
    missing = [str(x) for x in dirs if not x.is_dir()]
    if missing:
        print(f"  (no held-out split: {', '.join(missing)} not found; pass --studies-root)")
        return
    h = heldout_floor(dirs, keep=set(zip(runs["study"], runs["arm"])))
    sizes = "   ".join(f"{heldout_label(f['multiple'])} {f['estimate']:.2f} {_iv(f)}" for f in h["floors"])
    items = sorted({a["items"] for a in h["arms"]})
    print(f"  two-way model (seeds x held-out items), floor of the run-level MAE on: {sizes} "
          f"({h['runs']} runs with per-item results; N = {', '.join(map(str, items))} held-out items)")
    if h["arms"]:
        print(f"  held-out share of the seeds' spread (se2 / N over sa2 + se2 / N): mean over runs "
              f"{h['heldout_share']:.2f}; seed component 0 in {sum(a['seed_var'] == 0 for a in h['arms'])} of "
              f"{len(h['arms'])} arms")
    if h["skipped"]:
        print(f"  left out (no split): {'; '.join(h['skipped'])}")

if __name__ == "__main__":
    sys.exit(main())
