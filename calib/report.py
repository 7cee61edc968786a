"""The calibration report: ``calib report STUDY_DIR... --out REPORT_DIR``.

What it measures (issue 12, "It must show"), on calibration rows of every study given
(:mod:`calib.dataset`), for each forecaster (:data:`calib.dataset.FORECASTERS`: the probe, cost
only, the signal proxy, the raw first-order extrapolation), side by side:

- errors of the forecast gain vs grpo at the token budget, before calibration (the forecast as it
  is) and after (realized ~ f(forecast), the calibrator refitted without the held-out group):
  bias = mean(forecast - realized), MAE, and the held-out coverage of conformal intervals at the
  chosen level (MAPIE CV+ over the training groups; the uncorrected forecaster gets them too, from
  the other groups' residuals, :class:`calib.estimators.IdentityCalibrator`). Each forecaster on
  the rows it can say something about, and all of them on the rows they all cover ("common
  rows"), which is the fair comparison (a forecaster that covers fewer than 2 arms, e.g. the
  signal proxy on a probe that did not record it, is left out of the common rows, and named);
- the uncertainty of every MAE: a 95% study-cluster bootstrap percentile interval (studies
  resampled with replacement, all rows of a drawn study together; 5000 resamples, seed 0:
  :mod:`calib.bootstrap`), and on the common rows the paired difference of each compared
  forecaster's MAE minus cost only's, with its interval from the same resamples (intervals, not
  p-values; none under 5 studies, :data:`calib.bootstrap.MIN_INTERVAL_STUDIES`, as for the tau below, and a
  reason: with 2 studies a percentile bootstrap has 3 distinct resamples); so too the seed-noise floors'
  intervals (:mod:`calib.noise_floor`);
- validation by leaving one *study* out (the headline) and one arm out within its study. With one
  study, leave-one-study-out is impossible: the report says so (not an error) and leads with
  leave-one-arm-out, whose numbers are then in-sample in every respect but the held-out arm (the
  other arms of the same study, model and task are in the fit, and the grpo curve the forecasters
  read is the study's own), so they are not evidence of transfer;
- rank agreement with training within each study (Kendall tau-b, Spearman rho; grpo included at
  0), pooled over studies with a within-study permutation p-value (:mod:`calib.metrics`), for
  each raw forecaster, for the per-update efficiency ``rho`` alone (the raw per-update ordering),
  and for the chosen forecaster's cross-validated calibrated gains; the pooled tau and rho with a
  95% study-cluster bootstrap percentile interval from the same bootstrap settings (none under 5
  ranked studies, and a reason: :func:`calib.bootstrap.pooled_interval`).

Writes into REPORT_DIR: ``report.html`` (self-contained: every figure embedded as a base64 PNG),
the figures as PNG files (:data:`FIGURES`), ``metrics.json`` (the numbers; accuracy points),
``rows.csv`` (all rows) and ``cv_predictions.csv`` (every held-out prediction: cv mode,
forecaster, method, fold, prediction, interval), whose row count ``metrics.json`` records
(:data:`CV_ROWS_KEY`), so that a reader of the CSV can tell lines deleted from it.
"""

from __future__ import annotations

import inspect
import io
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gradprobe.forecast.validated_arms import DEFAULT_LOSS_TYPE
from gradprobe.layout import CV_PREDICTIONS_CSV, RUNS_CSV
from gradprobe.outputs import removed_if_left_empty
from gradprobe.probe_keys import entry_key

from .bootstrap import (LEVEL, MIN_INTERVAL_STUDIES, RESAMPLES, SEED, check_settings, detectable_difference,
                        mae_difference_interval, mae_interval)
from .dataset import (FORECASTERS, REFERENCE_ARM, RowsError, StudyFormatError, build_rows_many, select_rows,
                      study_dir_list)
from .estimators import make_estimator
from .metrics import bias, check_n_permutations, coverage, errors_by_entry, mae, pooled_rank_agreement, ranking_table
from .noise_floor import arm_level_errors, heldout_floor, seed_noise_floor, study_never_trained
from .forecaster_choice import PROBE_FORECASTERS, validation_record
from .files import REPORT_COMMAND, prepare_report_folder, write_bytes_atomic, write_json, write_text_atomic
from .model import software_versions
from .report_html import draw_figures, render_html
from .validation import INTERVALS, PLURAL, check_confidence_level, cross_validate, group_labels

__all__ = ["compute", "write_report", "read_runs", "FIGURES", "PER_UPDATE", "BASELINE",
           "PROBE_FORECASTERS", "validation_record"]  # the last two: calib.forecaster_choice, importable from here

FIGURES = ("predicted_vs_realized", "mae_by_forecaster", "residuals_by_arm", "accuracy_vs_tokens")
PER_UPDATE = "rho"
"""The per-update efficiency column, ranked beside the forecasters (the raw per-update ordering)."""
BASELINE = "forecast_cost_only"
"""The forecaster every other compared one is differenced against (``mae_difference_vs_cost_only``)."""
SAME_FORECAST = 1e-9
"""Two raw forecasts closer than this (points) are one forecast (float rounding, as calib.metrics.ranking_table
ties them)."""
CV_ROWS_KEY = "cv_predictions_rows"
"""The ``metrics.json`` key holding the number of data rows (lines after the header) of ``cv_predictions.csv``."""
BOOTSTRAP_METHOD = ("study-cluster bootstrap (studies resampled with replacement, all rows of a drawn study together), "
                    "percentile interval; an interval, not a p-value (calib.bootstrap)")
UNITS = ("accuracy points; bias = mean(forecast - realized) over held-out runs; realized = gain vs grpo of one run at "
         "the study's token budget; coverage = share of held-out runs inside their interval")


def compute(rows: pd.DataFrame, *, forecaster: str = "forecast_probe", method: str = "linear", cv: str = "auto",
            interval: str = "cv_plus", confidence_level: float = 0.9, include_reference: bool = False,
            n_permutations: int = 9999, bootstrap_resamples: int = RESAMPLES, bootstrap_level: float = LEVEL,
            bootstrap_seed: int = SEED, study_dirs=None, _analyses=None) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Cross-validated errors, coverage and rank agreement of every forecaster.

    Parameters
    ----------
    rows : DataFrame
        :func:`calib.dataset.build_rows_many` (grpo rows: left out of the errors, an arm of the rankings).
    forecaster : str
        The forecaster whose calibration is the report's headline (default the probe's).
    method : {"linear", "isotonic"}
        The correction applied to every forecaster ("after calibration").
    cv : {"auto", "study", "arm"}
        ``auto``: leave one study out as the headline and one arm out beside it; ``study`` or ``arm``:
        that one only. With one study, leave one arm out only, and a note says why.
    interval, confidence_level, include_reference
        See :func:`calib.validation.cross_validate` and :func:`calib.dataset.select_rows`.
    n_permutations : int
        Of the pooled rank tests (:func:`calib.metrics.pooled_rank_agreement`), at least 1.
    bootstrap_resamples, bootstrap_level, bootstrap_seed
        Of the study-cluster bootstrap intervals of the MAEs (:mod:`calib.bootstrap`; defaults 5000,
        0.95, 0: the report is deterministic) and of the pooled taus (:func:`calib.bootstrap.pooled_interval`).
    study_dirs : list of path, optional
        The folders ``rows`` come from, for ``metrics["heldout_floor"]`` (else None) and the arms with a run that never
        trained, left out of the floors and arm-mean errors (:func:`calib.noise_floor.study_never_trained`; internal
        ``_analyses``: their ``analysis.json`` as read for the rows).

    Returns
    -------
    (metrics, cv_rows, table)
        ``metrics``: the content of ``metrics.json``; ``cv_rows``: every held-out prediction (long format); ``table``:
        :func:`calib.metrics.ranking_table` of the forecasters, ``rho`` and the headline calibrated gains.

        In ``metrics["errors"][cv][forecaster]["raw" | "calibrated"]`` (and its ``"common"`` part, the rows all compared
        forecasters cover), beside ``mae``: ``mae_interval`` [lo, hi] (points; None under 5 studies,
        ``mae_interval_reason`` then says why: :func:`_bootstrap_record`); in the ``"common"`` part of every compared
        forecaster but cost only: ``mae_difference_vs_cost_only`` {estimate, interval, reason, n_clusters, rows,
        detectable_difference} (MAE minus cost only's on the same rows, < 0: better: :func:`_differences`);
        ``arm_level`` (MAE on arm means, :mod:`calib.noise_floor`), and ``metrics["seed_noise_floor"]``,
        ``metrics["heldout_floor"]`` (:func:`_floors`); ``metrics["bootstrap"]`` (:func:`_bootstrap_record`).
        ``metrics["ranking"]``: :func:`calib.metrics.pooled_rank_agreement` (``kendall_tau_interval`` too) by score.

    Raises
    ------
    calib.dataset.RowsError, calib.dataset.StudyFormatError
        The headline forecaster cannot be calibrated (missing columns, a single arm...); a ``study_dirs`` folder's
        ``study.json`` or ``analysis.json`` cannot be read (:func:`calib.noise_floor.study_never_trained`).
    ValueError, TypeError
        Checked before any fit: an unknown method, cv or interval; ``confidence_level`` outside (0, 1), NaN or no
        number (TypeError; as ``calib.fit``); ``n_permutations`` not a positive integer; bad bootstrap settings.
    """
    _check_settings(**locals())  # the arguments (all locals() holds here), before any work
    select_rows(rows, forecaster=forecaster, include_reference=include_reference)  # the headline must be usable
    modes, notes = _cv_modes(cv, int(rows["study"].nunique()))
    rows, base, compared = _common_rows(rows, include_reference, notes)
    boot = {"resamples": bootstrap_resamples, "level": bootstrap_level, "seed": bootstrap_seed}
    per_row = {**boot, "min_studies": MIN_INTERVAL_STUDIES}  # the tau's rule (pooled_interval) for every interval
    settings = {"method": method, "interval": interval, "include_reference": include_reference, "boot": per_row,
                "level": confidence_level, "never_trained": study_dirs and study_never_trained(
                    study_dirs, _analyses=_analyses)}  # from the rows' reads of analysis.json, not read again
    long, errors = [], {}
    for mode in modes:
        errors[mode] = _mode_errors(rows, mode, compared, notes if mode == modes[0] else [], long, **settings)
    cv_rows = pd.concat(long, ignore_index=True) if long else pd.DataFrame()
    head, common = modes[0], base[base["all_forecasters"]]
    table, ranking, ranking_common = _rankings(rows, cv_rows, forecaster, method, head, n_permutations, compared, boot)
    metrics = {
        "headline_cv": head, "cv_modes": modes, "notes": notes, "forecaster": forecaster, "method": method,
        "interval": interval, "confidence_level": confidence_level, "include_reference": include_reference,
        **_what_rows(rows, base, compared, include_reference),
        **_floors(common, study_dirs, per_row, settings["never_trained"]),
        "errors": errors, "ranking": ranking, "ranking_common_arms": ranking_common,
        **_headline(errors[head][forecaster]),
        "bootstrap": _bootstrap_record(per_row, base),
        **{k: ranking[forecaster][k] for k in ("kendall_tau", "kendall_tau_interval", "kendall_tau_interval_reason",
                                               "p_kendall", "spearman_rho", "p_spearman")},
        "versions": software_versions(), "units": UNITS}
    return metrics, cv_rows, table


def _bootstrap_record(per_row: dict, base: pd.DataFrame) -> dict:
    """``metrics["bootstrap"]``: {resamples, level, seed, min_studies, clusters: "study", n_clusters (studies among
    the common rows of ``base``), method}. Every study-cluster interval of the report (MAEs, paired differences,
    seed-noise floors; the pooled tau's and rho's too, :func:`calib.bootstrap.pooled_interval`) is None under
    ``min_studies`` (:data:`calib.bootstrap.MIN_INTERVAL_STUDIES`, 5) studies, its reason saying so."""
    return {**per_row, "clusters": "study", "n_clusters": int(base.loc[base["all_forecasters"], "study"].nunique()),
            "method": BOOTSTRAP_METHOD}


def _check_settings(**settings) -> None:
    """Check :func:`compute`'s settings (those not given: its defaults) before any work.

    Raises
    ------
    ValueError
        A bad setting, named (:func:`compute`).
    TypeError
        A ``confidence_level`` that is no number (:func:`~calib.validation.check_confidence_level`).
    """
    s = {name: p.default for name, p in inspect.signature(compute).parameters.items() if p.kind == p.KEYWORD_ONLY}
    s.update(settings)
    _check_choices(s["method"], s["cv"], s["interval"])
    check_confidence_level(s["confidence_level"])
    check_n_permutations(s["n_permutations"])
    check_settings(s["bootstrap_resamples"], s["bootstrap_level"])


def _check_choices(method: str, cv: str, interval: str) -> None:
    """Refuse an unknown calibration method, cv or interval (ValueError naming the choices)."""
    if method not in ("linear", "isotonic"):
        raise ValueError(f"unknown calibration method {method!r} for the report; choose linear or isotonic")
    if cv not in ("auto", "study", "arm"):
        raise ValueError(f"unknown cv {cv!r}; choose auto, study or arm")
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval method {interval!r}; choose one of {INTERVALS}")


def _floors(common: pd.DataFrame, study_dirs, boot: dict, untrained: dict | None) -> dict:
    """``seed_noise_floor`` of the common rows (:func:`calib.noise_floor.seed_noise_floor`; an arm with a run that
    never trained, ``untrained``: study -> arm -> records, is left out and named) and ``heldout_floor``,
    its split into training randomness and the held-out set's own error on the same runs
    (:func:`calib.noise_floor.heldout_floor`; None without ``study_dirs``)."""
    return {"seed_noise_floor": seed_noise_floor(common["target"], common["arm"], common["study"],
                                                 never_trained=untrained, reference_arm=REFERENCE_ARM, **boot),
            "heldout_floor": None if study_dirs is None else heldout_floor(
                study_dirs, keep=set(zip(common["study"], common["arm"])), **boot)}


def _common_rows(rows: pd.DataFrame, include_reference: bool, notes: list) -> tuple:
    """(rows, base, compared): ``rows`` and ``base`` (the rows errors are over: grpo's left out unless
    ``include_reference``, a realized gain) with ``all_forecasters`` (every compared forecaster has a
    number), and the compared forecasters (:func:`_compared`)."""
    base = rows if include_reference else rows[~rows["is_reference"].astype(bool)]
    base = base[np.isfinite(base["target"].astype(float))]
    compared = _compared(base, notes)
    rows = rows.assign(all_forecasters=np.isfinite(rows[compared].astype(float)).all(axis=1))
    base = base.assign(all_forecasters=rows.loc[base.index, "all_forecasters"])
    notes.extend(_same_as_baseline_notes(base[base["all_forecasters"]], compared))
    return rows, base, compared


def _same_as_baseline_notes(common: pd.DataFrame, compared: list) -> list[str]:
    """One note per compared forecaster whose raw forecast equals cost only's (within :data:`SAME_FORECAST` points)
    on some of the ``common`` runs, naming how many: there it fell back to cost only (the probe where it cannot tell a
    reward from grpo: rho's SNR <= 1, or rho undefined, :mod:`gradprobe.forecast.proxies`), so its MAE and its paired
    difference from cost only rest on the other runs alone. The rows keep the forecaster as the verdict uses it,
    fallbacks included, while ``gradprobe probe`` and ``calib apply`` print no probe forecast (n/a) for an arm of
    grpo's cost that falls back (cost only's 0 by construction there)."""
    if BASELINE not in compared or common.empty:
        return []
    base = common[BASELINE].astype(float)
    out = []
    for f in (f for f in compared if f != BASELINE):
        same = int(((common[f].astype(float) - base).abs() <= SAME_FORECAST).sum())
        if same:
            why = (" (its fallback where the probe cannot tell a reward from grpo: the SNR of rho-1 is <= 1, or rho "
                   "is undefined)") if f == "forecast_probe" else ""
            out.append(f"{f} equals cost only's forecast on {same} of the {len(common)} common runs{why}; its MAE "
                       f"difference from cost only rests on the other {len(common) - same} runs.")
    return out


def _what_rows(rows: pd.DataFrame, base: pd.DataFrame, compared: list, include_reference: bool) -> dict:
    """What the report is over: studies, models, tasks, arms, row counts, compared forecasters, budgets, and
    ``common_arms``: ``{"arm", "reward", "loss_type"}`` of each arm of the common rows (the arms the
    forecasters' errors are measured on; ``gradprobe probe`` says when a probed reward was not one of them)."""
    return {"studies": sorted(set(rows["study"])), "n_studies": int(rows["study"].nunique()),
            "models": sorted(set(rows["model"])), "tasks": sorted(set(rows["task"])),
            "arms": sorted(set(base["arm"])), "rows": int(len(base)), "common_rows": int(base["all_forecasters"].sum()),
            "common_arms": _arm_records(base[base["all_forecasters"]]),
            "compared_forecasters": compared,
            "grpo_rows_left_out": 0 if include_reference else int(rows["is_reference"].astype(bool).sum()),
            "budget": {"kind": "tokens", "values": sorted(set(map(float, rows["budget_value"])))}}


def _arm_records(rows: pd.DataFrame) -> list[dict]:
    """``{"arm", "reward", "loss_type"}`` of each distinct arm of ``rows`` (None for a column the rows lack)."""
    cols = ("arm", "reward", "loss_type")
    recs = {tuple(None if c not in rows.columns or pd.isna(r[c]) else str(r[c]) for c in cols)
            for _, r in rows.iterrows()}
    return [dict(zip(cols, rec)) for rec in sorted(recs, key=lambda t: tuple(x or "" for x in t))]


def _mode_errors(rows, mode, compared, notes, long: list, *, method, interval, level, include_reference,
                 boot, never_trained=None) -> dict:
    """Errors of every forecaster, raw and calibrated, held out by ``mode``; appends the held-out
    predictions to ``long`` and adds the paired MAE differences vs cost only (:func:`_differences`);
    ``never_trained`` (study -> arm -> records): the arms the errors on arm means leave out."""
    errors, preds = {}, {}
    for f in FORECASTERS:
        errors[f] = {}
        for m in ("none", method):
            key = "raw" if m == "none" else "calibrated"
            res, pred = _validate(rows, f, m, mode, interval, level, include_reference, boot, never_trained)
            errors[f][key] = res
            if pred is not None:
                long.append(pred.drop(columns="_common"))
                preds[f, key] = pred
    _differences(errors, preds, compared, notes, boot)
    return errors


def _headline(e: dict) -> dict:
    """The headline forecaster in brief (held out by the headline cv, its own rows)."""
    return {"raw_bias": e["raw"].get("bias", math.nan), "calibrated_bias": e["calibrated"].get("bias", math.nan),
            "raw_mae": e["raw"].get("mae", math.nan), "mae": e["calibrated"].get("mae", math.nan),
            "raw_coverage": e["raw"].get("coverage", math.nan), "coverage": e["calibrated"].get("coverage", math.nan),
            "raw_mae_interval": e["raw"].get("mae_interval"), "mae_interval": e["calibrated"].get("mae_interval")}


def _cv_modes(cv: str, n_studies: int) -> tuple[list, list]:
    """Validation schemes to run (headline first) and the note when leave-one-study-out is impossible."""
    if n_studies >= 2 and cv in ("auto", "study"):
        return (["study", "arm"] if cv == "auto" else ["study"]), []
    if cv == "arm":
        return ["arm"], []
    return ["arm"], [f"Leave-one-study-out is impossible with {n_studies} study: the headline is leave-one-arm-out "
                     "within the study. Its numbers are in-sample in all but the held-out arm (same study, model and "
                     "task; the forecasters read the study's own grpo curve), so they say nothing about transfer to "
                     "another study, model or task."]


def _compared(base: pd.DataFrame, notes: list) -> list:
    """Forecasters covering at least 2 arms (the others cannot be calibrated; a note names them)."""
    covered = {f: int(base.loc[np.isfinite(base[f].astype(float)), "arm"].nunique()) for f in FORECASTERS}
    for f in FORECASTERS:
        if covered[f] < 2:
            notes.append(f"{f} forecasts {covered[f]} arm(s) besides grpo here (the probe results lack what it needs, "
                         "or its arms are outside what it can tell), so it cannot be calibrated and is left out of "
                         "the comparison on common runs.")
    return [f for f in FORECASTERS if covered[f] >= 2]


def _validate(rows, f, m, mode, interval, level, include_reference, boot,
              never_trained=None) -> tuple[dict, pd.DataFrame | None]:
    """Held-out predictions of forecaster ``f`` corrected by ``m`` under ``mode``, and their errors (those on arm
    means leave out the arms with a run that never trained, ``never_trained``)."""
    try:
        sel, counts = select_rows(rows, forecaster=f, include_reference=include_reference, check_reference=False)
        if len(set(group_labels(sel, mode))) < 2:
            raise RowsError(f"leave-one-{mode}-out needs 2 {mode}s with a {f}")
        cvp = cross_validate(make_estimator(m), sel, forecaster=f, cv=mode, confidence_level=level,
                             interval=interval)
    except (RowsError, ValueError) as e:
        return {"error": str(e)}, None
    pred = pd.concat([sel[["study", "model", "task", "arm", "seed", "target"]], cvp], axis=1)
    pred.insert(0, "method", m)
    pred.insert(0, "forecaster", f)
    pred.insert(0, "cv", mode)
    pred["forecast"] = sel[f].to_numpy(float)
    in_common = sel["all_forecasters"].to_numpy(bool)
    out = _errors(pred, level, boot)
    out["rows"], out["arms"] = int(len(pred)), int(pred.groupby(["study", "arm"]).ngroups)
    out["no_forecast_arms"] = counts["no_forecast_arms"]
    out["common"] = _errors(pred[in_common], level, boot)
    losses = sel["loss_type"].fillna(DEFAULT_LOSS_TYPE) if "loss_type" in sel else [DEFAULT_LOSS_TYPE] * len(sel)
    keys = [entry_key(str(r), str(lt), DEFAULT_LOSS_TYPE) for r, lt in zip(sel["reward"], losses)]
    out["common"]["arm_level"] = arm_level_errors(pred["cv_pred"][in_common], pred["target"][in_common],
                                                  pred["arm"][in_common], pred["study"][in_common],
                                                  never_trained=never_trained, reference_arm=REFERENCE_ARM, **boot)
    out["common"]["by_entry"] = errors_by_entry(pred["cv_pred"][in_common], pred["target"][in_common],
                                                np.asarray(keys)[in_common], pred["study"][in_common])
    return out, pred.assign(_common=in_common)


def _errors(pred: pd.DataFrame, level: float, boot: dict) -> dict:
    """Bias, MAE (its interval or why none), and ``coverage`` over the ``coverage_rows`` held-out runs with a conformal
    interval, with ``coverage_reason`` only where some have none (:func:`_coverage_reason`)."""
    has = pred["cv_lower"].notna()
    n_iv = int(has.sum())
    ok = np.isfinite(pred["cv_pred"].astype(float)) & np.isfinite(pred["target"].astype(float))
    if ok.all():
        ci = mae_interval(pred["cv_pred"], pred["target"], pred["study"], **boot)
        iv, reason = (None if ci.interval is None else list(ci.interval)), ci.reason
    else:  # the MAE itself is NaN then: no interval around it
        iv, reason = None, f"{int((~ok).sum())} run(s) without a held-out prediction or realized gain"
    return {"rows": int(len(pred)), "bias": bias(pred["cv_pred"], pred["target"]),
            "mae": mae(pred["cv_pred"], pred["target"]),
            "mae_interval": iv, "mae_interval_reason": reason,
            "coverage": coverage(pred["cv_lower"], pred["cv_upper"], pred["target"]), "coverage_rows": n_iv,
            "coverage_se": math.sqrt(level * (1 - level) / n_iv) if n_iv else math.nan,
            "mean_interval_width": float((pred["cv_upper"] - pred["cv_lower"])[has].mean()) if n_iv else math.nan,
            **_coverage_reason(pred, has)}


def _coverage_reason(pred: pd.DataFrame, has: pd.Series) -> dict:
    """``{"coverage_reason": why}`` when some held-out runs of ``pred`` (one forecaster, one cv mode) got no conformal
    interval (``has``: those that did), else ``{}``: a fold whose training part holds under 2 groups gets none
    (:func:`calib.validation.cross_validate`), e.g. every fold of leave-one-study-out over 2 studies."""
    if has.all() or not len(pred):
        return {}
    mode = str(pred["cv"].iloc[0])
    groups = PLURAL.get(mode, mode + "s")
    folds = pred.loc[~has, "fold"].nunique()
    return {"coverage_reason": f"{int((~has).sum())} of {len(pred)} held-out runs have no conformal interval: "
                               f"holding out their {mode} ({folds} fold(s)) leaves under 2 {groups} to calibrate "
                               f"the interval on (CV+ and split conformal need 2+ {groups} besides the held-out one, "
                               f"so 3+ {groups} in all); coverage is over the other runs, n/a if none: add {groups}"
                               + (", or read the leave-one-arm-out coverage" if mode != "arm" else "")}


def _differences(errors: dict, preds: dict, compared: list, notes: list, boot: dict) -> None:
    """Add ``mae_difference_vs_cost_only`` to the common part of every compared forecaster but cost only.

    Paired on the common rows (matched by study, arm and seed), raw against raw and calibrated against
    calibrated, with the study-cluster bootstrap interval of :func:`calib.bootstrap.mae_difference_interval` and
    ``detectable_difference``: the smallest difference (points) a two-sided 5% test would detect with 80% power,
    2.80 x the standard deviation of the same resamples (:func:`calib.bootstrap.detectable_difference`); None where
    no interval is given (``reason`` says why).
    """
    if BASELINE not in compared:
        notes.append(f"{BASELINE} is not among the compared forecasters, so no MAE difference vs cost only is given.")
        return
    for f in compared:
        if f == BASELINE:
            continue
        for key in ("raw", "calibrated"):
            a, b = preds.get((f, key)), preds.get((BASELINE, key))
            if a is None or b is None:
                continue
            run = ["study", "arm", "seed"]  # a run (one budget per study); select_rows renumbers the rows
            both = a.loc[a["_common"], run + ["cv_pred", "target"]].merge(
                b.loc[b["_common"], run + ["cv_pred"]], on=run, suffixes=("", "_base"), validate="one_to_one")
            bad = int((~np.isfinite(both[["cv_pred", "cv_pred_base", "target"]].astype(float)).all(axis=1)).sum())
            if bad:  # as in _errors: no difference around a NaN MAE
                d = {"estimate": math.nan, "interval": None, "n_clusters": int(both["study"].nunique()),
                     "rows": int(len(both)), "reason": f"{bad} run(s) without a held-out prediction or realized gain",
                     "detectable_difference": None}
            else:
                iv = mae_difference_interval(both["cv_pred"], both["cv_pred_base"], both["target"], both["study"],
                                             **boot)
                # the smallest difference these studies could detect (None where no interval is given: same reason)
                d = dict(iv.as_dict(), detectable_difference=None if iv.resampled is None else
                         detectable_difference(iv.resampled))
            errors[f][key]["common"]["mae_difference_vs_cost_only"] = d


def _rankings(rows, cv_rows, forecaster, method, head, n_permutations, compared, boot):
    """Ranking table and pooled rank agreement: raw forecasters, rho, headline calibrated gains (their intervals
    with the report's bootstrap settings ``boot``: resamples, level, seed). grpo's calibrated gain is its study's
    held-out calibration at a forecast of 0 (``cv_pred_at_zero``, :func:`calib.validation.cross_validate`), as
    every arm's is the calibration at its forecast; a study with no calibrated arm leaves grpo unranked (NaN)."""
    df = rows[np.isfinite(rows["target"].astype(float))].copy()
    cal = f"calibrated_{forecaster}"
    df[cal] = np.nan
    if len(cv_rows):
        sub = cv_rows[(cv_rows["cv"] == head) & (cv_rows["forecaster"] == forecaster) & (cv_rows["method"] == method)]
        key = ["study", "arm", "seed"]
        vals = df[key].merge(sub[key + ["cv_pred"]], on=key, how="left")["cv_pred"].to_numpy()
        df[cal] = vals
        # grpo's forecast is 0 ("no difference from itself"): calibrated like every arm's, by its study's held-out
        # calibration at 0. At 0 instead, a study whose arms are all forecast 0 (the probe cannot tell them apart)
        # was ranked against grpo by the calibration's intercept alone, and counted as ranked (a trial user).
        at_zero = sub.groupby("study")["cv_pred_at_zero"].mean() if "cv_pred_at_zero" in sub else pd.Series(
            dtype=float)
        ref = df["arm"] == REFERENCE_ARM
        df.loc[ref, cal] = df.loc[ref, "study"].map(at_zero).to_numpy(float)
    cols = list(FORECASTERS) + [PER_UPDATE, cal]
    table = ranking_table(df, cols)
    kw = {"n_permutations": n_permutations, **{f"bootstrap_{k}": v for k, v in boot.items()}}
    ranking = {c: pooled_rank_agreement(table, c, **kw) for c in cols}
    full = table.dropna(subset=compared)
    ranking_common = {c: pooled_rank_agreement(full, c, **kw) for c in cols}
    return table, ranking, ranking_common


def write_report(study_dirs, out: str | Path, *, curve=None, forecast_fn=None, **settings) -> dict:
    """Build rows from the studies, compute the metrics, draw the figures and write the report.

    Parameters
    ----------
    study_dirs : sequence of paths, or one path
        ``gradprobe study`` folders (several: leave-one-study-out); a single str or Path is one study.
    out : path
        Report folder (created).
    curve, forecast_fn
        Passed to :func:`calib.dataset.build_rows`.
    **settings
        Passed to :func:`compute`.

    Returns
    -------
    dict
        The metrics (also in ``out/metrics.json``), with :data:`CV_ROWS_KEY`: the number of rows written to
        ``out/cv_predictions.csv`` (its lines after the header; ``benchmarks/unseen_study.py`` checks it), and
        ``"command": "calib report"`` (:data:`calib.files.REPORT_COMMAND`: the folder is a report's to replace).

    Raises
    ------
    TypeError
        ``study_dirs`` is neither a path nor an iterable of paths (:func:`calib.dataset.study_dir_list`).
    calib.dataset.StudyFormatError, calib.dataset.RowsError
        Bad study folders or rows (the message names the file or field).
    ValueError
        Bad settings (:func:`compute`).
    OSError
        ``out`` is a file, a probe's folder or cannot be written (checked before any work; calib.files).
    """
    study_dirs = [Path(d) for d in study_dir_list(study_dirs)]
    _check_settings(**settings)  # bad settings fail before the folder is made or any study is read
    with removed_if_left_empty(out):  # a study refused after the folder was made: the folder (and parents) go
        out = prepare_report_folder(out)
        earlier = (out / CV_PREDICTIONS_CSV).is_file()  # the folder passed prepare_report_folder: a report's
        analyses = {}  # folder -> its analysis.json as the rows read it: the never-trained arms come from it
        rows = build_rows_many(study_dirs, curve=curve, forecast_fn=forecast_fn, _analyses=analyses)
        runs = read_runs(study_dirs)
        metrics, cv_rows, table = compute(rows, study_dirs=study_dirs, _analyses=analyses, **settings)
    if earlier:  # said when it is replaced, after every check and the compute, as rank-prompts says it
        written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((out / CV_PREDICTIONS_CSV).stat().st_mtime))
        print(f"replacing the calibration report in {out} (written {written})", file=sys.stderr, flush=True)
    # the folder is marked as this command's before its first file: a report that stops part-way (Ctrl-C, a figure
    # that fails) leaves a folder its rerun replaces (calib.files); the complete metrics.json replaces the mark
    write_json(out / "metrics.json", {"command": REPORT_COMMAND, "complete": False}, indent=2)
    write_text_atomic(out / "rows.csv", rows.to_csv(index=False))
    write_text_atomic(out / "cv_predictions.csv", cv_rows.to_csv(index=False))
    metrics[CV_ROWS_KEY] = int(len(cv_rows))  # a reader of the CSV tells lines deleted from it
    images = draw_figures(rows, cv_rows, metrics, runs)
    for name, png in images.items():
        write_bytes_atomic(out / f"{name}.png", png)
    metrics["command"] = REPORT_COMMAND  # marks the folder as a report's: only such a one is replaced (calib.files)
    write_json(out / "metrics.json", metrics, indent=2)
    write_text_atomic(out / "report.html", render_html(metrics, table, images, study_dirs))
    return metrics


def read_runs(study_dirs) -> pd.DataFrame:
    """Every study's ``runs.csv`` (one row per run and eval point), with ``study_label`` = folder name.

    Raises
    ------
    StudyFormatError
        A missing ``runs.csv`` or column (named). (A ``runs.csv`` that lost eval lines is refused before, where the
        rows are built: :func:`calib.integrity.read_study_runs`.)
    """
    frames = []
    for d in study_dirs:
        path = Path(d) / RUNS_CSV
        if not path.is_file():
            raise StudyFormatError(f"{path} is missing; `gradprobe study` writes it (one row per run and eval point)")
        raw = path.read_bytes()
        df = pd.read_csv(io.BytesIO(raw))
        missing = [c for c in ("arm", "seed", "update", "generated_tokens", "accuracy") if c not in df.columns]
        if missing:
            raise StudyFormatError(f"{path} lacks column(s) {missing}")
        df["study_label"] = Path(d).name
        frames.append(df)
    return pd.concat(frames, ignore_index=True)
