"""Calibration rows: the probe's predictions joined with a study's realized gains.

One row per (model, task, arm, seed, budget) of a study folder (format: ``gradprobe study``;
``probe/probe.json``, ``probe/arms.json``, ``analysis.json``). Budgets are the study's three
matched budgets (``analysis.json["matched"]``): ``tokens`` (generated tokens), ``time``
(device-seconds of training work) and ``updates``.

Probe features of arm a with reward R and learning-rate scale s (``arms.json``), at budget X,
from the probe of R on the initial policy (DESIGN.md, "The probe"; gradprobe/probe/estimate.py):

- gain per update g_a = s * 100 * lr * <g_R, P v> accuracy points. The prediction is first order
  in the step, so scaling the learning rate by s scales the predicted gain by s (exact to first
  order; it ignores curvature, which is what the calibration then corrects).
- predicted gain vs the initial policy at the budget, ``predicted_gain_abs``:
  tokens: (T / c_R) * g_a, c_R generated tokens per update (continuations included);
  time: (S / d_R) * g_a, d_R the probe's device-seconds per update (measured on the probe's
  machine: comparable with the study's only when both ran on the same kind of device);
  updates: U * g_a.
- ``predicted_gain``: the same minus the ``grpo`` arm's, i.e. the predicted gain VS GRPO at the
  same budget, on the scale of the target. This is the calibration's main feature.
- ``alignment``: <g_R, P v> (accuracy fraction per unit step, not scaled by s); ``cosine``
  (NaN when the probe ran without ``--cosine``); ``snr`` (bootstrap signal-to-noise ratio, may be
  inf); ``token_multiplier``: c_R / c_outcome (the ``grpo`` arm's reward).

Target: ``target`` = realized gain vs GRPO at the same budget (accuracy points) for ONE training
run: acc(arm, seed) - acc(grpo, seed) when grpo has that seed (paired, ``paired=True``; this is
what the study's paired bootstrap compares), else acc(arm, seed) - mean over grpo's seeds.
Accuracies are ``analysis.json``'s ``per_seed`` values at the matched budget, in points.

The ``grpo`` arm: its rows are kept (``is_reference=True``): predicted 0 and, paired, realized 0
by definition. They carry no evidence about the probe (0 = 0 whatever the probe does) but pin
"no change, no gain"; :func:`select_rows` leaves them out of fits and metrics by default, because
as noise-free copies of the origin they would pull the fit through (0, 0) with a weight set by the
number of seeds, not by evidence, and dilute the bias and MAE toward 0 by the share of grpo rows.
Rankings (:mod:`calib.metrics`) include grpo as one arm among the others.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

BUDGETS = ("tokens", "time", "updates")
"""Matched budgets of a study (``analysis.json["matched"]``)."""

REFERENCE_ARM = "grpo"
"""The arm gains are measured against."""

FEATURES = ("predicted_gain", "alignment", "cosine", "snr", "token_multiplier")
"""Probe features a calibrator may use (``predicted_gain`` first: the default and only required one)."""

ID_COLUMNS = ("study", "model", "task", "arm", "reward", "lr_scale", "seed", "budget", "budget_value")
COLUMNS = ID_COLUMNS + ("is_reference", "paired", "gain_per_update", "tokens_per_update", "predicted_gain_abs") \
    + FEATURES + ("realized", "target")
"""Every column of :func:`build_rows`, in order."""

REQUIRED = ("model", "task", "arm", "seed", "budget", "is_reference", "predicted_gain", "target")
"""Columns a rows table must have to be calibrated on (plus any selected feature)."""


class StudyFormatError(ValueError):
    """A study folder lacks a file or field that calibration needs (the message names it)."""


class RowsError(ValueError):
    """A rows table cannot be calibrated on (missing columns, a single arm, ...)."""


def build_rows(study_dir: str | Path) -> pd.DataFrame:
    """Join a study's probe with its realized gains into calibration rows.

    Parameters
    ----------
    study_dir : path
        A ``gradprobe study`` folder with ``probe/probe.json``, ``probe/arms.json`` and
        ``analysis.json`` (see the module docstring for what is read).

    Returns
    -------
    pandas.DataFrame
        One row per (arm, seed, budget), columns :data:`COLUMNS`; gains in accuracy points.
        Rows whose accuracy is missing (a failed run) have ``target`` NaN: kept here, dropped and
        counted by :func:`select_rows`.

    Raises
    ------
    StudyFormatError
        A missing file, an arm whose reward the probe did not cover, no ``grpo`` arm, a missing
        matched budget, or a probe entry without the fields needed (each named, with the fix).
    """
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        raise StudyFormatError(f"study folder {str(study_dir)!r} does not exist or is not a folder; pass the --out "
                               f"folder of a finished `gradprobe study` (e.g. data/study_tiny)")
    if not (study_dir / "study.json").is_file() and not (study_dir / "probe").is_dir():
        raise StudyFormatError(f"{str(study_dir)!r} is not a study folder (no study.json, no probe/); pass the --out "
                               f"folder of a finished `gradprobe study` (e.g. data/study_tiny)")
    probe = _read_json(study_dir / "probe" / "probe.json", "run `gradprobe study` to the end (the probe runs last)")
    arms_map = _read_json(study_dir / "probe" / "arms.json", "it is written with probe.json by `gradprobe study`")
    analysis = _read_json(study_dir / "analysis.json", "run `gradprobe study` (it writes analysis.json at the end)")

    entries = _probe_entries(probe)
    cfg = probe.get("config") or {}
    model, task = cfg.get("model"), cfg.get("task")
    if not model or not task:
        raise StudyFormatError(f"{study_dir}/probe/probe.json: config.model and config.task are required")
    arms = analysis.get("arms") or {}
    if REFERENCE_ARM not in arms:
        raise StudyFormatError(f"{study_dir}/analysis.json has no {REFERENCE_ARM!r} arm (arms: {sorted(arms)}); "
                               "gains are measured against it, so the plan needs an arm named grpo")
    ref_reward = (arms_map.get(REFERENCE_ARM) or {}).get("reward", arms[REFERENCE_ARM].get("reward", "outcome"))
    matched = analysis.get("matched") or {}

    ref_entry = _entry(entries, ref_reward, study_dir)
    ref_lr = float((arms_map.get(REFERENCE_ARM) or {}).get("lr_scale", 1.0))
    rows = []
    for budget in BUDGETS:
        if budget not in matched or "budget" not in (matched[budget] or {}):
            raise StudyFormatError(f"{study_dir}/analysis.json: matched.{budget}.budget is missing")
        value = float(matched[budget]["budget"])
        ref_pred = _predicted_or_nan(ref_entry, budget, value, ref_lr, study_dir)
        ref_seeds = _per_seed(arms[REFERENCE_ARM], budget, REFERENCE_ARM, study_dir)
        ref_mean = float(np.nanmean(list(ref_seeds.values()))) if ref_seeds else math.nan
        for arm, res in arms.items():
            spec = arms_map.get(arm) or {}
            reward = spec.get("reward", res.get("reward"))
            if reward is None:
                raise StudyFormatError(f"{study_dir}: arm {arm!r} has no reward in probe/arms.json or analysis.json")
            lr_scale = float(spec.get("lr_scale", res.get("lr_scale", 1.0)))
            entry = _entry(entries, reward, study_dir)
            pred_abs = _predicted_or_nan(entry, budget, value, lr_scale, study_dir)
            for seed, acc in _per_seed(res, budget, arm, study_dir).items():
                paired = seed in ref_seeds and not math.isnan(ref_seeds[seed])
                base = ref_seeds[seed] if paired else ref_mean
                rows.append({
                    "study": str(study_dir), "model": model, "task": task, "arm": arm, "reward": reward,
                    "lr_scale": lr_scale, "seed": seed, "budget": budget, "budget_value": value,
                    "is_reference": arm == REFERENCE_ARM, "paired": paired,
                    "gain_per_update": lr_scale * float(entry["predicted_gain_per_update"]),
                    "tokens_per_update": float(entry["tokens_per_update"]),
                    "predicted_gain_abs": pred_abs, "predicted_gain": pred_abs - ref_pred,
                    "alignment": float(entry["inner_product"]), "cosine": _float(entry.get("cosine")),
                    "snr": _float(entry.get("snr")),
                    "token_multiplier": float(entry["tokens_per_update"]) / float(ref_entry["tokens_per_update"]),
                    "realized": acc, "target": acc - base,
                })
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    # exactly 0 for grpo's own paired rows, whatever the float rounding of acc - acc
    df.loc[df["is_reference"] & df["paired"], "target"] = 0.0
    return df


def build_rows_many(study_dirs) -> pd.DataFrame:
    """:func:`build_rows` of several studies (e.g. one per model), concatenated."""
    frames = [build_rows(d) for d in study_dirs]
    if not frames:
        raise StudyFormatError("no study folders given")
    return pd.concat(frames, ignore_index=True)


def predicted_at_budget(entry: dict, budget: str, value: float, *, lr_scale: float = 1.0) -> float:
    """The probe's predicted gain vs the initial policy at a budget (accuracy points).

    Parameters
    ----------
    entry : dict
        One reward entry of ``probe.json`` (:class:`gradprobe.probe.estimate.RewardEstimate`).
    budget : {"tokens", "time", "updates"}
    value : float
        The budget: generated tokens, device-seconds, or updates.
    lr_scale : float
        Learning-rate multiplier of the arm; the first-order gain scales with it.

    Returns
    -------
    float
        tokens: (value / c_R) * g; time: (value / seconds_per_update) * g; updates: value * g,
        with g = lr_scale * ``predicted_gain_per_update`` (DESIGN.md, "The probe").

    Raises
    ------
    StudyFormatError
        Unknown budget, or the entry lacks the per-update cost the budget needs.
    """
    g = lr_scale * float(entry["predicted_gain_per_update"])
    if budget == "tokens":
        return value / float(entry["tokens_per_update"]) * g
    if budget == "time":
        secs = _float(entry.get("seconds_per_update"))
        if not secs > 0:
            raise StudyFormatError(f"probe entry {entry.get('name')!r} has no positive seconds_per_update; "
                                   "a time budget needs it (re-run the probe with this gradprobe)")
        return value / secs * g
    if budget == "updates":
        return value * g
    raise StudyFormatError(f"unknown budget {budget!r}; choose one of {BUDGETS}")


def select_rows(rows: pd.DataFrame, *, budget: str | None = "tokens", features=("predicted_gain",),
                include_reference: bool = False, min_arms: int = 2) -> tuple[pd.DataFrame, dict]:
    """Validate a rows table and keep the rows a calibrator is fitted on.

    Parameters
    ----------
    rows : DataFrame
        From :func:`build_rows` (or a CSV of it).
    budget : {"tokens", "time", "updates"} or None
        Keep one budget (default tokens: the probe's headline prediction). The three budgets of one
        run are not independent observations, so they are not pooled unless None is passed.
    features : sequence of str
        Feature columns the calibrator will use (checked for presence and finiteness).
    include_reference : bool
        Keep the ``grpo`` rows (see the module docstring for why they are left out by default).
    min_arms : int
        Fewest distinct non-reference arms (leave-one-arm-out needs 2).

    Returns
    -------
    (DataFrame, dict)
        The kept rows (index reset) and counts: ``rows_in``, ``dropped_nan_target`` (rows whose
        realized accuracy is missing: dropped, counted and logged), ``dropped_reference``,
        ``dropped_other_budgets``, ``rows``.

    Raises
    ------
    RowsError
        Missing columns (named), an unknown budget, a non-finite feature (named, with the count),
        fewer than ``min_arms`` arms ("cannot calibrate": a single arm gives no spread of
        predictions to learn a map from and no arm to hold out), or no rows left.
    """
    features = list(features)
    missing = [c for c in dict.fromkeys(list(REQUIRED) + features) if c not in rows.columns]
    if missing:
        raise RowsError(f"rows table lacks column(s) {missing}; build it with `calib rows STUDY_DIR --out ROWS.csv` "
                        f"(columns: {', '.join(COLUMNS)})")
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise RowsError(f"unknown feature(s) {unknown}; choose from {list(FEATURES)}")
    counts = {"rows_in": int(len(rows))}
    df = rows
    if budget is not None:
        if budget not in BUDGETS:
            raise RowsError(f"unknown budget {budget!r}; choose one of {BUDGETS}")
        keep = df["budget"] == budget
        counts["dropped_other_budgets"] = int((~keep).sum())
        df = df[keep]
    ref = df["is_reference"].astype(bool)
    counts["dropped_reference"] = 0 if include_reference else int(ref.sum())
    if not include_reference:
        df = df[~ref]
    nan_target = ~np.isfinite(df["target"].astype(float))
    counts["dropped_nan_target"] = int(nan_target.sum())
    if nan_target.any():
        log.warning("dropped %d row(s) whose realized gain is missing (failed or unevaluated runs): %s",
                    int(nan_target.sum()), ", ".join(sorted({f"{a}/seed{s}" for a, s in
                                                             zip(df.loc[nan_target, "arm"], df.loc[nan_target, "seed"])})))
        df = df[~nan_target]
    for f in features:
        bad = ~np.isfinite(df[f].astype(float))
        if bad.any():
            raise RowsError(f"feature {f!r} is NaN or infinite in {int(bad.sum())} of {len(df)} rows "
                            f"(arms {sorted(set(df.loc[bad, 'arm']))}); choose other --features")
    if df.empty:
        raise RowsError(f"no rows left to calibrate on ({counts}); check the budget and that the study has results")
    arms = sorted(set(df.loc[~df["is_reference"].astype(bool), "arm"]))
    if len(arms) < min_arms:
        raise RowsError(f"cannot calibrate: the rows have {len(arms)} arm(s) besides grpo ({arms}) "
                        f"and calibration needs at least {min_arms}: one arm gives no spread of predicted gains to "
                        "learn a map from and none to hold out; add arms to the study")
    counts["rows"] = int(len(df))
    return df.reset_index(drop=True), counts


def read_rows(path: str | Path) -> pd.DataFrame:
    """Read a rows CSV (``calib rows``); FileNotFoundError names the path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"rows file {str(path)!r} not found; write it with `calib rows STUDY_DIR --out {path}`")
    df = pd.read_csv(path)
    for col in ("is_reference", "paired"):
        if col in df.columns and df[col].dtype == object:
            df[col] = df[col].map({"True": True, "False": False, True: True, False: False})
    return df


def _predicted_or_nan(entry: dict, budget: str, value: float, lr_scale: float, study_dir: Path) -> float:
    """:func:`predicted_at_budget`, or NaN (logged) when the probe lacks the per-update seconds a time
    budget needs: the token and update rows stay usable, and a fit at matched time names the gap."""
    try:
        return predicted_at_budget(entry, budget, value, lr_scale=lr_scale)
    except StudyFormatError as e:
        if budget != "time":
            raise
        log.warning("%s: %s; its time-budget rows get predicted_gain NaN", study_dir, e)
        return math.nan


def _read_json(path: Path, fix: str) -> dict:
    if not path.is_file():
        raise StudyFormatError(f"{path} is missing; {fix}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise StudyFormatError(f"{path} is not valid JSON ({e}); re-run the step that writes it") from e


def _probe_entries(probe: dict) -> dict:
    """``probe.json["rewards"]`` as name -> entry (run_probe writes a list of entries with ``name``)."""
    rewards = probe.get("rewards")
    if isinstance(rewards, list):
        return {r["name"]: r for r in rewards}
    if isinstance(rewards, dict):
        return {k: dict(v, name=v.get("name", k)) for k, v in rewards.items()}
    raise StudyFormatError("probe.json has no 'rewards' (list of entries or dict by reward name)")


def _entry(entries: dict, reward: str, study_dir: Path) -> dict:
    if reward not in entries:
        raise StudyFormatError(f"{study_dir}/probe/probe.json has no entry for reward {reward!r} (it has "
                               f"{sorted(entries)}); the study's probe must cover every arm's reward")
    entry = entries[reward]
    for key in ("predicted_gain_per_update", "tokens_per_update", "inner_product"):
        if entry.get(key) is None:
            raise StudyFormatError(f"{study_dir}/probe/probe.json: reward {reward!r} lacks {key!r}")
    return entry


def _per_seed(res: dict, budget: str, arm: str, study_dir: Path) -> dict[int, float]:
    block = res.get(budget)
    if not isinstance(block, dict) or "per_seed" not in block:
        raise StudyFormatError(f"{study_dir}/analysis.json: arms.{arm}.{budget}.per_seed is missing")
    return {int(s): _float(v) for s, v in (block["per_seed"] or {}).items()}


def _float(x) -> float:
    """JSON value -> float: None -> NaN, "inf"/"-inf" (probe.json's encoding) -> +-inf."""
    if x is None:
        return math.nan
    return float(x)
