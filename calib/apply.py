"""Apply a fitted calibration to a probe result (``gradprobe probe --calibration FILE|default``).

For every probed reward R the features are those of :mod:`calib.dataset` with the ``outcome``
reward as GRPO: at the probe's own token budget T (``config.budget_tokens``; or its
device-seconds budget for a calibration fitted at matched time), predicted gain vs GRPO =
(T / c_R) g_R - (T / c_outcome) g_outcome. Each reward entry of ``probe.json`` gains

- ``calibrated_gain``: the calibrated realized gain vs GRPO at that budget (accuracy points);
- ``calibrated_interval``: [lower, upper], the conformal interval for one training run at the
  calibration's confidence level (+-inf when the calibration had too few rows for that level);

and the result gains a ``calibration`` block saying what was applied. ``outcome`` is GRPO itself:
its calibrated gain vs itself is 0 with interval [0, 0] by definition.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .dataset import FEATURES, predicted_at_budget
from .model import Calibration

REFERENCE_REWARD = "outcome"


class CalibrationApplyError(ValueError):
    """The probe result cannot be calibrated with this calibration (the message says why and the fix)."""


def check_applicable(calibration: Calibration, *, rewards, budget_seconds=None) -> None:
    """Refuse, before the probe runs, a probe configuration the calibration cannot be applied to.

    Raises
    ------
    CalibrationApplyError
        ``outcome`` is not among ``rewards`` (the calibration predicts gains vs GRPO), the calibration
        was fitted at matched time and no device-seconds budget is given, or at matched updates.
    """
    if REFERENCE_REWARD not in rewards:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (given: {', '.join(rewards)})")
    if calibration.budget == "time" and budget_seconds is None:
        raise CalibrationApplyError("this calibration was fitted at matched device-seconds: pass --budget-seconds")
    if calibration.budget not in ("tokens", "time"):
        raise CalibrationApplyError(f"a calibration fitted at a matched {calibration.budget!r} budget cannot be applied "
                                    "to a probe (it predicts at a token or device-seconds budget); fit one with "
                                    "--budget tokens")


def probe_features(result: dict, budget: str) -> pd.DataFrame:
    """Calibration features of every reward of a probe result, one row per reward (index: name).

    Raises
    ------
    CalibrationApplyError
        No ``outcome`` reward among the probed ones, or a budget the probe has no value for.
    """
    entries = {r["name"]: r for r in result["rewards"]}
    if REFERENCE_REWARD not in entries:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (probed: {sorted(entries)})")
    cfg = result["config"]
    if budget == "tokens":
        value = float(cfg["budget_tokens"])
    elif budget == "time":
        if cfg.get("budget_seconds") is None:
            raise CalibrationApplyError("this calibration was fitted at matched device-seconds: pass --budget-seconds")
        value = float(cfg["budget_seconds"])
    else:
        raise CalibrationApplyError(f"a calibration fitted at a matched {budget!r} budget cannot be applied to a probe "
                                    "(it predicts at a token or device-seconds budget); fit one with --budget tokens")
    ref = entries[REFERENCE_REWARD]
    ref_pred = predicted_at_budget(ref, budget, value)
    rows = {}
    for name, e in entries.items():
        rows[name] = {
            "predicted_gain": predicted_at_budget(e, budget, value) - ref_pred,
            "alignment": float(e["inner_product"]),
            "cosine": math.nan if e.get("cosine") is None else float(e["cosine"]),
            "snr": math.nan if e.get("snr") is None else float(e["snr"]),
            "token_multiplier": float(e["tokens_per_update"]) / float(ref["tokens_per_update"]),
            "budget_value": value,
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(FEATURES) + ["budget_value"])


def calibrate_probe(result: dict, calibration: Calibration, *, source: str = "") -> dict:
    """Add ``calibrated_gain`` and ``calibrated_interval`` to each reward of a probe result (in place).

    Parameters
    ----------
    result : dict
        The probe result (:func:`gradprobe.probe.run.run_probe`, or ``probe.json`` read back).
    calibration : Calibration
        From :func:`calib.model.load_calibration`.
    source : str
        Where the calibration came from (recorded).

    Returns
    -------
    dict
        ``result``, with the fields added and a ``calibration`` block (source, method, budget, level,
        training rows/arms/models, and a note when the probe's budget lies outside the budgets the
        calibration was fitted at).

    Raises
    ------
    CalibrationApplyError
        See :func:`probe_features`; or a feature the calibration uses is not finite for a reward.
    """
    feats = probe_features(result, calibration.budget)
    names = [n for n in feats.index if n != REFERENCE_REWARD]
    for f in calibration.features:
        bad = [n for n in names if not math.isfinite(feats.loc[n, f])]
        if bad:
            raise CalibrationApplyError(f"feature {f!r} of the calibration is missing or infinite for reward(s) {bad}"
                                        + ("; re-run the probe with --cosine" if f == "cosine" else ""))
    point = lo = hi = []
    if names:
        point, lo, hi = calibration.predict(feats.loc[names])
    values = {n: (float(p), [float(a), float(b)]) for n, p, a, b in zip(names, point, lo, hi)}
    values[REFERENCE_REWARD] = (0.0, [0.0, 0.0])
    for entry in result["rewards"]:
        entry["calibrated_gain"], entry["calibrated_interval"] = values[entry["name"]]
    fitted_lo, fitted_hi = (float(calibration.rows["budget_value"].min()), float(calibration.rows["budget_value"].max()))
    value = float(feats["budget_value"].iloc[0])
    notes = []
    if not fitted_lo / 2 <= value <= 2 * fitted_hi:
        notes.append(f"the probe's {calibration.budget} budget {value:g} is far from the budgets the calibration was "
                     f"fitted at ({fitted_lo:g}-{fitted_hi:g}): the calibrated gains are an extrapolation")
    cfg = result.get("config") or {}
    models, tasks = sorted(set(calibration.rows["model"])), sorted(set(calibration.rows["task"]))
    if cfg.get("model") not in models or cfg.get("task") not in tasks:
        notes.append(f"the calibration was fitted on model(s) {models} and task(s) {tasks}, this probe is "
                     f"{cfg.get('model')!r} on {cfg.get('task')!r}: the calibration may not transfer (a leave-one-model-"
                     "out report, `calib report ... --cv model`, measures how well it does)")
    result["calibration"] = {
        "source": source, "method": calibration.method, "features": list(calibration.features),
        "budget": calibration.budget, "budget_value": value, "confidence_level": calibration.confidence_level,
        "interval": calibration.interval, "target": f"realized gain vs GRPO ({REFERENCE_REWARD}) at this budget, "
                                                   "accuracy points, one training run",
        "training_rows": int(len(calibration.rows)), "arms": sorted(set(calibration.rows["arm"])),
        "models": sorted(set(calibration.rows["model"])), "fitted_with": calibration.versions, "notes": notes,
    }
    return result


def format_calibrated(result: dict) -> str:
    """A plain-text table of the calibrated gains (what ``gradprobe probe --calibration`` prints)."""
    c = result["calibration"]
    lines = ["", f"calibrated gain vs GRPO at {c['budget_value']:,.0f} {c['budget']} ({c['method']}, "
                 f"{c['confidence_level']:.0%} conformal interval for one run; fitted on {c['training_rows']} runs of "
                 f"{len(c['arms'])} arms, {', '.join(c['models'])})",
             f"{'reward':<14}{'raw vs grpo':>13}{'calibrated':>12}{'interval':>24}"]
    feats = probe_features(result, c["budget"])
    for r in result["rewards"]:
        lo, hi = r["calibrated_interval"]
        lines.append(f"{r['name']:<14}{feats.loc[r['name'], 'predicted_gain']:>+13.3f}{r['calibrated_gain']:>+12.3f}"
                     f"{f'[{lo:+.3f}, {hi:+.3f}]':>24}")
    lines += [f"note: {n}" for n in c["notes"]]
    return "\n".join(lines)


def rewrite_probe_json(path: str | Path, result: dict) -> None:
    """Rewrite ``probe.json`` atomically (fsynced temporary file, then rename), non-finite floats
    encoded as in :mod:`gradprobe.probe.run` (NaN -> null, inf -> "inf")."""
    from gradprobe.probe.run import _json_safe
    from gradprobe.training.checkpoint import write_json_atomic

    write_json_atomic(Path(path), _json_safe(result))
