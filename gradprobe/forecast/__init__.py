"""Forecasts with diminishing returns (DESIGN.md, "The probe", "Forecast (what users read)").

A reward's accuracy at a budget is read off grpo's learning curve (:class:`ReferenceCurve`, the
ScaleRL sigmoid of Khatri et al. 2025, eq. 1, in updates) at the reward's effective number of
updates n_R = (T / c_R) rho_R, rho_R its per-update efficiency relative to grpo from the probe
(shrunk toward 1 by its signal-to-noise), beside two baselines: cost only (rho = 1) and verl's
forward-only gradient-signal proxy.

- :class:`ReferenceCurve`: the curve (from a study, a ``metrics.jsonl``, a CSV, a TRL
  ``trainer_state.json``, or a saved JSON);
- :func:`forecast_rewards`: per-reward forecasts of a probe result (:class:`ForecastResult`);
- :func:`study_forecasts`: per-arm forecasts of a study folder (the calibration's features).
"""

from .budget_forecast import forecast_rewards
from .curves import CurveError, ReferenceCurve, default_curve_path, load_reference_curve, scalerl_sigmoid
from .proxies import Efficiency, probe_efficiency, shrink_factor, signal_proxy_efficiency
from .result import METHODS, ForecastResult
from .section import forecast_section, format_forecast
from .study import STUDY_COLUMNS, SkippedEvalsWarning, study_forecasts

__all__ = ["ReferenceCurve", "CurveError", "load_reference_curve", "default_curve_path", "scalerl_sigmoid",
           "forecast_rewards", "forecast_section", "format_forecast", "ForecastResult", "METHODS", "Efficiency",
           "probe_efficiency", "shrink_factor", "signal_proxy_efficiency", "study_forecasts", "STUDY_COLUMNS",
           "SkippedEvalsWarning"]
