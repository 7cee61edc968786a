"""Power before compute: seeds and held-out size a plan needs, from a pilot study's variance.

``gradprobe study --power PLAN`` calls :func:`power_analysis` and prints :func:`format_power`.

Model (DESIGN.md, "Power"). Every seed of a study is evaluated on the same held-out items, so a
per-item paired difference (points) is D_si = mu + a_s + b_i + e_si: a seed effect (training
randomness, variance sa2), an item effect shared by all seeds (sb2) and their interaction (se2)
(two-way random effects; moment estimates as in Searle, Casella & McCulloch 1992, "Variance
Components", ch. 4; :func:`variance_components`). The estimate over n seeds and N items has
variance ``(sa2 + se2 / N) / n + sb2 / N``; ``sa2 + se2 / N`` is the variance of the per-seed
differences a paired t-test sees, ``sb2 / N`` the held-out set's own sampling error, which no
number of seeds removes (per item sb2 + se2 = 1e4 (q - delta^2) for a disagreement rate q and a
mean difference delta, as in McNemar's test, Agresti 2013, sec. 11.1). Without per-item results
only the pilot's per-seed SD is known (sa2 = its variance, sb2 = se2 = 0, the pilot's N only).

Seeds: the smallest n whose paired t-test at ``alpha`` has ``power`` against ``min_effect``
with the per-seed SD sqrt(n * variance) (``statsmodels.stats.power.TTestPower``), and at least the
seeds at which the exact sign-flip test can reach alpha at all
(:func:`gradprobe.study.stats.min_seeds_for_floor`); none when even infinitely many seeds do not
(the held-out error alone is too large: more items). Wall time: the pilot's mean run seconds
(``study.json``) per arm x the plan's runs / workers; with the pilot's ``eval_seconds`` (run
folders' ``metrics.jsonl``) the eval part scales with N / N0. Same budget and eval schedule as
the pilot assumed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .executors import default_workers
from .never_trained_arms import control_never_trained_why, never_trained_runs, never_trained_why
from .stats import NO_SPREAD, min_seeds_for_floor, no_spread
from .reading import (AnalysisError, _item_index, _item_lines, _load_plan, _runs, finished_study, initial_reads,
                      items_at, load_runs, matched_budgets, read_runs)
from ..training.plan import INITIAL

DEFAULT_POWER, DEFAULT_ALPHA = 0.8, 0.05
_STATSMODELS_ALT = {"two-sided": "two-sided", "larger": "larger", "smaller": "smaller", "greater": "larger",
                    "less": "smaller"}


class PowerError(ValueError):
    """A power request cannot be answered (no [power] section, no pilot, a pilot that is not a finished study)."""


def seeds_for_power(sd: float, *, min_effect: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                    alternative: str = "two-sided") -> int:
    """Smallest seed count (>= 2) giving ``power`` for a paired t-test against ``min_effect`` points.

    ``TTestPower().solve_power(effect_size=min_effect / sd, nobs=None, ...)``, rounded up; sd = 0: 2.
    """
    from statsmodels.stats.power import TTestPower

    if sd <= 0:
        return 2
    n = TTestPower().solve_power(effect_size=min_effect / sd, nobs=None, alpha=alpha, power=power,
                                 alternative=_STATSMODELS_ALT[alternative])
    return max(2, math.ceil(float(np.squeeze(n)) - 1e-9))


def detectable_effect(sd: float, *, seeds: int, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                      alternative: str = "two-sided") -> float | None:
    """Smallest difference (points) a paired t-test over ``seeds`` detects with ``power``; None below 2 seeds.

    ``sd * TTestPower().solve_power(effect_size=None, nobs=seeds, ...)``.
    """
    from statsmodels.stats.power import TTestPower

    if seeds < 2 or sd is None:
        return None
    d = TTestPower().solve_power(effect_size=None, nobs=seeds, alpha=alpha, power=power,
                                 alternative=_STATSMODELS_ALT[alternative])
    return float(sd) * float(np.squeeze(d))


def detectable_effects(arms: dict, *, axis: str = "generated_tokens", control: str = "grpo",
                       alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                       alternative: str = "two-sided") -> dict:
    """``analysis.json["detectable_effect"]``: per arm vs ``control`` at ``axis``, from the SD of its per-seed
    differences and its paired seeds (:func:`detectable_effect`); ``largest`` over arms. None for an arm with a run
    that never trained (a broken run's spread is not the arm's): ``sd``/``effect`` None, ``seeds`` 0, ``reason``
    "not computed: ARM never trained (seed S: ...)"; with a ``control`` that did, for every arm (and ``reason``). None
    too for an arm whose per-seed gains have no spread (:func:`~gradprobe.study.stats.no_spread`; ``reason`` "not
    computed: ARM: ..."): an sd of 0 would make any effect "detectable"."""
    per_arm, ctrl = {}, (arms.get(control) or {}).get("never_trained")
    ctrl_why = f"not computed: {control_never_trained_why(control, ctrl)}" if ctrl else None
    for arm, e in arms.items():
        a, broken = e.get(axis), e.get("never_trained")
        if arm == control or not a or (a.get("gain_sd") is None and not (broken or ctrl)):
            continue
        if not (broken or ctrl) and no_spread(a["gain_sd"], a["gain_vs_grpo"]):  # sd 0: "any effect" is no finding
            per_arm[arm] = {"sd": a["gain_sd"], "seeds": a["gain_seeds"], "effect": None,
                            "reason": f"not computed: {arm}: {NO_SPREAD}"}
            continue
        per_arm[arm] = ({"sd": None, "seeds": 0, "effect": None,  # a broken setup: no effect
                         "reason": ctrl_why or f"not computed: {never_trained_why(arm, broken)}"} if broken or ctrl
                        else {"sd": a["gain_sd"], "seeds": a["gain_seeds"], "reason": None, "effect": detectable_effect(
                            a["gain_sd"], seeds=a["gain_seeds"], alpha=alpha, power=power, alternative=alternative)})
    effects = [v["effect"] for v in per_arm.values() if v["effect"] is not None]
    k = min_seeds_for_floor(alpha, "two-sided" if alternative == "two-sided" else "greater")
    seeds = max((v["seeds"] for v in per_arm.values()), default=0)
    return {"axis": axis, "control": control, "power": power, "alpha": alpha, "alternative": alternative,
            "test": "paired t over seeds (statsmodels TTestPower)", "seeds": seeds, "per_arm": per_arm,
            "largest": max(effects) if effects else None, "reason": ctrl_why,
            "note": (f"an exact sign-flip test (a hypothesis with test = \"sign_flip\") needs >= {k} seeds to reach "
                     f"alpha {alpha:g} at all" + (f" (this study has {seeds})" if seeds < k else ""))}


def resolve_pilot(plan, pilot=None) -> Path:
    """The pilot folder: ``pilot`` or the plan's ``[power] pilot``, relative to the plan's folder
    first, then the working directory; a leading ``~`` or ``~user`` is that home folder (as every path of a plan,
    option or API call: :func:`gradprobe.outputs.home_path`); checked to be a finished study. Raises PowerError."""
    if plan.power is None:
        raise PowerError(f"plan {plan.path} has no [power] section; add e.g.\n[power]\nmin_effect = 1.5   # points\n"
                         f'pilot = "data/study_tiny"   # a finished study whose variance to use')
    given = pilot or plan.power.pilot
    if not given:
        raise PowerError("power.pilot is empty and no --pilot was given: the seeds needed follow from a pilot's "
                         "variance; set [power] pilot = \"DIR\" or pass --pilot DIR (a finished study folder)")
    given = os.path.expanduser(given)  # pilot = "~/x": the home folder's x, not a folder named ~ beside the plan
    candidates = [Path(given)] if Path(given).is_absolute() else [Path(plan.path).parent / given, Path(given)]
    found = next((c for c in candidates if c.is_dir()), candidates[-1])
    try:
        return finished_study(found, key="--pilot" if pilot else "power.pilot")
    except AnalysisError as e:
        raise PowerError(str(e)) from None


def _comparisons(plan, pilot_plan, matched) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(treatment, control, axis) of the plan's hypotheses the pilot can answer, else every pilot arm vs grpo; and a
    note per hypothesis the pilot cannot answer (an arm it did not run), saying what the rows are instead."""
    out, unanswered = [], []
    for h in plan.hypotheses:
        if all(a == INITIAL or a in pilot_plan.arms for a in h.arms):
            axis = h.at if matched.get(h.at, {}).get("recorded") else "generated_tokens"
            out.append((h.arms[0], h.arms[1], axis))
        else:
            missing = [a for a in h.arms if a != INITIAL and a not in pilot_plan.arms]
            unanswered.append(f"hypothesis {h.name} ({' vs '.join(h.arms)}) is not sized: the pilot ran no "
                              f"{', '.join(missing)} (its arms: {', '.join(pilot_plan.arms)})")
    if not out:
        out = [(a, "grpo", "generated_tokens") for a in pilot_plan.arms if a != "grpo" and "grpo" in pilot_plan.arms]
        if unanswered and out:
            unanswered.append("the rows are the pilot's own arms vs grpo, not the plan's comparisons: their "
                              "seed-to-seed spread stands in for the plan's only if its arms vary as much; a pilot "
                              "that runs the plan's arms sizes them")
    unique = {}
    for t, c, axis in out:  # a comparison and its reverse have the same variance
        unique.setdefault((frozenset((t, c)), axis), (t, c, axis))
    return list(unique.values()), unanswered


def _run_seconds(pilot: Path, skip=frozenset()) -> tuple[dict, dict]:
    """(arm -> mean run seconds, arm -> mean eval seconds per run, from run folders when present), of the arms not in
    ``skip`` (the arms that never trained: a run stopped for training nothing costs less than one that trains)."""
    study = json.loads((pilot / "study.json").read_text())
    secs, evals = {}, {}
    for r in study.get("runs", []):
        if r.get("status") == "done" and r.get("seconds") and r.get("arm") not in skip:
            secs.setdefault(r["arm"], []).append(float(r["seconds"]))
            m = pilot / r.get("dir", f"runs/{r['arm']}/seed{r['seed']}") / "metrics.jsonl"
            if m.is_file():
                lines = [json.loads(x) for x in m.read_text().splitlines() if '"eval": true' in x]
                evals.setdefault(r["arm"], []).append(sum(float(e.get("eval_seconds") or 0) for e in lines))
    return {a: float(np.mean(v)) for a, v in secs.items()}, {a: float(np.mean(v)) for a, v in evals.items()}


def variance_components(D) -> dict:
    """Moment estimates of the two-way model (module docstring) from per-item differences.

    Parameters
    ----------
    D : array, shape (seeds >= 2, items >= 2)
        Per-item paired differences (points) of each seed, items in held-out order.

    Returns
    -------
    dict
        ``seed``, ``item``, ``interaction`` (variances, points^2, >= 0): with V1 the mean over
        seeds of the item variance of D_s. and V2 the item variance of the seed means D_.i
        (ddof 1), interaction = (V1 - V2) n / (n - 1), capped at N var_s(D_s.) so that
        seed = var_s(D_s.) - interaction / N >= 0 (the per-seed variance at the pilot's N stays
        the observed one), item = V1 - interaction.
    """
    D = np.asarray(D, dtype=np.float64)
    n, N = D.shape
    v1, v2 = float(D.var(axis=1, ddof=1).mean()), float(D.mean(axis=0).var(ddof=1))
    per_seed = float(D.mean(axis=1).var(ddof=1))
    inter = min(max(0.0, (v1 - v2) * n / (n - 1)), N * per_seed)
    return {"seed": max(0.0, per_seed - inter / N), "item": max(0.0, v1 - inter), "interaction": inter}


def t_power(effect_size: float, n: int, *, alpha: float, alternative: str) -> float:
    """Power of a paired t-test over n seeds (``TTestPower().power``). Where scipy's noncentral t
    returns NaN (large noncentralities, power near 1) the normal approximation Phi(nc - t_crit)
    (+ Phi(-nc - t_crit) two-sided), nc = effect_size sqrt(n), is used instead."""
    from scipy.stats import norm, t
    from statsmodels.stats.power import TTestPower

    alt = _STATSMODELS_ALT[alternative]
    pw = float(TTestPower().power(effect_size=effect_size, nobs=n, alpha=alpha, alternative=alt))
    if math.isfinite(pw):
        return pw
    nc = effect_size * math.sqrt(n)
    crit = float(t.ppf(1 - alpha / (2 if alt == "two-sided" else 1), n - 1))
    sign = -1.0 if alt == "smaller" else 1.0
    pw = float(norm.cdf(sign * nc - crit))
    return pw + float(norm.cdf(-nc - crit)) if alt == "two-sided" else pw


def seeds_needed(comp: dict, *, n_items: int, min_effect: float, alpha: float, power: float, alternative: str,
                 max_seeds: int = 500) -> int | None:
    """Smallest n in [2, max_seeds] with ``power`` (module docstring), or None if none reaches it.

    The power grows with n (its noncentrality min_effect / sqrt(variance) does), so a bisection
    over n finds the smallest one."""
    per_seed = comp["seed"] + comp["interaction"] / n_items

    def enough(n: int) -> bool:
        sd = math.sqrt(per_seed + n * comp["item"] / n_items)
        return sd == 0 or t_power(min_effect / sd, n, alpha=alpha, alternative=alternative) >= power

    if not enough(max_seeds):
        return None
    lo, hi = 1, max_seeds  # enough(hi) holds; lo is below the range
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _pilot_comparison(runs, matched, pilot_plan, index, treat, ctrl, axis) -> dict | None:
    """Per-seed differences (and per-item differences D, or None) of one comparison in the pilot."""
    m = matched[axis]
    rd = read_runs(runs, axis, m["budget"], plan=pilot_plan, final=m["final_eval"])
    c_arm = treat if ctrl == INITIAL else ctrl
    t = {s: r for (a, s), r in rd.items() if a == treat and r["value"] is not None}
    c = {s: r for (a, s), r in (initial_reads(runs) if ctrl == INITIAL else rd).items()
         if a == c_arm and r["value"] is not None}
    seeds = sorted(set(t) & set(c))
    if len(seeds) < 2:
        return None
    diffs = np.array([t[s]["value"] - c[s]["value"] for s in seeds])
    rows = [(items_at(index, treat, s, t[s]), items_at(index, c_arm, s, c[s])) for s in seeds] if index else []
    D = 100.0 * np.stack([a - b for a, b in rows]) if rows and all(a is not None and b is not None
                                                                  for a, b in rows) else None
    return {"diffs": diffs, "D": D}


def paired_item_differences(study_dir, *, control: str = "grpo", axis: str = "generated_tokens") -> dict:
    """Every arm's paired differences from ``control`` at the axis's matched point, per seed and per item.

    The reads are the analysis's (:func:`~gradprobe.study.reading.read_runs` at ``matched_budgets``), so a
    seed's difference is the one ``analysis.json`` pairs; ``D`` feeds :func:`variance_components`.

    An arm with a run that never trained (every update of its ``metrics.jsonl`` had every advantage 0:
    :func:`~gradprobe.study.never_trained_arms.never_trained_runs`), and every arm when ``control`` has one, is
    left out as the analysis leaves it out of its rankings, hypotheses and detectable effect: such a run samples a
    broken setup, not the arm's effect, and dropping only its seeds would keep the seeds that happened to train (a
    spread conditioned on the outcome). Its entry holds no differences and says why (``left_out``). A study
    whose run folders keep no ``metrics.jsonl`` (the shipped ones) says nothing about training: nothing is left out.

    Parameters
    ----------
    study_dir : path
        A study folder (``runs.csv``, ``plan.toml``; per-item results in ``eval_items.jsonl.gz`` or the run
        folders).
    control : str
        The arm each arm is paired with, seed by seed.
    axis : str
        ``generated_tokens`` (the matched token budget), ``updates``, ``flops`` or ``device_seconds``.

    Returns
    -------
    dict
        arm -> ``{"diffs": (seeds,) points, "D": (seeds, items) points or None (no per-item results at the
        evals read), "items": held-out items or None, "never_trained": {}, "left_out": None}`` for every arm but
        ``control``; an arm with fewer than 2 seeds read on both arms maps to None. An arm left out for a run that
        never trained: ``diffs``, ``D`` and ``items`` None, ``never_trained`` (arm -> its records, of the arm and/or
        ``control``: ``[{"seed", "cause", "why", "updates", ...}]``) and ``left_out``, why: ``"ARM never trained
        (seed S: WHY (N updates))"`` or ``"the control arm CONTROL never trained (...)"`` (both, joined by "; ").

    Raises
    ------
    AnalysisError
        No usable ``runs.csv``, no ``control`` arm in it, or an axis the study does not record (named).
    """
    study_dir = Path(study_dir)
    df, plan = load_runs(study_dir), _load_plan(study_dir)
    if control not in set(df["arm"]):
        raise AnalysisError(f"{study_dir}/runs.csv has no {control!r} arm (arms: {sorted(set(df['arm']))}); "
                            "pass the arm the others are paired with")
    runs, matched = _runs(df), matched_budgets(df, plan)
    if axis not in matched or not matched[axis]["recorded"]:
        raise AnalysisError(f"{study_dir}: the study does not record {axis!r} at every eval "
                            f"(recorded: {sorted(a for a, m in matched.items() if m['recorded'])})")
    lines = _item_lines(study_dir)
    index = _item_index(lines) if lines else None
    untrained, out = never_trained_runs(study_dir, zip(df["arm"], df["seed"])), {}
    for arm in (a for a in dict.fromkeys(df["arm"]) if a != control):
        broken = {a: untrained[a] for a in (arm, control) if a in untrained}
        if broken:  # a broken setup's differences are no sample of the arm's effect
            out[arm] = {"diffs": None, "D": None, "items": None, "never_trained": broken, "left_out": "; ".join(
                (control_never_trained_why if a == control else never_trained_why)(a, r) for a, r in broken.items())}
            continue
        pc = _pilot_comparison(runs, matched, plan, index, arm, control, axis)
        out[arm] = None if pc is None else {**pc, "items": None if pc["D"] is None else int(pc["D"].shape[1]),
                                            "never_trained": {}, "left_out": None}
    return out


def power_analysis(plan, pilot_dir=None, *, workers: int | None = None, heldout_sizes=None) -> dict:
    """Seeds and held-out size that give the plan's ``[power]`` target, and their wall time.

    A pilot arm with a run that never trained (every update of its ``metrics.jsonl`` had every advantage 0:
    :func:`~gradprobe.study.never_trained_arms.never_trained_runs`) is left out: its seed-to-seed spread describes
    a broken setup, not the arm, so no comparison with it is sized (a note names the arm, its seeds and the cause,
    :func:`~gradprobe.study.never_trained_arms.never_trained_why`), and its run seconds (a run stopped for training
    nothing is short) are not used for the wall time: a plan arm of that name is priced at the mean of the others.

    Parameters
    ----------
    plan : Plan
        With a ``[power]`` section (min_effect in points; pilot unless ``pilot_dir`` is given).
    pilot_dir : path, optional
        A finished study (overrides ``[power] pilot``).
    workers : int, optional
        Parallel runs (default: min(runs, CPU cores), as ``gradprobe study``).
    heldout_sizes : list of int, optional
        Held-out sizes to price besides the plan's (default: the pilot's, twice and four times it).

    Returns
    -------
    dict
        ``min_effect``, ``power``, ``alpha``, ``alternative``, ``pilot``, ``pilot_items``,
        ``workers``, ``rows`` (per comparison and held-out size: ``pilot_sd``, ``pilot_seeds``,
        ``disagreement``, ``components``, ``sd`` (per-seed SD at that size), ``item_sd`` (the
        held-out set's own error, points), ``seeds`` (None: unreachable), ``seeds_t`` (the
        t-test alone), ``wall_seconds``), ``needed`` (the row needing the most seeds at the
        plan's held-out size), ``notes`` (first, each plan hypothesis the pilot cannot answer, having an arm it
        did not run, and what the rows are then; then each comparison not sized, e.g. with an arm that never
        trained), ``stand_in`` (True when no hypothesis of the plan can be answered and the rows are the pilot's own
        arms vs grpo), ``never_trained`` (pilot arm -> its runs that never trained, the records of
        :func:`~gradprobe.study.never_trained_arms.never_trained_runs`; {} when every run trained or says nothing)
        and ``left_out`` (pilot arm -> why it is left out: ``"ARM never trained (seed S: WHY (N updates))"``).

    Raises
    ------
    PowerError
        No [power] section, no pilot, or a pilot that is not a finished study (key and fix named).
    """
    pilot = resolve_pilot(plan, pilot_dir)
    spec, pilot_plan, df = plan.power, _load_plan(pilot), load_runs(pilot)
    runs, matched = _runs(df), matched_budgets(df, pilot_plan)
    lines = _item_lines(pilot)
    index = _item_index(lines) if lines else None
    n0 = len(next(iter(index.values()))["greedy"]) if index else pilot_plan.heldout.prompts
    sizes = sorted({plan.heldout.prompts, *(heldout_sizes or [n0, 2 * n0, 4 * n0])}) if index else [n0]
    untrained = never_trained_runs(pilot, zip(df["arm"], df["seed"]))  # a broken setup's spread is not the arm's
    left_out = {a: never_trained_why(a, r) for a, r in untrained.items()}
    secs, eval_secs = _run_seconds(pilot, set(untrained))
    workers = workers or default_workers(len(plan.arms) * len(plan.seeds))
    kw = {"min_effect": spec.min_effect, "alpha": spec.alpha, "power": spec.power, "alternative": spec.alternative}
    comparisons, unanswered = _comparisons(plan, pilot_plan, matched)
    pilot_data = (runs, matched, pilot_plan, index)
    rows, skipped = _sized_rows(plan, pilot_data, comparisons, left_out, (n0, sizes), (secs, eval_secs), workers, kw)
    at_plan = [r for r in rows if r["heldout"] == (plan.heldout.prompts if index else n0)]
    notes = unanswered + skipped + ([] if index else [
        "the pilot saved no per-item results: the held-out size cannot be traded for seeds, and its own sampling "
        "error is not counted"])
    if not eval_secs:
        notes.append("the pilot has no run folders with eval_seconds: wall time assumes the pilot's eval cost")
    if secs and (priced := [a for a in plan.arms if a in left_out]):
        notes.append(f"wall time of {', '.join(priced)}: the mean run seconds of the pilot's arms that trained (the "
                     "pilot's runs of it never trained)")
    if any(r["seeds"] is None for r in rows):
        notes.append("none: no number of seeds reaches the power, the held-out set's own error is too large; "
                     "use more held-out items")
    needed = max(at_plan, key=lambda r: math.inf if r["seeds"] is None else r["seeds"]) if at_plan else None
    stand_in = bool(unanswered) and not any(all(a == INITIAL or a in pilot_plan.arms for a in h.arms)
                                            for h in plan.hypotheses)
    return {**kw, "pilot": str(pilot), "pilot_items": n0, "workers": workers, "rows": rows, "needed": needed,
            "notes": notes, "stand_in": stand_in, "never_trained": untrained, "left_out": left_out}


def _sized_rows(plan, pilot_data: tuple, comparisons: list, left_out: dict, items: tuple, seconds: tuple,
                workers: int, kw: dict) -> tuple[list[dict], list[str]]:
    """(rows, notes) of :func:`power_analysis`: per comparison of the pilot and held-out size the seeds needed, and a
    note per comparison not sized (an arm in ``left_out``, which never trained; fewer than 2 seeds read).
    ``pilot_data``: (runs, matched, pilot plan, item index or None); ``items``: (the pilot's held-out size, the
    sizes to price: only the pilot's without per-item results); a comparison whose pilot per-seed differences have
    no spread (:func:`~gradprobe.study.stats.no_spread`) is not sized either (a t test sized on an sd of 0 needs 2
    seeds for any effect); ``seconds``: (arm -> mean run seconds, arm ->
    mean eval seconds) of the pilot's arms that trained; ``kw``: min_effect, alpha, power, alternative."""
    runs, matched, pilot_plan, index = pilot_data
    (secs, eval_secs), (n0, sizes) = seconds, items
    mean_secs = float(np.mean(list(secs.values()))) if secs else math.nan
    floor = min_seeds_for_floor(kw["alpha"], "two-sided" if kw["alternative"] == "two-sided" else "greater")
    rows, skipped = [], []
    for treat, ctrl, axis in comparisons:
        broken = [left_out[a] for a in dict.fromkeys((treat, ctrl)) if a in left_out]
        if broken:
            skipped.append(f"{treat} vs {ctrl} at {axis}: not sized, the pilot's {'; '.join(broken)}: its seed-to-seed "
                           "spread describes a broken setup, not the arm")
            continue
        pc = _pilot_comparison(runs, matched, pilot_plan, index, treat, ctrl, axis)
        if pc is None:
            skipped.append(f"{treat} vs {ctrl} at {axis}: fewer than 2 pilot seeds read within the promised eval "
                           f"interval there; not sized")
            continue
        s0 = float(pc["diffs"].std(ddof=1))
        if no_spread(s0, float(pc["diffs"].mean())):  # an sd of 0 sizes any study at 2 seeds: no sizing
            skipped.append(f"{treat} vs {ctrl} at {axis}: not sized, the pilot's per-seed differences have no spread "
                           f"(sd {s0:.3g} points): {NO_SPREAD}")
            continue
        comp = (variance_components(pc["D"]) if pc["D"] is not None else
                {"seed": s0 ** 2, "item": 0.0, "interaction": 0.0})
        q = float(np.mean(np.abs(pc["D"]) > 0)) if pc["D"] is not None else None
        for n_items in (sizes if pc["D"] is not None else [n0]):
            k_t = seeds_needed(comp, n_items=n_items, **kw)
            k = None if k_t is None else max(k_t, floor)
            per_run = {a: secs.get(a, mean_secs) + eval_secs.get(a, 0.0) * (n_items / n0 - 1) for a in plan.arms}
            rows.append({"treatment": treat, "control": ctrl, "axis": axis, "pilot_sd": s0,
                         "pilot_seeds": len(pc["diffs"]),
                         "disagreement": q, "components": comp, "heldout": n_items,
                         "sd": math.sqrt(comp["seed"] + comp["interaction"] / n_items),
                         "item_sd": math.sqrt(comp["item"] / n_items) if pc["D"] is not None else None,
                         "seeds_t": k_t, "seeds": k,
                         "wall_seconds": None if k is None else sum(per_run.values()) * k / workers})
    return rows, skipped


def format_power(res: dict) -> str:
    """The table ``gradprobe study --power`` prints (one row per comparison and held-out size), the seeds needed
    (``needed: not sized`` when no comparison was) and the notes (e.g. a pilot arm left out: it never trained)."""
    head = (f"power: seeds for {res['power']:.0%} power against {res['min_effect']:g} points ({res['alternative']} "
            f"paired t at alpha {res['alpha']:g}); pilot {res['pilot']} ({res['pilot_items']} held-out items); "
            f"{res['workers']} workers")
    cols = (f"{'comparison':<28}{'axis':<18}{'pilot sd':>9}{'disagree':>9}{'held-out':>9}{'seed sd':>8}"
            f"{'item sd':>8}{'seeds':>7}{'wall':>10}")
    lines = [head, "", cols]
    for r in res["rows"]:
        q = "n/a" if r["disagreement"] is None else f"{r['disagreement']:.3f}"
        k = "none" if r["seeds"] is None else str(r["seeds"])
        wall = "" if r["wall_seconds"] is None else f"{r['wall_seconds'] / 60:.1f} m"
        item = "n/a" if r["item_sd"] is None else f"{r['item_sd']:.3f}"
        lines.append(f"{r['treatment'] + ' vs ' + r['control']:<28}{r['axis']:<18}{r['pilot_sd']:>9.3f}{q:>9}"
                     f"{r['heldout']:>9d}{r['sd']:>8.3f}{item:>8}{k:>7}{wall:>10}")
    lines.append("(points; seed sd: SD of per-seed differences at that held-out size; item sd: the held-out "
                 "set's own error, shared by all seeds)")
    n, stand = res["needed"], ("; the pilot's arms standing in for the plan's: see the notes"
                               if res.get("stand_in") else "")
    if n and n["seeds"] is not None:
        lines += ["", f"needed: {n['seeds']} seeds ({n['treatment']} vs {n['control']} at {n['heldout']} held-out "
                      f"items; the t-test alone: {n['seeds_t']}{stand}), about {n['wall_seconds'] / 60:.0f} min "
                      "of wall time"]
    elif n:
        lines += ["", f"needed: no number of seeds at {n['heldout']} held-out items ({n['treatment']} vs "
                      f"{n['control']}{stand}); see the larger held-out sizes"]
    elif not res["rows"]:
        lines += ["", "needed: not sized: no comparison of the pilot could be sized; see the notes"]
    lines += [f"note: {x}" for x in res["notes"]]
    return "\n".join(lines)
