"""calib: learn, from matched-compute studies, how the probe's forecasts relate to realized gains.

DESIGN.md, "Calibration". gradprobe's forecasters (:mod:`gradprobe.forecast`) forecast each
reward's accuracy gain vs GRPO at a token budget; a study (``gradprobe study``) measures the
realized gains. This package joins the two across studies and learns, and validates, the map:

- :mod:`calib.dataset`: rows (study, model, task, arm, seed, budget) joining the forecasters'
  numbers with realized gains vs GRPO (accuracy points), from study folders;
- :mod:`calib.domain`: studies, models and tasks by resolved configuration; :func:`check_domain`;
- :mod:`calib.estimators`: scikit-learn calibrators (Huber linear, isotonic, none);
- :mod:`calib.validation`: leave-one-study-out / arm-out cross-validation, MAPIE conformal intervals;
- :mod:`calib.metrics`: bias, MAE, coverage, Kendall tau / Spearman rho pooled over studies;
- :mod:`calib.model`: a fitted calibration with its domain, as a versioned JSON file (``calib fit``);
- :mod:`calib.apply`: ``calibrated.json`` next to a probe's ``probe.json`` (``calib apply``,
  ``gradprobe probe --calibration``);
- :mod:`calib.report`: ``calib report`` (report.html, figures, metrics.json).

Top-level API (imported on first use): :func:`load` (a calibration file, or ``"default"``),
``apply(calibration, probe_result)`` (calibrated gains vs GRPO as a DataFrame, nothing written;
:func:`calib.apply.apply_calibration`: ``calib.apply`` is also the module :mod:`calib.apply`, made
callable), :func:`fit`, :func:`calibrate` (a probe result -> the calibrated document), :func:`check_domain`,
:func:`build_rows`, :func:`report_metrics` (what ``calib report`` computes: every forecaster's cross-validated
errors, coverage and rank agreement before and after calibration, ``(metrics, cv_rows, table)``;
:func:`calib.report.compute`), :class:`Calibration`, :class:`CalibrationFileError`,
:class:`CalibrationApplyError` (a ValueError: ``calib.apply`` cannot apply this calibration to this probe, e.g.
the probe has no ``outcome`` reward or no reference learning curve for its model), :class:`CalibrationDomainWarning`
(``calib.apply`` warns it for rewards outside the calibration's domain), the calibrators.

calib reads gradprobe's outputs; gradprobe's library never imports calib.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "apply": ("calib.apply", None),  # the module, callable: calib.apply.apply_calibration
    "load": ("calib.model", "load_calibration"), "fit": ("calib.model", "fit_calibration"),
    "Calibration": ("calib.model", "Calibration"), "CalibrationFileError": ("calib.model", "CalibrationFileError"),
    "calibrate": ("calib.apply", "calibrate"), "write_calibrated": ("calib.apply", "write_calibrated"),
    "CalibrationDomainWarning": ("calib.domain", "CalibrationDomainWarning"),
    "check_domain": ("calib.domain", "check_domain"), "build_rows": ("calib.dataset", "build_rows_many"),
    "report_metrics": ("calib.report", "compute"),  # `calib report`'s numbers: (metrics, cv_rows, table)
    "CalibrationApplyError": ("calib.probe_input", "CalibrationApplyError"),
    "IdentityCalibrator": ("calib.estimators", "IdentityCalibrator"),
    "IsotonicCalibrator": ("calib.estimators", "IsotonicCalibrator"),
    "LinearCalibrator": ("calib.estimators", "LinearCalibrator"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        return value if attr is None else getattr(value, attr)
    raise AttributeError(f"module 'calib' has no attribute {name!r}")


def __dir__():
    """The public names (lazy ones included); submodules stay importable but are not listed."""
    return sorted(__all__)
