"""``calib.apply(calibration, probe_result)``: a calibration applied to a probe, as a DataFrame.

The numbers are :func:`calib.apply.calibrate`'s (what ``calib apply`` and ``gradprobe probe
--calibration`` print); nothing is written: ``probe.json`` is never touched, and
``calib.write_calibrated(folder, table.attrs["document"])`` writes ``calibrated.json`` when wanted.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["apply_calibration"]


def apply_calibration(calibration, probe_result, *, source: str | None = None):
    """Calibrated gains vs GRPO of every probed reward.

    Parameters
    ----------
    calibration : Calibration, ``"default"`` or path
        A fitted calibration (:func:`calib.load`), or what to load: ``"default"`` (shipped) or a file.
    probe_result : gradprobe.ProbeResult, dict or path
        :func:`gradprobe.probe` / :func:`gradprobe.load_probe`'s result, a ``probe.json`` dict, or a
        probe folder (a study's ``probe/`` folder also gives the plan's full task configuration).
    source : str, optional
        Where the calibration came from, recorded in the document (default: ``calibration`` when
        it is a name or path).

    Returns
    -------
    pandas.DataFrame
        One row per probed reward (index ``reward``): ``forecast`` (the calibrated forecaster's
        gain vs GRPO at the probe's budget, accuracy points), ``calibrated_gain`` (the calibrated
        realized gain vs GRPO, accuracy points; NaN where the forecaster cannot say),
        ``interval_low``/``interval_high`` (the conformal interval for one training run at
        ``attrs["document"]["calibration"]["confidence_level"]``; +-inf with too few rows),
        ``outside_domain`` (bool). ``outcome`` is 0 with interval [0, 0] by definition.
        ``.attrs["document"]`` is the ``calibrated.json`` content (``notes``, ``warnings``, domain).

    Raises
    ------
    calib.model.CalibrationFileError
        The calibration file is missing or unreadable (named).
    calib.apply.CalibrationApplyError
        No ``outcome`` reward in the probe, no value of the calibration's budget, no forecast for
        a forecaster calibration, or a probe folder without ``probe.json`` (all ValueErrors).
    TypeError
        ``probe_result`` is none of the accepted kinds.
    """
    import pandas as pd

    from .apply import calibrate, load_probe
    from .model import Calibration, load_calibration

    if not isinstance(calibration, Calibration):
        source = str(calibration) if source is None else source
        calibration = load_calibration(calibration)
    task = None
    if isinstance(probe_result, (str, Path)):
        raw, _, task = load_probe(probe_result)
    elif isinstance(probe_result, dict):
        raw = probe_result
    elif isinstance(getattr(probe_result, "raw", None), dict):  # gradprobe.ProbeResult (duck-typed: calib reads
        raw = probe_result.raw                                 # gradprobe's outputs, never its classes)
        folder = getattr(probe_result, "folder", None)
        if folder is not None and (Path(folder) / "probe.json").is_file():
            task = load_probe(folder)[2]
    else:
        raise TypeError(f"probe_result must be a gradprobe.ProbeResult, a probe.json dict or a probe folder, got "
                        f"{type(probe_result).__name__}")
    doc = calibrate(calibration, raw, source=source or "", task=task)
    table = pd.DataFrame([{"reward": r["name"], "forecast": r["forecast"], "calibrated_gain": r["calibrated_gain"],
                           "interval_low": float(r["calibrated_interval"][0]),
                           "interval_high": float(r["calibrated_interval"][1]),
                           "outside_domain": bool(r["outside_domain"])} for r in doc["rewards"]]).set_index("reward")
    table.attrs["document"] = doc
    return table
