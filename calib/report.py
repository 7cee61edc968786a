"""The calibration report: ``calib report STUDY_DIR... --out REPORT_DIR``.

Writes into REPORT_DIR:

- ``report.html``: self-contained (every figure embedded as a base64 PNG), with the numbers, the
  ranking table and the figures;
- the same figures as PNG files beside it (``predicted_vs_realized.png``, ``residuals_by_arm.png``,
  ``accuracy_vs_tokens.png``, ``accuracy_vs_time.png``, ``accuracy_vs_updates.png``);
- ``metrics.json``: ``raw_bias``, ``calibrated_bias``, ``mae``, ``coverage``, ``kendall_tau``,
  ``spearman_rho`` (calibrated values under grouped cross-validation at the headline budget), the
  raw counterparts (``raw_mae``, ``raw_kendall_tau``...), row counts, settings, and ``by_budget``
  (raw bias, MAE and rank agreement at each matched budget: the cross-validated calibration is
  computed at the headline budget only);
- ``rows.csv`` (all calibration rows) and ``cv_predictions.csv`` (the cross-validated rows).
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .dataset import BUDGETS, RowsError, StudyFormatError, build_rows_many, select_rows
from .estimators import make_estimator
from .metrics import bias, coverage, mae, ranking_metrics, ranking_table
from .model import atomic_write_text, software_versions
from .validation import cross_validate

FIGURES = ("predicted_vs_realized", "residuals_by_arm", "accuracy_vs_tokens", "accuracy_vs_time",
           "accuracy_vs_updates")
_AXES = {"tokens": ("generated_tokens", "generated tokens"), "time": ("device_seconds", "device-seconds"),
         "updates": ("update", "updates")}


def compute(rows: pd.DataFrame, *, method: str = "linear", features=("predicted_gain",), budget: str = "tokens",
            cv: str = "arm", interval: str = "cv_plus", confidence_level: float = 0.9,
            include_reference: bool = False) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Cross-validated calibration metrics of a rows table.

    Returns
    -------
    (metrics, cv_rows, ranking)
        ``metrics``: the content of ``metrics.json`` (accuracy points); ``cv_rows``: the selected rows
        with ``fold``, ``cv_pred``, ``cv_lower``, ``cv_upper``; ``ranking``: :func:`calib.metrics.ranking_table`
        over every budget (calibrated column at the headline budget only).

    Raises
    ------
    calib.dataset.RowsError
        See :func:`calib.dataset.select_rows` (missing columns, a single arm, ...).
    """
    sel, counts = select_rows(rows, budget=budget, features=features, include_reference=include_reference)
    cvp = cross_validate(make_estimator(method), sel, features=features, cv=cv, confidence_level=confidence_level,
                         interval=interval)
    cv_rows = pd.concat([sel, cvp], axis=1)
    y = cv_rows["target"]
    has_iv = cv_rows["cv_lower"].notna()
    cov = coverage(cv_rows["cv_lower"], cv_rows["cv_upper"], y)
    n_iv = int(has_iv.sum())

    # rankings: every arm, grpo included, at every budget; calibrated gains (CV) at the headline budget
    all_rows = rows[np.isfinite(rows["target"].astype(float))].copy()
    calibrated = pd.Series(np.nan, index=all_rows.index)
    key = ["study", "model", "task", "arm", "seed", "budget"]
    merged = all_rows[key].reset_index().merge(cv_rows[key + ["cv_pred"]], on=key, how="left").set_index("index")
    calibrated.loc[merged.index] = merged["cv_pred"]
    table = ranking_table(all_rows, calibrated=calibrated)
    head = table[table["budget"] == budget]
    raw_rank, cal_rank = ranking_metrics(head, "predicted"), ranking_metrics(head, "calibrated")

    by_budget = {}
    for b in BUDGETS:
        try:
            s, _ = select_rows(rows, budget=b, features=features, include_reference=include_reference)
        except RowsError as e:
            by_budget[b] = {"error": str(e)}
            continue
        rk = ranking_metrics(table[table["budget"] == b], "predicted")
        by_budget[b] = {"rows": int(len(s)), "raw_bias": bias(s["predicted_gain"], s["target"]),
                        "raw_mae": mae(s["predicted_gain"], s["target"]), "raw_kendall_tau": rk["kendall_tau"],
                        "raw_spearman_rho": rk["spearman_rho"]}
    metrics = {
        "raw_bias": bias(sel["predicted_gain"], y), "calibrated_bias": bias(cv_rows["cv_pred"], y),
        "mae": mae(cv_rows["cv_pred"], y), "coverage": cov,
        "kendall_tau": cal_rank["kendall_tau"], "spearman_rho": cal_rank["spearman_rho"],
        "raw_mae": mae(sel["predicted_gain"], y), "raw_kendall_tau": raw_rank["kendall_tau"],
        "raw_spearman_rho": raw_rank["spearman_rho"],
        "coverage_rows": n_iv,
        "coverage_se": math.sqrt(confidence_level * (1 - confidence_level) / n_iv) if n_iv else math.nan,
        "confidence_level": confidence_level, "budget": budget, "cv": cv, "method": method, "interval": interval,
        "features": list(features), "include_reference": include_reference, "counts": counts,
        "arms": sorted(set(sel["arm"])), "models": sorted(set(sel["model"])),
        "ranking": {"probe": raw_rank["groups"], "calibrated": cal_rank["groups"]},
        "by_budget": by_budget, "versions": software_versions(),
        "units": "accuracy points; bias = mean(predicted - realized) over runs; realized = gain vs grpo",
    }
    return metrics, cv_rows, table


def write_report(study_dirs, out: str | Path, **settings) -> dict:
    """Build rows from the studies, compute the metrics, draw the figures and write the report.

    Parameters
    ----------
    study_dirs : sequence of paths
        ``gradprobe study`` folders (one per model for leave-one-model-out).
    out : path
        Report folder (created).
    **settings
        Passed to :func:`compute` (method, features, budget, cv, interval, confidence_level,
        include_reference).

    Returns
    -------
    dict
        The metrics (also in ``out/metrics.json``).

    Raises
    ------
    calib.dataset.StudyFormatError, calib.dataset.RowsError
        Bad study folders or rows (the message names the file or field).
    OSError
        ``out`` cannot be written (checked before any work).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".write-test").write_text("ok")
    (out / ".write-test").unlink()
    study_dirs = [Path(d) for d in study_dirs]
    rows = build_rows_many(study_dirs)
    runs = _read_runs(study_dirs)
    metrics, cv_rows, table = compute(rows, **settings)
    rows.to_csv(out / "rows.csv", index=False)
    cv_rows.to_csv(out / "cv_predictions.csv", index=False)
    images = {}
    images["predicted_vs_realized"] = _fig_predicted_vs_realized(cv_rows, metrics)
    images["residuals_by_arm"] = _fig_residuals(cv_rows, metrics)
    for b, (col, label) in _AXES.items():
        sub = rows[rows["budget"] == b]
        matched = {Path(st).name: float(v) for st, v in zip(sub["study"], sub["budget_value"])}
        images[f"accuracy_vs_{b}"] = _fig_accuracy(runs, col, label, matched)
    for name, png in images.items():
        (out / f"{name}.png").write_bytes(png)
    atomic_write_text(out / "metrics.json", json.dumps(_json_safe(metrics), indent=2, allow_nan=False))
    atomic_write_text(out / "report.html", _html(metrics, table, images, study_dirs))
    return metrics


# ----------------------------------------------------------------------------- figures

def _png(fig) -> bytes:
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt, sns


def _fig_predicted_vs_realized(cv_rows: pd.DataFrame, m: dict) -> bytes:
    plt, sns = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), sharey=True)
    y = cv_rows["target"]
    lim = [float(np.nanmin([cv_rows["predicted_gain"].min(), cv_rows["cv_pred"].min(), y.min()])),
           float(np.nanmax([cv_rows["predicted_gain"].max(), cv_rows["cv_pred"].max(), y.max()]))]
    pad = 0.05 * (lim[1] - lim[0] or 1.0)
    lim = [lim[0] - pad, lim[1] + pad]
    for ax, col, title in ((axes[0], "predicted_gain", f"before: probe (bias {m['raw_bias']:+.2f}, "
                                                         f"MAE {m['raw_mae']:.2f})"),
                           (axes[1], "cv_pred", f"after: calibrated, leave-one-{m['cv']}-out "
                                                f"(bias {m['calibrated_bias']:+.2f}, MAE {m['mae']:.2f})")):
        if col == "cv_pred":
            ok = cv_rows["cv_lower"].notna() & np.isfinite(cv_rows["cv_lower"]) & np.isfinite(cv_rows["cv_upper"])
            sub = cv_rows[ok]
            ax.errorbar(sub[col], sub["target"], xerr=[sub[col] - sub["cv_lower"], sub["cv_upper"] - sub[col]],
                        fmt="none", ecolor="0.7", elinewidth=1, zorder=1,
                        label=f"{m['confidence_level']:.0%} conformal interval")
        sns.scatterplot(data=cv_rows, x=col, y="target", hue="arm", style="model", ax=ax, s=45, zorder=2)
        ax.plot(lim, lim, "k--", lw=1, label="identity")
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_xlabel("predicted gain vs grpo (accuracy points)" if col == "predicted_gain"
                      else "calibrated gain vs grpo (accuracy points)")
        ax.set_ylabel("realized gain vs grpo, per run (accuracy points)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"probe vs training at the matched {m['budget']} budget")
    return _png(fig)


def _fig_residuals(cv_rows: pd.DataFrame, m: dict) -> bytes:
    plt, sns = _plt()
    long = pd.concat([
        pd.DataFrame({"arm": cv_rows["arm"], "residual": cv_rows["predicted_gain"] - cv_rows["target"], "which": "probe"}),
        pd.DataFrame({"arm": cv_rows["arm"], "residual": cv_rows["cv_pred"] - cv_rows["target"],
                      "which": f"calibrated (leave-one-{m['cv']}-out)"})], ignore_index=True)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * cv_rows["arm"].nunique() + 3), 4.5))
    sns.boxplot(data=long, x="arm", y="residual", hue="which", ax=ax, fliersize=0)
    sns.stripplot(data=long, x="arm", y="residual", hue="which", dodge=True, ax=ax, palette=["0.2", "0.2"], size=3,
                  legend=False)
    ax.axhline(0, color="k", lw=1)
    ax.set_ylabel("predicted - realized (accuracy points)")
    ax.set_title(f"residuals by arm at the matched {m['budget']} budget (> 0: overestimate)")
    ax.tick_params(axis="x", rotation=30)
    return _png(fig)


def _fig_accuracy(runs: pd.DataFrame, col: str, label: str, matched: dict) -> bytes:
    """One line per run (arm x seed): eval points of different seeds sit at different token counts
    and seconds, so runs are drawn as they are rather than averaged at unequal x."""
    plt, sns = _plt()
    studies = list(dict.fromkeys(runs["study_label"]))
    fig, axes = plt.subplots(1, len(studies), figsize=(6.5 * len(studies), 4.5), squeeze=False)
    for ax, s in zip(axes[0], studies):
        sub = runs[runs["study_label"] == s].sort_values(["arm", "seed", col]).copy()
        sub["accuracy (points)"] = 100 * sub["accuracy"]
        sns.lineplot(data=sub, x=col, y="accuracy (points)", hue="arm", units="seed", estimator=None, ax=ax,
                     marker="o", markersize=3, lw=1, alpha=0.8)
        if s in matched:
            ax.axvline(matched[s], color="k", ls="--", lw=1, label="matched budget")
            ax.legend(fontsize=7)
        ax.set_xlabel(label)
        ax.set_title(f"{s}: greedy held-out accuracy, one line per run", fontsize=10)
    return _png(fig)


def _read_runs(study_dirs) -> pd.DataFrame:
    frames = []
    for d in study_dirs:
        path = d / "runs.csv"
        if not path.is_file():
            raise StudyFormatError(f"{path} is missing; `gradprobe study` writes it (one row per run and eval point)")
        df = pd.read_csv(path)
        missing = [c for c in ("arm", "seed", "update", "generated_tokens", "device_seconds", "accuracy")
                   if c not in df.columns]
        if missing:
            raise StudyFormatError(f"{path} lacks column(s) {missing}")
        df["study_label"] = d.name
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- HTML

def _fmt(x, spec="+.2f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def _html(m: dict, table: pd.DataFrame, images: dict, study_dirs) -> str:
    e = html.escape
    lvl = m["confidence_level"]
    numbers = [
        ("raw bias (mean predicted - realized)", _fmt(m["raw_bias"]), "points"),
        ("calibrated bias (cross-validated)", _fmt(m["calibrated_bias"]), "points"),
        ("raw MAE", _fmt(m["raw_mae"], ".2f"), "points"),
        ("calibrated MAE (cross-validated)", _fmt(m["mae"], ".2f"), "points"),
        (f"coverage of the {lvl:.0%} conformal intervals", _fmt(m["coverage"], ".3f"),
         f"{m['coverage_rows']} runs; binomial SE at nominal {_fmt(m['coverage_se'], '.3f')}"),
        ("Kendall tau, probe vs training ranking", _fmt(m["raw_kendall_tau"], "+.3f"), "arms incl. grpo"),
        ("Kendall tau, calibrated (CV) vs training", _fmt(m["kendall_tau"], "+.3f"), ""),
        ("Spearman rho, probe vs training ranking", _fmt(m["raw_spearman_rho"], "+.3f"), ""),
        ("Spearman rho, calibrated (CV) vs training", _fmt(m["spearman_rho"], "+.3f"), ""),
    ]
    c = m["counts"]
    rows_note = (f"{c['rows']} runs used ({len(m['arms'])} arms: {', '.join(m['arms'])}; models: "
                 f"{', '.join(m['models'])}); grpo rows left out of the fit and metrics: {c['dropped_reference']}; "
                 f"rows dropped for a missing realized accuracy (failed runs): {c['dropped_nan_target']}.")
    num_html = "".join(f"<tr><td>{e(a)}</td><td class=n>{e(b)}</td><td>{e(u)}</td></tr>" for a, b, u in numbers)
    bb = "".join(f"<tr><td>{e(b)}</td>" + ("<td colspan=5>" + e(v["error"]) + "</td>" if "error" in v else
                 f"<td class=n>{v['rows']}</td><td class=n>{_fmt(v['raw_bias'])}</td><td class=n>{_fmt(v['raw_mae'], '.2f')}"
                 f"</td><td class=n>{_fmt(v['raw_kendall_tau'], '+.3f')}</td><td class=n>{_fmt(v['raw_spearman_rho'], '+.3f')}"
                 "</td>") + "</tr>" for b, v in m["by_budget"].items())
    tcols = ["model", "task", "budget", "arm", "predicted", "calibrated", "realized", "seeds", "rank_probe",
             "rank_calibrated", "rank_training"]
    def cell(k, v):
        if k in ("predicted", "calibrated", "realized"):
            return _fmt(v, "+.2f")
        if isinstance(v, float):  # ranks and counts
            return "n/a" if math.isnan(v) else str(int(v))
        return e(str(v))

    trows = "".join("<tr>" + "".join(f"<td class=n>{cell(k, r[k])}</td>" for k in tcols) + "</tr>"
                    for _, r in table.iterrows())
    figs = "".join(f"<figure><img alt=\"{e(n)}\" src=\"data:image/png;base64,{base64.b64encode(b).decode()}\">"
                   f"<figcaption>{e(n)}.png</figcaption></figure>" for n, b in images.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gradprobe calibration report</title>
<style>body{{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:90%}}
td.n{{text-align:right;font-family:monospace}}img{{max-width:100%}}figure{{margin:1.5em 0}}</style></head>
<body><h1>Calibration report</h1>
<p>Studies: {e(', '.join(str(d) for d in study_dirs))}. Target: realized gain vs grpo of one training run at the matched
{e(m['budget'])} budget (accuracy points); feature(s): {e(', '.join(m['features']))}; calibrator: {e(m['method'])};
intervals: {e(m['interval'])} conformal (MAPIE) at {lvl:.0%}; cross-validation: leave one {e(m['cv'])} out
(no run is predicted by a model that saw its {e(m['cv'])}).</p>
<p>{e(rows_note)}</p>
<h2>Numbers</h2><table><tr><th>metric</th><th>value</th><th>unit / note</th></tr>{num_html}</table>
<h3>Probe vs training at each matched budget (uncalibrated)</h3>
<table><tr><th>budget</th><th>runs</th><th>raw bias</th><th>raw MAE</th><th>Kendall tau</th><th>Spearman rho</th></tr>{bb}</table>
<h2>Ranking</h2><p>Mean gain vs grpo per arm (points; grpo is 0 by definition); rank 1 = best; calibrated gains are
the cross-validated ones at the {e(m['budget'])} budget.</p>
<table><tr>{''.join(f'<th>{e(k)}</th>' for k in tcols)}</tr>{trows}</table>
<h2>Figures</h2>{figs}
<p>Made by calib with {e(', '.join(f'{k} {v}' for k, v in m['versions'].items()))}.</p>
</body></html>
"""


def _json_safe(x):
    """NaN -> null and +-inf -> "inf"/"-inf" (the encoding of gradprobe.probe.run), numpy scalars -> Python."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x
