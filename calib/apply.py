"""Apply a fitted calibration to a probe result: ``calib apply PROBE_DIR``, ``gradprobe probe --calibration``.

calib never rewrites gradprobe's ``probe.json`` (issue 15): the calibrated numbers go to their own
``calibrated.json`` next to it (:func:`write_calibrated`), one entry per probed reward:

- ``forecast``: the calibrated forecaster's number for the reward (gain vs GRPO at the probe's
  token budget, accuracy points; a version-1 calibration: the raw first-order gain
  (T / c_R) g_R - (T / c_outcome) g_outcome, DESIGN.md "The probe");
- ``calibrated_gain``: the calibrated realized gain vs GRPO at that budget (accuracy points; NaN
  where the forecaster cannot say, e.g. a learning-rate change for the probe);
- ``calibrated_interval``: [lower, upper], the conformal interval for one training run at the
  calibration's confidence level (+-inf when the calibration had too few rows for that level);
- ``outside_domain``: True when the probe's model, task or budget lies outside the calibration's
  domain (:func:`calib.domain.check_domain`); the number is still computed, and the warnings say
  which field is outside.

``outcome`` is GRPO itself: its calibrated gain vs itself is 0 with interval [0, 0] by definition.

Where the forecasts come from (format-2 calibrations, which correct a forecaster column of
:mod:`calib.dataset`): ``probe.json``'s ``forecast`` section (written by ``gradprobe probe`` with
:func:`gradprobe.forecast.forecast_section`), or that section computed here from the probe result
with the model's shipped reference curve (:func:`probe_forecasts`).
"""

from __future__ import annotations

import json
import math
import sys as _sys
import types as _types
from pathlib import Path

import pandas as pd

import gradprobe

from .domain import check_domain, probe_identity, resolve_task
from .model import Calibration, atomic_write_text, json_safe

REFERENCE_REWARD = "outcome"
CALIBRATED_NAME = "calibrated.json"
CALIBRATED_FORMAT = "gradprobe-calibrated"


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
        raise CalibrationApplyError(f"a calibration fitted at a matched {calibration.budget!r} budget cannot be "
                                    "applied to a probe (it predicts at a token or device-seconds budget); refit it "
                                    "with `calib fit` (token budgets)")


def load_probe(path: str | Path) -> tuple[dict, Path, dict | None]:
    """Read a probe result for calibration, through gradprobe's reader (:func:`gradprobe.load_probe`,
    the one reader of ``probe.json``).

    Parameters
    ----------
    path : path
        A probe folder (with ``probe.json``) or the ``probe.json`` file.

    Returns
    -------
    (result, folder, task)
        ``result``: the parsed ``probe.json`` (a dict; not modified). ``task``: the resolved task of
        the study plan when the folder is a study's ``probe/`` (a study's probe.json records the
        task's name only; its configuration is in the plan), else None.

    Raises
    ------
    CalibrationApplyError
        The file is missing, not valid JSON or not a probe result (no ``rewards`` list); the message
        names the path.
    """
    try:
        probe = gradprobe.load_probe(path)
    except (FileNotFoundError, ValueError) as e:  # gradprobe's ProbeFileError / bad JSON, as calib's own error
        raise CalibrationApplyError(str(e)) from e
    result, folder = probe.raw, probe.folder
    task = None
    plan = folder.parent / "plan.toml"
    if folder.name == "probe" and plan.is_file() and (folder.parent / "study.json").is_file():
        import tomllib

        t = tomllib.loads(plan.read_text()).get("task") or {}
        if t.get("name"):
            task = resolve_task(t["name"], t.get("config") or {})
    return result, folder, task


def calibrate(calibration: Calibration, probe_result: dict, *, source: str = "", task: dict | None = None) -> dict:
    """The calibrated gains of every probed reward (the content of ``calibrated.json``).

    Parameters
    ----------
    calibration : Calibration
        From :func:`calib.model.load_calibration`.
    probe_result : dict
        ``probe.json`` (not modified).
    source : str
        Where the calibration came from (recorded).
    task : dict, optional
        The probe's resolved task, when ``probe.json`` does not say it in full (:func:`load_probe`).

    Returns
    -------
    dict
        ``format``, ``probe`` (model, task key, budgets), ``calibration`` (source, forecaster,
        method, level, domain...), ``outside_domain``, ``warnings`` (domain), ``notes`` (the
        warnings plus rewards the forecaster cannot say anything about), ``rewards`` (module
        docstring), ``target``.

    Raises
    ------
    CalibrationApplyError
        No ``outcome`` reward, no value of the calibration's budget, or no forecasts in the probe
        result for a format-2 calibration (the message says where they are looked for).
    """
    names = [r["name"] for r in probe_result["rewards"]]
    if REFERENCE_REWARD not in names:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (probed: {sorted(names)})")
    feats = probe_features(probe_result, calibration.budget) if calibration.legacy else \
        probe_forecasts(probe_result, calibration.forecaster)
    col = calibration.features[0]
    others = [n for n in names if n != REFERENCE_REWARD]
    ok = [n for n in others if all(math.isfinite(feats.loc[n, f]) for f in calibration.features)]
    values = {n: (math.nan, [math.nan, math.nan]) for n in others}
    if ok:
        point, lo, hi = calibration.predict(feats.loc[ok])
        values.update({n: (float(p), [float(a), float(b)]) for n, p, a, b in zip(ok, point, lo, hi)})
    values[REFERENCE_REWARD] = (0.0, [0.0, 0.0])
    me = probe_identity(probe_result, task=task)
    warnings = check_domain(calibration, probe_result, task=me["task"])
    outside = any(w.outside for w in warnings)
    notes = list(warnings)
    silent = [n for n in others if n not in ok]
    if silent:
        notes.append(f"{col} cannot say anything about {silent} (no forecast: e.g. a learning-rate change is outside "
                     "what the probe can tell); no calibrated gain is given for them")
    rewards = [{"name": n, "forecast": float(feats.loc[n, col]) if n in feats.index else math.nan,
                "calibrated_gain": values[n][0], "calibrated_interval": values[n][1], "outside_domain": outside}
               for n in names]
    dom = calibration.domain
    return {
        "format": CALIBRATED_FORMAT, "format_version": 1,
        "target": f"realized gain vs GRPO ({REFERENCE_REWARD}) at the probe's {calibration.budget} budget, accuracy "
                  "points, one training run",
        "probe": {"model": me["model"]["key"], "task": me["task"]["key"], "budgets": me["budgets"]},
        "budget": calibration.budget, "budget_value": me["budgets"].get(calibration.budget, math.nan),
        "calibration": {"source": source, "format_version": calibration.format_version,
                        "forecaster": calibration.forecaster, "method": calibration.method, "cv": calibration.cv,
                        "interval": calibration.interval, "confidence_level": calibration.confidence_level,
                        "training_rows": int(len(calibration.rows)), "studies": [s["key"] for s in dom.studies],
                        "models": [m["key"] for m in dom.models], "tasks": [t["key"] for t in dom.tasks],
                        "arms": dom.arms, "budget_range": dom.budget_range, "fitted_with": calibration.versions},
        "outside_domain": outside, "warnings": warnings, "notes": notes, "rewards": rewards,
    }


SECTION_COLUMNS = {"forecast_probe": "gain_probe", "forecast_cost_only": "gain_cost_only",
                   "forecast_signal_proxy": "gain_signal_proxy", "forecast_first_order": "first_order_gain"}
"""Forecaster column -> its name in the rows of ``probe.json``'s ``forecast`` section (gradprobe.forecast)."""


def probe_forecasts(result: dict, column: str) -> pd.DataFrame:
    """The forecaster ``column`` of every reward of a probe result, one row per reward (index: name).

    Looked for, in order: the reward entries themselves (a key ``column``); the rows of ``probe.json``'s
    ``forecast`` section (:func:`gradprobe.forecast.forecast_section`, one row per reward, the column
    named as in :data:`SECTION_COLUMNS`); else the section is computed here with the probe model's
    shipped reference curve, when gradprobe has one.

    Raises
    ------
    CalibrationApplyError
        No forecast can be had (the message says why: e.g. no reference curve for the model).
    """
    entries = {r["name"]: r for r in result["rewards"]}
    if all(column in e for e in entries.values()):
        vals = {n: e[column] for n, e in entries.items()}
    else:
        section = result.get("forecast")
        if not (isinstance(section, dict) and section.get("available")):
            section = _forecast_section(result, column)
        key = SECTION_COLUMNS[column]
        table = {r.get("arm") or r.get("reward"): r for r in section.get("rows") or []}
        vals = {n: (table.get(n) or {}).get(key) for n in entries}
    out = pd.DataFrame({column: {n: _num(v) for n, v in vals.items()}})
    out.loc[REFERENCE_REWARD, column] = 0.0  # grpo vs itself, whatever the table says
    return out


def _forecast_section(result: dict, column: str) -> dict:
    why = (result.get("forecast") or {}).get("note") if isinstance(result.get("forecast"), dict) else None
    try:
        from gradprobe.forecast import forecast_section
    except ImportError:
        forecast_section = None
    if forecast_section is not None and why is None:
        try:
            section = forecast_section(result)
        except (ValueError, KeyError) as e:
            why = str(e)
        else:
            if section.get("available"):
                return section
            why = section.get("note")
    raise CalibrationApplyError(
        f"this calibration corrects {column!r}, a forecast the probe result does not have"
        + (f": {why}" if why else " and this gradprobe cannot make (no gradprobe.forecast)")
        + "; or apply a version-1 calibration (the raw first-order gain)")


def probe_features(result: dict, budget: str) -> pd.DataFrame:
    """Version-1 features of every reward (index: name): ``predicted_gain`` = the raw first-order gain
    vs GRPO at the probe's budget, ``budget_value``.

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
                                    "(it predicts at a token or device-seconds budget); refit it with `calib fit`")
    ref = first_order_gain(entries[REFERENCE_REWARD], budget, value)
    rows = {n: {"predicted_gain": first_order_gain(e, budget, value) - ref, "budget_value": value}
            for n, e in entries.items()}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["predicted_gain", "budget_value"])


def first_order_gain(entry: dict, budget: str, value: float, *, lr_scale: float = 1.0) -> float:
    """The probe's raw first-order gain vs the initial policy at a budget (accuracy points).

    tokens: (value / c_R) * g; time: (value / seconds_per_update) * g; updates: value * g, with
    g = lr_scale * ``predicted_gain_per_update`` (DESIGN.md, "The probe"; no saturation).

    Raises
    ------
    CalibrationApplyError
        Unknown budget, or the entry lacks the per-update cost the budget needs.
    """
    g = lr_scale * float(entry["predicted_gain_per_update"])
    if budget == "tokens":
        return value / float(entry["tokens_per_update"]) * g
    if budget == "time":
        secs = _num(entry.get("seconds_per_update"))
        if not secs > 0:
            raise CalibrationApplyError(f"probe entry {entry.get('name')!r} has no positive seconds_per_update; a time "
                                        "budget needs it (re-run the probe with this gradprobe)")
        return value / secs * g
    if budget == "updates":
        return value * g
    raise CalibrationApplyError(f"unknown budget {budget!r}; choose tokens, time or updates")


def write_calibrated(folder: str | Path, document: dict) -> Path:
    """Write ``calibrated.json`` into the probe folder, atomically (never touching ``probe.json``).
    NaN -> null, +-inf -> "inf"/"-inf" (probe.json's encoding). Returns the path."""
    path = Path(folder) / CALIBRATED_NAME
    atomic_write_text(path, json.dumps(json_safe(document), indent=1, allow_nan=False))
    return path


def format_calibrated(document: dict) -> str:
    """A plain-text table of the calibrated gains (what ``calib apply`` and ``gradprobe probe
    --calibration`` print). Accepts :func:`calibrate`'s document or a probe result that
    :func:`calibrate_probe` filled."""
    doc = document.get("calibration") if document.get("format") != CALIBRATED_FORMAT else document
    c = doc["calibration"]
    lvl = c["confidence_level"]
    lines = ["", f"calibrated gain vs GRPO at {doc['budget_value']:,.0f} {doc['budget']} ({c['method']} correction of "
                 f"{c['forecaster']}, {lvl:.0%} conformal interval for one run; fitted on {c['training_rows']} runs of "
                 f"{len(c['arms'])} arms, {', '.join(c['models'])})",
             f"{'reward':<16}{'forecast':>10}{'calibrated':>12}{'interval':>24}"]
    for r in doc["rewards"]:
        lo, hi = r["calibrated_interval"]
        iv = "n/a" if math.isnan(r["calibrated_gain"]) else f"[{lo:+.3f}, {hi:+.3f}]"
        mark = "  outside domain" if r["outside_domain"] else ""
        lines.append(f"{r['name']:<16}{_f(r['forecast']):>10}{_f(r['calibrated_gain']):>12}{iv:>24}{mark}")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


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


def _num(v) -> float:
    if v is None:
        return math.nan
    return float(v)  # "inf"/"-inf" strings (probe.json's encoding) parse too


def _f(x: float) -> str:
    return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:+.3f}"


class _CallableModule(_types.ModuleType):
    """``calib.apply`` is this module AND the front-door function (issue 15; PEP 562 has no module
    ``__call__``): ``calib.apply(calibration, probe_result)`` is :func:`calib.api.apply_calibration`."""

    def __call__(self, calibration, probe_result, **kwargs):
        from .api import apply_calibration

        return apply_calibration(calibration, probe_result, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
