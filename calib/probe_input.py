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
from gradprobe.api.probe_result import check_fields
from gradprobe.forecast import METHODS, ReferenceCurve, default_curve_path, forecast_section, load_reference_curve
from gradprobe.forecast.probe_input import check_entry_inputs, probe_batches_of
from gradprobe.forecast.section import DEFAULT_CURVES
from gradprobe.layout import GUIDED_PROBES, PLAN_COPY, STUDY_JSON, restore_advice
from gradprobe.outputs import beyond_float, is_json_number, json_short, per_update_problem

from .domain import resolve_task, study_identity
from .file_check import json_spelled
from .files import json_float

__all__ = ["REFERENCE_REWARD", "CalibrationApplyError", "load_probe", "probe_forecasts", "probe_features",
           "first_order_gain", "SECTION_COLUMNS", "check_probe_budgets", "GAIN_RANGE", "probe_study_dir", "probe_study",
           "check_probe_entries", "check_probe_records", "check_forecast_section", "check_section_shape",
           "SECTION_TOLERANCE", "DICT_FIX", "DICT_WHERE"]

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
        The file is missing, not valid JSON or not a probe result (no ``rewards`` list), or an entry the forecast
        would refuse (:func:`gradprobe.load_probe` runs its checks: summaries against per-group lists, a multi-batch
        file's pooled entries against its batches); the message names the path, the field and the fix.
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
#: The fix a refusal of a probe result passed as a dict names (no folder to derive one from: :func:`_source`)
DICT_FIX = "pass the probe's result as gradprobe.probe returned it, or its probe folder"


class _NoFile(str):
    """The ``where`` of a probe result passed as a dict: its messages call it ``probe.json``, but no file was read.
    Marked by its type, not its text: a file read from the current folder (``calib apply .`` or ``calib apply
    probe.json``) is named ``probe.json`` too, and is a file (:func:`_source`)."""


#: ``where`` for a probe result passed as a dict (no file read; the default of every check here): :class:`_NoFile`
DICT_WHERE = _NoFile("probe.json")


def _source(where: str) -> Path | None:
    """The probe file a message names (``where``), as gradprobe's checks take it: None for a result passed as a dict
    (:data:`DICT_WHERE`: no file was read), else ``Path(where)`` (``probe.json`` of the current folder included)."""
    return None if isinstance(where, _NoFile) else Path(where)


def _dict_fix(where: str) -> str | None:
    """The fix gradprobe's checks are to name for ``where`` (their ``fix=``): :data:`DICT_FIX` for a result passed
    as a dict (:func:`_source` None), whose refusals then speak of the result, not of a file; None for a file
    (gradprobe derives its fix from the file's folder)."""
    return DICT_FIX if _source(where) is None else None


def _rerun(where: str) -> str:
    """The fix of calib's own refusal of a damaged value of ``where``: :data:`DICT_FIX` for a dict, else
    re-run the probe."""
    return _dict_fix(where) or _RERUN


def check_probe_budgets(result: dict, where: str = DICT_WHERE) -> None:
    """Refuse a probe result whose ``config.budget_tokens`` (always written) or ``config.budget_seconds`` (when
    not null) is not a finite number > 0; ``where`` names the file in the message.

    Raises
    ------
    CalibrationApplyError
        ``WHERE field config.KEY is VALUE, not ...; re-run gradprobe probe`` (VALUE as the file spells it:
        ``true``, ``null``, ``'1000'``; :func:`calib.file_check.json_spelled`); for a dict (``where``
        :data:`DICT_WHERE`, the default) the fix is :data:`DICT_FIX`.
    """
    cfg = result.get("config") if isinstance(result.get("config"), dict) else {}
    for key, unit in (("budget_tokens", "tokens"), ("budget_seconds", "device-seconds")):
        v = cfg.get(key)
        if v is None and key == "budget_seconds":
            continue
        if not (is_json_number(v, finite=True) and v > 0):  # gradprobe's one rule (an integer past a float: refused)
            raise CalibrationApplyError(f"{where} field config.{key} is {json_spelled(v)}, not a budget (a finite "
                                        f"number of {unit} > 0: gains are forecast at it); {_rerun(where)}")


def _gain(v, field: str, column: str, where: str) -> float:
    """A forecast value of ``probe.json`` (``field`` its place) as a float: null (or NaN) -> NaN, "no forecast".

    Raises
    ------
    CalibrationApplyError
        Not a number of gradprobe's JSON encoding (:func:`gradprobe.outputs.is_json_number`, or null, ``"inf"``,
        ``"-inf"``: :func:`gradprobe.outputs.json_float`), infinite (an integer too large for a float included: the
        message shows its digits shortened), or (all but the raw first order) outside :data:`GAIN_RANGE`; the message
        names ``where``, ``field`` and the fix (re-run the probe; for a dict, :data:`DICT_FIX`).
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
        raise CalibrationApplyError(f"{where} field {field} is {json_spelled(v)}: it {bad}; {_rerun(where)}")
    return x


def probe_forecasts(result: dict, column: str, *, where: str = DICT_WHERE) -> pd.DataFrame:
    """The forecaster ``column`` of every reward of a probe result, one row per reward (index: name).

    Looked for, in order: the reward entries themselves (a key ``column``); the rows of ``probe.json``'s
    ``forecast`` section (:func:`gradprobe.forecast.forecast_section`, one row per reward, the column
    named as in :data:`SECTION_COLUMNS`); else the section is computed here with the probe model's
    shipped reference curve, when gradprobe has one.

    A value of ``probe.json`` that is null (or NaN) is "no forecast" (NaN); ``where`` names the file in errors.
    A stored section is checked against the forecast of the probe's batches (:func:`check_forecast_section`); the
    notes of one that cannot be checked (a user's reference curve not readable here) are in ``.attrs["notes"]``
    (a list of text; empty otherwise), which :func:`calib.apply.calibrate` puts in the notes it writes.

    Raises
    ------
    CalibrationApplyError
        No forecast can be had (the message says why: e.g. no reference curve for the model), or a value of
        ``probe.json`` is not a number, is infinite, or lies outside :data:`GAIN_RANGE` (but the raw first
        order): the message names ``where``, the field and the fix (re-run the probe); or a stored section the
        batches contradict, or one that is no forecast section (:func:`check_forecast_section`).
    """
    check_section_shape(result, where)
    entries = {r["name"]: r for r in result["rewards"]}
    notes: list[str] = []
    if all(column in e for e in entries.values()):
        vals = {n: _gain(e[column], f"rewards[{i}].{column}", column, where)
                for i, (n, e) in enumerate(entries.items())}
    else:
        section, stored = result.get("forecast"), where
        if not (isinstance(section, dict) and section.get("available")):
            section, stored = _forecast_section(result, column, where), None
            where = f"the forecast computed from {where}"
        key = SECTION_COLUMNS[column]
        rows = list(enumerate(section.get("rows") or []))
        table = {r.get("arm") or r.get("reward"): (i, r) for i, r in rows if isinstance(r, dict)}
        vals = {n: _gain(table[n][1].get(key), f"forecast.rows[{table[n][0]}].{key}", column, where)
                if n in table else math.nan for n in entries}
        if stored is not None:  # the stored section's numbers against the forecast of the batches
            notes = check_forecast_section(result, stored)
    out = pd.DataFrame({column: vals})
    out.loc[REFERENCE_REWARD, column] = 0.0  # grpo vs itself, whatever the table says
    out.attrs["notes"] = notes
    return out


def check_probe_entries(result: dict, where: str = DICT_WHERE) -> None:
    """Refuse a probe result the forecast would refuse (:func:`gradprobe.forecast.probe_input.probe_batches_of`:
    each entry's summaries against its per-group lists, a multi-batch result's pooled entries against its batches),
    so calib never calibrates an edited entry; ``where`` names the file.

    Raises
    ------
    CalibrationApplyError
        gradprobe's one-line message: the file, the field, both values and the fix (for a dict, :data:`DICT_FIX`,
        which gradprobe's checks name, ``fix=``: :func:`_dict_fix`; they then say the result, not the file, was
        edited or damaged).
    """
    try:
        probe_batches_of(result, source=_source(where), fix=_dict_fix(where))
    except ValueError as e:
        raise CalibrationApplyError(str(e)) from None


def check_probe_records(result: dict, where: str = DICT_WHERE) -> None:
    """Refuse a probe result whose reward entries lack a field the probe writes in every entry, or contradict the
    settings and token counts it records, as :func:`gradprobe.load_probe` refuses such a file. First the fields
    (:func:`gradprobe.api.probe_result.check_fields`: ``inner_product``, ``predicted_gain_per_update``,
    ``tokens_per_update``, ``predicted_gain_at_budget`` and ``per_group`` in each top-level entry, the forecast's
    in each ``batches[k]`` entry; missing or null), then the records
    (:func:`gradprobe.forecast.probe_input.check_entry_inputs`): an entry's ``lr``, ``budget_tokens`` or
    ``budget_seconds`` other than ``config``'s, a ``config`` setting the probe does not accept (``lr: "fast"``), an
    entry's ``tokens_per_update`` other than max(1, round((G + C) x s)) of its batch's generated tokens G
    (``batch.generated_tokens``, or ``batches[k].batch``'s), its own charged tokens C and the update scale s
    (:func:`gradprobe.probe.result.per_update_costs`). Of the records only what is recorded is compared: a dict
    without ``config`` or batch records passes them. The result the probe returns in memory
    (``gradprobe.probe(...).raw``, one batch or several), which it writes as its probe.json, passes both. For the
    dict passed to :func:`calib.apply.apply_calibration`, which no reader of the file checked; ``where`` names the
    file (:data:`DICT_WHERE` for a dict: :func:`_source`; every refusal's fix is then :data:`DICT_FIX`).

    Raises
    ------
    CalibrationApplyError
        gradprobe's one-line message: the file, the field (e.g. ``rewards[1].inner_product``), that it is missing or
        null, what reads it and the fix; or the file, the field (e.g. ``rewards[1].tokens_per_update``), the reward,
        the recorded value and the one the records give, the rule and the fix (for a dict, :data:`DICT_FIX`, which
        gradprobe's checks name, ``fix=``: :func:`_dict_fix`).
    """
    try:
        check_fields(result, where, fix=_dict_fix(where))
        check_entry_inputs(result, source=_source(where), fix=_dict_fix(where))
    except ValueError as e:
        raise CalibrationApplyError(str(e)) from None


#: How far (accuracy points) a stored forecast number may lie from the forecast of the probe's batches
#: (:func:`check_forecast_section`): calib prints gains at 0.001 points; the forecast is deterministic (seeded), so
#: only a re-save's rounding separates an intact section from its recompute (at 4 decimal places, at most 5e-5 points
#: for the gains read off the curve in the shipped and tester's probes; the raw first-order gain gets more).
SECTION_TOLERANCE = 1e-3
#: The numbers of a forecast row :func:`check_forecast_section` compares: every forecaster's gain calib may correct
#: (:data:`SECTION_COLUMNS`) and the verdict's ``forecast_gain``.
_SECTION_NUMBERS = ("forecast_gain", *SECTION_COLUMNS.values())


_MISSING = object()  # a key a message says is missing


def _section_fix(where: str) -> str:
    """The fix for a forecast section that is damaged or differs from a recompute of the probe's entries: restore the
    file or write it again (:func:`gradprobe.layout.restore_advice` of its folder; for a dict, no file: pass the
    probe's result as it returned it, :data:`DICT_FIX`); deleting the section helps only when the entries are intact
    (calib then computes the forecast from them)."""
    source = _source(where)
    again = restore_advice(source.parent) if source is not None else DICT_FIX
    return (f"{again}; only when the entries are intact, delete its 'forecast' field (calib then computes the "
            "forecast from the batches)")


def check_section_shape(result: dict, where: str = DICT_WHERE) -> None:
    """Refuse a ``forecast`` field of a probe result that is no forecast section as
    :func:`gradprobe.forecast.forecast_section` writes it, so that no reader of it (calib's forecasts, notes and
    caveats) meets a shape it cannot read; ``where`` names the file. Absent or null: no section (calib computes the
    forecast from the batches).

    Raises
    ------
    CalibrationApplyError
        One line naming ``where``, the field and the fix (:func:`_section_fix`): ``forecast`` not an object;
        ``available`` not true or false; for an available section, a ``method`` none of
        :data:`gradprobe.forecast.METHODS`, a ``curve_is_default`` not true or false (the text ``"true"`` included:
        whether the section can be recomputed with the shipped curve depends on it; a section without these two keys
        cannot be recomputed, which :func:`check_forecast_section` notes), ``reference_reward`` neither text nor null,
        or ``rows`` missing; ``rows`` (where present) not a list, a row not an object, or a row whose
        ``arm`` and ``reward`` are not text (one at least; e.g. a list, which names no reward).
    """
    section = result.get("forecast")
    if section is None:
        return
    def refuse(field: str, value, want: str):
        shown = "missing" if value is _MISSING else json_spelled(value)
        raise CalibrationApplyError(f"{where} field {field} is {shown}, not {want}; {_section_fix(where)}")
    if not isinstance(section, dict):
        refuse("forecast", section, "an object (the forecast section gradprobe probe writes)")
    if not isinstance(section.get("available"), bool):
        refuse("forecast.available", section.get("available", _MISSING), "true or false")
    if section["available"]:  # method and curve_is_default where present (missing: a note, check_forecast_section)
        if "method" in section and not (isinstance(section["method"], str) and section["method"] in METHODS):
            refuse("forecast.method", section["method"],
                   f"a forecaster gradprobe probe writes ({', '.join(map(repr, METHODS))})")
        if "curve_is_default" in section and not isinstance(section["curve_is_default"], bool):
            refuse("forecast.curve_is_default", section["curve_is_default"],
                   "true or false (whether the forecast read the shipped reference curve)")
        if not isinstance(section.get("reference_reward"), (str, type(None))):
            refuse("forecast.reference_reward", section["reference_reward"], "a reward's name (text)")
    rows = section.get("rows", _MISSING)
    if not isinstance(rows, list) and (section["available"] or rows is not _MISSING):
        refuse("forecast.rows", rows, "a list (one forecast row per arm)")
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        if not isinstance(row, dict):
            refuse(f"forecast.rows[{i}]", row, "an object (a forecast row)")
        for key in ("arm", "reward"):
            if not isinstance(row.get(key), (str, type(None))):
                refuse(f"forecast.rows[{i}].{key}", row[key], "a reward's name (text)")
        if not (row.get("arm") or row.get("reward")):
            refuse(f"forecast.rows[{i}].arm", row.get("arm", _MISSING), "the name of the arm the row forecasts")


def check_forecast_section(result: dict, where: str = DICT_WHERE) -> list[str]:
    """Refuse a stored ``forecast`` section that the probe's own batches contradict: calib corrects the section's
    gains (:func:`probe_forecasts`), which ``gradprobe probe`` computed from the batches with
    :func:`gradprobe.forecast.forecast_section`, so an edited gain would be calibrated as if it were the probe's.

    The section's shape is checked first (:func:`check_section_shape`). It is then recomputed the way the probe wrote
    it (the section's ``method`` and ``reference_reward``, and its curve: the shipped reference curve when
    ``curve_is_default`` is true, else the curve its ``curve_spec`` names, read with its ``curve_options``:
    :func:`_section_curve`; deterministic: seeded draws; about 0.3 s for the tiny tier) and each row's
    :data:`_SECTION_NUMBERS` compared within :data:`SECTION_TOLERANCE`, plus for ``first_order_gain`` (T / c_R) s
    g_R - (T / c_grpo) g_grpo, which multiplies the per-update gains g by the updates in the budget, twice what
    rounding the recorded g can move it by (:func:`_first_order_slack`). An edit below that goes unseen (0.001
    points in a file as the probe writes it). A section without a forecast (``available`` false) is not read; one
    that records no ``method`` or no ``curve_is_default`` (put together by hand) cannot be recomputed: a note. A
    user's curve that cannot be read here (a missing file, a relative path read from another folder, a curve passed
    to the Python API as an object), or that now reads as another curve than the section records (``curve``), makes
    the section uncheckable: calib does not refuse it, but says so in a note (returned). A stored null (no forecast:
    calib says so in a note) and a value that is no number (:func:`_gain` refuses it by name) are not compared; a
    number where the recompute has none (NaN) is a difference.

    Returns
    -------
    list of str
        Notes on a section that could not be checked (why, and what then holds); empty when it was checked (or there
        is none to check).

    Raises
    ------
    CalibrationApplyError
        One line: ``where``, the field (``forecast.rows[i].KEY``), the arm, the stored value, the recomputed one and
        the fix (the section differs from a recompute of the entries, so the section or the entries were edited:
        restore the file or write it again; deleting the ``forecast`` field helps only when the entries are intact,
        :func:`_section_fix`); also a section of no known shape (:func:`check_section_shape`), a row the recompute
        has but the section lacks, a recompute that gives no forecast (e.g. a ``reference_reward`` that is no probed
        reward), or a recompute the batches refuse (:func:`check_probe_entries`'s message).
    """
    check_section_shape(result, where)
    section = result.get("forecast")
    if not (isinstance(section, dict) and section["available"]):
        return []
    lacks = [key for key in ("method", "curve_is_default") if key not in section]
    if lacks:  # put together by hand (a test, a user's dict) or cut: how the probe computed it is not recorded
        return [f"{where} field forecast could not be checked against the probe's batches: it records no "
                f"{' and no '.join(lacks)} (gradprobe probe writes both: how the section was computed is not known, "
                f"so it cannot be recomputed); {_AS_HELD}: to check them, {_section_fix(where)}"]
    curve, label, why = _section_curve(section)
    if why is not None:
        return [_unchecked_note(where, section, why)]
    try:
        fresh = forecast_section(result, curve=curve, curve_spec=section.get("curve_spec"), method=section["method"],
                                 source=_source(where), fix=_dict_fix(where),
                                 reference_reward=section.get("reference_reward") or REFERENCE_REWARD)
    except (ValueError, KeyError) as e:
        raise CalibrationApplyError(f"{where} field forecast cannot be checked against its batches: {e}") from None
    if not fresh.get("available"):
        raise CalibrationApplyError(f"{where} field forecast cannot be checked against its batches, whose forecast "
                                    f"gives none ({fresh.get('note')}); {_section_fix(where)}")
    if curve is not None and fresh.get("curve") != section.get("curve"):
        return [_unchecked_note(where, section, "the curve file it names changed since the probe read it (it now "
                                                "reads as another curve than the section's 'curve' records)")]
    _compare_rows(result, section, fresh, where, label)
    return []


def _compare_rows(result: dict, section: dict, fresh: dict, where: str, label: str) -> None:
    """Refuse the first number of ``section``'s rows that ``fresh`` (its recompute with ``label``'s curve) moves by
    more than the tolerance (:func:`check_forecast_section`)."""
    made = "wrote" if _source(where) is not None else "made"  # a dict: no file was written
    fix = (f"the section was edited or damaged after the probe {made} it, or the entries it was computed from were "
           f"(it differs from a recompute of the entries, so either changed; or a gradprobe whose forecast differs "
           f"{made} it), so calibrating it would not calibrate the probe's forecast; {_section_fix(where)}")
    stored = {r.get("arm"): (i, r) for i, r in enumerate(section.get("rows") or [])}
    slack = _first_order_slack(result, fresh)
    for row in fresh.get("rows") or []:
        if row["arm"] not in stored:
            raise CalibrationApplyError(f"{where} field forecast.rows has no row of arm {row['arm']!r}, which the "
                                        f"forecast of its batches gives; {fix}")
        i, old = stored[row["arm"]]
        for key in _SECTION_NUMBERS:
            mine, theirs = _stored_number(old.get(key)), json_float(row.get(key))
            allowed = SECTION_TOLERANCE + (slack(row) if key == "first_order_gain" else 0.0)
            if mine is None or abs(mine - theirs) <= allowed:  # NaN recomputed: a difference
                continue
            raise CalibrationApplyError(
                f"{where} field forecast.rows[{i}].{key} (arm {row['arm']!r}) is {json_spelled(old.get(key))}, but "
                f"the forecast of its batches gives {theirs!r} (gradprobe.forecast.forecast_section with {label}, "
                f"method {section['method']!r}, within {allowed:.3g} points); {fix}")


def _section_curve(section: dict) -> tuple[ReferenceCurve | None, str, str | None]:
    """(curve, how a message names it, why it cannot be had or None) of an available forecast section: None for the
    shipped curve (``curve_is_default`` true: :func:`gradprobe.forecast.forecast_section`'s default); for a user's
    curve, the curve its ``curve_spec`` names, ``default (NAME)`` being the shipped file NAME (as gradprobe writes
    the spec of a shipped curve) and anything else read by :func:`gradprobe.forecast.load_reference_curve` with the
    section's ``curve_options`` (``metric``, ``accuracy_scale``, ``initial_accuracy``), a relative path from the
    current folder; the reason is text when the spec names nothing readable."""
    if section["curve_is_default"]:
        return None, "the shipped curve", None
    spec = section.get("curve_spec")
    if not (isinstance(spec, str) and spec.strip()):
        return None, "", "it names no curve file"
    shipped = spec[len("default ("):-1] if spec.startswith("default (") and spec.endswith(")") else None
    try:
        if shipped in DEFAULT_CURVES.values():
            return ReferenceCurve.load(default_curve_path().with_name(shipped)), f"the shipped curve {shipped}", None
        opts = section.get("curve_options") if isinstance(section.get("curve_options"), dict) else {}
        curve = load_reference_curve(spec, **{k: opts.get(k) for k in ("metric", "accuracy_scale",
                                                                       "initial_accuracy")})
    except (OSError, ValueError, TypeError) as e:  # CurveError is a ValueError
        first = (str(e).splitlines() or [""])[0].split("; ", 1)[0]  # what is wrong, without the list of kinds
        return None, "", f"that curve cannot be read here ({first})"
    return curve, f"the curve of curve_spec {spec!r}", None


def _unchecked_note(where: str, section: dict, why: str) -> str:
    """The note on a forecast section computed with a user's reference curve that calib cannot recompute (``why``)."""
    spec = repr(section["curve_spec"]) if isinstance(section.get("curve_spec"), str) else \
        json_spelled(section.get("curve_spec"))
    return (f"{where} field forecast could not be checked against the probe's batches: it was computed with a "
            f"user's reference curve (curve_is_default false, curve_spec {spec}), and {why}; {_AS_HELD}: to check "
            "them, apply where that curve can be read as the probe read it")


#: What holds for a forecast section calib could not check (:func:`check_forecast_section`'s notes).
_AS_HELD = "the calibrated gains rest on the section's numbers as the file holds them (an edit of them would go unseen)"


def _first_order_slack(result: dict, fresh: dict):
    """Row -> twice the most by which rounding the probe's recorded per-update gains moves the row's
    ``first_order_gain`` = (T / c_R) s g_R - (T / c_grpo) g_grpo: (T / c_R |s| + T / c_grpo) x r, r half a unit in
    the last written place of the coarsest non-zero ``predicted_gain_per_update`` of the file (0.5 x 10^-k, k its
    decimals in plain notation: 5e-17 for 2.8264870441877834, 5e-5 for 2.8265), the bound of a re-save that rounded
    it to k places or to its significant digits. T is the section's budget, c the rows' tokens per update."""
    entries = [e for b in [result, *(result.get("batches") or [])] if isinstance(b, dict)
               for e in (b.get("rewards") or []) if isinstance(e, dict)]
    places = [_decimals(e.get("predicted_gain_per_update")) for e in entries]
    r = max((0.5 * 10.0 ** -k for k in places if k is not None), default=0.0)
    budget = json_float((fresh.get("budget") or {}).get("value"))
    ref = next((row for row in fresh.get("rows") or [] if row.get("reward") == fresh.get("reference_reward")
                and row.get("lr_scale") == 1.0), None)

    def slack(row: dict) -> float:
        tokens = [json_float(x.get("tokens_per_update")) if x else math.nan for x in (row, ref)]
        scale = json_float(row.get("lr_scale"))
        value = 2.0 * r * budget * (abs(scale) / tokens[0] + 1.0 / tokens[1])
        return value if math.isfinite(value) else 0.0
    return slack


def _decimals(value) -> int | None:
    """Digits after the point of a non-zero finite float as JSON writes it, in plain notation (``repr``: 2.8265
    holds 4, 1.25e-05 holds 7); None for 0, an int, a non-finite float or anything that is no float."""
    if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return None
    mantissa, _, exponent = repr(abs(value)).partition("e")
    return max(0, len(mantissa.partition(".")[2].rstrip("0")) - int(exponent or 0))


def _stored_number(value) -> float | None:
    """A stored forecast value as a finite float, None when it is null, no number or not finite (not compared:
    null is "no forecast", and :func:`_gain` names a value that is no number)."""
    try:
        x = json_float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _forecast_section(result: dict, column: str, where: str = DICT_WHERE) -> dict:
    why = (result.get("forecast") or {}).get("note") if isinstance(result.get("forecast"), dict) else None
    if why is None:
        try:
            section = forecast_section(result, source=_source(where), fix=_dict_fix(where))
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
