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

import importlib as _importlib

#: Public name -> the submodule defining it, imported on first use (PEP 562 module ``__getattr__``): importing
#: ``gradprobe.forecast`` or one of its light submodules (``probe_input``, whose checks ``gradprobe.load_probe`` runs)
#: loads neither pandas nor scipy, which the forecast itself needs (``budget_forecast``, ``curves``, ``study``)
_LAZY = {"forecast_rewards": "budget_forecast", "CurveError": "curves", "ReferenceCurve": "curves",
         "default_curve_path": "curves", "load_reference_curve": "curves", "scalerl_sigmoid": "curves",
         "Efficiency": "proxies", "probe_efficiency": "proxies", "shrink_factor": "proxies",
         "signal_proxy_efficiency": "proxies", "METHODS": "result", "ForecastResult": "result",
         "forecast_section": "section", "format_forecast": "section", "STUDY_COLUMNS": "study",
         "SkippedEvalsWarning": "study", "study_forecasts": "study"}

__all__ = ["ReferenceCurve", "CurveError", "load_reference_curve", "default_curve_path", "scalerl_sigmoid",
           "forecast_rewards", "forecast_section", "format_forecast", "ForecastResult", "METHODS", "Efficiency",
           "probe_efficiency", "shrink_factor", "signal_proxy_efficiency", "study_forecasts", "STUDY_COLUMNS",
           "SkippedEvalsWarning"]


def __getattr__(name: str):
    """A public name of :data:`_LAZY` from its submodule, or a submodule not imported yet (``curves`` after ``import
    gradprobe.forecast``, as when this package imported them all); AttributeError otherwise."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value  # looked up once
        return value
    if not name.startswith("_"):
        try:
            return _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise  # the submodule exists but lacks something it imports: said as it is
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (lazy ones included)."""
    return sorted([*globals(), *__all__])
