"""The forecaster ``gradprobe probe --forecaster auto`` uses, chosen from a calibration report's numbers.

``calib report STUDY... --validation-out FILE`` writes :func:`validation_record` of the report's
``metrics.json``; the shipped record is ``gradprobe/data/curves/forecast_validation.json``, read by
:func:`gradprobe.forecast.section.load_validation`.
"""

from __future__ import annotations

__all__ = ["PROBE_FORECASTERS", "validation_record"]

#: The forecasters ``gradprobe probe --forecaster`` can use, by their calib column.
PROBE_FORECASTERS = {"forecast_probe": "probe", "forecast_cost_only": "cost_only",
                     "forecast_signal_proxy": "signal_proxy"}


def _floor_text(floor: dict | None) -> str:
    """``"; their seed-noise floor 1.58"``: what no forecaster can be expected to beat on those runs
    (:func:`calib.noise_floor.seed_noise_floor`); empty when the metrics lack it or it is undefined."""
    if not floor or floor.get("estimate") is None or floor["estimate"] != floor["estimate"]:
        return ""
    return f"; seed-noise floor of single runs {floor['estimate']:.2f}"


def validation_record(metrics: dict, *, source: str) -> dict:
    """What ``gradprobe probe --forecaster auto`` uses: the forecaster that validated best, with its evidence.

    The choice is the lowest mean absolute error of the *uncalibrated* forecast gain vs grpo (accuracy
    points) in the report's headline validation (leave one study out when the report has 2+ studies),
    on the runs every compared forecaster covers, among the forecasters the probe command offers
    (:data:`PROBE_FORECASTERS`; the raw first-order extrapolation is reported, never chosen).

    Parameters
    ----------
    metrics : dict
        A report's ``metrics.json`` (:func:`write_report`).
    source : str
        How the metrics were made (the command), recorded.

    Returns
    -------
    dict
        ``{"best", "mae", "cv", "rows", "studies", "evidence", "source", "arms", "rewards", "loss_types"}``;
        ``mae`` maps forecaster -> MAE; ``arms`` are the arms of the runs the MAEs are over (the common
        runs), ``rewards`` and ``loss_types`` what those arms trained with (``loss_types`` None when the
        rows do not record them). A probed reward outside them is flagged by ``gradprobe probe``
        (:mod:`gradprobe.forecast.validated_arms`). ``arms``, ``rewards`` and ``loss_types`` are left
        out when ``metrics`` has no ``common_arms`` (a report written before they were recorded).
        ``entry_errors`` maps forecaster -> probe entry (``mc_value``, ``outcome@bnpo``) -> {mae, runs,
        studies}: its error on the common runs of that reward (:func:`calib.metrics.errors_by_entry`), which
        ``gradprobe probe``'s verdicts quote; left out for metrics without them.

    Raises
    ------
    ValueError
        The metrics lack the headline validation's errors (a report older than this format).
    """
    cv = metrics.get("headline_cv")
    errors = (metrics.get("errors") or {}).get(cv)
    if not errors:
        raise ValueError(f"metrics.json has no errors for its headline validation {cv!r}; re-run `calib report`")
    mae = {}
    for col, name in PROBE_FORECASTERS.items():
        raw = (errors.get(col) or {}).get("raw") or {}
        value = (raw.get("common") or raw).get("mae")
        if value is not None and value == value:
            mae[name] = round(float(value), 4)
    if not mae:
        raise ValueError("metrics.json has no mean absolute error for any probe forecaster; re-run `calib report`")
    first = ((errors.get("forecast_first_order") or {}).get("raw") or {})
    first_mae = (first.get("common") or first).get("mae")
    best = min(mae, key=mae.get)
    what = {"study": "leave one study out", "arm": "leave one arm out within its study"}.get(cv, cv)
    evidence = (f"{what} over {metrics.get('n_studies')} studies ({', '.join(metrics.get('studies', []))}), "
                f"{metrics.get('common_rows')} runs: mean absolute error of the gain vs grpo at the token budget, "
                + ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in sorted(mae.items(), key=lambda kv: kv[1]))
                + (f", raw first order {first_mae:.2f}" if first_mae is not None else "") + " points"
                + _floor_text(metrics.get("seed_noise_floor")))
    arms = metrics.get("common_arms") or []
    out = {"best": best, "mae": mae, "cv": cv, "rows": metrics.get("common_rows"),
           "studies": metrics.get("studies"), "evidence": evidence, "source": source}
    by_entry = {name: ((errors.get(col) or {}).get("raw") or {}).get("common", {}).get("by_entry")
                for col, name in PROBE_FORECASTERS.items()}
    if any(v is not None for v in by_entry.values()):  # each forecaster's error on the runs of each reward
        out["entry_errors"] = {k: v for k, v in by_entry.items() if v is not None}
    if arms:  # a metrics.json written before it listed the common arms: the record cannot say which were validated
        out.update(arms=sorted({a["arm"] for a in arms}),
                   rewards=sorted({a["reward"] for a in arms if a.get("reward")}),
                   loss_types=_loss_types(arms))
    return out


def _loss_types(arms: list[dict]) -> list | None:
    """The arms' loss types; None when some arm does not record one (rows built before loss-type arms)."""
    kinds = [a.get("loss_type") for a in arms]
    return None if any(k is None for k in kinds) else sorted(set(kinds))
