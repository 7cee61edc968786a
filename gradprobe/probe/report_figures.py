"""The figures of ``report.html`` (:mod:`gradprobe.probe.report_html`), drawn off-screen (:mod:`gradprobe.figures`).

:func:`interval_figure`: left, each arm's forecast gain vs grpo at the budget (accuracy points) with its interval;
right, <g_R, u> per reward with its 95% bootstrap interval over prompts. An arm whose forecast is 0 by
construction (:func:`by_construction`: cost only, the same cost per update as grpo, no interval) is not drawn as
a measured point at 0: its probe forecast (``gain_probe`` with ``gain_probe_interval``) is drawn instead, in its
own marker and colour, legend "probe (cost only: 0 by construction)"; without a finite probe forecast the arm is
left out and a text annotation says why. An arm read off a reference curve that gives no verdict at the budget,
or whose probe rho rests on too few groups to give one (:func:`no_verdict`: the row's ``no_verdict_reason``), is
not drawn at all, neither its forecast nor its probe
forecast: its row is annotated :data:`NO_VERDICT_LABEL` in grey and the caption says why (the verdict table shows its
numbers, marked). :func:`ledger_figure`: generated tokens by category and tokens per update.
"""

from __future__ import annotations

import base64
import io
import math

from .. import figures as plt
from ..forecast.special_rows import FEW_GROUPS_VERDICT, NO_VERDICT_MARK, REFERENCE_VERDICT

__all__ = ["interval_figure", "ledger_figure", "ledger_rows", "by_construction", "no_verdict", "png",
           "BY_CONSTRUCTION_LABEL", "NO_VERDICT_LABEL", "NO_VERDICT_MARK"]

#: legend entry of the probe forecasts drawn for arms whose cost-only forecast is 0 by construction
BY_CONSTRUCTION_LABEL = "probe (cost only: 0 by construction)"
#: the annotation at the row of an arm that gives no verdict (:func:`no_verdict`), drawn instead of its numbers
NO_VERDICT_LABEL = "no verdict: not drawn (why: the verdict table)"


def png(fig) -> str:
    """``fig`` as a base64 PNG (100 dpi, tight bounding box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def _finite_interval(iv) -> bool:
    return bool(iv) and len(iv) == 2 and all(math.isfinite(_num(v)) for v in iv)


def by_construction(row: dict) -> bool:
    """Whether a forecast row's gain is cost only's 0 by construction rather than a measurement: the row's
    ``by_construction`` field, set by :func:`gradprobe.forecast.special_rows.equal_cost_row`. A row of a
    ``probe.json`` written before the field existed is read as that function left it: method ``cost_only``, a
    finite ``forecast_gain`` and no finite ``gain_interval`` (NaN, or null in ``probe.json``)."""
    if row.get("by_construction") is not None:
        return bool(row["by_construction"])
    return (row.get("method") == "cost_only" and math.isfinite(_num(row.get("forecast_gain")))
            and not _finite_interval(row.get("gain_interval")))


def no_verdict(row: dict) -> bool:
    """Whether a forecast row gives no verdict (read off a reference curve that gives none at the budget, or its
    probe rho rests on too few groups): its ``no_verdict_reason``
    (:func:`gradprobe.forecast.budget_forecast.no_verdict_reasons`,
    :func:`gradprobe.forecast.special_rows.few_groups_reason`) is set. Such a row's numbers are not a forecast to
    plot."""
    return bool(row.get("no_verdict_reason"))


def _silent_words(rows: list[dict]) -> str:
    """Which arms the caption says are not drawn: those read off a reference curve that gives no verdict at the
    budget, those whose probe rho rests on too few groups to give one, or both
    (:func:`gradprobe.forecast.special_rows.no_verdict_words`)."""
    reasons = [str(r.get("no_verdict_reason") or "") for r in rows]
    if not any(FEW_GROUPS_VERDICT in x for x in reasons):
        return "an arm read off a reference curve that gives no verdict at the budget"
    if all(x.startswith(FEW_GROUPS_VERDICT) for x in reasons if x):
        return "an arm whose rho rests on too few probe groups to give a verdict"
    return ("an arm read off a reference curve that gives no verdict at the budget, or whose rho rests on too few "
            "probe groups to give one,")


def _errorbar(ax, ys, values, intervals, **style):
    vals = [_num(v) for v in values]
    lo = [v - _num(iv[0]) if iv and len(iv) == 2 else 0.0 for v, iv in zip(vals, intervals)]
    hi = [_num(iv[1]) - v if iv and len(iv) == 2 else 0.0 for v, iv in zip(vals, intervals)]
    lo = [0.0 if not math.isfinite(x) else max(0.0, x) for x in lo]
    hi = [0.0 if not math.isfinite(x) else max(0.0, x) for x in hi]
    return ax.errorbar(vals, ys, xerr=[lo, hi], capsize=4, **style)


def _axes(ax, labels, xlabel, title):
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(list(range(len(labels))), labels)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def _forecast_panel(ax, rows: list[dict], fc: dict, pct: int) -> None:
    """Measured forecasts in blue circles; by-construction arms as their probe forecast (orange diamonds) or,
    without one, left out with a note at their row; arms that give no verdict left out, :data:`NO_VERDICT_LABEL` in
    grey at their row."""
    silent = [no_verdict(r) for r in rows]
    special = [by_construction(r) and not q for r, q in zip(rows, silent)]
    skip = [s or q for s, q in zip(special, silent)]
    ys = list(range(len(rows)))
    _errorbar(ax, ys, [math.nan if k else r.get("forecast_gain") for r, k in zip(rows, skip)],
              [None if k else r.get("gain_interval") for r, k in zip(rows, skip)],
              fmt="o", color="#2166ac", ecolor="#555", label=f"forecast ({fc.get('method')})")
    drawn = [i for i, (r, s) in enumerate(zip(rows, special))
             if s and math.isfinite(_num(r.get("gain_probe"))) and _finite_interval(r.get("gain_probe_interval"))]
    if drawn:
        _errorbar(ax, drawn, [rows[i]["gain_probe"] for i in drawn], [rows[i]["gain_probe_interval"] for i in drawn],
                  fmt="D", color="#e08214", ecolor="#e08214", label=BY_CONSTRUCTION_LABEL)
    for i in (i for i, s in enumerate(special) if s and i not in drawn):
        ax.annotate("cost only: 0 by construction, no probe forecast", (0, i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8, color="#a01818")
    for i in (i for i, q in enumerate(silent) if q):
        ax.annotate(NO_VERDICT_LABEL, (0, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                    color="#767676", style="italic")
    _axes(ax, [r["arm"] for r in rows], "forecast gain vs grpo (accuracy points)",
          f"forecast ({fc.get('method')}) at the budget, {pct}% intervals")
    if drawn:
        ax.legend(fontsize=8, loc="best")


def interval_figure(result: dict):
    """The intervals figure of ``report.html`` and its caption.

    Parameters
    ----------
    result : dict
        ``probe.json``'s content: ``rewards`` (``name``, ``inner_product``, ``interval``) and, when
        ``forecast.available``, ``forecast.rows`` (``arm``, ``forecast_gain``, ``gain_interval``, ``method``,
        ``gain_probe``, ``gain_probe_interval``; points vs grpo) and ``forecast.level``.

    Returns
    -------
    tuple[matplotlib.figure.Figure, str]
        The figure (1 panel without a forecast, 2 with one: the forecast panel first) and its caption.
    """
    fc = result.get("forecast") or {}
    rewards = result.get("rewards") or []
    rows = [r for r in fc.get("rows", []) if not str(r.get("verdict") or "").startswith(REFERENCE_VERDICT)
            ] if fc.get("available") else []
    panels = 2 if rows else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels, 0.6 * max(len(rewards), len(rows), 2) + 1.6),
                             squeeze=False)
    caption = ("<g_R, u> per reward (the raw inner product with the reference update u) with its 95% bootstrap "
               "interval over prompts")
    if rows:
        pct = int(round(100 * float(fc.get("level") or 0.95)))
        _forecast_panel(axes[0, 0], rows, fc, pct)
        special = ("; an arm whose update costs what grpo's does has cost only's forecast 0 by construction, not a "
                   "measurement: it is drawn as the probe's forecast with its interval (orange diamond), or left out "
                   "when the probe has none" if any(by_construction(r) and not no_verdict(r) for r in rows)
                   else "")
        silent = f"; {_silent_words(rows)} is not drawn (its numbers are not a forecast: the verdict table gives " \
                 f"them, marked {NO_VERDICT_MARK}, and says why)" if any(no_verdict(r) for r in rows) else ""
        caption = (f"Left: each arm's forecast gain vs grpo at the budget with its {pct}% interval (accuracy points; "
                   f"0 = as good as grpo for the same tokens){special}{silent}. Right: " + caption)
    ax = axes[0, -1]
    _errorbar(ax, list(range(len(rewards))), [r.get("inner_product") for r in rewards],
              [r.get("interval") for r in rewards], fmt="o", color="#2166ac", ecolor="#555")
    _axes(ax, [r["name"] for r in rewards], "<g_R, u>", "inner product with the reference update")
    fig.tight_layout()
    return fig, caption


def ledger_rows(result: dict) -> list[tuple[str, int]]:
    """(category, generated tokens) of the probe's ledger, plus the held-out reference's rollouts when recorded."""
    gen = (result.get("ledger") or {}).get("generated_tokens") or {}
    ref = (((result.get("reference") or {}).get("ledger") or {}).get("generated_tokens") or {})
    rows = [(f"probe: {k}", int(v)) for k, v in gen.items()]
    if ref:
        rows.append(("held-out reference rollouts", int(sum(ref.values()))))
    return rows


def ledger_figure(result: dict):
    """The token-ledger figure of ``report.html``: generated tokens by category, tokens per update c_R per reward."""
    rows = ledger_rows(result)
    rewards = result.get("rewards") or []
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(rows), len(rewards), 3) + 1.6))
    ax = axes[0]
    labels, vals = [k for k, _ in rows], [v for _, v in rows]
    bars = ax.barh(labels, vals, color="#4c72b0")
    ax.bar_label(bars, labels=[f"{v:,}" for v in vals], fontsize=8, padding=2)
    ax.invert_yaxis()
    ax.set_xlabel("generated tokens")
    ax.set_title("generated tokens by category", fontsize=10)
    ax = axes[1]
    labels = [r["name"] for r in rewards]
    vals = [int(v) if math.isfinite(v := _num(r.get("tokens_per_update"))) else 0 for r in rewards]
    bars = ax.barh(labels, vals, color="#dd8452")
    ax.bar_label(bars, labels=[f"{v:,}" for v in vals], fontsize=8, padding=2)
    ax.invert_yaxis()
    ax.set_xlabel("generated tokens per update (c_R)")
    ax.set_title("tokens per training update, by reward", fontsize=10)
    for a in axes:
        a.grid(axis="x", alpha=0.3)
        a.margins(x=0.15)
    fig.tight_layout()
    return fig
