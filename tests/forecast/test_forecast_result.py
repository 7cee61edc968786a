"""ForecastResult.to_dict writes numbers in gradprobe's one JSON encoding (gradprobe.outputs.json_safe), and
the plain-text forecast reads them back."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from gradprobe.forecast.result import ForecastResult
from gradprobe.forecast.section import format_forecast
from gradprobe.outputs import json_float


def _result() -> ForecastResult:
    nan, inf = float("nan"), float("inf")
    row = {"arm": "mc_value", "reward": "mc_value", "lr_scale": 1.0, "tokens_per_update": np.int64(4400),
           "rho": np.float64(0.5), "rho_interval": (np.float64(0.25), inf), "snr": inf, "effective_updates": 12.5,
           "forecast_accuracy": 71.0, "forecast_gain": -np.inf, "gain_interval": np.array([-inf, 2.0]),
           "method": "probe", "note": "", "verdict": "no forecast", "rho_raw": nan, "rho_signal_proxy": None,
           "gain_probe": -inf, "gain_probe_interval": (nan, 1.0), "gain_cost_only": np.float32(1.5),
           "gain_cost_only_interval": (0.5, 2.5), "gain_signal_proxy": nan, "gain_signal_proxy_interval": None,
           "first_order_gain": np.bool_(True)}
    return ForecastResult(table=pd.DataFrame([row]), method="probe", budget={"kind": "tokens", "value": 250_000.0},
                          curve="grpo curve", curve_source="test", grpo_accuracy=inf, reference_reward="outcome",
                          level=0.9, notes=["n"])


def test_to_dict_writes_inf_as_strings_and_nan_as_null():
    d = _result().to_dict()
    row = d["rows"][0]
    assert d["grpo_accuracy"] == "inf"
    assert row["snr"] == "inf" and row["forecast_gain"] == "-inf" and row["gain_probe"] == "-inf"
    assert row["rho_interval"] == [0.25, "inf"] and row["gain_interval"] == ["-inf", 2.0]
    assert row["rho_raw"] is None and row["gain_probe_interval"] == [None, 1.0] and row["gain_signal_proxy"] is None
    assert row["tokens_per_update"] == 4400 and type(row["tokens_per_update"]) is int
    assert row["gain_cost_only"] == 1.5 and type(row["gain_cost_only"]) is float
    assert row["first_order_gain"] is True
    text = json.dumps(d, allow_nan=False)  # strict JSON, and nothing lost: the values read back
    back = json.loads(text)["rows"][0]
    assert json_float(back["snr"]) == math.inf and json_float(back["forecast_gain"]) == -math.inf
    assert math.isnan(json_float(back["rho_raw"]))


def test_format_forecast_prints_infinite_values():
    d = {**_result().to_dict(), "grpo_accuracy": 60.0}
    text = format_forecast(d)
    line = next(x for x in text.splitlines() if x.startswith("mc_value "))
    assert "[0.25, inf]" in line and "[-inf, +2.0]" in line and " inf " in line  # rho interval, gain interval, SNR
