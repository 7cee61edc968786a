"""``benchmarks/unseen_study.py``: one held-out study's errors from a `calib report` folder, checked against a
direct computation on the shipped report, and its refusals (no report, a prefix naming no or several studies)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "data" / "calibration" / "report"


@pytest.fixture(scope="module")
def unseen():
    spec = importlib.util.spec_from_file_location("unseen_study", REPO / "benchmarks" / "unseen_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_held_out_studys_errors_are_those_of_its_rows(unseen, capsys):
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    d = pd.read_csv(REPORT / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & d["study"].str.startswith("study_tiny@") & (d["arm"] != "grpo_2xlr")]
    for f in ("forecast_cost_only", "forecast_probe"):
        x = d[(d["forecaster"] == f) & (d["method"] == "none")]
        c = d[(d["forecaster"] == f) & (d["method"] == "linear")]
        assert len(x) == len(c) == 12
        mae, cal = np.abs(x["cv_pred"] - x["target"]).mean(), np.abs(c["cv_pred"] - c["target"]).mean()
        line = next(s for s in out.splitlines() if s.strip().startswith(f))
        assert f"as forecast {mae:.2f} [" in line and f"calibrated on the other studies {cal:.2f} [" in line
    assert out.startswith("study_tiny@b6b755233a8f held out: 12 runs of 3 arms;")  # grpo_2xlr: no probe forecast
    assert "two-way split on N = 1000 held-out items: N " in out


def test_the_interval_resamples_seeds_within_arms(unseen):
    errors = pd.Series([1.0, 1.0, 1.0, 5.0, 5.0, 5.0])
    arms = pd.Series(["a", "a", "a", "b", "b", "b"])
    m, (lo, hi) = unseen.seed_resampled_mae(errors, arms)
    assert m == 3.0 and lo == hi == 3.0  # each arm's seeds agree: resampling them changes nothing
    m, (lo, hi) = unseen.seed_resampled_mae(pd.Series([0.0, 2.0, 3.0, 3.0]), pd.Series(["a", "a", "b", "b"]))
    assert m == 2.0 and 1.5 - 1e-12 <= lo < m < hi <= 2.5 + 1e-12  # only arm a's two seeds vary: [1.5, 2.5]


@pytest.mark.parametrize("study, why", [("study_tiny", "names 8 studies"), ("nothing", "names 0 studies")])
def test_a_prefix_must_name_one_study(unseen, capsys, study, why):
    assert unseen.main([str(REPORT), "--study", study]) == 2
    assert why in capsys.readouterr().err


def test_pooled_studies_count_every_run_once_and_resample_seeds_within_each_studys_arms(unseen, capsys):
    names = ["study_tiny@", "study_tiny_hard_rewards"]
    assert unseen.main([str(REPORT), *[a for n in names for a in ("--study", n)],
                        "--studies-root", str(REPO / "data")]) == 0
    out = capsys.readouterr().out
    pooled = out[out.index("pooled, 2 held-out studies: 24 runs of 6 arms;"):]
    d = pd.read_csv(REPORT / "cv_predictions.csv")
    d = d[(d["cv"] == "study") & (d["study"].str.startswith(names[0]) | d["study"].str.startswith(names[1]))
          & (d["arm"] != "grpo_2xlr")]
    for f in ("forecast_cost_only", "forecast_probe"):
        x = d[(d["forecaster"] == f) & (d["method"] == "none")]
        assert len(x) == 24
        err = (x["cv_pred"] - x["target"]).abs()
        m, (lo, hi) = unseen.seed_resampled_mae(err, x["study"] + "/" + x["arm"])
        line = next(s for s in pooled.splitlines() if s.strip().startswith(f))
        assert f"as forecast {err.mean():.2f} [{lo:.2f}, {hi:.2f}]" in line
        # each study's own block is printed before the pooled one, with its 12 runs
        per = [np.abs(x[x["study"].str.startswith(n)]["cv_pred"] - x[x["study"].str.startswith(n)]["target"]).mean()
               for n in names]
        assert err.mean() == pytest.approx(np.mean(per))  # 12 runs each: the pooled MAE is their mean
    assert out.index("study_tiny@b6b755233a8f held out: 12 runs") < out.index("study_tiny_hard_rewards@") < out.index(
        "pooled, 2 held-out studies")
    assert "6 arms of 2 studies; given without an interval" in pooled


def test_a_study_named_twice_is_refused(unseen, capsys):
    assert unseen.main([str(REPORT), "--study", "study_tiny@", "--study", "study_tiny@b6"]) == 2
    assert "names study_tiny@b6b755233a8f again; name each study once" in capsys.readouterr().err


def test_a_missing_report(unseen, capsys, tmp_path):
    assert unseen.main([str(tmp_path / "none"), "--study", "x"]) == 2
    assert capsys.readouterr().err.startswith(f"unseen_study: error: {tmp_path / 'none'}/cv_predictions.csv not found")


def test_the_figures_the_unseen_studys_readme_quotes(unseen, capsys, tmp_path):
    """data/study_tiny_heldout4k/README.md quotes this command's output on a report over the nine calibration
    studies and it (the commands in the README): each forecaster's line and the floors must be there."""
    import subprocess
    import sys

    studies = ["study_tiny", "study_tiny_sparse", "study_tiny_hard_rewards", "study_tiny_lr", "study_reward_granularity",
               "study_tiny_llama", "study_tiny_losses", "study_tiny_greso", "study_tiny_guided", "study_tiny_heldout4k"]
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "calib.cli", "report", *[str(REPO / "data" / s) for s in studies],
                           "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert unseen.main([str(out), "--study", "study_tiny_heldout4k", "--studies-root", str(REPO / "data")]) == 0
    printed = capsys.readouterr().out
    readme = " ".join((REPO / "data" / "study_tiny_heldout4k" / "README.md").read_text().split())
    for f, name in (("forecast_cost_only", "cost only"), ("forecast_probe", "probe"),
                    ("forecast_signal_proxy", "signal proxy")):
        line = next(s for s in printed.splitlines() if s.strip().startswith(f))
        raw = line.split("as forecast ")[1].split("   ")[0]
        cal = line.split("calibrated on the other studies ")[1].strip()
        assert f"| {name} | {raw} | {cal} |" in readme, line
    assert "seed-noise floor of the run-level MAE: 0.66" in printed and "is 0.66" in readme
    assert "N 0.58" in printed and "gives 0.58 at its own 4,000 prompts" in readme
