"""The report says on how many common runs a forecaster's forecast is cost only's own. A trial user found 16 of the
shipped report's runs whose ``forecast_probe`` is the probe's fallback to cost only (rho's SNR <= 1), counted in the
probe's MAE and its paired difference from cost only without a word, while ``calib apply`` prints such a reward's
probe forecast as n/a."""

from __future__ import annotations

import numpy as np
import pandas as pd

from calib.report import _common_rows, _same_as_baseline_notes


def _rows() -> pd.DataFrame:
    """4 runs besides grpo: the probe equals cost only on two (one within float rounding), differs on two; the signal
    proxy differs on all."""
    return pd.DataFrame({
        "study": ["s"] * 5, "arm": ["grpo", "a", "b", "c", "d"], "is_reference": [True] + [False] * 4,
        "target": [0.0, -1.0, 0.5, 2.0, -3.0],
        "forecast_cost_only": [0.0, -2.0, 0.0, 1.0, -1.0],
        "forecast_probe": [0.0, -2.0, 1e-12, 1.5, -2.0],
        "forecast_signal_proxy": [0.0, -2.5, 0.3, 1.2, -1.1],
        "forecast_first_order": [0.0, np.nan, 1.0, 2.0, 3.0],
    })


def test_the_note_counts_the_probe_runs_that_are_cost_onlys_forecast():
    notes: list = []
    _, base, compared = _common_rows(_rows(), False, notes)
    assert "forecast_first_order" in compared and int(base["all_forecasters"].sum()) == 3  # run a: no first order
    same = [n for n in notes if "equals cost only's forecast" in n]
    assert same == [
        "forecast_probe equals cost only's forecast on 1 of the 3 common runs (its fallback where the probe cannot "
        "tell a reward from grpo: the SNR of rho-1 is <= 1, or rho is undefined); its MAE difference from cost only "
        "rests on the other 2 runs."]


def test_no_note_where_every_forecast_differs_or_cost_only_is_not_compared():
    rows = _rows().assign(forecast_probe=[0.0, -1.9, 0.2, 1.5, -2.0])
    assert _same_as_baseline_notes(rows[~rows["is_reference"]], ["forecast_probe", "forecast_cost_only"]) == []
    assert _same_as_baseline_notes(_rows(), ["forecast_probe", "forecast_signal_proxy"]) == []
