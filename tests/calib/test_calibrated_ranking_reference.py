"""grpo in the calibrated ranking gets its study's held-out calibration at a forecast of 0, as every arm gets the
calibration at its own forecast. A trial user found that with grpo fixed at 0, a study whose arms the probe could
not tell apart (every forecast 0: study_tiny_greso, study_tiny_losses) was ranked against grpo by the calibration's
intercept alone, and counted: the shipped report's calibrated probe ranked 8 studies (p 0.021) to the raw probe's
6."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calib.dataset import FORECASTERS
from calib.report import _rankings
from calib.validation import cross_validate
from calib.estimators import make_estimator


def _rows() -> pd.DataFrame:
    """Study A: arms x, y forecast 0 (the probe cannot tell), realized below grpo; study B: u above, v below."""
    arms = {("A", "grpo"): (0.0, 0.0), ("A", "x"): (0.0, -1.0), ("A", "y"): (0.0, -2.0),
            ("B", "grpo"): (0.0, 0.0), ("B", "u"): (1.0, 1.0), ("B", "v"): (-1.0, -1.0)}
    rows = []
    for (study, arm), (forecast, target) in arms.items():
        for seed in range(3):
            row = {"study": study, "arm": arm, "seed": seed, "target": target + 0.01 * seed, "rho": np.nan}
            row.update({f: forecast for f in FORECASTERS})
            rows.append(row)
    return pd.DataFrame(rows)


def _cv(rows: pd.DataFrame) -> pd.DataFrame:
    """Held-out calibrations: A's is 0.5 f - 0.8, B's 0.5 f - 0.3 (grpo rows are never calibrated)."""
    arms = rows[rows["arm"] != "grpo"].copy()
    at_zero = arms["study"].map({"A": -0.8, "B": -0.3})
    return arms.assign(cv="study", forecaster="forecast_probe", method="linear", fold=arms["study"],
                       cv_pred=0.5 * arms["forecast_probe"] + at_zero, cv_pred_at_zero=at_zero)


def test_grpo_is_ranked_at_its_calibration_of_zero_and_an_all_tied_study_is_not_ranked():
    rows = _rows()
    table, ranking, _ = _rankings(rows, _cv(rows), "forecast_probe", "linear", "study", 99, ["forecast_probe"],
                                  {"resamples": 200, "level": 0.95, "seed": 0})
    grpo = table[table["arm"] == "grpo"].set_index("study")["calibrated_forecast_probe"]
    assert grpo.to_dict() == pytest.approx({"A": -0.8, "B": -0.3})
    cal, raw = ranking["calibrated_forecast_probe"], ranking["forecast_probe"]
    assert cal["n_studies"] == raw["n_studies"] == 1  # A: every arm tied with grpo, as the raw forecasts are
    assert cal["kendall_tau"] == pytest.approx(raw["kendall_tau"]) == pytest.approx(1.0)


def test_the_held_out_calibration_at_zero_is_the_folds_own():
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"study": np.repeat(["a", "b", "c"], 8), "arm": np.tile(list("pqrstuvw"), 3),
                         "model": "tiny", "forecast_probe": rng.normal(size=24)})
    rows["target"] = -1.0 + 0.5 * rows["forecast_probe"] + rng.normal(scale=0.1, size=24)
    out = cross_validate(make_estimator("linear"), rows, forecaster="forecast_probe", cv="study")
    for study, part in out.groupby("fold"):
        train = rows[rows["study"] != study]
        est = make_estimator("linear").fit(train[["forecast_probe"]].to_numpy(), train["target"].to_numpy())
        assert part["cv_pred_at_zero"].tolist() == pytest.approx([est.predict(np.zeros((1, 1)))[0]] * len(part))
