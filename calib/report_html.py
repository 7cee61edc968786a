"""Figures and the self-contained HTML page of the calibration report (:mod:`calib.report`).

Figures (PNG bytes, seaborn on matplotlib's Agg backend):

- ``predicted_vs_realized``: every held-out run, forecast (top: as it is; bottom: calibrated,
  with its conformal interval) against realized gain vs grpo, one panel per forecaster,
  coloured by study;
- ``mae_by_forecaster``: MAE before and after calibration per forecaster, on the rows all
  forecasters cover, per validation scheme, with its 95% study-cluster bootstrap interval as an
  error bar (:mod:`calib.bootstrap`; none, and the title says so, under ``min_studies`` studies);
- ``residuals_by_arm``: the headline forecaster's residuals by arm, before and after;
- ``accuracy_vs_tokens``: every run's held-out accuracy against generated tokens, one panel per
  study, with the token budget.
"""

from __future__ import annotations

import base64
import html
import io
import math
import warnings

import numpy as np
import pandas as pd

from .dataset import FORECASTERS
from .metrics import p_value_text
from .validation import level_percent
from .noise_floor import heldout_label
from gradprobe import figures
from gradprobe.probe.table import bidi_escaped


_SHORT = {"forecast_probe": "probe", "forecast_cost_only": "cost only", "forecast_signal_proxy": "signal proxy",
          "forecast_first_order": "first order (raw)", "rho": "per-update rho"}


def _escape(text: str) -> str:
    """``text`` for the page: HTML-escaped (quotes too, :func:`html.escape`), each bidirectional control written as
    ``\\u202e`` (:func:`gradprobe.probe.table.bidi_escaped`), so that a study folder's or an arm's name holding U+202E
    cannot reverse the rest of its cell or paragraph. Every name and text of the page passes here."""
    return html.escape(bidi_escaped(text))


def short(col: str) -> str:
    """Display name of a forecaster column."""
    if col.startswith("calibrated_"):
        return f"{short(col[len('calibrated_'):])}, calibrated (CV)"
    return _SHORT.get(col, col)


def draw_figures(rows: pd.DataFrame, cv_rows: pd.DataFrame, m: dict, runs: pd.DataFrame) -> dict:
    """{figure name: PNG bytes} for :data:`calib.report.FIGURES`."""
    return {"predicted_vs_realized": _fig_predicted(cv_rows, m), "mae_by_forecaster": _fig_mae(m),
            "residuals_by_arm": _fig_residuals(cv_rows, m),
            "accuracy_vs_tokens": _fig_accuracy(runs, rows)}


def _plt():
    """(figures, seaborn): off-screen figures without a backend switch (:mod:`gradprobe.figures`)."""
    import seaborn as sns

    return figures, sns


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _fig_predicted(cv_rows: pd.DataFrame, m: dict) -> bytes:
    plt, sns = _plt()
    head = cv_rows[cv_rows["cv"] == m["headline_cv"]] if len(cv_rows) else cv_rows
    fig, axes = plt.subplots(2, len(FORECASTERS), figsize=(4.2 * len(FORECASTERS), 8.4), squeeze=False)
    studies = sorted(set(cv_rows["study"])) if len(cv_rows) else []
    palette = dict(zip(studies, sns.color_palette("tab10", max(len(studies), 1))))
    for j, f in enumerate(FORECASTERS):
        col = head[head["forecaster"] == f] if len(head) else head
        lim = _limits(col)  # one scale per forecaster (the raw first order spans tens of points)
        for i, (method, label) in enumerate((("none", "as forecast"), (m["method"], f"calibrated ({m['method']})"))):
            ax = axes[i, j]
            sub = col[col["method"] == method] if len(col) else col
            e = m["errors"][m["headline_cv"]][f]["raw" if method == "none" else "calibrated"]
            if len(sub):
                ok = np.isfinite(sub["cv_lower"]) & np.isfinite(sub["cv_upper"])
                if method != "none" and ok.any():
                    s = sub[ok]
                    # a CV+ interval is not centred on the point prediction and may not contain it
                    # (Barber et al. 2021): drawn as the segment [lower, upper], not as error bars
                    ax.hlines(s["target"], s["cv_lower"], s["cv_upper"], colors="0.75", linewidth=1, zorder=1)
                sns.scatterplot(data=sub, x="cv_pred", y="target", hue="study", palette=palette, ax=ax, s=40,
                                zorder=2, legend=(i == 0 and j == 0))
                title = (f"{short(f)}, {label}\nMAE {e['mae']:.2f} {ci_text(e.get('mae_interval'))}, "
                         f"bias {e['bias']:+.2f} ({e['rows']} runs)")
            else:
                title = f"{short(f)}, {label}\nnot calibrated: fewer than 2 arms forecast"
            ax.plot(lim, lim, "k--", lw=1)
            ax.set(xlim=lim, ylim=lim, xlabel="forecast gain vs grpo (points)",
                   ylabel="realized gain vs grpo, one run (points)")
            ax.set_title(title, fontsize=9)
    if axes[0, 0].get_legend() is not None:
        axes[0, 0].legend(fontsize=7, title="study", title_fontsize=7, loc="upper left")
    fig.suptitle(f"held-out forecasts vs training (leave one {m['headline_cv']} out; coloured by study; "
                 "bars: conformal intervals)")
    fig.tight_layout()
    return _png(fig)


def _limits(df: pd.DataFrame) -> list:
    vals = np.concatenate([df[c].to_numpy(float) for c in ("cv_pred", "target")]) if len(df) else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (-1.0, 1.0)
    pad = 0.08 * ((hi - lo) or 1.0)
    return [lo - pad, hi + pad]


def _fig_mae(m: dict) -> bytes:
    """Bars: MAE on the common rows; error bars: its study-cluster bootstrap interval (none under ``min_studies``)."""
    plt, sns = _plt()
    whens = (("raw", "as forecast"), ("calibrated", "calibrated"))
    colors = sns.color_palette("tab10", len(whens))
    fig, axes = plt.subplots(1, len(m["cv_modes"]), figsize=(6.5 * len(m["cv_modes"]), 4.2), squeeze=False)
    width = 0.38
    least = (m.get("bootstrap") or {}).get("min_studies", 2)
    for ax, cv in zip(axes[0], m["cv_modes"]):
        missing = False
        for i, (key, when) in enumerate(whens):
            x, y, lo, hi, has = [], [], [], [], []
            for j, f in enumerate(FORECASTERS):
                r = m["errors"][cv][f][key].get("common")
                if r is None or r["mae"] is None or not np.isfinite(r["mae"]):
                    continue
                has.append(r.get("mae_interval") is not None)
                iv = r.get("mae_interval") or [r["mae"], r["mae"]]
                x.append(j + (i - 0.5) * width)
                y.append(r["mae"])
                lo.append(r["mae"] - iv[0])
                hi.append(iv[1] - r["mae"])
            if x:
                ax.bar(x, y, width, color=colors[i], label=when)
                ok = [k for k, h in enumerate(has) if h]  # no error bar where there is no interval
                if ok:
                    ax.errorbar([x[k] for k in ok], [y[k] for k in ok], yerr=[[lo[k] for k in ok], [hi[k] for k in ok]],
                                fmt="none", ecolor="k", elinewidth=1, capsize=3)
                missing = missing or len(ok) < len(x)
                for xi, yi, top in zip(x, y, np.add(y, hi)):  # the value above its interval's upper end
                    ax.annotate(f"{yi:.2f}", (xi, top), xytext=(0, 2), textcoords="offset points", ha="center",
                                va="bottom", fontsize=7)
        ax.set_xticks(range(len(FORECASTERS)), [short(f) for f in FORECASTERS], rotation=15)
        ax.set_ylabel("MAE (points)")
        ax.legend(fontsize=8)
        bars = (f"no study-cluster bootstrap interval under {least} studies (few clusters: too narrow)" if missing
                else "bars: 95% study-cluster bootstrap interval")
        ax.set_title(f"leave one {cv} out, on the {m['common_rows']} runs all compared forecasters cover\n{bars}",
                     fontsize=9)
    return _png(fig)


def _fig_residuals(cv_rows: pd.DataFrame, m: dict) -> bytes:
    plt, sns = _plt()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(m["arms"]) + 4), 4.5))
    if len(cv_rows):
        sub = cv_rows[(cv_rows["cv"] == m["headline_cv"]) & (cv_rows["forecaster"] == m["forecaster"])].copy()
        sub["residual"] = sub["cv_pred"] - sub["target"]
        sub["when"] = np.where(sub["method"] == "none", "as forecast", "calibrated")
        sub["arm "] = sub["arm"] if m["n_studies"] == 1 else sub["study"].str.split("@").str[0] + "/" + sub["arm"]
        if len(sub):
            with warnings.catch_warnings():  # seaborn 0.13's boxplot passes matplotlib 3.11's deprecated vert=
                warnings.filterwarnings("ignore", message=".*vert: bool was deprecated.*")
                sns.boxplot(data=sub, x="arm ", y="residual", hue="when", ax=ax, fliersize=0)
            state = np.random.get_state()  # seaborn jitters strip points with the global numpy RNG: seed it,
            np.random.seed(0)               # so the same rows draw the same figure (report.html reproducible)
            try:
                sns.stripplot(data=sub, x="arm ", y="residual", hue="when", dodge=True, ax=ax,
                              palette=["0.2", "0.2"], size=3, legend=False)
            finally:
                np.random.set_state(state)
    ax.axhline(0, color="k", lw=1)
    ax.set_ylabel("forecast - realized (points)")
    ax.set_title(f"{short(m['forecaster'])}: held-out residuals by arm (leave one {m['headline_cv']} out; > 0: "
                 "overestimate)", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    return _png(fig)


def _fig_accuracy(runs: pd.DataFrame, rows: pd.DataFrame) -> bytes:
    """One line per run (arm x seed): eval points of different seeds sit at different token counts,
    so runs are drawn as they are rather than averaged at unequal x."""
    plt, sns = _plt()
    studies = list(dict.fromkeys(runs["study_label"]))
    budgets = {s.split("@")[0]: float(v) for s, v in zip(rows["study"], rows["budget_value"])}
    fig, axes = plt.subplots(1, len(studies), figsize=(6.5 * len(studies), 4.5), squeeze=False)
    for ax, s in zip(axes[0], studies):
        sub = runs[runs["study_label"] == s].sort_values(["arm", "seed", "generated_tokens"]).copy()
        sub["accuracy (points)"] = 100 * sub["accuracy"]
        sns.lineplot(data=sub, x="generated_tokens", y="accuracy (points)", hue="arm", units="seed", estimator=None,
                     ax=ax, marker="o", markersize=3, lw=1, alpha=0.8)
        if s in budgets:
            ax.axvline(budgets[s], color="k", ls="--", lw=1, label="token budget")
            ax.legend(fontsize=7)
        ax.set_xlabel("generated tokens")
        ax.set_title(f"{s}: greedy held-out accuracy, one line per run", fontsize=10)
    return _png(fig)


# ----------------------------------------------------------------------------- HTML

def _fmt(x, spec="+.2f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def ci_text(iv, spec=".2f") -> str:
    """``[lo, hi]`` of an interval (points), or ``[no interval]`` when it is None (too few studies)."""
    if iv is None:
        return "[no interval]"
    return f"[{format(iv[0], spec)}, {format(iv[1], spec)}]"


def _ci_html(iv, reason, spec=".2f") -> str:
    """:func:`ci_text`, with the reason of a missing interval (e.g. under 5 studies) as the tooltip of
    ``[no interval]``."""
    if iv is None and reason:
        return f"<span title=\"{_escape(reason)}\">[no interval]</span>"
    return ci_text(iv, spec)


def _mae_cell(r: dict) -> str:
    """MAE with its bootstrap interval; the reason of a missing interval as a tooltip."""
    return f"{_fmt(r['mae'], '.2f')} {_ci_html(r.get('mae_interval'), r.get('mae_interval_reason'))}"


def _difference_table(m: dict, cv: str) -> str:
    """Paired MAE difference of each compared forecaster minus cost only (common rows), with intervals."""
    e = _escape
    recs = [(f, {k: m["errors"][cv][f][k].get("common", {}).get("mae_difference_vs_cost_only")
                 for k in ("raw", "calibrated")}) for f in m["compared_forecasters"]]
    recs = [(f, d) for f, d in recs if any(d.values())]
    if not recs:
        return ""
    body = ""
    for f, d in recs:
        cells = [e(short(f) + " - cost only")]
        for k in ("raw", "calibrated"):
            r = d[k]
            if r is None:
                cells.append("n/a")
            elif r["interval"] is None:
                cells.append(f"{_fmt(r['estimate'])} {_ci_html(None, r['reason'] or 'not recorded')}")
            else:
                mde = r.get("detectable_difference")
                cells.append(f"{_fmt(r['estimate'])} {ci_text(r['interval'], '+.2f')}"
                             + ("" if mde is None else f", detectable {_fmt(mde, '.2f')}"))
        body += "<tr>" + "".join(f"<td class=n>{c}</td>" for c in cells) + "</tr>"
    return ("<p>Paired MAE difference vs cost only on the same runs (points; &lt; 0: fewer errors than cost only), "
            "with its 95% study-cluster bootstrap interval (the same resamples for both forecasters) and the "
            "smallest difference these studies could detect (detectable: 2.80 bootstrap standard errors, 80% power "
            "at two-sided 5%, <code>calib.bootstrap.detectable_difference</code>):</p>"
            f"<table><tr><th>difference</th><th>as forecast</th><th>calibrated ({e(m['method'])})</th></tr>"
            f"{body}</table>")


def _floor_html(m: dict, cv: str) -> str:
    """The seed-noise floor of the run-level MAE and the errors on arm means (:mod:`calib.noise_floor`)."""
    fl = m.get("seed_noise_floor")
    if not fl:
        return ""
    if not fl["arms"]:
        return f"<p>Seed-noise floor of the run-level MAE: n/a, {_escape(fl['reason'] or '')}.</p>"
    rows = ""
    for f in m["compared_forecasters"]:
        a = m["errors"][cv][f]["raw"].get("common", {}).get("arm_level")
        if a:
            rows += (f"<tr><td>{_escape(short(f))}</td><td class=n>{_fmt(a['mae']['estimate'], '.2f')} "
                     f"{_ci_html(a['mae']['interval'], a['mae']['reason'])}</td><td class=n>"
                     f"{_fmt(a['floor']['estimate'], '.2f')} {_ci_html(a['floor']['interval'], a['floor']['reason'])}"
                     f"</td><td class=n>{a['arms']}"
                     + ("" if a["floor_arms"] == a["arms"] else f" (floor over {a['floor_arms']})") + "</td></tr>")
    left = f"; {fl['single_seed_arms']} arm(s) of one seed left out" if fl.get("single_seed_arms") else ""
    return (f"<p>Seed-noise floor of the run-level MAE on these runs: {_fmt(fl['estimate'], '.2f')} "
            f"{_ci_html(fl['interval'], fl['reason'])} points ({fl['arms']} study-arms with 2 or more seeds, "
            f"{fl['runs']} runs{left}): even a "
            "forecaster that knew each arm's mean gain exactly would be off by about this much on single runs. It "
            "leaves out grpo's own noise and is itself uncertain (its interval), so an MAE near it is at the floor. "
            f"Method: {_escape(fl['method'])}.</p>"
            "<p>On arm means (each arm once: mean forecast vs mean realized over its seeds), as forecast:</p>"
            "<table><tr><th>forecaster</th><th>MAE [95% interval]</th><th>floor of arm means</th><th>study-arms</th>"
            "</tr>"
            f"{rows}</table>{_never_trained_html(fl)}{_heldout_html(m.get('heldout_floor'))}")


def _never_trained_html(fl: dict) -> str:
    """The arms the seed-noise floor and the arm-mean errors left out for a run that never trained
    (:func:`calib.noise_floor.seed_noise_floor`'s ``never_trained``), else ""."""
    left = fl.get("never_trained")
    if not left:
        return ""
    return "<p>Left out of the floor and the arm-mean errors: " + "; ".join(
        _escape(f"{e['study']}/{e['arm']}: {e['why']}") for e in left) + ".</p>"


def _heldout_html(h: dict | None) -> str:
    """The run-level floor on larger held-out sets (:func:`calib.noise_floor.heldout_floor`)."""
    if not h:
        return ""
    skipped = (f" Not split: {_escape('; '.join(h['skipped']))}." if h["skipped"] else "")
    if not h["arms"]:
        return f"<p>Held-out split of the floor: n/a.{skipped}</p>"
    items = ", ".join(map(str, sorted({a["items"] for a in h["arms"]})))
    cells = "".join(f"<tr><td>{_escape(heldout_label(f['multiple']))}</td><td class=n>"
                    f"{_fmt(f['estimate'], '.2f')} {_ci_html(f['interval'], f['reason'])}</td></tr>"
                    for f in h["floors"])
    return (f"<p>How much of that floor is the held-out set (N = {items} items, the same for every seed): on average "
            f"{_fmt(h['heldout_share'], '.2f')} of the seeds' variance is the held-out set's own error, which a larger "
            f"held-out set removes; the rest is training randomness ({h['runs']} runs, {len(h['arms'])} study-arms "
            f"with per-item results).{skipped} Method: {_escape(h['method'])}.</p>"
            f"<table><tr><th>held-out items</th><th>run-level floor [95% interval]</th></tr>{cells}</table>")


def _error_table(m: dict, cv: str, part: str | None) -> str:
    e = _escape
    head = ("<tr><th rowspan=2>forecaster</th><th rowspan=2>runs</th><th colspan=4>as forecast</th>"
            f"<th colspan=4>calibrated ({e(m['method'])})</th></tr><tr>"
            + "<th>bias</th><th>MAE [95% interval]</th><th>coverage</th><th>width</th>" * 2 + "</tr>")
    body = ""
    for f in FORECASTERS:
        cells = [e(short(f))]
        for i, key in enumerate(("raw", "calibrated")):
            r = m["errors"][cv][f][key]
            r = r.get(part, r) if part else r
            if "error" in r:
                if i == 0:
                    cells.append("")
                cells.append(f"<span title=\"{e(r['error'])}\">n/a</span>")
                cells += [""] * 3
                continue
            if i == 0:
                cells.append(str(r["rows"]))
            cov = f"{_fmt(r['coverage'], '.2f')} ({r['coverage_rows']})"
            cells += [_fmt(r["bias"]), _mae_cell(r),
                      f"<span{_title(r['coverage_reason'])}>{cov}</span>" if r.get("coverage_reason") else cov,
                      _fmt(r["mean_interval_width"], ".1f")]
        body += "<tr>" + "".join(f"<td class=n>{c}</td>" for c in cells) + "</tr>"
    return f"<table>{head}{body}</table>"


def _test(r: dict) -> str:
    if not r["n_permutations"]:
        return "no study with 2 or more ranked arms"
    return f"{'exact' if r['exact'] else 'Monte Carlo'}, {r['n_permutations']} permutations"


def _title(reason) -> str:
    return f' title="{_escape(reason)}"' if reason else ""


def _interval_cell(r: dict, key: str) -> str:
    """A pooled tau's or rho's interval ``r[key]`` as a cell; n/a titled with its reason when None."""
    iv = r.get(key)
    return (f"<td class=n{_title(r.get(key + '_reason') or 'not recorded')}>n/a</td>" if iv is None else
            f"<td class=n>[{_fmt(iv[0], '+.2f')}, {_fmt(iv[1], '+.2f')}]</td>")


def _ranking_table(rk: dict) -> str:
    head = ("<tr><th>ranked by</th><th>Kendall tau</th><th>tau interval</th><th>p</th><th>Spearman rho</th>"
            "<th>rho interval</th><th>p</th><th>studies</th>"
            "<th>study-arms (grpo included)</th><th>test</th><th>ceiling of tau</th><th>tau significant from</th></tr>")
    body = "".join(
        f"<tr><td>{_escape(short(c))}</td><td class=n>{_fmt(r['kendall_tau'], '+.3f')}</td>"
        f"{_interval_cell(r, 'kendall_tau_interval')}"
        f"<td class=n>{_escape(p_value_text(r))}</td><td class=n>{_fmt(r['spearman_rho'], '+.3f')}</td>"
        f"{_interval_cell(r, 'spearman_rho_interval')}"
        f"<td class=n>{_escape(p_value_text(r, 'p_spearman'))}</td><td class=n>{r['n_studies']}</td>"
        f"<td class=n>{r['n_arms']}</td>"
        f"<td>{_test(r)}</td><td class=n{_title(r.get('oracle_reason'))}>"
        f"{_fmt(r.get('oracle_kendall_tau', math.nan), '+.2f')}</td>"
        f"<td class=n{_title(r.get('critical_reason'))}>{_fmt(r.get('critical_kendall_tau', math.nan), '+.2f')}</td>"
        "</tr>"
        for c, r in rk.items())
    return f"<table>{head}{body}</table>"


def _boot_text(m: dict) -> str:
    b = m.get("bootstrap") or {}
    if not b:
        return "none recorded."
    return (f"{b['level']:.0%} percentile intervals of a study-cluster bootstrap ({b['resamples']} resamples of the "
            f"{b['n_clusters']} studies with replacement, every run of a drawn study together; seed {b['seed']}; "
            "Efron &amp; Tibshirani 1993). They are intervals, not p-values; with few studies they are optimistic "
            f"(few distinct resamples), and under {b.get('min_studies', 2)} studies none is given ([no interval], the "
            "reason as its title), as for the tau: a percentile bootstrap over few clusters undercovers (Cameron "
            "&amp; Miller 2015).")


def _critical_text(m: dict) -> str:
    """The reasons of the "tau significant from" cells that are n/a (``critical_reason`` of
    :func:`calib.metrics.pooled_rank_agreement`), each once with the scores it holds for, escaped; empty when none."""
    by_reason: dict = {}
    for part in ("ranking", "ranking_common_arms"):
        for col, r in (m.get(part) or {}).items():
            if r.get("critical_reason") and _fmt(r.get("critical_kendall_tau", math.nan), "+.2f") == "n/a":
                by_reason.setdefault(r["critical_reason"], []).append(short(col))
    return "".join(f" No significance for {_escape(', '.join(dict.fromkeys(cols)))}: {_escape(reason)}."
                   for reason, cols in by_reason.items())


def _rank_interval_text(m: dict) -> str:
    """What the tau and rho intervals are (:func:`calib.bootstrap.pooled_interval`), from the settings recorded."""
    b = next((r["interval_bootstrap"] for r in m["ranking"].values() if "interval_bootstrap" in r), None)
    return "Tau and rho intervals: none recorded." if b is None else (
        f"Tau and rho intervals: {b['level']:.0%} percentile, study-cluster bootstrap ({b['resamples']} resamples of "
        f"the ranked studies, the same weighted mean on each; seed {b['seed']}; calib.bootstrap.pooled_interval), "
        f"not a test; none (n/a, the reason as its title) under {b['min_studies']} ranked studies: a percentile "
        "bootstrap over few clusters undercovers (Cameron &amp; Miller 2015).")


def render_html(m: dict, table: pd.DataFrame, images: dict, study_dirs) -> str:
    """The report page (self-contained: figures embedded as base64 PNG)."""
    e = _escape
    lvl = m["confidence_level"]
    notes = "".join(f"<p class=note>{e(n)}</p>" for n in m["notes"])
    errs = "".join(
        f"<h3>Leave one {e(cv)} out{' (headline)' if cv == m['headline_cv'] else ''}</h3>"
        f"<p>Each forecaster on the runs it can forecast:</p>{_error_table(m, cv, None)}"
        f"<p>On the {m['common_rows']} runs that all compared forecasters "
        f"({e(', '.join(map(short, m['compared_forecasters'])))}) cover (the fair comparison):</p>"
        f"{_error_table(m, cv, 'common')}{_difference_table(m, cv)}"
        f"{_floor_html(m, cv) if cv == m['headline_cv'] else ''}" for cv in m["cv_modes"])
    rcols = [c for c in table.columns
             if c not in ("study", "arm", "seeds", "realized_se") and not c.startswith("rank_")]
    trows = "".join("<tr><td>" + e(str(r["study"])) + "</td><td>" + e(str(r["arm"])) + "</td>"
                    + "".join(f"<td class=n>{_fmt(r[c])}</td>" for c in rcols)
                    + f"<td class=n>{int(r['seeds'])}</td></tr>" for _, r in table.iterrows())
    figs = "".join(f"<figure><img alt=\"{e(n)}\" src=\"data:image/png;base64,{base64.b64encode(b).decode()}\">"
                   f"<figcaption>{e(n)}.png</figcaption></figure>" for n, b in images.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gradprobe calibration report</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:90%}}
td.n{{text-align:right;font-family:monospace}}img{{max-width:100%}}figure{{margin:1.5em 0}}
p.note{{background:#fff4d6;padding:6px 10px;border-left:4px solid #e0a800}}</style></head>
<body><h1>Calibration report</h1>
<p>Studies ({m['n_studies']}): {e(', '.join(m['studies']))} (folders: {e(', '.join(str(d) for d in study_dirs))});
models: {e(', '.join(m['models']))}; tasks: {e('; '.join(m['tasks']))}.</p>
<p>Target: realized gain vs grpo of one training run at the study's generated-token budget (accuracy points);
{m['rows']} runs of {len(m['arms'])} arms besides grpo (distinct arm names over the {m['n_studies']} studies;
"study-arms" below count an arm once per study it is in; {m['grpo_rows_left_out']} grpo runs left out: 0 = 0 by
definition).
Calibration: realized ~ f(forecast), {e(m['method'])} (Huber linear or isotonic), refitted without the held-out group;
intervals: {e(m['interval'])} conformal (MAPIE) at {level_percent(lvl)}, nested inside each held-out fold; coverage =
share of held-out runs inside their interval (count in brackets), width = mean interval width (points).</p>
<p>MAE intervals: {_boot_text(m)}</p>
{notes}
<h2>Errors of the forecast gain vs grpo, before and after calibration</h2>{errs}
<h2>Ranking of arms vs training, within each study</h2>
<p>Kendall tau-b and Spearman rho of each score's arm ranking against training's (mean realized gain vs grpo over
seeds; grpo included at 0), pooled over studies (weights: arm pairs for tau, arms for rho); p: one-sided, permuting
arm labels within each study. Ceiling of tau: what a forecaster that knew each arm's mean could expect
against the realized means with their seed noise (a parametric bootstrap with the observed means and standard errors
plugged in, an upper estimate; calib.metrics.oracle_kendall_tau). Tau significant from: the smallest pooled tau the
same permutation test calls significant at one-sided 5% on these arms (calib.metrics.critical_value); a tau below it
is not shown above chance; n/a (the reason as its title) where no tau can be: too few arms or studies, or ties among
them, keep every permutation p above 5%.{_critical_text(m)} {_rank_interval_text(m)}</p>
<h3>Each score on the arms it covers</h3>{_ranking_table(m['ranking'])}
<h3>On the arms all compared forecasters cover</h3>{_ranking_table(m['ranking_common_arms'])}
<h3>Per study and arm (points; rho: per-update efficiency vs grpo)</h3>
<table><tr><th>study</th><th>arm</th>{''.join(f'<th>{e(short(c))}</th>' for c in rcols)}<th>seeds</th></tr>
{trows}</table>
<h2>Figures</h2>{figs}
<p>Made by calib with {e(', '.join(f'{k} {v}' for k, v in m['versions'].items()))}.</p>
</body></html>
"""
