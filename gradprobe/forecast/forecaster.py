"""The forecaster's names in one place, as they were importable before the forecast layer was split.

The forecast of every arm at a budget (the model, its interval and its verdicts) is
:mod:`gradprobe.forecast.budget_forecast`; what it reads from a probe result,
:mod:`gradprobe.forecast.probe_input`; what it returns, :mod:`gradprobe.forecast.result`; the
``forecast`` section of ``probe.json`` and its printout, :mod:`gradprobe.forecast.section`.
"""

from __future__ import annotations

from .budget_forecast import forecast_rewards
from .probe_input import TRAIN_FORWARDS, probe_batches_of
from .result import METHODS, TABLE_COLUMNS, ForecastResult, format_budget
from .section import DEFAULT_CURVES, VALIDATION, VALIDATION_FILE, forecast_section, format_forecast, load_validation

__all__ = ["ForecastResult", "forecast_rewards", "METHODS", "probe_batches_of", "format_budget", "forecast_section",
           "format_forecast", "DEFAULT_CURVES", "VALIDATION", "VALIDATION_FILE", "load_validation", "TABLE_COLUMNS",
           "TRAIN_FORWARDS"]
