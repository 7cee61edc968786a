"""The learning-rate sweep's report lines and figure (``figures/lr_sweep.png``), from the ``lr_sweep`` section
of ``analysis.json`` that :func:`gradprobe.study.lr_sweep.lr_sweep` computes. A point whose arm has a run that
never trained (its ``never_trained`` records) reads "never trained" in place of its accuracy, with its seeds and
cause below, and is not drawn: a broken run measures no learning rate."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from ..figures import subplots
from . import stats
from .lr_sweep import AXIS_ORDER, FIGURE
from .never_trained_arms import never_trained_why


def _ci(ci) -> str:
    return "n/a" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _clipped_ci(p: dict) -> tuple[list | None, bool]:
    """A point's accuracy interval within [0, 100] points and whether its t interval was clipped to get there: where
    the analysis clipped it (``ci_unclipped``), or, in an ``analysis.json`` written before accuracy intervals were
    clipped, where a bound lies outside the range (clipped here, :data:`gradprobe.study.stats.ACCURACY_RANGE`)."""
    ci = p["ci"]
    if ci is None:
        return None, False
    out = [stats.clip_accuracy(ci[0]), stats.clip_accuracy(ci[1])]
    return out, bool(p.get("ci_unclipped")) or out != list(ci)


def _accuracy_ci(p: dict) -> str:
    """A point's 95% t interval of its arm's mean accuracy over ``p["seeds"]`` seeds, as :func:`_ci` writes it
    (within [0, 100], followed by :data:`gradprobe.study.stats.CLIPPED_NOTE` where a bound was clipped), or
    "n/a (no spread)" when the seeds' accuracies have none (:func:`gradprobe.study.stats.no_spread`, on the sd the
    t interval implies, before any clipping: half its width / t_(0.975, seeds - 1) * sqrt(seeds)): a zero-width
    interval is no interval."""
    (ci, clipped), n = _clipped_ci(p), p.get("seeds") or 0
    if ci is None or n < 2:
        return _ci(ci)
    raw = p.get("ci_unclipped") or p["ci"]
    sd = (raw[1] - raw[0]) / 2.0 / float(student_t.ppf(0.975, n - 1)) * math.sqrt(n)
    if stats.no_spread(sd, p["accuracy"]):
        return "n/a (no spread)"
    return _ci(ci) + (f" {stats.CLIPPED_NOTE}" if clipped else "")


def _label(g: dict) -> str:
    sh = g["shared"]
    extra = [f"{k}={v}" for part in ("train", "mc", "selection", "guidance") for k, v in sh.get(part, {}).items()]
    return f"reward {sh['reward']}" + (f" ({', '.join(extra)})" if extra else "")


def _cell(p: dict) -> str:
    """One point's cell: ``"2x 43.75 [..] diff +2.50 [..]"``, ``"2x not read"`` or ``"2x never trained"``."""
    if p.get("never_trained"):
        return f"{p['lr_scale']:g}x never trained (not used)"
    if p["accuracy"] is None:
        return f"{p['lr_scale']:g}x not read" + (f" (refused {p['refused_seeds']})" if p["refused_seeds"] else "")
    c = f"{p['lr_scale']:g}x {p['accuracy']:.2f} {_accuracy_ci(p)}"
    if p["reference"]:
        c += " (reference)"
    elif p["difference"] is not None:
        c += f" diff {p['difference']:+.2f} {_ci(p['difference_ci'])}" + (
            f" [{_ci(p['difference_ci_two_way'])[1:-1]}]" if p["difference_ci_two_way"] else "")
    return c + ("" if p["used"] else f" (not used: read on {p['seeds']} of {p['seeds_total']} seeds, refused "
                                     f"{p['refused_seeds']})")


def format_lr_sweep(sweep: dict | None) -> list[str]:
    """The sweep as report lines (empty when the analysis has no ``lr_sweep`` or no group); a point that never
    trained shows no number, and a line per such arm names its seeds and the cause."""
    if not sweep or not sweep["groups"]:
        return []
    lines = ["learning-rate sweep (arms that differ only by lr_scale; accuracy points with 95% t intervals over "
             "seeds; diff: paired vs lr_scale 1, t [two-way]):"]
    for g in sweep["groups"]:
        lines.append(f"  {_label(g)}: " + ", ".join(f"{a} {s:g}x" for a, s in zip(g["arms"], g["lr_scales"]))
                     + ("" if g["reference"] else "; no arm at lr_scale 1")
                     + (f"; left out (same lr_scale): {', '.join(g['duplicates'])}" if g["duplicates"] else ""))
        broken = {}
        for axis, r in g["axes"].items():
            broken.update({p["arm"]: p["never_trained"] for p in r["points"] if p.get("never_trained")})
            lines.append(f"    {axis} = {r['budget']:,.6g}: " + "; ".join(_cell(p) for p in r["points"]))
            if any(not p["used"] and not p.get("never_trained") for p in r["points"]):
                lines.append("      not used: a point not read on every seed (refused: a gap wider than the promised "
                             "eval interval); a mean over fewer seeds is not compared")
            if r["best"] is None:
                lines.append(f"      optimum {r['optimum_note']}")
                continue
            fit = r["peak_fit"]
            lines.append(f"      best {r['best_lr_scale']:g}x ({r['best']}); {r['optimum_note']}; "
                         + (r["reference_within_best_note"] or "")
                         + (f"; peak fit {fit['lr_scale']:.3g}x ({fit['accuracy']:.2f}; {fit['flag']})"
                            if fit and fit["concave"] else f"; no peak fit: {r['peak_fit_reason']}"))
        lines += [f"    not used: {never_trained_why(a, runs)}; a broken run measures no learning rate"
                  for a, runs in broken.items()]
    return lines


def plot_lr_sweep(sweep: dict | None, folder: str | Path) -> Path | None:
    """``folder/lr_sweep.png``: mean accuracy (points) at each matched axis vs lr_scale (log2 axis),
    one panel per axis with a used point, one line per group (groups set slightly apart on x),
    bars: 95% t interval over seeds;
    hollow: a point not used (read on fewer seeds), a star: the best, dotted: the peak fit; a point whose arm has a
    run that never trained is not drawn (the report names it). Removes a stale figure and returns None when there
    is no group."""
    folder = Path(folder)
    path = folder / FIGURE
    groups = (sweep or {}).get("groups") or []
    axes = [a for a in AXIS_ORDER if any(g["axes"].get(a, {}).get("used") for g in groups)]
    if not axes:
        path.unlink(missing_ok=True)
        return None

    folder.mkdir(parents=True, exist_ok=True)
    fig, panels = subplots(1, len(axes), figsize=(4.6 * len(axes), 4.2), squeeze=False)
    for ax, axis in zip(panels[0], axes):
        for k, g in enumerate(groups):
            r, color = g["axes"][axis], f"C{k}"
            dodge = 2.0 ** (0.03 * (k - (len(groups) - 1) / 2))  # groups side by side at one lr_scale
            pts = [p for p in r["points"] if p["accuracy"] is not None and not p.get("never_trained")]
            for p in pts:
                ci = _clipped_ci(p)[0]
                err = None if ci is None else [[p["accuracy"] - ci[0]], [ci[1] - p["accuracy"]]]
                ax.errorbar([p["lr_scale"] * dodge], [p["accuracy"]], yerr=err, fmt="o", color=color, capsize=3,
                            mfc=color if p["used"] else "none")
            used = [p for p in pts if p["used"]]
            ax.plot([p["lr_scale"] * dodge for p in used], [p["accuracy"] for p in used], color=color, lw=1,
                    label=_label(g))
            if r["best"] is not None:
                ax.plot([r["best_lr_scale"] * dodge], [next(p["accuracy"] for p in used if p["arm"] == r["best"])],
                        "*", color=color, ms=13, mec="k")
            fit = r["peak_fit"]
            if fit and fit["concave"]:
                xs = np.linspace(math.log2(used[0]["lr_scale"]), math.log2(used[-1]["lr_scale"]), 60)
                ax.plot(dodge * 2.0 ** xs, np.polyval(fit["coefficients"], xs), ":", color=color, lw=1)
        ax.set_xscale("log", base=2)
        scales = sorted({p["lr_scale"] for g in groups for p in g["axes"][axis]["points"]})
        ax.set_xticks(scales, [f"{s:g}x" for s in scales])
        ax.set_xlabel("lr_scale (x the plan's learning rate)")
        ax.set_ylabel("held-out greedy accuracy (points)")
        budget = groups[0]["axes"][axis]["budget"]
        ax.set_title(f"at matched {axis} = {budget:,.6g}", fontsize=10)
        ax.legend(fontsize=8, loc="lower center")
    fig.suptitle("learning-rate sweep: mean over seeds, bars 95% t interval; star: best; hollow: not read on every "
                 "seed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
