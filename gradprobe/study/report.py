"""What ``gradprobe study`` prints and draws from an analysis (:func:`gradprobe.study.analysis.analyze`).

:func:`format_rankings`: rankings per axis side by side, how each matched value was read, gains
with their t and two-way intervals (a t interval over differences with no spread,
:func:`gradprobe.study.stats.no_spread`, reads ``n/a (no spread)``, in the gains and the hypotheses),
sigmoid parameters (identified or not), side effects, the detectable effect, the hypotheses and the learning-rate
sweep (:mod:`gradprobe.study.lr_sweep`).
A column ranks at least two arms (:func:`ranked_arms`: read on every seed, no run that never trained), else it
says "not ranked (only ARM read; the others: why)" (:func:`not_ranked`); an arm with a run that never trained
(``never_trained``) shows as "never trained" in place of its accuracy, gains, fits, detectable effect, hypotheses
(not tested), learning-rate point (not used) and side effects, with its seeds and cause; with a control arm that never
trained no gain vs it is shown.
:func:`plot_figures`: accuracy against each axis, and ``lr_sweep.png``.
All values in accuracy points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..figures import subplots
from . import stats
from .lr_sweep_report import format_lr_sweep, plot_lr_sweep
from .never_trained_arms import control_never_trained_why, never_trained_text

HEADS = {"updates": "per update (at {:,.0f} updates)", "generated_tokens": "at matched tokens ({:,.0f})",
         "flops": "at matched FLOPs ({:.3g})", "device_seconds": "at matched time ({:,.1f} s)"}
FIGURES = {"updates": ("accuracy_vs_updates.png", "updates", "update"),
           "generated_tokens": ("accuracy_vs_generated_tokens.png", "generated tokens (charged)", "generated_tokens"),
           "flops": ("accuracy_vs_flops.png", "FLOPs (generation + training)", "flops"),
           "device_seconds": ("accuracy_vs_device_seconds.png", "training device-seconds", "device_seconds")}


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


#: what a t interval over per-seed differences with no spread (:func:`gradprobe.study.stats.no_spread`) prints as
NO_SPREAD_CI = "n/a (no spread)"


def _t_ci(ci, sd, estimate) -> str:
    """A t interval as :func:`_ci` writes it, or :data:`NO_SPREAD_CI` when the per-seed differences (``sd``, mean
    ``estimate``, points) have no spread (:func:`gradprobe.study.stats.no_spread`): an interval narrower than any
    eval's resolution is no interval, as the paired t test, the lr sweep and the detectable effect treat it."""
    return NO_SPREAD_CI if estimate is not None and stats.no_spread(sd, estimate) else _ci(ci)


def _sd(values) -> float | None:
    """Standard deviation (ddof 1, as :func:`gradprobe.study.stats.paired_t`) of per-seed differences; None under 2."""
    v = [float(x) for x in values if x is not None]
    return float(np.std(v, ddof=1)) if len(v) >= 2 else None


def _name_width(result: dict) -> int:
    """Width of an arm-name column: the longest arm name and one space, at least 14 (the width of the
    rankings, sigmoid and side-effects tables)."""
    return max(14, *(len(arm) + 1 for arm in result["arms"]))


def control_missing(arms, control: str) -> str | None:
    """Why no arm has a gain vs ``control`` (the study has no such arm among ``arms``), else None; recorded as
    ``analysis.json`` ``control_arm_missing`` and printed in place of the gains."""
    if control in arms:
        return None
    return (f"the study has no arm {control!r}, so no gain vs {control} is computed (analysis.json gain_vs_grpo is "
            "null; the gains vs the initial policy are kept)")


def _no_control(result: dict) -> str | None:
    """:func:`control_missing` of an analysis (one written before that key too), or, when the control arm has a run
    that never trained, why its gains are not shown (a gain over a broken setup is no finding; analysis.json keeps
    them)."""
    control = result.get("control_arm", "grpo")
    if (runs := (result.get("arms", {}).get(control) or {}).get("never_trained")):
        return f"gains vs {control}: not shown, {control_never_trained_why(control, runs)}"
    return control_missing(result.get("arms", {}), control)


#: the read statuses that give a seed a value (:func:`gradprobe.study.reading.read_point`); the others are not read
READ_STATUSES = ("exact", "interpolated", "final")


def ranked_arms(arms: dict, axis: str) -> list[tuple[str, float]]:
    """(arm, mean accuracy) of the arms of ``analysis.json["arms"]`` that can be ranked on ``axis``: read on every
    seed (a mean over fewer seeds is not comparable) and with no run that never trained (``never_trained``: every
    update had every advantage 0, a broken setup rather than a finding); in ``arms`` order."""
    return [(a, r[axis]["accuracy"]) for a, r in arms.items()
            if r.get(axis) and r[axis]["accuracy"] is not None and r[axis]["seeds"] == r["seeds"]
            and not r.get("never_trained")]


def not_ranked(arms: dict, axis: str, missing: list | None = None) -> dict[str, str]:
    """Why each arm that :func:`ranked_arms` leaves out on ``axis`` is not ranked (``analysis.json``
    ``not_ranked[axis]``): it never trained (its seeds and the cause), it is read on fewer seeds than it has (the
    read statuses of the others: ``gap_exceeded`` = the evals around the point are further apart than promised,
    ``outside``, ``blank_accuracy``...), or (``missing``: ``analysis.json["missing_runs"]``) runs.csv has no run of
    it (the status of its runs in study.json)."""
    out = {}
    for arm, e in arms.items():
        cell = e.get(axis) or {}
        if e.get("never_trained"):
            out[arm] = f"never trained ({never_trained_text(e['never_trained'])})"
        elif cell.get("accuracy") is None or cell.get("seeds") != e.get("seeds"):
            other = {k: n for k, n in (cell.get("read") or {}).items() if k not in READ_STATUSES}
            out[arm] = (f"read on {cell.get('seeds', 0)} of {e.get('seeds')} seeds"
                        + (f" ({', '.join(f'{k} {n}' for k, n in other.items())})" if other else ""))
    for r in missing or []:
        if isinstance(r, dict) and r.get("arm") not in arms:
            why = str(r.get("reason", "")).split(" (")[0]
            out.setdefault(str(r.get("arm")), f"no run in runs.csv (seed {r.get('seed')}: {why})")
    return out


def _ranking(result: dict, axis: str) -> list[str]:
    """``rankings[axis]`` of an analysis, [] where it holds fewer than two arms (an ``analysis.json`` written before a
    ranking needed two) or an arm that never trained."""
    r = [a for a in result["rankings"][axis] if not result["arms"].get(a, {}).get("never_trained")]
    return r if len(r) >= 2 else []


def _unranked(result: dict, axis: str, *, short: bool = False) -> str | None:
    """What a column that ranks nothing says: ``"(no arm read on every seed)"``, or with one arm read
    ``"not ranked (only ARM read; the others: why)"`` (:func:`not_ranked`; ``short``: without the others, for the
    table's cell; the whole text goes below the table). None for the note when no arm is read (the cell says it)."""
    read = [a for a, _ in ranked_arms(result["arms"], axis)]
    if not read:
        return "(no arm read on every seed)" if short else None
    if short:
        return f"not ranked (only {', '.join(read)} read)"
    why = not_ranked(result["arms"], axis, result.get("missing_runs"))
    others = "; ".join(f"{a}: {w}" for a, w in why.items()) or "none"
    return f"not ranked (only {', '.join(read)} read; the others: {others})"


def _table(result: dict, axes: list[str]) -> list[str]:
    heads = {a: HEADS[a].format(result["matched"][a]["budget"]) for a in axes}
    name = _name_width(result)  # an arm's name, then at least one space
    width = max(32, name + 18, *(len(h) + 2 for h in heads.values()))  # name, 6.2f accuracy, " (+dd.dd)", 2 spaces
    ranked, no_gain = {a: _ranking(result, a) for a in axes}, _no_control(result) is not None
    lines = ["rank  " + "".join(f"{heads[a]:<{width}}" for a in axes)]
    for i in range(max(1, *(len(ranked[a]) for a in axes))):
        cells = []
        for a in axes:
            r = ranked[a]
            e = result["arms"][r[i]][a] if i < len(r) else None
            gain = "" if e is None or e["gain_vs_grpo"] is None or no_gain else f" ({e['gain_vs_grpo']:+.2f})"
            cells.append((_unranked(result, a, short=True) if i == 0 and not r else "") if e is None else
                         f"{r[i]:<{name}}{e['accuracy']:6.2f}{gain}")
        lines.append(f"{i + 1:<6}" + "".join(f"{c:<{width}}" for c in cells))
    never = [arm for arm, e in result["arms"].items() if e.get("never_trained")]
    lines += [f"{'-':<6}" + "".join(f"{f'{arm:<{name}}never trained':<{width}}" for _ in axes) for arm in never]
    gains = "" if _no_control(result) else f"in parentheses: paired gain vs {result.get('control_arm', 'grpo')}; "
    lines.append(f"(accuracy points; {gains}ranked: the arms read on every seed)")
    lines += [f"{heads[a]}: {note}" for a in axes if not ranked[a] and (note := _unranked(result, a))]
    lines += [f"{arm} never trained, not ranked (every update of the run had every advantage 0): "
              f"{never_trained_text(result['arms'][arm]['never_trained'])}" for arm in never]
    return lines


def _reads(result: dict, axes: list[str]) -> list[str]:
    lines = ["matched values read within one promised eval interval:"]
    for a in result["matched"]:
        m = result["matched"][a]
        if not m["recorded"]:
            lines.append(f"  {a}: not recorded ({m['source']})")
            continue
        refused = {arm: e[a]["gap_exceeded"] for arm, e in result["arms"].items() if e[a]["gap_exceeded"]}
        counts = ", ".join(f"{n} {k}" for k, n in m["reads"].items())
        lines.append(f"  {a} = {m['budget']:,.6g} ({m['source']}{_overshoot(m)}): {counts}"
                     + ("; refused (gap wider than promised): " + "; ".join(
                         f"{arm} seeds {','.join(map(str, s))}" for arm, s in refused.items()) if refused else ""))
        if m.get("overshoot_fraction_max", 0.0) > OVERSHOOT_NOTE:
            lines.append(f"  note: the runs are matched on {a} only to within {m['overshoot_fraction_max']:.1%} of the "
                         "budget (a run stops before the first update that would start with its budget spent, so an "
                         "arm with costlier updates ends further past it); to match closer, raise the budget or make "
                         "an update a smaller share of it (fewer prompts per batch)")
    return lines


#: Above this share of the budget, the largest overshoot of a budget read at each run's final eval gets a note.
OVERSHOOT_NOTE = 0.10


def _overshoot(m: dict) -> str:
    """``", runs ended 0.3-9.6% past it"``: how far past a budget read at each run's final eval the runs ended
    (``matched[axis]["overshoot"]``, :func:`gradprobe.study.reading.matched_budgets`); ``""`` otherwise."""
    over, budget = m.get("overshoot"), m.get("budget")
    if not over or not budget:
        return ""
    return f", runs ended {over['min'] / budget:.1%}-{over['max'] / budget:.1%} past it"


def _fewer_seeds(cell: dict) -> str:
    """``" (on 1 of 2 seeds: those read in both arms)"``: a gain paired over fewer seeds than the arm has
    (``gain_seeds`` < the seeds of ``per_seed``), which the ranking and the sweep do not use; ``""`` otherwise."""
    n, of = cell.get("gain_seeds"), len(cell.get("per_seed") or {})
    if not isinstance(n, int) or not of or n >= of:
        return ""
    return f" (on {n} of {of} seeds: those read in both arms)"


def _gains(result: dict, axes: list[str]) -> list[str]:
    if (why := _no_control(result)) is not None:
        return [why]
    lines = [f"gains vs {result.get('control_arm', 'grpo')} (95% t interval over seeds; two-way: seeds x items"
             + ("" if result.get("two_way") else f", n/a: {result.get('two_way_reason')}") + "):"]
    for a in axes:
        cells = [f"{arm} never trained" if e.get("never_trained") else
                 f"{arm} {e[a]['gain_vs_grpo']:+.2f} "
                 f"{_t_ci(e[a]['gain_ci'], e[a].get('gain_sd'), e[a]['gain_vs_grpo'])}"
                 + (f" two-way {_ci(e[a]['gain_vs_grpo_ci_two_way'])}" if e[a]["gain_vs_grpo_ci_two_way"] else "")
                 + _fewer_seeds(e[a])
                 for arm, e in result["arms"].items()
                 if e[a]["gain_vs_grpo"] is not None and arm != result.get("control_arm")]
        lines.append(f"  {a}: " + ("; ".join(cells) if cells else "none read"))
    return lines


def _sigmoid_cell(fit: dict) -> str:
    if "error" in fit:
        return f"no fit ({fit['error'].split(';')[0]})"
    parts = []
    for name, p in fit["params"].items():
        v = f"{p['value']:.3g}"
        parts.append(f"{name} {v} [{p['ci'][0]:.3g}, {p['ci'][1]:.3g}]" if p["identified"] else
                     f"{name} {v} ({'at bound' if p['at_bound'] else 'not identified'})")
    return ", ".join(parts) + (f"; intervals given {', '.join(fit['at_bound'])} at its bound" if fit["at_bound"]
                               and any(p["identified"] for p in fit["params"].values()) else "")


def _sigmoids(result: dict) -> list[str]:
    """The sigmoid fits' lines: arm, axis and fit, the arm column as wide as the longest arm name (:func:`_name_width`,
    as the rankings table)."""
    lines = ["sigmoid fits R0 + (A - R0) / (1 + (C_mid / C)^B) (intervals only for identified parameters):"]
    name = _name_width(result)
    for arm, e in result["arms"].items():
        if e.get("never_trained"):  # a curve of a run that never trained is no learning curve
            lines.append(f"  {arm:<{name}}never trained: its fits are no learning curve (analysis.json keeps them)")
            continue
        for axis, fit in ((a, f) for a, f in (e.get("sigmoid") or {}).items() if f.get("recorded", True)):
            lines.append(f"  {arm:<{name}}{axis:<17}{_sigmoid_cell(fit)}")
    return lines


def _side_effects(result: dict, axes: list[str]) -> list[str]:
    """The side effects' lines: each arm's means at the matched point; an arm with a run that never trained reads
    "never trained: SEEDS AND CAUSE" in place of its numbers (its runs measure a broken setup, not what the arm does
    to the policy; analysis.json keeps them). The arm column is as wide as the longest arm name (:func:`_name_width`,
    as the rankings table)."""
    a = "generated_tokens" if "generated_tokens" in axes else axes[0]
    rows, name = [], _name_width(result)
    for arm, e in result["arms"].items():
        se = e[a]["side_effects"]
        if not any(v is not None for v in se.values()):
            continue
        rows.append(f"  {arm:<{name}}" + (f"never trained: {never_trained_text(e['never_trained'])}"
                                      if e.get("never_trained") else
                                      ", ".join(f"{k} {'n/a' if v is None else f'{v:.4g}'}" for k, v in se.items())))
    return [f"side effects at matched {a} (response length in tokens, format rate, KL to the initial policy in nats):",
            *rows] if rows else ["side effects: not recorded in runs.csv (response_length, format_rate, kl_init)"]


def _hypotheses(result: dict) -> list[str]:
    hs = result["hypotheses"]
    lines = [f"hypotheses (Holm-corrected over the {hs[0]['holm_family']} testable):"] if hs else []
    for h in hs:
        if h.get("never_trained"):  # not tested: a broken setup, no estimate
            lines.append(f"  {h['name']}: not tested: {h['untestable_reason']}; out of the Holm family")
            continue
        if h["estimate"] is None:
            lines.append(f"  {h['name']}: not evaluated: {h['error']}")
            continue
        adj = "" if h["p_adjusted"] is None else f", Holm-adjusted p = {h['p_adjusted']:.3g}"
        why = h["untestable_reason"]
        if h["p_text"] is None:  # no p-value (a paired t over one seed): say why in its place
            p_text, test = "p n/a", f" ({why or 'no p-value'}; {h['alternative']}, alpha {h['alpha']:g})"
            why = None
        else:
            p_text, test = h["p_text"], f" ({h['alternative']}, alpha {h['alpha']:g})"
        t_ci = _t_ci(h["ci"], _sd((h.get("per_seed") or {}).values()), h["estimate"])
        lines.append(f"  {h['name']}: {h['status']}  estimate {h['estimate']:+.2f} points, t interval "
                     f"{t_ci}" + (f" ({h['ci_level']:.0%})" if h["ci"] and t_ci != NO_SPREAD_CI else "") + ", two-way "
                     f"{_ci(h['ci_two_way'])}, {p_text}{adj}{test}"
                     + (f"; {why}" if why else "")
                     + (f"; seeds refused: {h['excluded_seeds']}" if h["excluded_seeds"] else ""))
    return lines


def _detectable(d: dict | None) -> list[str]:
    """The detectable effect's lines (none without one): the largest over arms and each arm's, an arm with a run
    that never trained (``per_arm[arm]["reason"]``) or a control arm that did (``reason``) named in place of a
    number."""
    if not d:
        return []
    per_arm = d.get("per_arm") or {}
    skipped = [v["reason"] for v in per_arm.values() if v.get("reason")]  # each names its arm
    if d.get("reason") or (d.get("largest") is None and skipped):
        return ["", f"detectable effect (at matched {d['axis']}): " + (d.get("reason") or "; ".join(skipped))]
    if d.get("largest") is None:
        return []
    skipped = "".join(f"; {r}" for r in skipped)
    head = (f"detectable effect (80% power, {d['alternative']} paired t at alpha {d['alpha']:g}, {d['seeds']} seeds, "
            f"at matched {d['axis']})")
    return ["", f"{head}: {d['largest']:.2f} points (largest over arms: "
            + ", ".join(f"{a} {v['effect']:.2f}" for a, v in per_arm.items() if v["effect"] is not None)
            + f"); {d['note']}{skipped}"]


def format_rankings(result: dict) -> str:
    """The analysis as text (module docstring); what ``gradprobe study`` prints."""
    axes = [a for a in ("updates", "generated_tokens", "flops", "device_seconds") if a in result["rankings"]]
    init = result["initial"]
    lines = [f"initial policy: {init['accuracy']:.2f} points (greedy)", "", *_table(result, axes), "",
             *_reads(result, axes), "", *_gains(result, axes), "", *_sigmoids(result), "",
             *_side_effects(result, axes)]
    lines += _detectable(result.get("detectable_effect"))
    if result["hypotheses"]:
        lines += ["", *_hypotheses(result)]
    sweep = format_lr_sweep(result.get("lr_sweep"))
    if sweep:
        lines += ["", *sweep]
    return "\n".join(lines)


def accuracy_band(values) -> tuple[float, float]:
    """The band drawn around an arm's mean accuracy at one point of a figure: mean +- 2 standard errors over seeds
    (``pandas.Series.sem``, ddof = 1, as seaborn's ``errorbar=("se", 2)``), clipped to [0, 100] points
    (:data:`~gradprobe.study.stats.ACCURACY_RANGE`: seeds near the ceiling drew a band above 100). One seed: NaN,
    no band (as seaborn's).

    Parameters
    ----------
    values : array-like, shape (seeds,)
        The seeds' accuracies at one point (points).
    """
    import pandas as pd

    v = pd.Series(np.asarray(values, dtype=np.float64))
    mean, half = float(v.mean()), 2.0 * float(v.sem())
    return (stats.clip_accuracy(mean - half), stats.clip_accuracy(mean + half))  # one seed: NaN, no band


def plot_figures(df, result: dict, folder: str | Path, grid_points: int = 41) -> list[Path]:
    """Accuracy (points) against every recorded axis per arm: mean over seeds with a band of +-2
    standard errors over seeds clipped to [0, 100] (seaborn; :func:`accuracy_band`), each run interpolated on a
    common grid from 0 to the arm's smallest final x (a drawing, not a matched value); a dashed line marks the
    matched point; and :func:`~gradprobe.study.lr_sweep_report.plot_lr_sweep`. Returns the written files."""
    import pandas as pd
    import seaborn as sns

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    runs = {(a, int(s)): g.sort_values("update") for (a, s), g in df.groupby(["arm", "seed"], sort=False)}
    written = []
    for axis, (name, label, column) in FIGURES.items():
        if not result["matched"][axis]["recorded"]:
            continue
        rows = []
        for arm in dict.fromkeys(df["arm"]):
            keys = [k for k in runs if k[0] == arm]
            hi = min(float(runs[k][column].iloc[-1]) for k in keys)
            for k in keys:
                x = runs[k][column].to_numpy(dtype=np.float64)
                y = 100.0 * runs[k]["accuracy"].to_numpy(dtype=np.float64)
                rows += [{"arm": arm, "seed": k[1], column: gx, "accuracy (points)": np.interp(gx, x, y)}
                         for gx in np.linspace(float(x[0]), hi, grid_points)]
        fig, ax = subplots(figsize=(7, 4.5))  # off-screen: no backend switch (gradprobe.figures)
        sns.lineplot(data=pd.DataFrame(rows), x=column, y="accuracy (points)", hue="arm", errorbar=accuracy_band,
                     ax=ax)
        ax.axvline(result["matched"][axis]["budget"], color="0.4", ls="--", lw=1, label=f"matched {axis}")
        ax.set_xlabel(label)
        ax.set_title(f"held-out greedy accuracy vs {label}\nmean over seeds, band: +-2 standard errors "
                     "(within 0-100)", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        written.append(folder / name)
    sweep = plot_lr_sweep(result.get("lr_sweep"), folder)
    return written + ([sweep] if sweep else [])
