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
  flagged too: its warning says it has no calibrated gain, and its note says why.

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

from gradprobe.layout import CALIBRATED_JSON, PROBE_JSON
from gradprobe.outputs import OutputDirError

from .domain import CalibrationDomainWarning, DomainWarning, check_domain, check_rewards, probe_identity
from .files import write_json
from .model import Calibration, load_calibration
from .probe_input import (REFERENCE_REWARD, SECTION_COLUMNS, CalibrationApplyError, check_probe_budgets,
                          first_order_gain, load_probe, probe_features, probe_forecasts)

__all__ = ["apply_calibration", "calibrate", "calibrate_probe", "check_applicable", "write_calibrated",
           "format_calibrated", "rewrite_probe_json", "CALIBRATED_NAME", "CALIBRATED_FORMAT",
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
              where: str = "probe.json") -> dict:
    """The calibrated gains of every probed reward (the content of ``calibrated.json``).

    Parameters
    ----------
    calibration : Calibration
        From :func:`calib.model.load_calibration`.
    probe_result : dict
        ``probe.json`` (not modified).
    source, where : str
        Where the calibration came from (recorded); the probe file as errors name it.
    task : dict, optional
        The probe's resolved task, when ``probe.json`` does not say it in full (:func:`load_probe`).

    Returns
    -------
    dict
        ``format``, ``probe`` (model, task key, budgets), ``calibration`` (source, forecaster, method,
        level, domain...), ``outside_domain`` (any entry outside), ``warnings`` (domain and per reward),
        ``notes`` (the warnings plus one note per reward without a calibrated gain: a reward that gives no
        gradient on the probe batch, ``no_signal`` in ``probe.json``, with its ``no_signal_reason``; rewards
        the forecaster cannot say anything about, and those whose forecast row gives no verdict, with its
        ``no_verdict_reason``: their calibrated gain is NaN), ``rewards`` (module docstring), ``target``. A reward
        outside the domain is marked ``outside_domain`` whether or not it has a calibrated gain; the
        warning of one without (NaN) says so instead of "still computed".

    Raises
    ------
    CalibrationApplyError
        No ``outcome`` reward, no value of the calibration's budget, no forecasts for a format-2 calibration (the
        message says where they are looked for), a damaged budget or gain (``WHERE field X is ...``).
    """
    check_probe_budgets(probe_result, where)
    names = [r["name"] for r in probe_result["rewards"]]
    if REFERENCE_REWARD not in names:
        raise CalibrationApplyError(f"calibration predicts gains vs GRPO, so the probe needs the {REFERENCE_REWARD!r} "
                                    f"reward too: add it to --rewards (probed: {sorted(names)})")
    feats = probe_features(probe_result, calibration.budget) if calibration.legacy else \
        probe_forecasts(probe_result, calibration.forecaster, where=where)
    col = calibration.features[0]
    others = [n for n in names if n != REFERENCE_REWARD]
    no_signal = _no_signal_rewards(probe_result)
    # a forecast that gives no advice (no_verdict_reason) is not calibrated into one
    ok, values = _calibrated_values(calibration, feats, others, {*no_signal, *_no_verdict_rewards(probe_result)})
    me = probe_identity(probe_result, task=task)
    warnings = check_domain(calibration, probe_result, task=me["task"])
    probe_outside = any(w.outside for w in warnings)
    silent = [n for n in others if n not in ok]
    # a reward outside the domain is marked whether or not it has a calibrated gain; the warning of one without
    # says so (check_rewards' text says the gain "is still computed", which the note below would contradict)
    warnings += [_without_gain(w) if w.reward in silent else w
                 for w in check_rewards(calibration, probe_result, reference_reward=REFERENCE_REWARD)]
    off_rewards = {w.reward for w in warnings if w.outside and w.reward is not None}
    outside = any(w.outside for w in warnings)
    notes = list(warnings) + _reference_note(col, no_signal) + _no_gain_notes(col, silent, no_signal, probe_result)
    rewards = [{"name": n, "forecast": 0.0 if n == REFERENCE_REWARD and n in no_signal else  # gain 0 vs itself
                math.nan if n in no_signal or n not in feats.index else float(feats.loc[n, col]),
                "calibrated_gain": values[n][0], "calibrated_interval": values[n][1],
                "outside_domain": probe_outside or n in off_rewards}
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
                        "arms": dom.arms, "arm_rewards": dom.rewards, "arm_loss_types": dom.loss_types,
                        "budget_range": dom.budget_range, "fitted_with": calibration.versions},
        "outside_domain": outside, "warnings": warnings, "notes": notes, "rewards": rewards,
    }


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


def write_calibrated(folder: str | Path, document: dict) -> Path:
    """Write ``calibrated.json`` into the probe folder, atomically (never touching ``probe.json``).
    NaN -> null, +-inf -> "inf"/"-inf" (gradprobe's encoding, :mod:`calib.files`). Returns the path.

    Raises
    ------
    gradprobe.outputs.OutputDirError
        The write failed (an OSError; nothing changed): the message names the file, why, and the fix (its place
        is fixed next to probe.json: move what is in the way, make the folder writable, or copy the probe folder).
    """
    path = Path(folder) / CALIBRATED_NAME
    try:
        return write_json(path, document, indent=1)
    except OutputDirError as e:
        why = e.__cause__.strerror if isinstance(e.__cause__, OSError) and e.__cause__.strerror else str(e)
        err = OutputDirError(e.errno, f"writing {str(path)!r} failed ({why}); calibrated.json is written next to "
                             f"probe.json: remove or rename what is at {str(path)!r}, or make {str(Path(folder))!r} "
                             "writable (or copy the probe folder somewhere writable and apply there)")
        err.filename = str(path)
        raise err from e


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
        calibration's domain; the warnings in ``attrs["document"]["warnings"]`` name which).
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
        a forecaster calibration, or a probe folder without ``probe.json`` (all ValueErrors).
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
    task, where = None, "probe.json"
    if isinstance(probe_result, (str, Path)):
        raw, folder, task = load_probe(probe_result)
        where = str(Path(folder) / PROBE_JSON)
    elif isinstance(probe_result, dict):
        raw = probe_result
    elif isinstance(getattr(probe_result, "raw", None), dict):  # gradprobe.ProbeResult (duck-typed: calib reads
        raw = probe_result.raw                                 # gradprobe's outputs, never its classes)
        folder = getattr(probe_result, "folder", None)
        if folder is not None and (Path(folder) / PROBE_JSON).is_file():
            task = load_probe(folder)[2]
    else:
        raise TypeError(f"probe_result must be a gradprobe.ProbeResult, a probe.json dict or a probe folder, got "
                        f"{type(probe_result).__name__}")
    doc = calibrate(calibration, raw, source=source or "", task=task, where=where)
    table = pd.DataFrame([{"reward": r["name"], "forecast": r["forecast"], "calibrated_gain": r["calibrated_gain"],
                           "interval_low": float(r["calibrated_interval"][0]),
                           "interval_high": float(r["calibrated_interval"][1]),
                           "outside_domain": bool(r["outside_domain"])} for r in doc["rewards"]]).set_index("reward")
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
