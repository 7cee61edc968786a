"""What a forecast returns: :class:`ForecastResult` (one row per arm), its verdicts and budget labels."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..outputs import json_safe
from .overflow_parts import overflow_parts, part_overflow_text, part_rescale_text

__all__ = ["ForecastResult", "METHODS", "TABLE_COLUMNS", "format_budget", "verdict", "no_signal_reason",
           "no_gradient_verdict", "no_verdict", "NO_VERDICT", "gain_text"]

METHODS = ("probe", "cost_only", "signal_proxy")
TABLE_COLUMNS = ("arm", "reward", "lr_scale", "tokens_per_update", "rho", "rho_interval", "snr", "effective_updates",
                 "forecast_accuracy", "forecast_gain", "gain_interval", "method", "note", "verdict", "rho_raw",
                 "rho_signal_proxy", "gain_probe", "gain_probe_interval", "gain_cost_only", "gain_cost_only_interval",
                 "gain_signal_proxy", "gain_signal_proxy_interval", "first_order_gain", "no_signal",
                 "by_construction", "no_verdict_reason")

#: How the verdict of an arm whose forecast gives no verdict starts (:func:`no_verdict`).
NO_VERDICT = "no verdict at "

#: Why a reward gives no gradient (:func:`no_signal_reason`); ``{where}``: "on this batch" or "on all N probe batches".
_NO_SIGNAL = {
    "missing": "no usable reward: it returned None or NaN for every completion, or marked none valid",
    "equal": "every group's rewards are equal {where}, so every advantage is 0",
    "equal_or_missing": "every group's usable rewards are equal {where} (the others are None/NaN), so every "
                        "advantage is 0",
    "overflow": "its rewards are too large for float64 group statistics {where} (|reward| up to {big:.3g}: the "
                "mean or std of {k} group(s) whose rewards differ overflows, so their advantages were set to 0; "
                "every other group's usable rewards are equal), so every advantage is 0; rescale the reward "
                "(e.g. divide it by its largest magnitude)",
}


def format_budget(value: float, kind: str = "tokens") -> str:
    """A budget as the forecast prints it: FLOPs (``kind="flops"``) to 3 significant digits with the unit (1.5e15 ->
    '1.5e+15 FLOPs'); any other kind (tokens) to 4 significant digits with a k, M or G suffix, the one that keeps
    the digits under 1000 (250000 -> '250k', 1000000 -> '1M', 999999 -> '1M', 2.5e9 -> '2.5G'), a count under 1000
    as it is ('999'; so is a value that is not positive, or not finite: 'inf', 'nan'), and from 1000G up in
    scientific notation as ``--budget-tokens`` reads it (1e15 -> '1e15', 1.2345e13 -> '1.234e13'; a G count there
    would read '1e+06G')."""
    if kind == "flops":
        return f"{value:.3g} FLOPs"
    if not (math.isfinite(value) and value >= 1e3):
        return f"{value:g}"
    for div, suf in ((1e3, "k"), (1e6, "M"), (1e9, "G")):
        shown = f"{value / div:.4g}"
        if float(shown) < 1000:  # 999,999 is '1M', not '1000k'
            return f"{shown}{suf}"
    digits, _, exponent = f"{value:.4g}".partition("e")
    return f"{digits}e{int(exponent)}"


def _points(x: float) -> str:
    """``x`` accuracy points as the verdict prints them (``+.1f``), a negative zero as ``+0.0``."""
    s = f"{x:+.1f}"
    return "+0.0" if s == "-0.0" else s


def verdict(gain: float, iv, budget: str, kind: str, *, why: str = "") -> str:
    """One line on an arm: ``worth its tokens`` when the interval ``iv`` (accuracy points vs grpo) lies
    above 0, ``not worth its tokens`` when below, ``no detectable difference`` when it contains 0 or when the
    gain and both ends print as 0.0 (a flat or saturated curve: a sign left by round-off is not a difference),
    ``no forecast`` when the gain or the interval is not finite. ``kind``: "tokens" or "flops"; ``why``: a
    clause put in parentheses after the budget (e.g. that the forecast is cost only, and why)."""
    what = "tokens" if kind == "tokens" else "FLOPs"
    if not (math.isfinite(gain) and iv and all(math.isfinite(x) for x in iv)):
        return "no forecast"
    lo, hi = iv
    at = f"{budget} ({why})" if why else budget
    nums = gain_text(gain, iv)
    if all(_points(x) == "+0.0" for x in (gain, lo, hi)):
        return f"no detectable difference at {at}: {nums}"
    if lo > 0:
        return f"worth its {what} at {at}: {nums}"
    if hi < 0:
        return f"not worth its {what} at {at}: {nums}"
    return f"no detectable difference at {at}: {nums}"


def gain_text(gain: float, iv) -> str:
    """A gain vs grpo and its interval (accuracy points) as the verdicts print them: ``-0.9 [-1.7, -0.1] vs grpo``."""
    printed = [_points(x) for x in (gain, *iv)]
    return f"{printed[0]} [{printed[1]}, {printed[2]}] vs grpo"


def no_verdict(budget: str, reason: str) -> str:
    """The verdict of an arm forecast off a reference curve that cannot carry one at ``budget`` (``reason``: why,
    each clause with its fix, from :func:`~gradprobe.forecast.budget_forecast.no_verdict_reasons`): no advice, the
    forecast numbers stay in the table, marked."""
    return f"{NO_VERDICT}{budget}: {reason}"


def no_gradient_verdict(reason: str) -> str:
    """The verdict of a reward without signal (``reason`` from :func:`no_signal_reason`): it cannot train, and
    no forecast was made for it (its zeros are not a measured "no difference")."""
    return f"no gradient: {reason}; it cannot train (no forecast)"


def _all_zero(values) -> bool:
    """True when ``values`` is a non-empty list of exact zeros (None, a NaN or a string is not a zero)."""
    return bool(values) and all(isinstance(x, (int, float)) and x == 0 for x in values)


def _flat(entry: dict, reference: dict | None) -> bool:
    """Whether one batch's entry shows every advantage to be 0: its per-group contributions <g_R, u> are all
    exactly 0 and so are its signal-proxy sums (A^2 W); without signal-proxy sums (an older probe), when the
    reference reward's contributions on the same alignment are not all 0 (so the alignment is not zero)."""
    if not _all_zero(entry.get("per_group")):
        return False
    proxy = entry.get("signal_proxy_per_group")
    if proxy is not None:
        return _all_zero(proxy)
    return reference is not None and reference is not entry and bool(reference.get("per_group")) \
        and not _all_zero(reference["per_group"])


def no_signal_reason(entries: list[dict], references: list | None = None, *, pooled: dict | None = None,
                     batches: int | None = None) -> str | None:
    """Why a probed reward gives no gradient on the probe batch(es), or None when it may give one.

    A reward has no signal when every advantage it gives is 0: its rewards are equal within every group
    (a constant, or accuracy 0 or 1 everywhere), it returned None/NaN for every completion (masked,
    advantage 0), or its rewards are too large for float64 group statistics where they differ
    (``reward_stats["nonfinite_groups"]``, :func:`gradprobe.grpo.advantages.group_normalize`: those groups'
    advantages are set to 0, and the reason says to rescale the reward, never that its rewards are equal; for a
    hybrid that records its parts, :func:`overflow_parts`, it names the part that overflowed, whose advantage alone
    is 0 there, and says that the other part gave those groups advantage 0 too).
    Its inner product, interval and forecast are then exact zeros that measure nothing.

    Parameters
    ----------
    entries : list of dict
        The reward's entry in each probe batch (``probe.json``'s ``rewards`` entry, or a ``batches`` item's):
        ``per_group`` (B,), ``signal_proxy_per_group`` (B,) when recorded, ``valid_completions`` and
        ``reward_stats`` (``missing``, ``nonfinite_groups``, ``overflow_max_abs_reward``) when recorded.
    references : list of dict or None, optional
        The reference reward's entry in the same batches (used only for probes without signal-proxy sums).
    pooled : dict, optional
        The pooled entry of several batches (its ``valid_completions`` and ``reward_stats``).
    batches : int, optional
        How many probe batches the entries stand for (the reason's wording; default ``len(entries)``).

    Returns
    -------
    str or None
        A plain-language reason (no usable reward; every group's rewards equal; rewards too large), or None.
    """
    if not entries:
        return None
    refs = list(references) if references is not None else [None] * len(entries)
    source = pooled if pooled is not None else (entries[0] if len(entries) == 1 else {})
    valid = source.get("valid_completions")
    if isinstance(valid, (int, float)) and valid == 0:
        return _NO_SIGNAL["missing"]
    if not all(_flat(e, r) for e, r in zip(entries, refs)):
        return None
    missing = (source.get("reward_stats") or {}).get("missing") or 0
    n = batches or len(entries)
    where = "on this batch" if n == 1 else f"on all {n} probe batches"
    stats = [e.get("reward_stats") or {} for e in entries]
    overflow = sum(int(st.get("nonfinite_groups") or 0) for st in stats)
    if overflow:
        big = max(float(st.get("overflow_max_abs_reward") or 0.0) for st in stats)
        parts = _pooled_parts(stats)
        if parts is not None:
            return (f"{where}, {part_overflow_text(parts, big=big, others_train=False)}; every other group's usable "
                    f"rewards are equal, so every advantage is 0; {part_rescale_text(parts)}")
        return _NO_SIGNAL["overflow"].format(where=where, big=big, k=overflow)
    return _NO_SIGNAL["equal_or_missing" if missing else "equal"].format(where=where)


def _pooled_parts(stats: list[dict]) -> dict[str, int] | None:
    """The per-part overflow of a hybrid over batches' ``reward_stats`` ``stats``: each part's counts summed, when
    every batch that overflowed records them for the same parts (:func:`overflow_parts`); else None."""
    read = [(st, overflow_parts(st)) for st in stats if int(st.get("nonfinite_groups") or 0)]
    if not read or any(p is None or set(p) != set(read[0][1]) for _, p in read):
        return None
    return {name: sum(p[name] for _, p in read) for name in read[0][1]}


@dataclass
class ForecastResult:
    """Forecasts of every arm at one budget.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per arm, columns :data:`TABLE_COLUMNS`: ``reward``, ``tokens_per_update`` (tokens),
        ``rho`` (shrunk probe efficiency), ``rho_interval`` ((lo, hi)), ``snr`` (|rho_raw - 1| / se),
        ``effective_updates`` (updates, of the method used), ``forecast_accuracy`` (points),
        ``forecast_gain`` (points vs grpo), ``gain_interval`` ((lo, hi)), ``method`` (the forecaster
        that made the row's number), ``note``, ``verdict``; beside it every forecaster's gain and
        interval (``gain_probe``, ``gain_cost_only``, ``gain_signal_proxy``) and the raw first-order
        extrapolation ``first_order_gain`` (points vs grpo, expected to overestimate); ``no_signal``
        (True for a reward whose every advantage is 0 on the probe batch: its ``verdict`` says it gives no
        gradient and its forecast numbers are NaN, :func:`no_signal_reason`); ``no_verdict_reason`` (missing:
        NaN here, null in ``probe.json``; or why the row's verdict gives no advice: the reference curve is not
        described by its fit, falls, or has no eval before the budget's updates, or the probe's rho that the verdict
        would read rests on too few groups, :func:`~.special_rows.few_groups_reason`; its numbers are still there:
        :func:`no_verdict`).
    method : str
        The forecaster asked for.
    budget : dict
        ``kind`` ("tokens" or "flops") and ``value``.
    curve : str
        The reference curve's one-line description; ``curve_source`` where it came from.
    grpo_accuracy : float
        f(T / c_outcome), points.
    notes : list[str]
    no_verdict_reason : str or None
        Why no arm read off the reference curve gets a verdict at this budget (the clauses of
        :func:`~gradprobe.forecast.budget_forecast.no_verdict_reasons`), or None: the curve carries verdicts.
    update : dict or None
        The update the forecast is for where it differs from the probe's (:func:`~.probe_input.update_batches`:
        ``curve`` and ``probe`` as [prompts, group], ``stated``), or None: the forecast reads the curve's updates.
    """

    table: pd.DataFrame
    method: str
    budget: dict
    curve: str
    curve_source: str
    grpo_accuracy: float
    reference_reward: str
    level: float
    notes: list[str] = field(default_factory=list)
    no_verdict_reason: str | None = None
    update: dict | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict: ``probe.json``'s ``forecast`` section.

        Numbers in gradprobe's one JSON encoding of non-finite values, :func:`gradprobe.outputs.json_safe`
        (NaN -> None, +inf -> ``"inf"``, -inf -> ``"-inf"``; :func:`gradprobe.outputs.json_float` reads them
        back), numpy scalars and arrays as Python numbers and lists, tuples as lists.
        """
        rows = [{k: _json_value(v) for k, v in rec.items()} for rec in self.table.to_dict(orient="records")]
        return {"available": True, "method": self.method, "budget": dict(self.budget), "curve": self.curve,
                "curve_source": self.curve_source, "grpo_accuracy": _json_value(self.grpo_accuracy),
                "reference_reward": self.reference_reward, "level": self.level, "rows": rows,
                "notes": list(self.notes), "no_verdict_reason": self.no_verdict_reason,
                "update": None if self.update is None else dict(self.update),
                "model": "accuracy f(n_R) of grpo's reference curve at effective updates n_R = (T / c_R) rho_R; "
                         "gain = f(n_R) - f(T / c_outcome) (DESIGN.md, 'Forecast'; ScaleRL sigmoid, Khatri et al. "
                         "2025, eq. 1)"}


def _json_value(v):
    """One table cell through :func:`gradprobe.outputs.json_safe` (a numpy array as its list first)."""
    return json_safe(v.tolist() if isinstance(v, np.ndarray) else v)
