"""calib: calibrate the gradient probe's predicted gains against matched-compute ground truth.

DESIGN.md, "Calibration". The probe (gradprobe.probe) predicts each reward's accuracy gain by a
first-order extrapolation that is expected to overestimate; a study (gradprobe study) measures
the realized gains at matched budgets. This package learns the map between the two:

- :mod:`calib.dataset`: rows (model, task, arm, seed, budget) joining probe features with realized
  gains vs GRPO (accuracy points), from study folders;
- :mod:`calib.estimators`: scikit-learn calibrators, :class:`LinearCalibrator` (Huber) and
  :class:`IsotonicCalibrator`;
- :mod:`calib.validation`: leave-one-arm/model-out cross-validation and MAPIE conformal intervals;
- :mod:`calib.metrics`: bias, MAE, coverage, Kendall tau / Spearman rho of the rankings;
- :mod:`calib.model`: a fitted calibration as a versioned JSON file (``calib fit``);
- :mod:`calib.apply`: calibrated gains in ``probe.json`` (``gradprobe probe --calibration``);
- :mod:`calib.report`: ``calib report`` (report.html, figures, metrics.json).

calib reads gradprobe's saved outputs; gradprobe's library never imports calib (only its
command line does, for ``--calibration``).
"""

from .estimators import IsotonicCalibrator, LinearCalibrator

__all__ = ["IsotonicCalibrator", "LinearCalibrator"]
