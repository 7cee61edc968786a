"""``calib.apply(calibration, probe_result)``: a calibration applied to a probe, as a DataFrame.

The function is :func:`calib.apply.apply_calibration` (it lives beside :func:`calib.apply.calibrate`,
whose numbers it returns, so that the callable module ``calib.apply`` needs no import back to here);
this module keeps the name ``calib.api.apply_calibration`` importable.
"""

from __future__ import annotations

from .apply import apply_calibration

__all__ = ["apply_calibration"]
