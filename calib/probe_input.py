"""What calib reads from a probe result: the probe itself, its forecasts and its first-order gains.

calib reads gradprobe's outputs, never its classes: :func:`load_probe` goes through gradprobe's one
reader of ``probe.json`` (:func:`gradprobe.load_probe`) and returns the raw dict. The forecasts a
format-2 calibration corrects come from the reward entries, ``probe.json``'s ``forecast`` section
(:func:`gradprobe.forecast.forecast_section`), or that section computed here with the probe model's
shipped reference curve (:func:`probe_forecasts`); a version-1 calibration corrects the raw
first-order gain (:func:`probe_features`, :func:`first_order_gain`).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pandas as pd

import gradprobe
from gradprobe.forecast import forecast_section
from gradprobe.layout import GUIDED_PROBES, PLAN_COPY, STUDY_JSON
from gradprobe.outputs import beyond_float, is_json_number, json_short, per_update_problem

from .domain import resolve_task, study_identity
from .file_check import json_spelled
from .files import json_float

__all__ = ["REFERENCE_REWARD", "CalibrationApplyError", "load_probe", "probe_forecasts", "probe_features",
           "first_order_gain", "SECTION_COLUMNS", "check_probe_budgets", "GAIN_RANGE", "probe_study_dir", "probe_study"]

REFERENCE_REWARD = "outcome"


class CalibrationApplyError(ValueError):
    """The probe result cannot be calibrated with this calibration (the message says why and the fix)."""


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
    plan = folder.parent / PLAN_COPY
    if folder.name == "probe" and plan.is_file() and (folder.parent / STUDY_JSON).is_file():
        t = tomllib.loads(plan.read_text()).get("task") or {}
        if t.get("name"):
            task = resolve_task(t["name"], t.get("config") or {})
    return result, folder, task


def probe_study_dir(folder: str | Path) -> Path | None:
    """The study folder a probe folder belongs to, else None: ``STUDY`` for ``STUDY/probe`` and for a guided arm's
    ``STUDY/probe/guided/<arm>`` (:data:`gradprobe.layout.GUIDED_PROBES`), where ``STUDY`` holds ``study.json`` (the
    file that marks a study folder, :func:`gradprobe.layout.output_kind`); None for a ``gradprobe probe --out``
    folder."""
    folder = Path(folder).resolve()
    if folder.name == "probe":
        study = folder.parent
    elif folder.parent.name == GUIDED_PROBES and folder.parent.parent.name == "probe":
        study = folder.parent.parent.parent
    else:
        return None
    return study if (study / STUDY_JSON).is_file() else None


def probe_study(folder: str | Path) -> dict | None:
    """The identity of the study a probe folder belongs to (:func:`probe_study_dir`), as calibration files record
    their studies (:func:`calib.domain.study_identity`: ``name``, ``plan_sha256``, ``key`` = ``name@sha[:12]``, the
    sha from ``study.json``'s ``plan_sha256``); None for a probe outside a study, or when ``study.json`` is unreadable
    or has no ``plan_sha256`` text (then nothing is claimed about the study)."""
    study = probe_study_dir(folder)
    if study is None:
        return None
    try:
        sha = json.loads((study / STUDY_JSON).read_text(encoding="utf-8")).get("plan_sha256")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return study_identity(study, sha) if isinstance(sha, str) and sha else None


SECTION_COLUMNS = {"forecast_probe": "gain_probe", "forecast_cost_only": "gain_cost_only",
                   "forecast_signal_proxy": "gain_signal_proxy", "forecast_first_order": "first_order_gain"}
"""Forecaster column -> its name in the rows of ``probe.json``'s ``forecast`` section (gradprobe.forecast)."""


GAIN_RANGE = (-100.0, 100.0)
"""The possible range of a gain vs GRPO in accuracy points: a forecast outside it is damage, except the raw first
order (``first_order_gain``), which does not saturate and may overshoot it (it must still be finite)."""
_RERUN = "re-run `gradprobe probe` (calib never edits probe.json)"


def check_probe_budgets(result: dict, where: str = "probe.json") -> None:
    """Refuse a probe result whose ``config.budget_tokens`` (always written) or ``config.budget_seconds`` (when
    not null) is not a finite number > 0; ``where`` names the file in the message.

    Raises
    ------
    CalibrationApplyError
        ``WHERE field config.KEY is VALUE, not ...; re-run gradprobe probe`` (VALUE as the file spells it:
        ``true``, ``null``, ``'1000'``; :func:`calib.file_check.json_spelled`).
    """
    cfg = result.get("config") if isinstance(result.get("config"), dict) else {}
    for key, unit in (("budget_tokens", "tokens"), ("budget_seconds", "device-seconds")):
        v = cfg.get(key)
        if v is None and key == "budget_seconds":
            continue
        if not (is_json_number(v, finite=True) and v > 0):  # gradprobe's one rule (an integer past a float: refused)
            raise CalibrationApplyError(f"{where} field config.{key} is {json_spelled(v)}, not a budget (a finite "
                                        f"number of {unit} > 0: gains are forecast at it); {_RERUN}")


def _gain(v, field: str, column: str, where: str) -> float:
    """A forecast value of ``probe.json`` (``field`` its place) as a float: null (or NaN) -> NaN, "no forecast".

    Raises
    ------
    CalibrationApplyError
        Not a number of gradprobe's JSON encoding (:func:`gradprobe.outputs.is_json_number`, or null, ``"inf"``,
        ``"-inf"``: :func:`gradprobe.outputs.json_float`), infinite (an integer too large for a float included: the
        message shows its digits shortened), or (all but the raw first order) outside :data:`GAIN_RANGE`; the message
        names ``where``, ``field`` and the fix.
    """
    try:
        x, bad = json_float(v), False
    except ValueError:  # true/false (never 1 or 0), other text, a list or an object
        x, bad = math.nan, "is not a number" + ("" if isinstance(v, bool) else " (a number, or null for no forecast)")
    if not bad and math.isinf(x):  # an integer read as inf is too large for a float, not infinite
        bad = ("is not a finite number" if beyond_float(v) else "is infinite") + " (null means no forecast)"
    low, high = GAIN_RANGE
    if not bad and column != "forecast_first_order" and not (math.isnan(x) or low <= x <= high):
        bad = f"is outside [{low:g}, {high:g}] (a gain vs GRPO in accuracy points)"
    if bad:
        raise CalibrationApplyError(f"{where} field {field} is {json_spelled(v)}: it {bad}; {_RERUN}")
    return x


def probe_forecasts(result: dict, column: str, *, where: str = "probe.json") -> pd.DataFrame:
    """The forecaster ``column`` of every reward of a probe result, one row per reward (index: name).

    Looked for, in order: the reward entries themselves (a key ``column``); the rows of ``probe.json``'s
    ``forecast`` section (:func:`gradprobe.forecast.forecast_section`, one row per reward, the column
    named as in :data:`SECTION_COLUMNS`); else the section is computed here with the probe model's
    shipped reference curve, when gradprobe has one.

    A value of ``probe.json`` that is null (or NaN) is "no forecast" (NaN); ``where`` names the file in errors.

    Raises
    ------
    CalibrationApplyError
        No forecast can be had (the message says why: e.g. no reference curve for the model), or a value of
        ``probe.json`` is not a number, is infinite, or lies outside :data:`GAIN_RANGE` (but the raw first
        order): the message names ``where``, the field and the fix (re-run the probe).
    """
    entries = {r["name"]: r for r in result["rewards"]}
    if all(column in e for e in entries.values()):
        vals = {n: _gain(e[column], f"rewards[{i}].{column}", column, where)
                for i, (n, e) in enumerate(entries.items())}
    else:
        section = result.get("forecast")
        if not (isinstance(section, dict) and section.get("available")):
            section = _forecast_section(result, column)
            where = f"the forecast computed from {where}"
        key = SECTION_COLUMNS[column]
        rows = list(enumerate(section.get("rows") or []))
        table = {r.get("arm") or r.get("reward"): (i, r) for i, r in rows if isinstance(r, dict)}
        vals = {n: _gain(table[n][1].get(key), f"forecast.rows[{table[n][0]}].{key}", column, where)
                if n in table else math.nan for n in entries}
    out = pd.DataFrame({column: vals})
    out.loc[REFERENCE_REWARD, column] = 0.0  # grpo vs itself, whatever the table says
    return out


def _forecast_section(result: dict, column: str) -> dict:
    why = (result.get("forecast") or {}).get("note") if isinstance(result.get("forecast"), dict) else None
    if why is None:
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
        + (f": {why}" if why else " and this gradprobe cannot make")
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
        Unknown budget, or the entry lacks the per-update cost the budget needs (a ``seconds_per_update`` that is
        null, not a number (true/false included: :func:`gradprobe.outputs.json_float`) or not > 0; a
        ``tokens_per_update`` that is no finite number > 0), or its ``predicted_gain_per_update`` is no number or
        infinite (null is NaN: no forecast).
    """
    name = entry.get("name")
    v = entry.get("predicted_gain_per_update")
    try:
        g = lr_scale * json_float(v)  # null: no gain measured -> NaN, no forecast
    except ValueError:  # true/false (never 1 or 0), other text, a list
        g = math.nan
        bad = "is not a number (a number, or null for none)"
    else:
        bad = None if not math.isinf(g) else "is too large for a float" if beyond_float(v) else "is infinite"
    if bad:
        raise CalibrationApplyError(f"probe entry {name!r} field predicted_gain_per_update is {json_short(v)}: it "
                                    f"{bad}; {_RERUN}")
    if budget == "tokens":
        c = entry.get("tokens_per_update")
        problem = per_update_problem("tokens_per_update", c) if c is not None else "is null: a token budget needs it"
        if problem:  # gradprobe's one per-update rule (a token budget divides by it)
            raise CalibrationApplyError(f"probe entry {name!r} field tokens_per_update {problem}; {_RERUN}")
        return value / float(c) * g
    if budget == "time":
        try:
            secs = json_float(entry.get("seconds_per_update"))
        except ValueError:  # true/false (never 1 second or 0) or other text: no time per update either
            secs = math.nan
        if not secs > 0:
            raise CalibrationApplyError(f"probe entry {entry.get('name')!r} has no positive seconds_per_update; a time "
                                        "budget needs it (re-run the probe with this gradprobe)")
        return value / secs * g
    if budget == "updates":
        return value * g
    raise CalibrationApplyError(f"unknown budget {budget!r}; choose tokens, time or updates")
