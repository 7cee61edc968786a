"""Apply a fitted calibration to a probe result: ``calib apply PROBE_DIR``, ``gradprobe probe --calibration``.

calib never rewrites gradprobe's ``probe.json`` (issue 15): the calibrated numbers go to their own
``calibrated.json`` next to it (:func:`write_calibrated`), one entry per probed reward:

- ``forecast``: the calibrated forecaster's number for the reward (gain vs GRPO at the probe's
  token budget, accuracy points; a version-1 calibration: the raw first-order gain
  (T / c_R) g_R - (T / c_outcome) g_outcome, DESIGN.md "The probe");
- ``calibrated_gain``: the calibrated realized gain vs GRPO at that budget (accuracy points; NaN
  where the forecaster cannot say, e.g. a learning-rate change for the probe, and for a reward that
  gives no gradient on the probe batch, ``no_signal`` in ``probe.json``: it cannot train);
- ``calibrated_interval``: [lower, upper], the conformal interval for one training run at the
  calibration's confidence level (+-inf when the calibration had too few rows for that level);
- ``outside_domain``: True when the probe's model, task or budget lies outside the calibration's
  domain (:func:`calib.domain.check_domain`), or when this reward was never an arm of the
  calibration's studies, or trains with a loss type none of them did (:func:`calib.domain.check_rewards`:
  its intervals were validated on other rewards); the number is still computed, and the warnings
  say which field (or reward) is outside. ``outcome`` is never flagged by the reward check. A reward
  outside the domain without a calibrated gain (no gradient on the probe batch, or no forecast) is
  flagged too: its warning says it has no calibrated gain, and its note says why;
- ``caveats``: what the calibrated gain cannot tell, each with a note: ``tied`` (other rewards have the same
  forecast, so the same calibrated gain: the calibration cannot tell them apart, e.g. rewards of equal tokens per
  update under cost only), ``intercept only`` (a linear calibration's reward forecast at 0: its calibrated gain is
  the intercept alone, the mean offset of the fitted runs from GRPO), ``shift only`` (every reward, when the slope's
  interval over the calibration's studies includes 0: :func:`slope_interval`).

The calibration is applied to the forecaster it was fitted on (``calibration.forecaster``), never to another: when
the probe's verdicts quote another forecaster (``gradprobe probe --forecaster probe`` with the shipped cost-only
calibration), the title says whose gain is calibrated and a note says it is not the verdicts' forecaster
(:func:`forecaster_mismatch_note`; ``calibration.verdict_forecaster``, ``calibration.calibrates_verdict``).

``outcome`` is GRPO itself: its calibrated gain vs itself is 0 with interval [0, 0] by definition.

Where the forecasts come from (format-2 calibrations, which correct a forecaster column of
:mod:`calib.dataset`): ``probe.json``'s ``forecast`` section (written by ``gradprobe probe`` with
:func:`gradprobe.forecast.forecast_section`), or that section computed from the probe result with
the model's shipped reference curve (:func:`calib.probe_input.probe_forecasts`).

``calib.apply`` is both this module and the front door ``calib.apply(calibration, probe_result)``
(:func:`apply_calibration`: a DataFrame, nothing written); :mod:`calib.api` re-exports it.
"""

from __future__ import annotations

import math
import sys as _sys
import types as _types
import warnings as _warnings
from pathlib import Path

import pandas as pd
from scipy.stats import t as student_t
from sklearn.base import clone

from gradprobe.layout import CALIBRATED_JSON, PROBE_JSON
from gradprobe.outputs import OutputDirError
from gradprobe.tables import format_columns

from .domain import (CalibrationDomainWarning, DomainWarning, check_domain, check_in_sample, check_rewards,
                     probe_identity)
from .files import json_float, refuse_looping_file, write_json
from .forecaster_choice import PROBE_FORECASTERS
from .model import Calibration, load_calibration
from .probe_input import (DICT_WHERE, REFERENCE_REWARD, SECTION_COLUMNS, CalibrationApplyError, check_probe_budgets,
                          check_probe_entries, check_probe_records, check_section_shape, first_order_gain, load_probe,
                          probe_features, probe_forecasts, probe_study)
from .validation import PLURAL, group_labels, level_percent

__all__ = ["apply_calibration", "calibrate", "calibrate_probe", "check_applicable", "write_calibrated",
           "format_calibrated", "rewrite_probe_json", "CALIBRATED_NAME", "CALIBRATED_FORMAT",
           "forecaster_name", "verdict_forecaster", "forecaster_mismatch_note", "slope_interval", "FORECASTER_NAMES",
           "SLOPE_LEVEL", "TIED", "INTERCEPT_ONLY", "SHIFT_ONLY",
           "CalibrationDomainWarning",
           # what calib reads from a probe (calib.probe_input), importable from here as before
           "REFERENCE_REWARD", "SECTION_COLUMNS", "CalibrationApplyError", "first_order_gain", "load_probe",
           "probe_features", "probe_forecasts"]

CALIBRATED_NAME = CALIBRATED_JSON
CALIBRATED_FORMAT = "gradprobe-calibrated"


def check_applicable(calibration: Calibration, *, rewards, budget_seconds=None, model: str | None = None,
                     has_curve: bool = True) -> None:
    """Refuse, before the probe runs, a probe configuration the calibration cannot be applied to.

    ``has_curve``: whether the probe will have a reference learning curve (``--reference-curve``, or the
    shipped curve of ``model``: :data:`gradprobe.forecast.DEFAULT_CURVES`); every forecaster a version-2
    calibration corrects is read on one (:data:`calib.probe_input.SECTION_COLUMNS`).

    Raises
    ------
    CalibrationApplyError
        ``outcome`` is not among ``rewards`` (the calibration predicts gains vs GRPO), the calibration
        was fitted at matched time and no device-seconds budget is given, or at matched updates, or it
        corrects a forecast that needs a reference curve and the probe will have none.
    """
    if REFERENCE_REWARD not in rewards:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (given: {', '.join(rewards)})")
    if not has_curve and calibration.forecaster in SECTION_COLUMNS:
        raise CalibrationApplyError(f"this calibration corrects {calibration.forecaster!r}, a forecast read on a "
                                    f"reference learning curve, and none is shipped for model {model!r}: pass "
                                    "--reference-curve (a grpo run's metrics.jsonl, a TRL trainer_state.json, a CSV "
                                    "of update,accuracy, a study folder or a saved curve), or drop --calibration")
    if calibration.budget == "time" and budget_seconds is None:
        raise CalibrationApplyError("this calibration was fitted at matched device-seconds: pass --budget-seconds")
    if calibration.budget not in ("tokens", "time"):
        raise CalibrationApplyError(f"a calibration fitted at a matched {calibration.budget!r} budget cannot be "
                                    "applied to a probe (it predicts at a token or device-seconds budget); refit it "
                                    "with `calib fit` (token budgets)")


def calibrate(calibration: Calibration, probe_result: dict, *, source: str = "", task: dict | None = None,
              where: str = DICT_WHERE, study: dict | None = None) -> dict:
    """The calibrated gains of every probed reward (the content of ``calibrated.json``).

    Parameters
    ----------
    calibration : Calibration
        From :func:`calib.model.load_calibration`.
    probe_result : dict
        ``probe.json`` (not modified), checked as the forecast reads it (:func:`calib.probe_input.check_probe_entries`)
        and, when it has one, its ``forecast`` section's shape (:func:`calib.probe_input.check_section_shape`).
    source, where : str
        Where the calibration came from (recorded); the probe file as errors name it (a dict: ``DICT_WHERE``).
    task : dict, optional
        The probe's resolved task, when ``probe.json`` does not say it in full (:func:`load_probe`).
    study : dict, optional
        The probe's study (:func:`calib.probe_input.probe_study`); None outside a study.

    Returns
    -------
    dict
        ``format``, ``probe`` (model, task key, budgets), ``calibration`` (source, forecaster, method, level,
        domain...), ``outside_domain`` (any entry outside), ``in_sample`` (None, or the warning of
        :func:`calib.domain.check_in_sample`, also in ``warnings``), ``warnings`` (in-sample, domain and per reward),
        ``notes`` (the warnings, then the notes on a stored forecast section that could not be checked against the
        probe's batches: :func:`calib.probe_input.check_forecast_section`, e.g. a user's curve not readable here; then
        one note per reward without a calibrated gain: a reward that gives no gradient on the probe batch,
        ``no_signal`` in ``probe.json``, with its ``no_signal_reason``; rewards the forecaster cannot say anything
        about, and those whose forecast row gives no verdict, with its ``no_verdict_reason``: their calibrated gain is
        NaN; then the notes on ``caveats``, then the note when the calibration corrects another forecaster than the
        verdicts', then why the intervals are infinite, if they are), ``rewards`` (module docstring), ``target``.
        ``calibration`` also holds ``forecaster_name``, ``verdict_forecaster``, ``calibrates_verdict``,
        ``forecaster_note`` and ``slope`` (:func:`_calibration_block`). A reward outside the domain is marked
        ``outside_domain`` whether or not it has a calibrated gain; the warning of one without (NaN) says so
        instead of "still computed".

    Raises
    ------
    CalibrationApplyError
        No ``outcome`` reward, no value of the calibration's budget, no forecasts for a format-2 calibration (the
        message says where they are looked for), a damaged budget or gain, an edited entry or forecast section, a
        ``forecast`` field that is no forecast section (one line naming the file, the field and the fix).
    """
    names = _checked_rewards(probe_result, where)
    feats = probe_features(probe_result, calibration.budget) if calibration.legacy else \
        probe_forecasts(probe_result, calibration.forecaster, where=where)
    col = calibration.features[0]
    others = [n for n in names if n != REFERENCE_REWARD]
    no_signal = _no_signal_rewards(probe_result)
    # a forecast that gives no advice (no_verdict_reason) is not calibrated into one
    ok, values = _calibrated_values(calibration, feats, others, {*no_signal, *_no_verdict_rewards(probe_result)})
    me = probe_identity(probe_result, task=task)
    in_sample = check_in_sample(calibration, study)
    warnings = ([in_sample] if in_sample else []) + check_domain(calibration, probe_result, task=me["task"])
    probe_outside = any(w.outside for w in warnings)
    silent = [n for n in others if n not in ok]
    # marked outside whether or not it has a calibrated gain; for one without, check_rewards' "is still computed" goes
    warnings += [_without_gain(w) if w.reward in silent else w
                 for w in check_rewards(calibration, probe_result, reference_reward=REFERENCE_REWARD)]
    off_rewards = {w.reward for w in warnings if w.outside and w.reward is not None}
    outside = any(w.outside for w in warnings)
    notes = list(warnings) + list(feats.attrs.get("notes") or []) + _reference_note(col, no_signal) \
        + _no_gain_notes(col, silent, no_signal, probe_result)
    rewards = [{"name": n, "forecast": 0.0 if n == REFERENCE_REWARD and n in no_signal else  # gain 0 vs itself
                math.nan if n in no_signal or n not in feats.index else float(feats.loc[n, col]),
                "calibrated_gain": values[n][0], "calibrated_interval": values[n][1],
                "outside_domain": probe_outside or n in off_rewards}
               for n in names]
    block = _calibration_block(calibration, source, probe_result)
    # what the calibrated numbers cannot say: another forecaster than the verdict's, equal forecasts, a mere shift
    notes += _information_notes(calibration, rewards, probe_result, block) + \
        ([block["forecaster_note"]] if block["forecaster_note"] else []) + _infinite_note(calibration, rewards)
    return {
        "format": CALIBRATED_FORMAT, "format_version": 1,
        "target": f"realized gain vs GRPO ({REFERENCE_REWARD}) at the probe's {calibration.budget} budget, accuracy "
                  "points, one training run",
        "probe": {"model": me["model"]["key"], "task": me["task"]["key"], "budgets": me["budgets"]},
        "budget": calibration.budget, "budget_value": me["budgets"].get(calibration.budget, math.nan),
        "calibration": block, "outside_domain": outside, "in_sample": in_sample, "warnings": warnings,
        "notes": notes, "rewards": rewards}


def _infinite_note(calibration: Calibration, rewards: list[dict]) -> list[str]:
    """The note of :meth:`calib.model.Calibration.infinite_interval_note` (why the intervals are [-inf, +inf] and the
    fix), when some reward has a calibrated gain with such an interval; else none."""
    infinite = any(math.isfinite(r["calibrated_gain"]) and not all(map(math.isfinite, r["calibrated_interval"]))
                   for r in rewards)
    note = calibration.infinite_interval_note() if infinite else None
    return [note] if note else []


def _checked_rewards(probe_result: dict, where: str) -> list[str]:
    """The probed rewards' names, after the checks :func:`calibrate` runs first: the budgets, the entries as the
    forecast reads them, the forecast section's shape (every reader below may then read its rows as rows) and the
    ``outcome`` reward (CalibrationApplyError naming the field and the fix)."""
    check_probe_budgets(probe_result, where)
    check_probe_entries(probe_result, where)
    check_section_shape(probe_result, where)
    names = [r["name"] for r in probe_result["rewards"]]
    if REFERENCE_REWARD not in names:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (probed: {sorted(names)})")
    return names


def _calibration_block(calibration: Calibration, source: str, probe_result: dict) -> dict:
    """``calibrated.json``'s ``calibration``: where the calibration came from, what it corrects and its domain;
    ``forecaster_name`` (the corrected column as ``gradprobe probe --forecaster`` names it), ``verdict_forecaster``
    (the forecaster of ``probe_result``'s forecast section, None without one), ``calibrates_verdict`` (the two are
    the same; None without a section), ``forecaster_note`` (:func:`forecaster_mismatch_note`, None when they match)
    and ``slope`` (:func:`slope_interval`)."""
    dom = calibration.domain
    verdict = verdict_forecaster(probe_result)
    name = forecaster_name(calibration.forecaster)
    return {"source": source, "format_version": calibration.format_version,
            "forecaster": calibration.forecaster, "method": calibration.method, "cv": calibration.cv,
            "interval": calibration.interval, "confidence_level": calibration.confidence_level,
            "training_rows": int(len(calibration.rows)), "studies": [s["key"] for s in dom.studies],
            "models": [m["key"] for m in dom.models], "tasks": [t["key"] for t in dom.tasks],
            "arms": dom.arms, "arm_rewards": dom.rewards, "arm_loss_types": dom.loss_types,
            "budget_range": dom.budget_range, "fitted_with": calibration.versions,
            "forecaster_name": name, "verdict_forecaster": verdict,
            "calibrates_verdict": None if verdict is None else verdict == name,
            "forecaster_note": forecaster_mismatch_note(calibration, probe_result),
            "slope": slope_interval(calibration)}


#: A calibration's forecaster column -> the forecaster as ``gradprobe probe --forecaster`` and its forecast section
#: name it (a version-1 calibration's ``predicted_gain`` is the raw first-order gain, never a verdict's).
FORECASTER_NAMES = {**PROBE_FORECASTERS, "forecast_first_order": "raw first order",
                    "predicted_gain": "raw first order"}

#: The level of the slope interval of :func:`slope_interval`.
SLOPE_LEVEL = 0.95

#: The marks of :func:`format_calibrated` (and the ``caveat`` of :func:`apply_calibration`'s table): a calibrated gain
#: equal to other rewards' because their forecasts are equal; one that is the linear calibration's intercept alone
#: (its forecast is 0); every gain of a calibration whose slope interval includes 0.
TIED, INTERCEPT_ONLY, SHIFT_ONLY = "tied", "intercept only", "shift only"


def forecaster_name(column: str) -> str:
    """The forecaster a calibration corrects (its column, ``forecast_cost_only``) as ``gradprobe probe
    --forecaster`` names it (``cost_only``); a column it does not know is returned as it is."""
    return FORECASTER_NAMES.get(column, column)


def verdict_forecaster(probe_result: dict) -> str | None:
    """The forecaster whose gains ``probe_result``'s forecast section quotes in its verdicts (its ``method``:
    ``probe``, ``cost_only`` or ``signal_proxy``, as asked with ``--forecaster`` or chosen by ``auto``); None when
    the result has no forecast section, or one without a forecast."""
    section = probe_result.get("forecast")
    method = section.get("method") if isinstance(section, dict) and section.get("available") else None
    return method if isinstance(method, str) and method else None


def forecaster_mismatch_note(calibration: Calibration, probe_result: dict) -> str | None:
    """The note when the calibration corrects another forecaster than the one ``probe_result``'s verdicts quote
    (:func:`verdict_forecaster`), None when they are the same or there is no verdict.

    The calibration is applied to the gain of the forecaster it was fitted on, never to the verdict's: its map and
    its conformal intervals were measured on that forecaster's errors, and say nothing about another's. The note says
    so, and how to calibrate the verdict's forecaster instead.
    """
    verdict, mine = verdict_forecaster(probe_result), forecaster_name(calibration.forecaster)
    if verdict is None or verdict == mine:
        return None
    choice = str((probe_result.get("forecast") or {}).get("method_choice") or "")
    how = "chosen by --forecaster auto" if choice.startswith("auto") else f"--forecaster {verdict}"
    return (f"this calibration corrects {mine} ({calibration.forecaster}), not {verdict}, the forecaster of the "
            f"verdicts ({how}): the forecast and calibrated columns here are {mine}'s gain and its calibration, not a "
            f"calibration of the {verdict} gains the verdicts quote (a calibration is valid only for the forecaster "
            f"it was fitted on); to calibrate those, fit one with `calib fit ROWS.csv --forecaster forecast_{verdict} "
            "--out FILE.json` and pass --calibration FILE.json")


def slope_interval(calibration: Calibration) -> dict | None:
    """The slope of a linear calibration of one forecaster, with an interval from its studies (None for another
    method, or several features).

    The interval is the delete-one-group jackknife (Efron & Tibshirani 1993, "An Introduction to the Bootstrap",
    ch. 11; groups as the calibration's conformal folds, ``cv``: studies by default, as in MacKinnon, Nielsen & Webb
    2023, "Cluster-robust inference: a guide to empirical practice", its CV3 jackknife): refit without each of the
    G groups, slopes s_g; se = sqrt((G - 1) / G * sum_g (s_g - mean s)^2); slope +- t(G - 1, (1 + L) / 2) se at
    level L = :data:`SLOPE_LEVEL`. With few groups it is approximate (the same caveat as :mod:`calib.bootstrap`).

    Returns
    -------
    dict or None
        ``{"value": slope (accuracy points realized per point forecast), "intercept": points, "interval": [lo, hi]
        (None with under 2 groups), "level", "groups": G, "method", "includes_zero": bool (None without an
        interval)}``. The calibrated gain is intercept + slope * forecast; an interval that includes 0 means the
        studies do not show that the calibration's output depends on the forecast at all (a shift only).
    """
    if calibration.method != "linear" or len(calibration.features) != 1:
        return None
    X = calibration.rows[list(calibration.features)].to_numpy(float)
    y = calibration.rows["target"].to_numpy(float)
    est = calibration.estimator
    out = {"value": float(est.coef_[0]), "intercept": float(est.intercept_), "interval": None,
           "level": SLOPE_LEVEL, "groups": 0, "method": f"delete-one-{calibration.cv} jackknife",
           "includes_zero": None}
    groups = group_labels(calibration.rows, calibration.cv)
    labels = sorted(set(groups))
    out["groups"] = len(labels)
    if len(labels) < 2:
        return out
    slopes = [float(clone(est).fit(X[groups != g], y[groups != g]).coef_[0]) for g in labels]
    n = len(slopes)
    mean = sum(slopes) / n
    se = math.sqrt((n - 1) / n * sum((s - mean) ** 2 for s in slopes))
    half = float(student_t.ppf((1 + SLOPE_LEVEL) / 2, n - 1)) * se
    lo, hi = out["value"] - half, out["value"] + half
    out.update(interval=[lo, hi], includes_zero=bool(lo <= 0 <= hi))
    return out


def _calibrated_values(calibration: Calibration, feats, others: list, skip: set) -> tuple[list, dict]:
    """(the rewards of ``others`` that get a calibrated gain: not in ``skip``, every feature finite; reward ->
    (calibrated gain, [lower, upper]) in accuracy points, NaN for the others, (0, [0, 0]) for grpo)."""
    ok = [n for n in others if n not in skip and all(math.isfinite(feats.loc[n, f]) for f in calibration.features)]
    values = {n: (math.nan, [math.nan, math.nan]) for n in others}
    if ok:
        point, lo, hi = calibration.predict(feats.loc[ok])
        values.update({n: (float(p), [float(a), float(b)]) for n, p, a, b in zip(ok, point, lo, hi)})
    values[REFERENCE_REWARD] = (0.0, [0.0, 0.0])
    return ok, values


def _information_notes(calibration: Calibration, rewards: list[dict], probe_result: dict, block: dict) -> list[str]:
    """What the calibrated gains cannot tell, as notes; each reward entry gets ``caveats`` (a list, in place):
    :data:`TIED` for rewards whose forecasts are equal (equal forecasts map to equal calibrated gains: the
    calibration cannot tell them apart), :data:`INTERCEPT_ONLY` for a linear calibration's reward forecast at 0 (its
    calibrated gain is the intercept alone), :data:`SHIFT_ONLY` for every reward when the slope interval includes 0
    (:func:`slope_interval`). grpo itself (gain 0 by definition) and rewards without a calibrated gain get none."""
    for r in rewards:
        r["caveats"] = []
    given = [r for r in rewards if r["name"] != REFERENCE_REWARD and math.isfinite(r["calibrated_gain"])]
    ties: dict[float, list[dict]] = {}
    for r in given:
        ties.setdefault(round(r["forecast"], 9), []).append(r)
    notes = [_tie_note(calibration.forecaster, tied, probe_result, block) for tied in ties.values() if len(tied) > 1]
    slope = block["slope"]
    if slope is None:
        return notes
    if slope["includes_zero"]:
        for r in given:
            r["caveats"].append(SHIFT_ONLY)
        lo, hi = slope["interval"]
        groups = PLURAL.get(calibration.cv, "groups")
        return notes + [f"the calibration's slope on {calibration.forecaster} is {slope['value']:+.3f}, and its "
                        f"{slope['level']:.0%} {slope['method']} interval over its {slope['groups']} {groups}, "
                        f"[{lo:+.3f}, {hi:+.3f}], includes 0: the studies do not show that the calibrated gain depends "
                        f"on the forecast, so every calibrated gain here is its intercept ({slope['intercept']:+.3f}) "
                        "plus a change not distinguished from none: a shift, not a ranking of the rewards"]
    zero = [r for r in given if r["forecast"] == 0.0]
    for r in zero:
        r["caveats"].append(INTERCEPT_ONLY)
    if zero:
        one = len(zero) == 1
        why = ": the same tokens per update as grpo" if calibration.forecaster == "forecast_cost_only" else ""
        notes.append(f"{[r['name'] for r in zero]} {'has' if one else 'have'} {calibration.forecaster} 0 (no "
                     f"difference from grpo{why}), so {'its' if one else 'their'} calibrated gain "
                     f"{slope['intercept']:+.3f} is the calibration's intercept alone: the mean offset from grpo of "
                     f"the runs it was fitted on, the same for any reward forecast at 0, not a measurement of "
                     f"{'it' if one else 'them'}")
    return notes


def _tie_note(col: str, tied: list[dict], probe_result: dict, block: dict) -> str:
    """The note on rewards ``tied`` whose ``col`` forecasts are equal (so are their calibrated gains); each gets
    :data:`TIED`. For cost only: the tokens per update they share; when the verdicts quote another forecaster, its
    gains of these rewards (from the forecast section), which may differ."""
    for r in tied:
        r["caveats"].append(TIED)
    names = [r["name"] for r in tied]
    tokens = {e.get("name"): e.get("tokens_per_update") for e in probe_result.get("rewards") or []}
    for r in (probe_result.get("forecast") or {}).get("rows") or []:  # what the forecast read (rescaled to the
        if isinstance(r, dict) and r.get("arm") in tokens:  # curve's update size where it differs from the probe's)
            tokens[r["arm"]] = r.get("tokens_per_update")
    shared = {tokens.get(n) for n in names}
    why = ""
    if col == "forecast_cost_only":
        one = next(iter(shared)) if len(shared) == 1 else None
        why = "; cost only reads only the tokens per update" + (
            f": {one:,.0f} for each" if isinstance(one, (int, float)) and not isinstance(one, bool)
            and math.isfinite(one) else "")
    verdict = block["verdict_forecaster"]
    other = ""
    if verdict is not None and verdict != block["forecaster_name"]:
        key = SECTION_COLUMNS.get(f"forecast_{verdict}")
        rows = {r.get("arm") or r.get("reward"): r for r in (probe_result.get("forecast") or {}).get("rows") or []
                if isinstance(r, dict)}
        values = {n: json_float(rows[n].get(key)) for n in names if n in rows}
        gains = [f"{n} {v:+.1f}" for n, v in values.items() if math.isfinite(v)]
        other = f"; the {verdict} gains the verdicts quote: {', '.join(gains)}" if gains else ""
    return (f"{names} have the same {col} ({tied[0]['forecast']:+.3f}{why}), so the calibration gives them the same "
            f"calibrated gain ({tied[0]['calibrated_gain']:+.3f}) and interval: it cannot tell them apart, and the "
            f"difference between them is not measured by it{other}")


def _without_gain(w: DomainWarning) -> DomainWarning:
    """Reward-domain warning ``w`` (:func:`calib.domain.check_rewards`) for a reward without a calibrated gain: its
    tail on the computed gain and its interval replaced by what holds for it (no gain; still outside_domain)."""
    if not w.outside:
        return w
    head = str(w).split("; the calibration's intervals were validated", 1)[0]
    return DomainWarning(f"{head}; it gets no calibrated gain here (the note on it says why), and is marked "
                         "outside_domain", field=w.field, outside=True, reward=w.reward)


def _reference_note(col: str, no_signal: dict[str, str]) -> list[str]:
    """The note when grpo's own reward gives no gradient on the probe batch: it stays the reference (gain 0 by
    definition), and the other rewards' calibrated gains rest on ``col`` alone (the probe cannot compare)."""
    if REFERENCE_REWARD not in no_signal:
        return []
    alone = " (cost only, which does not read the probe)" if col == "forecast_cost_only" else ""
    return [f"the reference reward {REFERENCE_REWARD!r} (grpo) gives no gradient on the probe batch "
            f"({no_signal[REFERENCE_REWARD]}): it stays the reference, with gain 0 by definition, but the probe cannot "
            f"compare the other rewards with it, so their calibrated gains rest on {col} alone{alone}"]


def _no_gain_notes(col: str, silent: list[str], no_signal: dict[str, str], probe_result: dict) -> list[str]:
    """The notes on the rewards ``silent`` without a calibrated gain: one per reward without signal (its reason),
    one for those the forecaster ``col`` cannot say anything about: the reason ``probe.json``'s forecast section
    gives (:func:`_no_forecast_reasons`), else that the value is missing there (no cause is guessed)."""
    why = _no_forecast_reasons(probe_result)
    notes = [f"reward {n!r} gives no gradient on the probe batch ({no_signal[n]}): it cannot train, so no calibrated "
             "gain is given for it" for n in silent if n in no_signal]
    cannot = [n for n in silent if n not in no_signal]
    if cannot:
        said = "; ".join(f"{n}: {why[n]}" for n in cannot if n in why)
        missing = [n for n in cannot if n not in why]
        reason = "; ".join(([f"probe.json says {said}"] if said else [])
                           + ([f"probe.json holds no {col} value (null) for {missing}"] if missing else []))
        notes.append(f"{col} cannot say anything about {cannot} (no forecast: {reason}); no calibrated gain is given "
                     "for them")
    return notes


def _no_forecast_reasons(probe_result: dict) -> dict[str, str]:
    """Reward -> the verdict of its row in ``probe.json``'s forecast section when that row is marked as having no
    forecast (method ``outside_probe``, e.g. a learning-rate change); empty without a section."""
    section = probe_result.get("forecast")
    rows = (section.get("rows") or []) if isinstance(section, dict) else []
    out = {str(r.get("arm") or r.get("reward")): str(r.get("verdict") or r.get("method")) for r in rows
           if isinstance(r, dict) and r.get("method") == "outside_probe"}
    return {**out, **{n: f"no verdict: {why}" for n, why in _no_verdict_rewards(probe_result).items() if n not in out}}


def _no_verdict_rewards(probe_result: dict) -> dict[str, str]:
    """Reward -> the ``no_verdict_reason`` of its row in ``probe.json``'s forecast section (the reference curve is
    not described by its fit, falls, or has no eval before the budget's updates:
    :func:`gradprobe.forecast.result.no_verdict`), for rows that have one; grpo's own row is left out (its gain is
    0 by definition). A forecast that gives no advice gets no calibrated gain: calibrating it would turn a number
    the forecast itself disowns into one that looks validated."""
    section = probe_result.get("forecast")
    rows = (section.get("rows") or []) if isinstance(section, dict) else []
    return {str(r.get("arm") or r.get("reward")): str(r["no_verdict_reason"]) for r in rows
            if isinstance(r, dict) and isinstance(r.get("no_verdict_reason"), str) and r["no_verdict_reason"]
            and (r.get("arm") or r.get("reward")) != REFERENCE_REWARD}


def _no_signal_rewards(probe_result: dict) -> dict[str, str]:
    """Probed rewards that give no gradient on the probe batch -> why: the entries ``gradprobe probe`` marked
    ``no_signal`` (their ``no_signal_reason``), and the rows of the ``forecast`` section with method ``no_signal``."""
    out = {r["name"]: str(r.get("no_signal_reason") or "every advantage is 0")
           for r in probe_result.get("rewards") or [] if r.get("no_signal")}
    section = probe_result.get("forecast")
    for row in (section.get("rows") or []) if isinstance(section, dict) else []:
        name = row.get("arm") or row.get("reward")
        if row.get("method") == "no_signal" and name and name != REFERENCE_REWARD:
            out.setdefault(name, "every advantage is 0")
    return out


def write_calibrated(folder: str | Path, document: dict, *, out: str | Path | None = None) -> Path:
    """Write ``calibrated.json`` into the probe folder (or to ``out``, ``calib apply --out``), atomically (never
    touching ``probe.json``). NaN -> null, +-inf -> "inf"/"-inf" (gradprobe's encoding, :mod:`calib.files`).
    Returns the path.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        The write failed (an OSError; nothing changed): the message names the file, why, and the fix (next to
        probe.json: move what is in the way, make the folder writable, or copy the probe folder; ``out``: choose
        another --out); errno ELOOP: ``path`` is or lies under a symbolic link in a loop, refused before writing
        (:func:`calib.files.refuse_looping_file`: the loop's chain and the fix).
    """
    path = Path(folder) / CALIBRATED_NAME if out is None else Path(out)
    refuse_looping_file(path, "choose another --out" if out is not None else
                        f"copy the probe folder {str(Path(folder))!r} somewhere else and apply there")
    try:
        return write_json(path, document, indent=1)
    except OutputDirError as e:
        why = e.__cause__.strerror if isinstance(e.__cause__, OSError) and e.__cause__.strerror else str(e)
        fix = (f"calibrated.json is written next to probe.json: remove or rename what is at {str(path)!r}, or make "
               f"{str(Path(folder))!r} writable (or copy the probe folder somewhere writable and apply there)"
               if out is None else "choose another --out (a file in a writable folder)")
        err = OutputDirError(e.errno, f"writing {str(path)!r} failed ({why}); {fix}")
        err.filename = str(path)
        raise err from e


def format_calibrated(document: dict) -> str:
    """A plain-text table of the calibrated gains (what ``calib apply`` and ``gradprobe probe
    --calibration`` print). Accepts :func:`calibrate`'s document or a probe result that
    :func:`calibrate_probe` filled."""
    doc = document.get("calibration") if document.get("format") != CALIBRATED_FORMAT else document
    c = doc["calibration"]
    lvl = c["confidence_level"]
    mismatch = c.get("forecaster_note")  # another forecaster than the verdicts': said at the top, not at the bottom
    in_sample = doc.get("in_sample")  # fitted on this study's runs: a warning at the top, not a note at the bottom
    whose = f" of {c.get('forecaster_name')}'s gain, not {c.get('verdict_forecaster')}'s" if mismatch else ""
    lines = ["", f"calibrated gain vs GRPO at {doc['budget_value']:,.0f} {doc['budget']}{whose} ({c['method']} "
                 f"correction of {c['forecaster']}, {level_percent(lvl)} conformal interval for one run; fitted on "
                 f"{c['training_rows']} runs of {len(c['arms'])} arms, {', '.join(c['models'])})",
             *([f"warning: {in_sample}"] if in_sample else []),
             *([f"note: {mismatch}"] if mismatch else []), *_reward_lines(doc["rewards"])]
    lines += [f"note: {n}" for n in doc["notes"] if n not in (mismatch, in_sample)]
    return "\n".join(lines)


#: :func:`format_calibrated`'s columns: title, alignment and least width (the widths of its fixed-width table, which
#: a name of up to 14 characters keeps)
_COLUMNS = (("reward", "<", 16), ("forecast", ">", 10), ("calibrated", ">", 12), ("interval", ">", 24))


def _reward_lines(rewards: list[dict]) -> list[str]:
    """The header and one line per reward of :func:`format_calibrated`'s table, its marks (caveats, ``outside
    domain``) after the interval: :func:`gradprobe.tables.format_columns`, each column at least its width in
    :data:`_COLUMNS` and two spaces from the next, so a long reward name (a plug-in's, 40 characters) widens its
    column instead of pushing its row out of line with the others."""
    rows = []
    for r in rewards:
        lo, hi = r["calibrated_interval"]
        iv = "n/a" if math.isnan(r["calibrated_gain"]) else f"[{lo:+.3f}, {hi:+.3f}]"
        rows.append([f"{r['name']}  ", f"  {_f(r['forecast'])}", f"  {_f(r['calibrated_gain'])}", f"  {iv}"])
    lines = format_columns([title for title, _, _ in _COLUMNS], rows, "".join(align for _, align, _ in _COLUMNS),
                           sep="", min_widths=[width for _, _, width in _COLUMNS])
    marks = [list(r.get("caveats") or []) + (["outside domain"] if r["outside_domain"] else []) for r in rewards]
    return [lines[0]] + [line + "".join(f"  {m}" for m in ms) for line, ms in zip(lines[1:], marks)]


def calibrate_probe(result: dict, calibration: Calibration, *, source: str = "", task: dict | None = None) -> dict:
    """:func:`calibrate`, with the numbers also put on the in-memory ``result`` (for printing).

    Each reward entry gains ``calibrated_gain``, ``calibrated_interval`` and ``outside_domain``, and
    ``result["calibration"]`` holds the whole document. Only the dictionary is changed: calib never
    rewrites ``probe.json``; :func:`write_calibrated` writes the document to ``calibrated.json``.
    """
    doc = calibrate(calibration, result, source=source, task=task)
    by = {r["name"]: r for r in doc["rewards"]}
    for entry in result["rewards"]:
        r = by[entry["name"]]
        entry.update(calibrated_gain=r["calibrated_gain"], calibrated_interval=r["calibrated_interval"],
                     outside_domain=r["outside_domain"])
    result["calibration"] = doc
    return result


def rewrite_probe_json(path: str | Path, result: dict) -> Path:
    """Deprecated name kept for ``gradprobe probe --calibration``: writes ``calibrated.json`` next to
    ``path`` (a ``probe.json``) from ``result["calibration"]`` (:func:`calibrate_probe`). It no longer
    rewrites probe.json (issue 15); call :func:`write_calibrated` instead."""
    return write_calibrated(Path(path).parent, result["calibration"])


def _f(x: float) -> str:
    return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:+.3f}"


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
        ``outside_domain`` (bool: the probe's model, task or budget, or this reward, is outside the
        calibration's domain; the warnings in ``attrs["document"]["warnings"]`` name which), ``caveat`` (what
        the calibrated gain cannot tell, ``""`` for nothing: ``tied``, ``intercept only``, ``shift only``, comma
        separated; the notes say why: :func:`calibrate`).
        ``outcome`` is 0 with interval [0, 0] by definition.
        ``.attrs["document"]`` is the ``calibrated.json`` content (``notes``, ``warnings``, domain).

    Warns
    -----
    calib.domain.CalibrationDomainWarning
        Once per call when any reward is marked ``outside_domain``: names those rewards, the arms
        the calibration was fitted on and why (``gradprobe probe --calibration`` and ``calib apply``
        print their own marks and do not warn).

    Raises
    ------
    calib.model.CalibrationFileError
        The calibration file is missing or unreadable (named).
    calib.apply.CalibrationApplyError
        No ``outcome`` reward in the probe, no value of the calibration's budget, no forecast for
        a forecaster calibration, or a probe folder without ``probe.json`` (all ValueErrors); the messages name the
        probe's file (``FOLDER/probe.json`` for a folder, and for a ProbeResult read from one: its ``folder``;
        ``probe.json`` for a dict or a ProbeResult without a file: :data:`calib.probe_input.DICT_WHERE`). A dict (or a
        ProbeResult without a file) gets the checks :func:`gradprobe.load_probe` runs on a file's entries too
        (:func:`calib.probe_input.check_probe_records`): a field every entry holds missing or null (e.g.
        ``rewards[1].inner_product`` or ``predicted_gain_at_budget``), an entry's ``lr``/budgets other than
        ``config``'s, a ``tokens_per_update`` its batch's generated tokens contradict (where the dict records them).
        The refusals of a damaged dict name the field, the values and :data:`calib.probe_input.DICT_FIX` (a damaged
        ``forecast`` section: and "delete its 'forecast' field" where the entries are intact), and say the result,
        not a file, was edited: no file to restore, no probe to re-run.
    TypeError
        ``probe_result`` is none of the accepted kinds.
    """
    return _apply(calibration, probe_result, source=source)


def _apply(calibration, probe_result, *, source: str | None):
    """:func:`apply_calibration`; called only by the two front doors (``apply_calibration`` and
    ``calib.apply(...)``), so its warning points at their caller (:func:`_warn_outside`)."""
    if not isinstance(calibration, Calibration):
        source = str(calibration) if source is None else source
        calibration = load_calibration(calibration)
    task, where, study = None, DICT_WHERE, None
    if isinstance(probe_result, (str, Path)):
        raw, folder, task = load_probe(probe_result)
        where, study = str(Path(folder) / PROBE_JSON), probe_study(folder)
    elif isinstance(probe_result, dict):
        raw = probe_result
    elif isinstance(getattr(probe_result, "raw", None), dict):  # gradprobe.ProbeResult (duck-typed: calib reads
        raw = probe_result.raw                                 # gradprobe's outputs, never its classes)
        folder = getattr(probe_result, "folder", None)
        if folder is not None and (Path(folder) / PROBE_JSON).is_file():  # messages name its file, as for a path
            task, study = load_probe(folder)[2], probe_study(folder)
            where = str(Path(folder) / PROBE_JSON)
    else:
        raise TypeError(f"probe_result must be a gradprobe.ProbeResult, a probe.json dict or a probe folder, got "
                        f"{type(probe_result).__name__}")
    if where is DICT_WHERE:  # no file read (a dict): its entries' fields and records, as load_probe checks a file
        check_probe_records(raw, where)
    doc = calibrate(calibration, raw, source=source or "", task=task, where=where, study=study)
    table = pd.DataFrame([{"reward": r["name"], "forecast": r["forecast"], "calibrated_gain": r["calibrated_gain"],
                           "interval_low": float(r["calibrated_interval"][0]),
                           "interval_high": float(r["calibrated_interval"][1]),
                           "outside_domain": bool(r["outside_domain"]), "caveat": ", ".join(r["caveats"])}
                          for r in doc["rewards"]]).set_index("reward")
    table.attrs["document"] = doc
    _warn_outside(doc)
    return table


def _warn_outside(doc: dict) -> None:
    """One :class:`CalibrationDomainWarning` for the rewards of ``doc`` marked ``outside_domain`` (none: no warning).
    ``doc["warnings"]`` are :class:`calib.domain.DomainWarning`; the warning points at the caller of the front door
    (stacklevel 4: here, :func:`_apply`, the front door, its caller)."""
    off = [r["name"] for r in doc["rewards"] if r["outside_domain"]]
    if not off:
        return
    c, ws = doc["calibration"], [w for w in doc["warnings"] if w.outside]
    probe = sorted({str(w.field) for w in ws if w.reward is None})
    never = [w.reward for w in ws if w.reward is not None and w.field == "reward"]
    loss = [w.reward for w in ws if w.reward is not None and w.field == "loss_type"]
    why = ([f"the probe's {' and '.join(probe)} {'is' if len(probe) == 1 else 'are'} outside it (every reward is "
            "marked)"] if probe else []) \
        + ([f"{never} {'was' if len(never) == 1 else 'were'} never trained by its arms"] if never else []) \
        + ([f"{loss} train with a loss type none of its arms used ({c.get('arm_loss_types')})"] if loss else [])
    which = f"reward {off[0]!r} is" if len(off) == 1 else f"rewards {off} are"
    gainless = [r["name"] for r in doc["rewards"] if r["outside_domain"] and math.isnan(r["calibrated_gain"])]
    gain = "The calibrated gain is computed, but its interval was not validated there" if len(gainless) < len(off) \
        else f"No calibrated gain is given for {'it' if len(off) == 1 else 'them'}"
    if gainless and len(gainless) < len(off):
        gain += f" ({gainless} get no calibrated gain: the notes say why)"
    _warnings.warn(CalibrationDomainWarning(
        f"{which} outside the calibration's domain, fitted on the arms {c['arms']}: {'; '.join(why)}. {gain} "
        "(outside_domain in the table; attrs['document']['warnings'] has the details"
        + (", attrs['document']['notes'] why there is no gain)" if gainless else ")")), stacklevel=4)


class _CallableModule(_types.ModuleType):
    """``calib.apply`` is this module AND the front-door function (issue 15; PEP 562 has no module
    ``__call__``): ``calib.apply(calibration, probe_result)`` is :func:`apply_calibration`."""

    def __call__(self, calibration, probe_result, *, source: str | None = None):
        return _apply(calibration, probe_result, source=source)


_sys.modules[__name__].__class__ = _CallableModule
