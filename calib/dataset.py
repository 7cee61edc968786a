"""Calibration rows: the forecasters' numbers joined with a study's realized gains, across studies.

One row per (study, model, task, arm, seed, budget) of one or more ``gradprobe study`` folders.

Features (per arm, from :func:`gradprobe.forecast.study_forecasts`, at the study's token budget;
DESIGN.md, "The probe" and "Calibration"): ``rho`` (the probe's per-update efficiency vs grpo,
shrunk by its SNR), ``snr``, ``tokens_per_update`` (c_R, continuations included),
``token_multiplier`` (c_R / c_grpo), and four forecasts of the gain vs grpo at the budget, in
accuracy points (:data:`FORECASTERS`): ``forecast_probe`` (grpo's reference curve read at the
arm's effective updates (T / c_R) rho_R), ``forecast_cost_only`` (rho_R = 1),
``forecast_signal_proxy`` (verl's forward-only variance proxy in place of the probe) and
``forecast_first_order`` (the probe's raw first-order extrapolation, no saturation). A forecast
is NaN where its forecaster cannot say (e.g. a learning-rate arm for the probe). ``curve_source``
says which reference curve was read. The grpo curve comes from the study itself: that is the
user's own cheap GRPO run, not a leak; what must not leak into a held-out study is the
*calibration* fit, and :mod:`calib.validation` guarantees that.

Target: ``target`` = realized gain vs grpo at the same budget (accuracy points) for ONE training
run: acc(arm, seed) - acc(grpo, seed) when grpo has that seed (``paired=True``; what the study's
paired bootstrap compares), else acc(arm, seed) - mean over grpo's seeds. Accuracies are
``analysis.json``'s ``arms.ARM.tokens.per_seed`` at the matched token budget
(``matched.tokens.budget``), in points.

Loss-type arms: an arm's ``loss_type`` (the loss it trains with) and ``probe_entry`` (the key of its
(reward, loss type) in the study's ``probe.json``, e.g. ``outcome@bnpo``; :mod:`gradprobe.probe_keys`)
come from the forecasts (``probe/arms.json``); an arm of an older study reads the entry of its reward,
and a forecaster that does not return these columns gives ``loss_type`` None and ``probe_entry`` = reward.

Identities (:mod:`calib.domain`): ``study`` = folder name @ the first 12 hex digits of the plan's
SHA-256 (``study.json``); ``model`` and ``task`` are resolved from the frozen ``plan.toml``
(``[model] name``, ``[task] name`` + ``[task.config]``), with the full resolved configurations
as JSON in ``model_config`` and ``task_config``.

The ``grpo`` arm: its rows are kept (``is_reference=True``), forecast 0 and, paired, realized 0
by definition. They carry no evidence about any forecaster, so :func:`select_rows` leaves them
out of fits and errors by default (they would pin the fit through (0, 0) with a weight set by the
number of seeds and dilute the errors toward 0); rankings (:mod:`calib.metrics`) include grpo as
one arm.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from gradprobe.api.probe_result import load_probe
from gradprobe.forecast.study import (MATCHED_BUDGET_KEYS, SkippedEvalsWarning, matched_token_budget, read_study_json,
                                      study_forecasts)
from gradprobe.layout import ANALYSIS_JSON, GUIDED_PROBES, PLAN_COPY, PROBE_JSON, STUDY_JSON, probe_dir
from gradprobe.outputs import is_json_number, json_number_text, json_short, read_probe_json
from gradprobe.study.folder import check_frozen_plan, is_plan_sha

from .domain import resolve_model, resolve_task, study_identity
from .integrity import (DuplicateRunsWarning, RowsError, StudyFormatError, analysis_error, analysis_number,
                        check_analysis_matches_runs, check_duplicate_runs, check_finite_forecasts,
                        check_one_row_per_run, check_paired_targets, check_plan_sha, check_reference_rows,
                        read_rows_csv, read_study_runs, rebuild_analysis)

log = logging.getLogger(__name__)

REFERENCE_ARM = "grpo"
"""The arm gains are measured against."""

BUDGET = "tokens"
"""The budget kind of the rows: the forecasters forecast at the study's generated-token budget."""
# the key of the matched generated-token budget in analysis.json ("tokens" in analyses written
# before gradprobe's axes became one vocabulary, gradprobe.training.plan.AXES)
ANALYSIS_KEYS = MATCHED_BUDGET_KEYS  # an arm's per-seed results live under the same keys

FORECASTERS = ("forecast_probe", "forecast_cost_only", "forecast_signal_proxy", "forecast_first_order")
"""Forecast columns (gain vs grpo at the budget, accuracy points); ``forecast_probe`` is the default."""

FEATURES = ("rho", "snr", "tokens_per_update", "token_multiplier")
"""Probe features carried beside the forecasts (not regressed on: the calibrators correct one forecast)."""

FORECAST_COLUMNS = ("arm", "reward", "lr_scale") + FEATURES + FORECASTERS + ("curve_source",)
"""Columns :func:`gradprobe.forecast.study_forecasts` returns (the contract)."""

ID_COLUMNS = ("study", "plan_sha256", "model", "task", "model_config", "task_config", "arm", "reward", "loss_type",
              "probe_entry", "lr_scale", "seed", "budget", "budget_value")
COLUMNS = ID_COLUMNS + ("is_reference", "paired") + FEATURES + FORECASTERS + ("curve_source", "realized", "target")
"""Every column of :func:`build_rows`, in order."""

REQUIRED = ("study", "model", "task", "arm", "seed", "budget", "budget_value", "is_reference", "target")
"""Columns a rows table must have to be calibrated on (plus the chosen forecaster)."""


__all__ = ["REFERENCE_ARM", "BUDGET", "FORECASTERS", "FEATURES", "FORECAST_COLUMNS", "ID_COLUMNS", "COLUMNS",
           "REQUIRED", "StudyFormatError", "RowsError", "DuplicateRunsWarning", "SkippedEvalsWarning", "build_rows",
           "build_rows_many", "study_dir_list", "select_rows", "read_rows", "rows_header",
           "default_forecast_fn"]


def build_rows(study_dir: str | Path, *, curve=None, forecast_fn=None) -> pd.DataFrame:
    """Join a study's forecasts with its realized gains into calibration rows.

    Parameters
    ----------
    study_dir : path
        A finished ``gradprobe study`` folder (``study.json``, ``plan.toml``, ``analysis.json``, ``probe/``).
    curve : gradprobe.forecast.ReferenceCurve, optional
        Passed to the forecaster (default: the study's own grpo curve).
    forecast_fn : callable, optional
        ``f(study_dir, curve=None) -> DataFrame`` with :data:`FORECAST_COLUMNS`, one row per arm;
        default :func:`gradprobe.forecast.study_forecasts`.

    Returns
    -------
    pandas.DataFrame
        One row per (arm, seed) at the token budget, columns :data:`COLUMNS`; gains in accuracy
        points. A run whose accuracy is missing (failed) has ``target`` NaN: kept here, dropped
        and counted by :func:`select_rows`.

    Raises
    ------
    StudyFormatError
        A missing file or field (named, with the fix), no ``grpo`` arm, an arm without a forecast
        row, forecasts that lack contract columns, an infinite forecast (study, arm, seeds), or an
        ``analysis.json`` that no longer matches ``runs.csv`` (arms, seeds per arm, each run's accuracy read at the
        matched points, the realized accuracies among them) or ``study.json``'s plan (:mod:`calib.integrity`; fix:
        ``gradprobe study --analyze-only --overwrite-analysis``, once a cut or edited runs.csv is restored), a bad
        runs.csv cell or a runs.csv accuracy that is not the mean of its eval's per-item results (checked first,
        :func:`calib.integrity.read_study_runs`), an analysis.json number that is none
        (:func:`_token_budget`, :func:`_per_seed`), a study.json ``plan_sha256`` that is no SHA-256
        (:func:`_study_plan_sha`), a probe.json number that is none or field missing (:func:`check_probe_numbers`),
        or a plan.toml the analysis refuses: edited after the study froze it, or invalid (:func:`_study_plan`).

    Warns
    -----
    A logged warning line naming each arm of the plan left out (every run failed): :func:`_warn_left_out_arms`.
    SkippedEvalsWarning
        With ``curve`` None, lines of grpo in ``runs.csv`` that hold no update or greedy accuracy: the study's
        own curve is fitted without them (the rows are built). The default forecaster warns
        (:func:`gradprobe.forecast.study_forecasts`, from the curve it fits); this module re-exports the class.
    """
    return _study_rows(Path(study_dir), curve, forecast_fn)[0]


def _study_rows(study_dir: Path, curve, forecast_fn) -> tuple[pd.DataFrame, dict]:
    """(rows, analysis): :func:`build_rows`'s rows (its checks, warnings and errors) and the ``analysis.json``
    document they were built from (``calib report`` finds the arms that never trained in it, not reading it again)."""
    _check_folder(study_dir)
    study_json = _read_json(study_dir / STUDY_JSON, "it is written by `gradprobe study` when the plan is frozen")
    analysis = _read_json(study_dir / ANALYSIS_JSON, "run `gradprobe study` (it writes analysis.json at the end)")
    arms = _analysis_arms(analysis, study_dir)
    sha, model, task, plan = _study_plan(study_dir, study_json, analysis)
    runs = read_study_runs(study_dir)  # its cells first: a bad one is runs.csv's fault, and a re-analysis reads it
    budget = _token_budget(analysis, study_dir)
    per_seed = {arm: _per_seed(res, arm, study_dir) for arm, res in arms.items()}
    check_analysis_matches_runs(study_dir, analysis, per_seed, runs)
    check_probe_numbers(study_dir)
    fc = _forecasts(study_dir, curve, forecast_fn)
    check_finite_forecasts(fc, study_dir, per_seed)
    ref_seeds = per_seed[REFERENCE_ARM]
    ref_mean = float(np.nanmean(list(ref_seeds.values()))) if ref_seeds else math.nan
    ident = study_identity(study_dir, sha)
    rows = []
    for arm, res in arms.items():
        if arm not in fc.index:
            raise StudyFormatError(f"{study_dir}: arm {arm!r} has no forecast row (forecasts for {sorted(fc.index)}); "
                                   "the forecaster must return one row per arm of analysis.json")
        f = fc.loc[arm]
        for seed, acc in per_seed[arm].items():
            paired = seed in ref_seeds and not math.isnan(ref_seeds[seed])
            base = ref_seeds[seed] if paired else ref_mean
            row = {"study": ident["key"], "plan_sha256": sha, "model": model["key"], "task": task["key"],
                   "model_config": json.dumps(model, sort_keys=True), "task_config": json.dumps(task, sort_keys=True),
                   "arm": arm, "reward": f["reward"], "loss_type": f.get("loss_type"),
                   "probe_entry": f.get("probe_entry") or f["reward"], "lr_scale": float(f["lr_scale"]), "seed": seed,
                   "budget": BUDGET, "budget_value": budget, "is_reference": arm == REFERENCE_ARM, "paired": paired,
                   "curve_source": f["curve_source"], "realized": acc, "target": acc - base}
            row.update({c: float(f[c]) for c in FEATURES + FORECASTERS})
            rows.append(row)
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df.loc[df["is_reference"] & df["paired"], "target"] = 0.0  # exactly 0 for grpo's own paired rows
    _warn_left_out_arms(study_dir, [a for a in plan.arms if a not in arms], analysis, study_json)
    return df, analysis


def build_rows_many(study_dirs, *, curve=None, forecast_fn=None, _analyses=None) -> pd.DataFrame:
    """:func:`build_rows` of several studies, concatenated.

    ``study_dirs``: a list (or other iterable) of study folders; a single path (str or Path) is one study.
    ``_analyses`` (internal, ``calib report``): a dict, filled with ``Path(folder)`` -> its ``analysis.json`` as
    the rows were built from it (:func:`_study_rows`).

    Warns
    -----
    DuplicateRunsWarning
        The same training run read from two of the studies (:func:`calib.integrity.duplicate_runs`:
        same model, task, arm settings and seed, identical accuracy curve), naming both studies and
        the runs: deterministic retraining gives such copies (the shipped calibration reads copies of
        ``grpo`` and ``grpo_2xlr``).

    Raises
    ------
    TypeError
        ``study_dirs`` is neither a path nor an iterable of paths (e.g. None), or one of its items is not a
        path (:func:`study_dir_list`).
    StudyFormatError
        No folder given, one study given twice (same folder name and plan: its rows would count
        twice, and leave-one-study-out would hold out only one copy), or a study all of whose runs are
        read from the other studies given (e.g. ``data/study_tiny_granularity`` beside
        ``data/study_reward_granularity``; :func:`calib.integrity.check_duplicate_runs`).
    """
    study_dirs = study_dir_list(study_dirs)
    if not study_dirs:
        raise StudyFormatError("no study folders given")
    frames = []
    for d in map(Path, study_dirs):
        rows, analysis = _study_rows(d, curve, forecast_fn)
        frames.append(rows)
        if _analyses is not None:
            _analyses[d] = analysis
    keys = [f["study"].iloc[0] for f in frames if len(f)]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise StudyFormatError(f"study {dup[0]!r} is given twice (same folder name and plan sha256); pass each study "
                               "once")
    check_duplicate_runs(frames, study_dirs, REFERENCE_ARM)
    return pd.concat(frames, ignore_index=True)


def study_dir_list(study_dirs, *, name: str = "study_dirs") -> list:
    """``study_dirs`` as a list of study folders: a single path (str or ``os.PathLike``) is a list of one.

    Raises
    ------
    TypeError
        ``study_dirs`` is neither a path nor an iterable (e.g. None or a number), or an item is not a path; the
        message names the argument (``name``) and what to pass.
    """
    if isinstance(study_dirs, (str, os.PathLike)):
        return [study_dirs]
    if isinstance(study_dirs, (bytes, dict)) or not isinstance(study_dirs, Iterable):
        raise TypeError(f"{name} must be a study folder or a list of study folders, got "
                        f"{type(study_dirs).__name__}; pass e.g. [\"data/study_tiny\"]")
    dirs = list(study_dirs)
    for i, d in enumerate(dirs):
        if not isinstance(d, (str, os.PathLike)):
            raise TypeError(f"{name}[{i}] is a {type(d).__name__}, not a path; pass study folders as str or "
                            "pathlib.Path, e.g. [\"data/study_tiny\"]")
    return dirs


def select_rows(rows: pd.DataFrame, *, forecaster: str = "forecast_probe", include_reference: bool = False,
                min_arms: int = 2, check_reference: bool = True) -> tuple[pd.DataFrame, dict]:
    """Validate a rows table and keep the rows a calibrator of ``forecaster`` is fitted on.

    Parameters
    ----------
    rows : DataFrame
        From :func:`build_rows` (or its CSV, :func:`read_rows`).
    forecaster : str
        The forecast column to correct (:data:`FORECASTERS`).
    include_reference : bool
        Keep the ``grpo`` rows (see the module docstring for why they are left out by default).
    min_arms : int
        Fewest distinct non-reference arms (leave-one-arm-out needs 2).
    check_reference : bool
        Check the ``is_reference`` flags (:func:`calib.integrity.check_reference_rows`). False only where the
        caller already checked these rows, so that its warning is given once (``calib report``'s fit of each
        forecaster).

    Returns
    -------
    (DataFrame, dict)
        The kept rows (index reset) and counts: ``rows_in``, ``dropped_reference``,
        ``dropped_nan_target`` (runs without a realized accuracy), ``dropped_no_forecast`` (rows the
        forecaster cannot say anything about, e.g. learning-rate arms for the probe),
        ``no_forecast_arms``, ``rows``.

    Raises
    ------
    RowsError
        Missing columns (named), an unknown forecaster, a non-numeric or infinite forecast or target
        (study, arm and seed named), one run (study, arm, seed) on two rows
        (:func:`calib.integrity.check_one_row_per_run`), a paired target that is not the run's realized
        accuracy minus the reference's on its seed (:func:`calib.integrity.check_paired_targets`),
        ``is_reference`` flags that disagree with the arm names (a ``grpo`` row not marked, another arm marked:
        :func:`calib.integrity.check_reference_rows`, which also warns of an arm that looks like the reference
        renamed; a table without grpo's rows is fitted), fewer
        than ``min_arms`` arms with a forecast, every row the reference arm, or no rows left.
    """
    _check_columns(rows, forecaster)
    _check_values(rows, forecaster)
    check_one_row_per_run(rows)
    check_paired_targets(rows)
    if check_reference:  # grpo's rows fitted as data would pin the fit through (0, 0); grpo's rows may be filtered out
        check_reference_rows(rows, reference_arm=REFERENCE_ARM, require_reference=False)
    counts = {"rows_in": int(len(rows))}
    ref = rows["is_reference"].astype(bool)
    counts["dropped_reference"] = 0 if include_reference else int(ref.sum())
    df = rows if include_reference else rows[~ref]
    nan_target = ~np.isfinite(df["target"].astype(float))
    counts["dropped_nan_target"] = int(nan_target.sum())
    if nan_target.any():
        log.warning("dropped %d row(s) whose realized gain is missing (failed or unevaluated runs): %s",
                    int(nan_target.sum()), ", ".join(sorted({f"{st}/{a}/seed{s}" for st, a, s in zip(
                        df.loc[nan_target, "study"], df.loc[nan_target, "arm"], df.loc[nan_target, "seed"])})))
        df = df[~nan_target]
    no_fc = ~np.isfinite(df[forecaster].astype(float))
    counts["dropped_no_forecast"] = int(no_fc.sum())
    counts["no_forecast_arms"] = sorted({f"{st}/{a}" for st, a in zip(df.loc[no_fc, "study"], df.loc[no_fc, "arm"])})
    df = df[~no_fc]
    if df.empty and len(rows) and ref.all():
        raise RowsError(f"every row ({len(rows)}) is the reference arm {REFERENCE_ARM!r}, whose gain vs itself is 0 "
                        f"by definition: there is nothing to calibrate {forecaster} on; add rows of other arms "
                        "(`calib rows STUDY_DIR... --out ROWS.csv` over studies that train arms besides grpo)")
    if df.empty:
        raise RowsError(f"no rows left to calibrate {forecaster} on ({counts}); check that the studies have results "
                        "and that the forecaster covers their arms")
    arms = sorted(set(df.loc[~df["is_reference"].astype(bool), "arm"]))
    if len(arms) < min_arms:
        raise RowsError(f"cannot calibrate {forecaster}: the rows have {len(arms)} arm(s) with a forecast besides grpo "
                        f"({arms}) and calibration needs at least {min_arms}: one arm gives no spread of forecasts to "
                        "learn a map from and none to hold out; add arms or studies")
    counts["rows"] = int(len(df))
    return df.reset_index(drop=True), counts


def read_rows(path: str | Path) -> pd.DataFrame:
    """Read a rows CSV (``calib rows``).

    Raises
    ------
    FileNotFoundError
        The path (named) does not exist.
    RowsError
        The path is a folder (named; a study folder gets the ``calib rows`` command that makes its rows).
        A rows file of the old format (``predicted_gain``, no forecasts): rebuild it. An empty, binary,
        unparseable or cut file (no line break at its end), a file separated by semicolons or tabs, a JSON document (a
        calibration file named as such), a header naming a column twice or a line whose cells do not match the
        header's columns in number (named by line), or a bad cell:
        an empty study, model, task, arm, seed, budget or reward (:data:`calib.integrity.IDENTITY`), a non-number in
        a numeric column (only an empty cell is missing: ``n/a`` or ``NA`` is text), an infinite forecast,
        realized accuracy or target (NaN/empty = none), a target, realized accuracy or saturating forecast outside
        its range in points, a ``budget_value`` that is not a finite number > 0, a flag that is not True/False;
        named by file, line and column, with the fix (:func:`calib.integrity.read_rows_csv`).
    """
    path = Path(path)
    if path.is_dir():
        study = (path / STUDY_JSON).is_file() or probe_dir(path).is_dir()
        raise RowsError(f"rows file {str(path)!r} is a folder, not a rows CSV; " + (
            f"it looks like a study folder: write its rows with `calib rows {path} --out rows.csv`, then "
            "`calib fit rows.csv`" if study else "pass the CSV that `calib rows STUDY_DIR... --out ROWS.csv` writes"))
    if not path.is_file():
        raise FileNotFoundError(f"rows file {str(path)!r} not found; write it with `calib rows STUDY_DIR --out {path}`")
    df = read_rows_csv(path)
    if "predicted_gain" in df.columns and not any(c in df.columns for c in FORECASTERS):
        raise RowsError(f"{path} is a rows file of the old format (the first-order predicted_gain, no forecast "
                        f"columns); rebuild it with `calib rows STUDY_DIR... --out {path}`")
    return df


def rows_header(path: str | Path) -> list[str] | None:
    """The column names of ``path``'s first line when it is a rows CSV's header (``calib rows`` writes it: every
    column of :data:`REQUIRED` among its comma-separated names), else None (a folder, an unreadable, binary or empty
    file, another CSV such as a study's ``runs.csv``, JSON, TOML). Reads the first line only (64 KiB at most)."""
    try:
        with open(path, "rb") as f:
            line = f.readline(1 << 16)
        names = next(csv.reader([line.decode("utf-8-sig").strip()]), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return names if set(REQUIRED) <= set(names) else None


def _check_columns(rows: pd.DataFrame, forecaster: str) -> None:
    if forecaster not in FORECASTERS:
        raise RowsError(f"unknown forecaster {forecaster!r}; choose one of {list(FORECASTERS)}")
    missing = [c for c in dict.fromkeys(list(REQUIRED) + [forecaster]) if c not in rows.columns]
    if missing:
        raise RowsError(f"rows table lacks column(s) {missing}; build it with `calib rows STUDY_DIR... --out ROWS.csv` "
                        f"(columns: {', '.join(COLUMNS)})")


def _check_values(rows: pd.DataFrame, forecaster: str) -> None:
    """Refuse a non-numeric or infinite ``forecaster``/``target`` cell of a rows table (NaN = none)."""
    for col in (forecaster, "target"):
        vals = pd.to_numeric(rows[col], errors="coerce").to_numpy(np.float64)
        bad = np.isinf(vals) | (np.isnan(vals) & rows[col].notna().to_numpy())
        if bad.any():
            i = int(np.argmax(bad))
            r, v = rows.iloc[i], rows[col].iloc[i]
            shown = repr(v) if isinstance(v, str) else v
            raise RowsError(f"rows table, study {r['study']!r}, arm {r['arm']!r}, seed {r['seed']}: {col} = "
                            f"{shown} is not a finite number (NaN means none; an infinity is bad "
                            "data); rebuild the rows with `calib rows STUDY_DIR... --out ROWS.csv`")


def _check_folder(study_dir: Path) -> None:
    if not study_dir.is_dir():
        raise StudyFormatError(f"study folder {str(study_dir)!r} does not exist or is not a folder; pass the --out "
                               f"folder of a finished `gradprobe study` (e.g. data/study_tiny)")
    if not (study_dir / STUDY_JSON).is_file() and not probe_dir(study_dir).is_dir():
        raise StudyFormatError(f"{str(study_dir)!r} is not a study folder (no study.json, no probe/); pass the --out "
                               f"folder of a finished `gradprobe study` (e.g. data/study_tiny)")


def _study_plan_sha(study_json: dict, study_dir: Path) -> str | None:
    """``study.json``'s ``plan_sha256``: the frozen plan's SHA-256 (64 lowercase hex digits, as text), or None when
    it is absent (or null: the caller falls back to analysis.json's). StudyFormatError naming the file, the field,
    its value (as JSON writes it) and the fix otherwise (``true``, ``0``, a list, a 40-digit text: it names the study
    in the rows and is compared with analysis.json's)."""
    sha = study_json.get("plan_sha256")
    if sha is None or is_plan_sha(sha):
        return sha
    path = study_dir / STUDY_JSON
    raise StudyFormatError(f"{path} field plan_sha256 is {json_number_text(sha, json_short(sha))}, not the SHA-256 of "
                           f"the study's plan (64 lowercase hex digits, as text); restore {path} from a copy of the "
                           "study (`gradprobe study` writes it when the study's plan is frozen)")


def _plan_identity(study_dir: Path) -> tuple[dict, dict]:
    """Resolved model and task of the study's frozen plan. Read with tomllib (the plan's [model] and
    [task] tables only): validating the whole plan would need every reward plug-in registered here."""
    path = study_dir / PLAN_COPY
    if not path.is_file():
        raise StudyFormatError(f"{path} is missing; `gradprobe study` freezes the plan there (copy the plan the study "
                               "ran with, unchanged: its sha256 is in study.json)")
    try:
        plan = tomllib.loads(path.read_text())
        m, t = plan["model"], plan["task"]
        return resolve_model(m["name"], dtype=m.get("dtype")), resolve_task(t["name"], t.get("config") or {})
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise StudyFormatError(f"{path}: cannot read [model] name and [task] name ({type(e).__name__}: {e}); "
                               "restore the plan the study was frozen with") from None


def _study_plan(study_dir: Path, study_json: dict, analysis: dict) -> tuple:
    """(plan sha256, resolved model, resolved task, validated Plan) of the study: its sha256 as ``study.json`` (else
    ``analysis.json``) records it, the model and task of :func:`_plan_identity`, and the plan read as the analysis
    reads it (:func:`_frozen_plan`).

    Raises
    ------
    StudyFormatError
        No plan sha256 recorded, ``analysis.json`` made for another plan (:func:`calib.integrity.check_plan_sha`),
        ``plan.toml`` edited after the study froze it (its sha256 is not ``study.json``'s ``plan_sha256``: the one
        check of the analysis, :func:`gradprobe.study.folder.check_frozen_plan`), or a plan the analysis refuses
        (``lr = "fast"``, :func:`_frozen_plan`); each names the file and the fix.
    """
    sha = _study_plan_sha(study_json, study_dir) or analysis.get("plan_sha256")
    if not sha:
        raise StudyFormatError(f"{study_dir}/study.json has no plan_sha256; the study folder predates frozen plans: "
                               "re-run it with this gradprobe")
    check_plan_sha(study_dir, study_json.get("plan_sha256"), analysis.get("plan_sha256"))
    check_frozen_plan(study_dir, study_json, error=StudyFormatError)  # an edited plan.toml, as the analysis refuses
    model, task = _plan_identity(study_dir)
    return sha, model, task, _frozen_plan(study_dir, study_json)


def _frozen_plan(study_dir: Path, study_json: dict):
    """The study's frozen plan read and validated as its analysis reads it
    (:func:`gradprobe.study.reading.frozen_plan`, ``gradprobe study --analyze-only``): a plan the analysis refuses
    (``lr = "fast"``, an unknown key) is refused here too. One difference: an arm's reward name need not be
    registered in this process (:func:`_reward_names_only`): the rows read the reward by name and never run it,
    and a reward a user registered in their own script is not registered in ``calib``.

    Raises
    ------
    StudyFormatError
        The plan is invalid or missing: the analysis's message, naming the file, and the fix.
    """
    from gradprobe.study.reading import AnalysisError, frozen_plan
    from gradprobe.training.plan import PlanError

    try:
        with _reward_names_only():
            return frozen_plan(study_dir, study_json)
    except (PlanError, AnalysisError) as e:
        raise StudyFormatError(f"{study_dir / PLAN_COPY}: {e} (`gradprobe study --analyze-only` refuses it "
                               "likewise); restore the plan the study was frozen with") from None


def _reward_names_only():
    """A block within which a reward name that is not registered resolves to a stand-in that is never run, so a
    plan is validated without its rewards' code (:func:`_frozen_plan`): a
    :func:`gradprobe.rewards.base.scoped_resolvers` block, seen by this thread alone; the shared
    :data:`gradprobe.rewards.base.RESOLVERS` is left as it is (it was appended to and removed from, which another
    thread resolving a name meanwhile would have seen)."""
    from gradprobe.rewards.base import scoped_resolvers

    return scoped_resolvers(_stand_in)


def _stand_in(name: str):
    """A reward for ``name`` that is never run (:func:`_reward_names_only`); calling it raises RuntimeError."""
    def never_run(*_args, **_kwargs):
        raise RuntimeError(f"reward {name!r} is a stand-in of calib's plan check and is never run")
    return never_run


def _warn_left_out_arms(study_dir: Path, left_out: list, analysis: dict, study_json: dict) -> None:
    """Log one warning naming the arms of the plan (``left_out``) that give no row: ``analysis.json`` holds no
    result of them because every run of them failed or is missing from runs.csv; each with the reasons its runs
    are missing (``analysis.json``'s ``missing_runs``, else the status ``study.json`` records), so no arm is
    dropped silently."""
    if not left_out:
        return
    missing = analysis.get("missing_runs") if isinstance(analysis.get("missing_runs"), list) else []
    runs = study_json.get("runs") if isinstance(study_json.get("runs"), list) else []
    told = []
    for arm in left_out:
        why = {}  # reason -> its seeds (told once for the seeds that share it)
        for r in (r for r in missing if isinstance(r, dict) and r.get("arm") == arm):
            why.setdefault(str(r.get("reason")), []).append(str(r.get("seed")))
        for r in (r for r in ([] if why else runs) if isinstance(r, dict) and r.get("arm") == arm):
            reason = f"its status in {STUDY_JSON} is {r.get('status')!r}" + (f" ({r['error']})" if r.get("error")
                                                                              else "")
            why.setdefault(reason, []).append(str(r.get("seed")))
        said = "; ".join(f"seed{'s' if len(s) > 1 else ''} {', '.join(s)}: {w}" for w, s in why.items())
        told.append(f"{arm!r} ({said or f'no run of it in {STUDY_JSON}'})")
    log.warning("%s: arm(s) %s of the plan left out of the rows: %s holds no result of it (every run of it failed "
                "or is missing from runs.csv, so it has no realized accuracy): %s; see %s missing_runs and %s runs",
                study_dir, ", ".join(repr(a) for a in left_out), ANALYSIS_JSON, ", ".join(told), ANALYSIS_JSON,
                STUDY_JSON)


def check_probe_numbers(study_dir: Path) -> None:
    """Refuse a study whose probe (``probe/probe.json``, and each guided arm's ``probe/guided/<arm>/probe.json``)
    holds a number field that is no usable number, naming the file: the forecasts read the probe as a dict and
    could only name the field or the entry. Checked: each reward entry's per-update costs (``tokens_per_update``,
    ``seconds_per_update``: a finite number > 0; ``true`` was read as 1 token per update and flipped forecasts
    silently; :func:`gradprobe.api.probe_result.load_probe`) and its ``per_group`` lists and first-order gain
    (:func:`gradprobe.forecast.probe_input.check_entry_numbers`), and that it has the fields every forecast reads
    (``tokens_per_update``, ``per_group``...: missing or null is refused). :func:`gradprobe.load_probe` checks all
    of these (the fields: :func:`gradprobe.api.probe_result.check_fields`, in the top-level entries and in each
    batch's, a ``rewards`` list or an object mapping name -> entry, e.g.
    ``batches[0].rewards['mc_value'].tokens_per_update``) and its ValueError is raised as a StudyFormatError, its
    message unchanged. Each file is read as :func:`gradprobe.load_probe` reads it
    (:func:`gradprobe.outputs.read_probe_json`: a UTF-8 byte-order mark is read); a missing file, or one that is not
    UTF-8, not JSON or no object with a ``rewards`` list, is left to the forecaster, which names it.

    Raises
    ------
    StudyFormatError
        One line: the file, the field (e.g. ``rewards[1].tokens_per_update``), what is accepted (or that it is
        missing) and the fix (:func:`gradprobe.layout.rerun_advice`: delete the probe.json and resume the study, which
        re-runs the probe; restore it from a copy of a study without run folders).
    """
    folder = probe_dir(study_dir)
    for path in [folder / PROBE_JSON, *sorted((folder / GUIDED_PROBES).glob(f"*/{PROBE_JSON}"))]:
        if not path.is_file():
            continue
        try:  # read as load_probe reads it (a UTF-8 byte-order mark is read); its refusal is not shown: no fix needed
            read_probe_json(path, "")
        except (ValueError, OSError):  # not UTF-8, not JSON, no rewards list: named by the forecaster's own reader
            continue
        try:
            load_probe(path)  # the forecast's checks too (probe_batches_of, with this file named)
        except ValueError as e:
            raise StudyFormatError(str(e)) from None
        except (KeyError, TypeError, AttributeError):  # a malformed entry (no name...): the forecaster says so
            continue


def _forecasts(study_dir: Path, curve, forecast_fn) -> pd.DataFrame:
    if forecast_fn is None:
        forecast_fn = default_forecast_fn()
    fc = forecast_fn(study_dir, curve=curve)
    missing = [c for c in FORECAST_COLUMNS if c not in fc.columns]
    if missing:
        raise StudyFormatError(f"the forecasts of {study_dir} lack column(s) {missing} (gradprobe.forecast."
                               f"study_forecasts must return {list(FORECAST_COLUMNS)}); update gradprobe")
    if fc["arm"].duplicated().any():
        raise StudyFormatError(f"the forecasts of {study_dir} have several rows for arm(s) "
                               f"{sorted(set(fc.loc[fc['arm'].duplicated(), 'arm']))}; expected one row per arm")
    return fc.set_index("arm", drop=False)


def default_forecast_fn():
    """The forecaster of every study's arms: :func:`gradprobe.forecast.study_forecasts` (tests route it to a
    synthetic one by patching this function)."""
    return study_forecasts


def _analysis_arms(analysis: dict, study_dir: Path) -> dict:
    """``analysis.json``'s ``arms`` (arm -> its results), each an object whose ``seeds`` is a whole number >= 0 (or
    absent), after checking its ``plan_sha256`` is text (or absent); StudyFormatError naming the field and the fix
    (:func:`calib.integrity.analysis_error`), or saying that it has no ``grpo`` arm (gains are measured against it)."""
    sha = analysis.get("plan_sha256")
    if sha is not None and not isinstance(sha, str):
        raise analysis_error(study_dir, "plan_sha256", sha, "the plan's sha256 (64 hex digits, text)")
    arms = analysis.get("arms", {})
    if not isinstance(arms, dict):
        raise analysis_error(study_dir, "arms", arms, "an object {arm: its results}")
    for arm, res in arms.items():
        if not isinstance(res, dict):
            raise analysis_error(study_dir, f"arms.{arm}", res, "an object of the arm's results")
        n = res.get("seeds")  # compared with runs.csv's seeds (gradprobe.study.coverage.stale_analysis)
        if n is not None and not (is_json_number(n, finite=True, integer=True) and n >= 0):
            raise analysis_error(study_dir, f"arms.{arm}.seeds", n, "a seed count (a whole number >= 0)", number=True)
    if REFERENCE_ARM not in arms:
        raise StudyFormatError(f"{study_dir}/analysis.json has no {REFERENCE_ARM!r} arm (arms: {sorted(arms)}); "
                               "gains are measured against it, so the plan needs an arm named grpo")
    return arms


def _token_budget(analysis: dict, study_dir: Path) -> float:
    """The matched generated-token budget of ``analysis.json``, in tokens: gradprobe's own read of it
    (:func:`gradprobe.forecast.study.matched_token_budget`), so ``calib rows`` and a study forecast refuse the same
    values with the same words.

    Raises
    ------
    StudyFormatError
        The field is missing, or holds no finite number > 0 (``true``, text, NaN, 0); the file, the field and the fix
        (a re-analysis) named.
    """
    return matched_token_budget(analysis, study_dir, error=StudyFormatError)


def _read_json(path: Path, fix: str) -> dict:
    """The JSON object of a study file ``path`` (``study.json``, ``analysis.json``).

    Raises
    ------
    StudyFormatError
        It is missing or no valid JSON (``fix`` named: :func:`gradprobe.forecast.study.read_study_json`), or valid
        JSON that is no object (``[]``, a number): the file, what it holds and the fix (restore it from a copy of the
        study; ``gradprobe study`` writes it).
    """
    doc = read_study_json(path, fix, error=StudyFormatError)
    if not isinstance(doc, dict):
        raise StudyFormatError(f"{path} holds {json_short(doc)}, not a JSON object of the study's fields; restore "
                               f"{path} from a copy of the study ({fix})")
    return doc


def _per_seed(res: dict, arm: str, study_dir: Path) -> dict[int, float]:
    """Seed -> accuracy (points; NaN for a failed run, null in the file) of ``arm``'s results ``res`` at the token
    budget (``arms.ARM.generated_tokens.per_seed``, or the older ``tokens`` key).

    Raises
    ------
    StudyFormatError
        It is missing or no object, a key is no seed (a whole number >= 0 as text, e.g. ``"0"``), or a value is no
        accuracy (a finite number in [0, 100] by :func:`calib.integrity.analysis_number`: never a boolean or text);
        the file, the field and the fix (a re-analysis) named.
    """
    key = next((k for k in ANALYSIS_KEYS if isinstance(res.get(k), dict)), None)
    if key is None or "per_seed" not in res[key]:
        raise StudyFormatError(f"{study_dir}/analysis.json: arms.{arm}.{ANALYSIS_KEYS[0]}.per_seed is missing; "
                               + rebuild_analysis(study_dir))
    field, block = f"arms.{arm}.{key}.per_seed", res[key]["per_seed"]
    if not isinstance(block, dict):
        raise analysis_error(study_dir, field, block, "an object {seed: accuracy in points}")
    out = {}
    for seed, acc in block.items():
        if not re.fullmatch(r"\d{1,18}", seed):
            raise analysis_error(study_dir, f"{field} key", seed, 'a seed (a whole number >= 0 such as "0")')
        out[int(seed)] = math.nan if acc is None else analysis_number(
            study_dir, f"{field}.{seed}", acc, "an accuracy in points (a finite number in [0, 100]; null for a failed "
            "run)", low=0.0, high=100.0)
    return out
