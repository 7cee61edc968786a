"""Learning-rate sweeps of a study: arms that differ only by the learning rate, read at each matched point.

A *sweep group* is a set of >= 2 arms of the frozen plan whose resolved run settings are the same
except for the learning rate: the same reward, the same ``[train]`` settings other than ``lr``
(after the arm's overrides), the same ``[mc]`` settings and the same prompt selection. Each arm's
*lr_scale* is its learning rate over the plan's ``[train] lr`` (``lr_scale`` times an overridden
``lr`` / the plan's). ``plans/tiny_lr.toml``: grpo at 0.25x, 0.5x, 1x, 2x and 4x; ``plans/tiny.toml``:
grpo and grpo_2xlr.

Per group and per axis the analysis reads (:data:`~gradprobe.training.plan.AXES`, at its matched
point, :mod:`gradprobe.study.analysis`), every lr_scale gets

- the arm's mean matched accuracy (accuracy points) and its Student-t 95% interval over seeds,
  as the analysis reads them (``analysis.json["arms"][arm][axis]``: ``accuracy``, ``ci``);
- its paired difference to the group's lr_scale = 1 arm (the *reference*) over the seeds read in
  both, with the Student-t interval (:func:`~gradprobe.study.stats.paired_t`) and, with per-item
  results, the two-way seeds x items interval (:func:`~gradprobe.study.stats.two_way_bootstrap`);
  when the reference is the analysis's control arm these are its ``gain_vs_grpo`` entries.

A point is *used* (compared) only when it is read on every seed of its arm and its arm has no run that
never trained: a seed the analysis refuses (read across a gap wider than the promised eval interval) is
left out of every mean and difference, a mean over fewer seeds is not compared with the others, and an
arm with a run that never trained (``analysis.json["arms"][arm]["never_trained"]``: every advantage 0,
a broken setup) measures no learning rate (all as :func:`~gradprobe.study.analysis.ranking`); the point
says why (``note``; ``never_trained``: the records) and gets no difference; when the reference arm never
trained, no point gets a difference to it (``difference_note`` says why). Over the used points:

- ``best``: the lr_scale of the largest mean accuracy (ties: the smallest lr_scale);
- ``optimum``: ``"interior"``, or ``"edge"`` when the best is the smallest or largest used lr_scale
  ("optimum at the edge: extend the sweep"): the sweep does not bracket the optimum;
- ``reference_within_best``: whether the best's paired difference to lr_scale = 1 has a t interval
  that contains 0 (True when the best is lr_scale = 1; None without an interval, as when the seeds'
  differences have no spread: :func:`~gradprobe.study.stats.no_spread`, an interval narrower than any eval's
  resolution is no evidence);
- ``peak_fit`` (only for an interior optimum): the quadratic ``acc = a + b x + c x^2`` in
  ``x = log2(lr_scale)`` through the best mean and its two neighbours (``numpy.polyfit``; the
  three-point bracket of a line search, e.g. Brent's parabolic step), its vertex
  ``x* = -b / (2 c)`` when concave (c < 0): a location estimate without an interval, flagged as
  such. Only the bracket is fitted: points far from the peak (a learning rate that diverges) would
  bend a global quadratic and put its vertex and height anywhere.

:func:`lr_sweep` builds ``analysis.json["lr_sweep"]``;
:func:`~gradprobe.study.lr_sweep_report.format_lr_sweep` is its text in the report and
:func:`~gradprobe.study.lr_sweep_report.plot_lr_sweep` draws ``figures/lr_sweep.png``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from . import stats
from .never_trained_arms import never_trained_records, never_trained_text, never_trained_why

FIGURE = "lr_sweep.png"
EDGE_NOTE = "optimum at the edge: extend the sweep"
AXIS_ORDER = ("updates", "generated_tokens", "flops", "device_seconds")
_TOL = 1e-9


# ----------------------------------------------------------------------------- grouping

def _settings(plan, arm) -> tuple[str, float, dict]:
    """(group key, effective lr_scale, the settings that differ from the plan besides lr) of one arm."""
    train = dataclasses.replace(plan.train, **arm.train)
    scale = arm.lr_scale * train.lr / plan.train.lr
    train_d = {k: v for k, v in dataclasses.asdict(train).items() if k != "lr"}
    mc_d = dataclasses.asdict(dataclasses.replace(plan.mc, **arm.mc))
    base_train, base_mc = dataclasses.asdict(plan.train), dataclasses.asdict(plan.mc)
    shared = {"reward": arm.reward,
              "train": {k: v for k, v in train_d.items() if base_train[k] != v},
              "mc": {k: v for k, v in mc_d.items() if base_mc[k] != v},
              "selection": dict(arm.selection)}
    if getattr(arm, "guidance", None):  # off-context guidance (gradprobe.rollout.guided): another intervention
        shared["guidance"] = dict(arm.guidance)
    key = json.dumps({"reward": arm.reward, "train": train_d, "mc": mc_d, "selection": dict(arm.selection),
                      "guidance": shared.get("guidance", {})},
                     sort_keys=True, default=str)
    return key, float(scale), shared


def sweep_groups(plan, arms_run=None) -> list[dict]:
    """The plan's sweep groups (module docstring): arms equal in everything but the learning rate.

    Parameters
    ----------
    plan : gradprobe.training.plan.Plan
        The frozen plan of the study.
    arms_run : collection of str, optional
        The arms that have completed runs (default: every arm of the plan); the others are
        listed in ``not_run`` and left out.

    Returns
    -------
    list[dict]
        Per group with >= 2 distinct lr_scales among the run arms, in plan order of its first arm:
        ``arms`` (names by increasing lr_scale), ``lr_scales``, ``shared`` (``reward`` and the
        ``train``/``mc``/``selection`` settings that differ from the plan), ``reference`` (the arm
        at lr_scale 1, or None), ``duplicates`` (arms at an lr_scale already taken: left out),
        ``not_run``.
    """
    groups: dict[str, dict] = {}
    for name, arm in plan.arms.items():
        key, scale, shared = _settings(plan, arm)
        g = groups.setdefault(key, {"members": [], "shared": shared, "not_run": []})
        if arms_run is not None and name not in arms_run:
            g["not_run"].append(name)
        else:
            g["members"].append((name, scale))
    out = []
    for g in groups.values():
        chosen, dup = {}, []
        for name, scale in g["members"]:  # plan order: the first arm at a scale is used
            if any(math.isclose(scale, s, rel_tol=_TOL) for s in chosen.values()):
                dup.append(name)
            else:
                chosen[name] = scale
        if len(chosen) < 2:
            continue
        order = sorted(chosen, key=chosen.get)
        ref = next((a for a in order if math.isclose(chosen[a], 1.0, rel_tol=_TOL)), None)
        out.append({"arms": order, "lr_scales": [chosen[a] for a in order], "shared": g["shared"],
                    "reference": ref, "duplicates": dup, "not_run": g["not_run"]})
    return out


# ----------------------------------------------------------------------------- one axis

def _point(arm: str, scale: float, entry: dict, seeds_total: int, untrained: list | None = None) -> dict:
    """One lr_scale on one axis: the analysis's read of the arm, and whether it is compared (not when the arm has a
    run that never trained: ``untrained``, its ``never_trained`` records)."""
    refused = list(entry["gap_exceeded"])
    used = entry["accuracy"] is not None and entry["seeds"] == seeds_total and not untrained
    if untrained:
        note = f"not used: never trained ({never_trained_text(untrained)}); a broken run measures no learning rate"
    elif used:
        note = None
    elif entry["accuracy"] is None:
        note = (f"not used: no seed read (refused, gap wider than the promised eval interval: seeds {refused})"
                if refused else "not used: no seed read")
    else:
        note = (f"not used: read on {entry['seeds']} of {seeds_total} seeds (refused, gap wider than the promised "
                f"eval interval: seeds {refused}); a mean over fewer seeds is not compared")
    clipped = {"ci_unclipped": entry["ci_unclipped"]} if entry.get("ci_unclipped") else {}
    return {"arm": arm, "lr_scale": scale, "accuracy": entry["accuracy"], "ci": entry["ci"], **clipped,
            "seeds": entry["seeds"], "seeds_total": seeds_total, "refused_seeds": refused, "used": used,
            "note": note, "never_trained": never_trained_records(untrained), "reference": False, "difference": None,
            "difference_ci": None, "difference_ci_two_way": None, "difference_seeds": 0, "difference_note": None}


def _difference(point: dict, ref: str, entry: dict, axis: str, control: str | None, pair) -> None:
    """Fill the point's paired difference to the reference arm (the analysis's gain when ref is its control)."""
    if ref == control:
        est, ci, tw, n = entry["gain_vs_grpo"], entry["gain_ci"], entry["gain_vs_grpo_ci_two_way"], entry["gain_seeds"]
        sd = entry.get("gain_sd")
    else:
        c = pair(axis, point["arm"], ref)
        t = c["t"]
        est, ci, n, sd = (t["estimate"], t["ci"], t["seeds"], t["sd"]) if t else (None, None, 0, None)
        tw = c["two_way"]["ci"] if c["two_way"] else None
    if est is not None and stats.no_spread(sd, est):  # a t interval of no width excludes 0 on no evidence
        ci = None
    point.update(difference=est, difference_ci=ci, difference_ci_two_way=tw, difference_seeds=n,
                 difference_note=None if est is not None else f"no seed read in both {point['arm']} and {ref}")
    if est is not None and ci is None:
        point["difference_note"] = stats.NO_SPREAD if n >= 2 else "one paired seed: no interval"


def peak_fit(lr_scales, accuracy) -> dict:
    """Quadratic in log2(lr_scale) through the mean accuracies and its vertex (module docstring).

    Parameters
    ----------
    lr_scales : array, shape (points,)
        Distinct lr_scales (> 0), >= 3 of them.
    accuracy : array, shape (points,)
        Mean accuracy (points) at each.

    Returns
    -------
    dict
        ``coefficients`` [c, b, a] of ``a + b x + c x^2`` (``numpy.polyfit`` order), ``concave``
        (c < 0), ``log2_lr_scale`` and ``lr_scale`` of the vertex and ``accuracy`` there (None
        unless concave), ``within_sweep`` (vertex between the smallest and largest lr_scale),
        ``points``, ``residual_df`` (points - 3), ``rmse`` (points), ``flag`` (what the fit is not).

    Raises
    ------
    ValueError
        Fewer than 3 points, non-positive or repeated lr_scales, or shapes that differ.
    """
    s, y = np.asarray(lr_scales, dtype=np.float64), np.asarray(accuracy, dtype=np.float64)
    if s.ndim != 1 or s.shape != y.shape or s.size < 3:
        raise ValueError(f"peak_fit needs >= 3 (lr_scale, accuracy) pairs of one shape, got {s.shape} and {y.shape}")
    if np.any(s <= 0) or np.unique(s).size != s.size or not np.all(np.isfinite(y)):
        raise ValueError(f"peak_fit needs distinct lr_scales > 0 and finite accuracies, got {s.tolist()}, {y.tolist()}")
    x = np.log2(s)
    coef = np.polyfit(x, y, 2)
    rmse = float(np.sqrt(np.mean((np.polyval(coef, x) - y) ** 2)))
    out = {"coefficients": [float(v) for v in coef], "concave": bool(coef[0] < 0), "log2_lr_scale": None,
           "lr_scale": None, "accuracy": None, "within_sweep": None, "points": int(s.size),
           "residual_df": int(s.size - 3), "rmse": rmse,
           "flag": ("quadratic in log2(lr_scale) through the seed means: a location estimate of the peak, "
                    "no interval" + ("; exact through 3 points (no residual check)" if s.size == 3 else ""))}
    if coef[0] < 0:
        xv = float(-coef[1] / (2.0 * coef[0]))
        out.update(log2_lr_scale=xv, lr_scale=float(2.0 ** xv), accuracy=float(np.polyval(coef, xv)),
                   within_sweep=bool(x.min() <= xv <= x.max()))
    return out


def _axis(group: dict, arms: dict, axis: str, budget, control: str | None, pair) -> dict:
    """One group on one axis (:func:`lr_sweep`'s ``axes[axis]``): its points, and the best among the used ones."""
    ref = group["reference"]
    ref_untrained = arms[ref].get("never_trained") if ref is not None else None
    points = []
    for arm, scale in zip(group["arms"], group["lr_scales"]):
        entry = arms[arm][axis]
        p = _point(arm, scale, entry, int(arms[arm]["seeds"]), arms[arm].get("never_trained"))
        if arm == ref:
            p.update(reference=True, difference=0.0, difference_note="the reference (lr_scale 1)")
        elif ref_untrained:  # a difference to a run that never trained is no finding
            p["difference_note"] = f"no difference: the reference {never_trained_why(ref, ref_untrained)}"
        elif p["never_trained"]:  # nor a difference of one
            p["difference_note"] = f"no difference: {never_trained_why(arm, p['never_trained'])}"
        elif ref is not None:
            _difference(p, ref, entry, axis, control, pair)
        else:
            p["difference_note"] = "no arm at lr_scale 1 in this group"
        points.append(p)
    used = [p for p in points if p["used"]]
    out = {"budget": budget, "points": points, "used": len(used), "best": None, "best_lr_scale": None,
           "optimum": None, "optimum_note": None, "reference_within_best": None, "reference_within_best_note": None,
           "peak_fit": None, "peak_fit_reason": None}
    if len(used) < 2:
        broken = [p["arm"] for p in points if p["never_trained"]]
        out["optimum_note"] = (f"not located: {len(used)} lr_scale(s) read on every seed"
                               + (" with no run that never trained" if broken else "") + ", 2 needed"
                               + (f" (never trained: {', '.join(broken)})" if broken else ""))
        out["peak_fit_reason"] = "no optimum located"
        return out
    best_i = int(np.argmax([p["accuracy"] for p in used]))  # first maximum: the smallest lr_scale on ties
    best = used[best_i]
    edge = "smallest" if best_i == 0 else "largest" if best_i == len(used) - 1 else None
    out.update(best=best["arm"], best_lr_scale=best["lr_scale"], optimum="edge" if edge else "interior",
               optimum_note=(f"{EDGE_NOTE} ({'below' if edge == 'smallest' else 'above'} {best['lr_scale']:g}x, the "
                             f"{edge} lr_scale read)" if edge else
                             f"interior: {used[best_i - 1]['lr_scale']:g}x < {best['lr_scale']:g}x < "
                             f"{used[best_i + 1]['lr_scale']:g}x"))
    if ref is None:
        out["reference_within_best_note"] = "no arm at lr_scale 1 in this group"
    elif ref_untrained:
        out["reference_within_best_note"] = f"not compared: the reference {never_trained_why(ref, ref_untrained)}"
    elif best["arm"] == ref:
        out.update(reference_within_best=True, reference_within_best_note="lr_scale 1 is the best")
    elif best["difference_ci"] is None:
        out["reference_within_best_note"] = (f"no t interval for {best['arm']} - {ref}"
                                             + (f" ({best['difference_note']})" if best["difference_note"] else ""))
    else:
        lo, hi = best["difference_ci"]
        inside = bool(lo <= 0.0 <= hi)
        out.update(reference_within_best=inside, reference_within_best_note=(
            f"{best['arm']} - {ref} = {best['difference']:+.2f} [{lo:+.2f}, {hi:+.2f}] "
            + ("contains 0: lr_scale 1 is not shown worse" if inside else "excludes 0: lr_scale 1 is worse")))
    if edge:
        out["peak_fit_reason"] = "optimum at the edge: no peak to fit"
    else:  # an interior optimum: the bracket (neighbour, best, neighbour)
        bracket = used[best_i - 1:best_i + 2]
        out["peak_fit"] = peak_fit([p["lr_scale"] for p in bracket], [p["accuracy"] for p in bracket])
        if not out["peak_fit"]["concave"]:
            out["peak_fit_reason"] = "the fitted quadratic is not concave: no peak"
    return out


# ----------------------------------------------------------------------------- the sweep

def lr_sweep(plan, arms: dict, matched: dict, *, control: str | None = None, pair=None) -> dict:
    """``analysis.json["lr_sweep"]``: every sweep group of the plan read on every axis the analysis reads.

    Parameters
    ----------
    plan : gradprobe.training.plan.Plan or None
        The frozen plan (None: no sweep, the reason says so).
    arms : dict
        ``analysis.json["arms"]``: arm -> {"seeds", "never_trained" (optional), axis -> {"accuracy", "ci", "seeds",
        "gap_exceeded", "gain_vs_grpo", "gain_ci", "gain_vs_grpo_ci_two_way", "gain_seeds", ...}}.
    matched : dict
        ``analysis.json["matched"]``: axis -> {"budget", "recorded", ...}.
    control : str, optional
        The analysis's control arm: a reference arm of that name reuses its ``gain_vs_grpo``.
    pair : callable, optional
        ``pair(axis, treatment_arm, reference_arm)`` -> :func:`gradprobe.study.analysis.compare`
        dict (``t``, ``two_way``) over the seeds read in both; needed for a reference arm other
        than ``control``.

    Returns
    -------
    dict
        ``groups``: per group (:func:`sweep_groups`) ``arms``, ``lr_scales``, ``shared``,
        ``reference``, ``duplicates``, ``not_run`` and ``axes``: axis -> ``budget``, ``points``
        (per lr_scale: ``arm``, ``lr_scale``, ``accuracy`` and ``ci`` (points, 95% t over seeds, clipped to
        [0, 100]; ``ci_unclipped``, the t interval, only where a bound was clipped),
        ``seeds``, ``seeds_total``, ``refused_seeds``, ``used``, ``note``, ``never_trained`` (the arm's runs
        that never trained: the point is not used), ``reference``,
        ``difference``, ``difference_ci``, ``difference_ci_two_way``, ``difference_seeds``,
        ``difference_note``), ``used``, ``best``, ``best_lr_scale``, ``optimum``,
        ``optimum_note``, ``reference_within_best`` (+ ``_note``), ``peak_fit`` (:func:`peak_fit`
        or None), ``peak_fit_reason``. ``level`` (0.95), ``reason`` (why there is no group, else None).

    Raises
    ------
    ValueError
        A reference arm other than ``control`` without ``pair``.
    """
    if plan is None:
        return {"groups": [], "level": 0.95, "reason": "the study folder has no frozen plan.toml: arms cannot be "
                                                       "matched setting by setting"}
    groups = sweep_groups(plan, set(arms))
    axes = [a for a in AXIS_ORDER if matched.get(a, {}).get("recorded") and all(a in arms[x] for x in arms)]
    for g in groups:
        if g["reference"] not in (None, control) and pair is None:
            raise ValueError(f"the sweep of {g['arms']} has the reference arm {g['reference']!r}, not the control arm "
                             f"{control!r}: pass pair= (gradprobe.study.analysis.compare over that axis's reads)")
        g["axes"] = {a: _axis(g, arms, a, matched[a]["budget"], control, pair) for a in axes}
    return {"groups": groups, "level": 0.95,
            "reason": None if groups else "no arms of the plan differ only by lr_scale (>= 2 distinct lr_scales)"}

