"""Analysis of a study folder: accuracy per arm at matched updates, tokens and device-seconds.

``analyze(study_dir) -> dict`` (also ``gradprobe study --analyze-only --out DIR``) reads
``DIR/runs.csv`` and the frozen ``DIR/plan.toml`` and writes ``DIR/analysis.json`` and
``DIR/figures/*.png`` (format: the study directory contract, ``/work/notes/study_format.md``).

Definitions (DESIGN.md, "Matched-compute training"):

Matched budgets
    ``tokens``: the plan's generated-token budget; an arm's accuracy there is each run's FINAL
    eval (runs stop before the first update that would start with the budget spent, so they
    overshoot by less than one update; the overshoot is reported). Without a token budget, the
    smallest final ``generated_tokens`` over all runs, interpolated as below.
    ``time``: the smallest final ``device_seconds`` over all runs. ``updates``: the smallest
    final update count over all runs.
Interpolation
    A run's accuracy at a matched x is linear in x between its two neighbouring eval points
    (:func:`interpolate`); never extrapolated.
Paired bootstrap over seeds
    Seeds pair arms (same seed: same held-out set, same pool order, same eval sampler), so a
    gain is the mean over common seeds of the per-seed difference, and its interval is the
    percentile interval of the mean of ``n_resamples`` (>= 2000) resamples of those seeds with
    replacement, drawn by ``numpy.random.default_rng(seed)`` (Efron & Tibshirani 1993, ch. 13).
    With one seed the interval collapses to the point.
Sigmoid compute curve
    ScaleRL (Khatri et al. 2025, "The Art of Scaling Reinforcement Learning Compute for LLMs",
    eq. 1): R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), C = generated tokens, R in accuracy
    points; R0 is fixed to the arm's measured accuracy at C = 0 (the initial policy, as R0 is
    defined in the paper), A (asymptote), B (exponent) and C_mid (tokens at half the gain) are
    fitted with :func:`scipy.optimize.curve_fit` over every eval point of the arm's runs.
Hypotheses
    Each ``[[hypotheses]]`` entry: estimate = mean paired difference treatment - control
    (points) at its budget; bootstrap p-value of H0 "effect <= min_effect" (``greater``),
    "effect >= -min_effect" (``less``), or twice the smaller of the two (``two-sided``), as
    (1 + #resamples on the null side) / (1 + n_resamples); ``passed`` = p < alpha.
    ``ci`` is the percentile interval whose relevant bound(s) test at alpha: [q_alpha, q_(1-alpha)]
    for one-sided, [q_(alpha/2), q_(1-alpha/2)] for two-sided (``ci_level`` says which).

All accuracies and gains in ``analysis.json`` are in accuracy points (0-100).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

AXES = {"tokens": "generated_tokens", "time": "device_seconds", "updates": "update"}
METRIC_COLUMNS = {"greedy_accuracy": "accuracy", "sampled_accuracy": "accuracy_sampled"}
AT_COLUMNS = {"generated_tokens": "generated_tokens", "device_seconds": "device_seconds", "updates": "update"}
N_RESAMPLES = 4000
BOOTSTRAP_SEED = 0
CONTROL_ARM = "grpo"


class AnalysisError(ValueError):
    """The study folder cannot be analysed (no runs.csv, missing columns, no completed run)."""


# ----------------------------------------------------------------------------- building blocks

def interpolate(x, y, at: float) -> float:
    """Linear interpolation of y at ``at`` between the eval points (x, y).

    Parameters
    ----------
    x : array, shape (points,)
        Strictly increasing compute coordinates of one run's evals (tokens, seconds or updates).
    y : array, shape (points,)
        Accuracy at each eval point.
    at : float
        Where to read the curve; must lie in [x[0], x[-1]] (a relative tolerance of 1e-9
        absorbs float round-off at the ends).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``at`` outside the run's range (no extrapolation), x not strictly increasing, or empty input.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape:
        raise ValueError(f"interpolate needs matching non-empty x and y, got shapes {x.shape} and {y.shape}")
    if x.size > 1 and not np.all(np.diff(x) > 0):
        raise ValueError(f"eval points must be strictly increasing in x, got {x.tolist()}")
    tol = 1e-9 * max(1.0, abs(float(x[-1])))
    if at < x[0] - tol or at > x[-1] + tol:
        raise ValueError(f"x = {at:g} is outside the run's eval range [{x[0]:g}, {x[-1]:g}]; no extrapolation")
    return float(np.interp(min(max(at, x[0]), x[-1]), x, y))


def bootstrap_means(values, *, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Means of ``n_resamples`` resamples (with replacement) of ``values``.

    Parameters
    ----------
    values : array, shape (seeds,)
        One number per seed (for a paired comparison: the per-seed differences).

    Returns
    -------
    ndarray, shape (n_resamples,)
        Resample r uses indices ``default_rng(seed).integers(0, seeds, size=(n_resamples, seeds))[r]``.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"bootstrap needs a non-empty 1-d array of per-seed values, got shape {v.shape}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    idx = np.random.default_rng(seed).integers(0, v.size, size=(n_resamples, v.size))
    return v[idx].mean(axis=1)


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> list[float]:
    """Two-sided percentile interval [q_((1-level)/2), q_((1+level)/2)] (numpy's linear quantiles)."""
    a = (1.0 - level) / 2
    lo, hi = np.quantile(boot, [a, 1.0 - a])
    return [float(lo), float(hi)]


def paired_bootstrap(treatment: dict, control: dict, *, level: float = 0.95, n_resamples: int = N_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> dict:
    """Mean paired difference over common seeds and its percentile bootstrap interval.

    Parameters
    ----------
    treatment, control : dict[int, float]
        Seed -> value (accuracy points). Only seeds present in both are used (pairs).

    Returns
    -------
    dict
        ``estimate`` (mean of treatment - control), ``ci`` [lo, hi], ``seeds`` (pairs used),
        ``boot`` (ndarray, shape (n_resamples,), the resampled means).

    Raises
    ------
    ValueError
        No common seed.
    """
    seeds = sorted(set(treatment) & set(control))
    if not seeds:
        raise ValueError(f"no common seed to pair: treatment seeds {sorted(treatment)}, control seeds {sorted(control)}")
    d = np.array([treatment[s] - control[s] for s in seeds], dtype=np.float64)
    boot = bootstrap_means(d, n_resamples=n_resamples, seed=seed)
    return {"estimate": float(d.mean()), "ci": percentile_interval(boot, level), "seeds": len(seeds), "boot": boot}


def scalerl_sigmoid(C, A: float, B: float, C_mid: float, R0: float):
    """ScaleRL compute curve (Khatri et al. 2025, eq. 1): R0 + (A - R0) / (1 + (C_mid / C)^B).

    Parameters
    ----------
    C : array, shape (points,)
        Compute (generated tokens), >= 0; R(0) = R0.
    A, R0 : float
        Asymptote and initial accuracy (points).
    B : float
        Exponent (> 0).
    C_mid : float
        Compute at which half the gain A - R0 is reached (tokens, > 0).
    """
    C = np.asarray(C, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = np.where(C > 0, C_mid / np.where(C > 0, C, 1.0), np.inf)
        return R0 + (A - R0) / (1.0 + np.power(ratio, B))


def fit_sigmoid(x, y, R0: float) -> dict:
    """Fit A, B, C_mid of :func:`scalerl_sigmoid` with R0 fixed.

    Parameters
    ----------
    x : array, shape (points,)
        Generated tokens of every eval point (all seeds pooled).
    y : array, shape (points,)
        Accuracy (points) at those points.
    R0 : float
        Accuracy of the initial policy (points).

    Returns
    -------
    dict
        ``A``, ``B``, ``C_mid``, ``R0``, ``x`` = "generated_tokens", ``n_points``, ``rmse`` (points).

    Raises
    ------
    ValueError
        Fewer than 3 distinct x > 0 (three free parameters), the optimizer did not converge,
        or the parameters are not identifiable (non-finite covariance, e.g. a flat curve).
    """
    from scipy.optimize import OptimizeWarning, curve_fit

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    pos = np.unique(x[x > 0])
    if pos.size < 3:
        raise ValueError(f"needs eval points at >= 3 distinct token counts > 0 (3 free parameters), got {pos.size}; "
                         f"set [eval] every_tokens smaller than the budget")

    def f(c, A, B, C_mid):
        return scalerl_sigmoid(c, A, B, C_mid, R0)

    top = float(np.max(y))
    p0 = [min(100.0, max(top, R0 + 1e-3)), 1.0, float(np.median(pos))]
    bounds = ([0.0, 1e-3, float(pos[0]) * 1e-3], [100.0, 50.0, float(pos[-1]) * 1e3])
    p0[0] = min(max(p0[0], bounds[0][0]), bounds[1][0])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", OptimizeWarning)
            popt, pcov = curve_fit(f, x, y, p0=p0, bounds=bounds, maxfev=20000)
    except (RuntimeError, OptimizeWarning, ValueError) as e:
        raise ValueError(f"curve_fit failed: {e}") from None
    if not np.all(np.isfinite(pcov)):
        raise ValueError("parameters not identifiable (curve_fit covariance is not finite): the accuracy curve "
                         "does not rise or fall like a sigmoid")
    A, B, C_mid = (float(v) for v in popt)
    if A >= bounds[1][0] - 1e-3 or A <= bounds[0][0] + 1e-3:
        raise ValueError(f"asymptote A = {A:.4g} sits at its bound [0, 100] points: the curve has not bent over "
                         f"within the evaluated compute, so A is not identified")
    if abs(A - R0) < 0.1:
        raise ValueError(f"flat curve: the fitted gain A - R0 = {A - R0:+.3g} points is below 0.1, so B and C_mid "
                         f"are not identifiable")
    rmse = float(np.sqrt(np.mean((f(x, *popt) - y) ** 2)))
    return {"A": A, "B": B, "C_mid": C_mid, "R0": float(R0), "x": "generated_tokens", "n_points": int(x.size),
            "rmse": rmse}


def ranking(arms: dict, axis: str) -> list[str]:
    """Arm names by mean accuracy on ``axis``, best first (ties: by name)."""
    scored = [(a, r[axis]["accuracy"]) for a, r in arms.items() if r.get(axis) and r[axis]["accuracy"] is not None]
    return [a for a, _ in sorted(scored, key=lambda t: (-t[1], t[0]))]


# ----------------------------------------------------------------------------- reading a study

def load_runs(study_dir: str | Path):
    """``runs.csv`` as a pandas DataFrame (accuracies stay fractions here).

    Raises
    ------
    AnalysisError
        Missing file or columns, or no rows.
    """
    import pandas as pd

    from .runner import RUNS_CSV_COLUMNS

    path = Path(study_dir) / "runs.csv"
    if not path.exists():
        raise AnalysisError(f"{path} does not exist; run `gradprobe study PLAN --out {study_dir}` first")
    df = pd.read_csv(path)
    missing = [c for c in RUNS_CSV_COLUMNS if c not in df.columns]
    if missing:
        raise AnalysisError(f"{path} lacks the column(s) {', '.join(missing)}")
    if df.empty:
        raise AnalysisError(f"{path} has no rows: no run of the study has completed yet")
    df["arm"] = df["arm"].astype(str)
    return df.sort_values(["arm", "seed", "update"]).reset_index(drop=True)


def _runs(df) -> dict:
    """(arm, seed) -> that run's eval rows, sorted by update."""
    return {(a, int(s)): g.sort_values("update") for (a, s), g in df.groupby(["arm", "seed"], sort=False)}


def _value_at(run, column: str, at: float, metric: str, final: bool) -> float:
    """Accuracy (points) of one run at ``at`` on ``column`` (final eval if ``final``)."""
    y = run[metric].to_numpy(dtype=np.float64)
    if final:
        return 100.0 * float(y[-1])
    return 100.0 * interpolate(run[column].to_numpy(dtype=np.float64), y, at)


def matched_budgets(df, plan=None) -> dict:
    """The three matched budgets (see the module docstring), with the token overshoot."""
    runs = _runs(df)
    finals = {k: g.iloc[-1] for k, g in runs.items()}
    token_budget = getattr(getattr(plan, "budget", None), "generated_tokens", None)
    out = {}
    smallest = float(min(float(f["generated_tokens"]) for f in finals.values()))
    if token_budget is not None and smallest >= token_budget:
        over = np.array([float(f["generated_tokens"]) - token_budget for f in finals.values()])
        out["tokens"] = {"budget": float(token_budget), "source": "plan budget; each run's final eval",
                         "final_eval": True,
                         "overshoot_tokens": {"mean": float(over.mean()), "max": float(over.max()),
                                              "min": float(over.min())},
                         "overshoot_fraction_max": float(over.max() / token_budget)}
    else:
        why = ("the plan sets no token budget" if token_budget is None else
               f"a run stopped on another budget before the token budget {token_budget:g}")
        out["tokens"] = {"budget": smallest, "final_eval": False,
                         "source": f"smallest final generated_tokens over all runs ({why})"}
    out["time"] = {"budget": float(min(float(f["device_seconds"]) for f in finals.values())),
                   "source": "smallest final device_seconds over all runs"}
    out["updates"] = {"budget": float(min(int(f["update"]) for f in finals.values())),
                      "source": "smallest final update count over all runs"}
    return out


def _load_plan(study_dir: Path):
    from ..training.plan import load_plan

    p = study_dir / "plan.toml"
    return load_plan(p) if p.exists() else None


# ----------------------------------------------------------------------------- the analysis

def analyze(study_dir: str | Path, *, write: bool = True, figures: bool = True, n_resamples: int = N_RESAMPLES,
            seed: int = BOOTSTRAP_SEED, control: str = CONTROL_ARM) -> dict:
    """Analyse a study folder (see the module docstring for every definition).

    Parameters
    ----------
    study_dir : path
        Holds ``runs.csv`` and (for the token budget and hypotheses) the frozen ``plan.toml``.
    write : bool
        Write ``analysis.json`` (atomically).
    figures : bool
        Write ``figures/accuracy_vs_{updates,generated_tokens,device_seconds}.png``.
    n_resamples : int
        Bootstrap resamples (>= 2000).
    seed : int
        Seed of the bootstrap's ``numpy.random.Generator``.
    control : str
        Arm the gains are measured against (``gain_vs_grpo``; null if the study has no such arm).

    Returns
    -------
    dict
        The content of ``analysis.json``: ``plan_sha256``, ``initial``, ``matched``, ``arms``,
        ``rankings``, ``hypotheses`` (accuracy points).

    Raises
    ------
    AnalysisError
        No usable ``runs.csv``.
    ValueError
        ``n_resamples`` < 2000.
    """
    if n_resamples < 2000:
        raise ValueError(f"n_resamples must be >= 2000 for stable 95% intervals, got {n_resamples}")
    study_dir = Path(study_dir)
    df = load_runs(study_dir)
    plan = _load_plan(study_dir)
    runs = _runs(df)
    matched = matched_budgets(df, plan)
    boot_kw = {"n_resamples": n_resamples, "seed": seed}

    # initial policy: each run's eval at update 0, per seed averaged over arms (identical under greedy decoding)
    init_runs = {k: g for k, g in runs.items() if int(g["update"].iloc[0]) == 0}
    if not init_runs:
        raise AnalysisError("no run has an eval at update 0 (the initial policy); gains vs initial need it")
    initial = {}
    for metric, key in (("accuracy", "accuracy"), ("accuracy_sampled", "accuracy_sampled")):
        per_seed = {}
        for (a, s), g in init_runs.items():
            v = g[metric].iloc[0]
            if v == v:  # not NaN
                per_seed.setdefault(s, []).append(100.0 * float(v))
        per_seed = {s: float(np.mean(v)) for s, v in sorted(per_seed.items())}
        initial[key] = float(np.mean(list(per_seed.values()))) if per_seed else None
        initial[f"{key}_per_seed"] = per_seed
    initial["ci"] = (percentile_interval(bootstrap_means(list(initial["accuracy_per_seed"].values()), **boot_kw))
                     if initial["accuracy_per_seed"] else None)
    initial["per_seed"] = initial.pop("accuracy_per_seed")

    per_axis = {}  # axis -> arm -> seed -> accuracy points
    for axis, column in AXES.items():
        at = matched[axis]["budget"]
        final = axis == "tokens" and matched["tokens"]["final_eval"]
        vals = {}
        for (a, s), g in runs.items():
            vals.setdefault(a, {})[s] = _value_at(g, column, at, "accuracy", final)
        per_axis[axis] = vals

    arm_order = list(plan.arms) if plan is not None else []
    arm_order += [a for a in dict.fromkeys(df["arm"]) if a not in arm_order]
    arms = {}
    for arm in arm_order:
        if arm not in per_axis["tokens"]:
            continue
        rows = df[df["arm"] == arm]
        entry = {"reward": str(rows["reward"].iloc[0]), "lr_scale": float(rows["lr_scale"].iloc[0]),
                 "seeds": int(rows["seed"].nunique())}
        for axis in AXES:
            ps = per_axis[axis][arm]
            boot = bootstrap_means(list(ps.values()), **boot_kw)
            res = {"accuracy": float(np.mean(list(ps.values()))), "ci": percentile_interval(boot),
                   "per_seed": {int(s): v for s, v in sorted(ps.items())}}
            if control in per_axis[axis]:
                g = paired_bootstrap(ps, per_axis[axis][control], **boot_kw)
                res.update(gain_vs_grpo=g["estimate"], gain_ci=g["ci"])
            else:
                res.update(gain_vs_grpo=None, gain_ci=None)
            init = {s: 100.0 * float(runs[(arm, s)]["accuracy"].iloc[0]) for s in ps if (arm, s) in init_runs}
            if init:
                g = paired_bootstrap(ps, init, **boot_kw)
                res.update(gain_vs_initial=g["estimate"], gain_vs_initial_ci=g["ci"])
            else:
                res.update(gain_vs_initial=None, gain_vs_initial_ci=None)
            entry[axis] = res
        r0 = [100.0 * float(runs[(arm, s)]["accuracy"].iloc[0]) for s in per_axis["tokens"][arm] if (arm, s) in init_runs]
        try:
            entry["sigmoid"] = fit_sigmoid(rows["generated_tokens"], 100.0 * rows["accuracy"], float(np.mean(r0)))
            entry["sigmoid_error"] = None
        except ValueError as e:
            entry["sigmoid"], entry["sigmoid_error"] = None, str(e)
        arms[arm] = entry

    result = {
        "plan_sha256": plan.sha256 if plan is not None else None,
        "initial": initial,
        "matched": matched,
        "arms": arms,
        "rankings": {axis: ranking(arms, axis) for axis in AXES},
        "hypotheses": evaluate_hypotheses(plan, df, matched, **boot_kw) if plan is not None else [],
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "level": 0.95, "method": "percentile, paired over seeds"},
        "control_arm": control,
        "excluded_runs": _excluded_runs(study_dir),
    }
    if write:
        from ..training.checkpoint import write_json_atomic

        write_json_atomic(study_dir / "analysis.json", _json_safe(result))
    if figures:
        plot_figures(df, result, study_dir / "figures")
    return result


def _excluded_runs(study_dir: Path) -> list:
    """Runs of study.json that are not complete (failed or unfinished): not in runs.csv."""
    p = study_dir / "study.json"
    if not p.exists():
        return []
    try:
        runs = json.loads(p.read_text()).get("runs", [])
    except (OSError, json.JSONDecodeError):
        return []
    return [{"arm": r["arm"], "seed": r["seed"], "status": r.get("status"), "error": r.get("error")}
            for r in runs if r.get("status") != "done"]


def evaluate_hypotheses(plan, df, matched: dict, *, n_resamples: int = N_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> list[dict]:
    """Test the plan's ``[[hypotheses]]`` with the paired bootstrap over seeds (module docstring).

    Returns
    -------
    list[dict]
        Per hypothesis: ``name``, ``statement``, ``estimate`` (points), ``ci``, ``ci_level``,
        ``p_value``, ``passed``, ``treatment``, ``control``, ``at``, ``budget``, ``metric``,
        ``alternative``, ``alpha``, ``min_effect``, ``seeds``, ``error`` (why it could not be
        evaluated, else null).
    """
    from ..training.plan import INITIAL

    runs = _runs(df)
    out = []
    for h in plan.hypotheses:
        treat, ctrl = h.arms
        budget = h.budget if h.budget is not None else getattr(plan.budget, h.at)
        rec = {"name": h.name, "statement": h.statement, "estimate": None, "ci": None, "ci_level": None,
               "p_value": None, "passed": False, "treatment": treat, "control": ctrl, "at": h.at,
               "budget": float(budget), "metric": h.metric, "alternative": h.alternative, "alpha": h.alpha,
               "min_effect": h.min_effect, "seeds": 0, "error": None}
        try:
            if h.at not in AT_COLUMNS:
                raise ValueError(f"at = {h.at!r}: runs.csv has no such column (use one of {', '.join(AT_COLUMNS)})")
            column, metric = AT_COLUMNS[h.at], METRIC_COLUMNS[h.metric]
            final = (h.at == "generated_tokens" and matched["tokens"]["final_eval"]
                     and float(budget) == matched["tokens"]["budget"])

            def values(arm):
                if arm == INITIAL:
                    return {s: 100.0 * float(g[metric].iloc[0]) for (a, s), g in runs.items()
                            if a == treat and int(g["update"].iloc[0]) == 0}
                vals = {s: _value_at(g, column, float(budget), metric, final) for (a, s), g in runs.items() if a == arm}
                if not vals:
                    raise ValueError(f"arm {arm!r} has no completed run")
                return vals

            t_vals, c_vals = values(treat), values(ctrl)
            if any(math.isnan(v) for v in [*t_vals.values(), *c_vals.values()]):
                raise ValueError(f"metric {h.metric} was not evaluated (check [eval] greedy/sampled)")
            pb = paired_bootstrap(t_vals, c_vals, n_resamples=n_resamples, seed=seed)
            boot, m = pb["boot"], h.min_effect
            p_greater = (1 + int(np.sum(boot <= m))) / (1 + boot.size)
            p_less = (1 + int(np.sum(boot >= -m))) / (1 + boot.size)
            if h.alternative == "greater":
                p, q = p_greater, [h.alpha, 1 - h.alpha]
            elif h.alternative == "less":
                p, q = p_less, [h.alpha, 1 - h.alpha]
            else:
                p, q = min(1.0, 2 * min(p_greater, p_less)), [h.alpha / 2, 1 - h.alpha / 2]
            rec.update(estimate=pb["estimate"], ci=[float(v) for v in np.quantile(boot, q)], ci_level=1 - 2 * q[0],
                       p_value=float(p), passed=bool(p < h.alpha), seeds=pb["seeds"])
            if pb["seeds"] < 2:
                rec.update(passed=False, error="one paired seed: the bootstrap has no spread; the test needs >= 2 seeds")
        except ValueError as e:
            rec["error"] = str(e)
        out.append(rec)
    return out


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return _json_safe(x.item())
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


# ----------------------------------------------------------------------------- output

def format_rankings(result: dict) -> str:
    """The three rankings side by side (per update, at matched tokens, at matched time), with
    mean accuracy and the paired gain vs the control arm (points)."""
    m = result["matched"]
    heads = {"updates": f"per update (at {m['updates']['budget']:,.0f} updates)",
             "tokens": f"at matched tokens ({m['tokens']['budget']:,.0f})",
             "time": f"at matched time ({m['time']['budget']:,.1f} s)"}
    order = ("updates", "tokens", "time")
    width = max(38, *(len(h) + 2 for h in heads.values()))
    lines = [f"initial policy: {result['initial']['accuracy']:.2f} points (greedy)", "",
             "rank  " + "".join(f"{heads[a]:<{width}}" for a in order)]
    n = max(len(result["rankings"][a]) for a in order)
    for i in range(n):
        cells = []
        for a in order:
            r = result["rankings"][a]
            if i < len(r):
                e = result["arms"][r[i]][a]
                gain = "" if e["gain_vs_grpo"] is None else f" ({e['gain_vs_grpo']:+.2f})"
                cells.append(f"{r[i]:<14}{e['accuracy']:6.2f}{gain}")
            else:
                cells.append("")
        lines.append(f"{i + 1:<6}" + "".join(f"{c:<{width}}" for c in cells))
    lines.append(f"(accuracy points; in parentheses: paired gain vs {result.get('control_arm', CONTROL_ARM)})")
    if result["hypotheses"]:
        lines += ["", "hypotheses:"]
        for h in result["hypotheses"]:
            if h["estimate"] is None:
                lines.append(f"  {h['name']}: not evaluated: {h['error']}")
            else:
                lines.append(f"  {h['name']}: {'PASSED' if h['passed'] else 'not passed'}  estimate "
                             f"{h['estimate']:+.2f} points, ci [{h['ci'][0]:+.2f}, {h['ci'][1]:+.2f}], "
                             f"p = {h['p_value']:.4f} ({h['alternative']}, alpha {h['alpha']})"
                             + (f"; {h['error']}" if h["error"] else ""))
    return "\n".join(lines)


FIGURES = {"update": ("accuracy_vs_updates.png", "updates", "updates"),
           "generated_tokens": ("accuracy_vs_generated_tokens.png", "generated tokens (charged)", "tokens"),
           "device_seconds": ("accuracy_vs_device_seconds.png", "training device-seconds", "time")}


def plot_figures(df, result: dict, folder: str | Path, grid_points: int = 41) -> list[Path]:
    """Accuracy (points) vs updates, generated tokens and device-seconds per arm: mean over seeds
    with a band of +-2 standard errors over seeds (seaborn), each run interpolated on a common grid from 0 to the
    arm's smallest final x; a dashed line marks the matched budget. Returns the written files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    runs = _runs(df)
    written = []
    for column, (name, label, axis) in FIGURES.items():
        rows = []
        for arm in dict.fromkeys(df["arm"]):
            keys = [k for k in runs if k[0] == arm]
            hi = min(float(runs[k][column].iloc[-1]) for k in keys)
            for k in keys:
                g = runs[k]
                x = g[column].to_numpy(dtype=np.float64)
                y = 100.0 * g["accuracy"].to_numpy(dtype=np.float64)
                for gx in np.linspace(float(x[0]), hi, grid_points):
                    rows.append({"arm": arm, "seed": k[1], column: gx, "accuracy (points)": np.interp(gx, x, y)})
        data = pd.DataFrame(rows)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        sns.lineplot(data=data, x=column, y="accuracy (points)", hue="arm", errorbar=("se", 2), ax=ax)
        ax.axvline(result["matched"][axis]["budget"], color="0.4", ls="--", lw=1, label=f"matched {axis}")
        ax.set_xlabel(label)
        ax.set_title(f"held-out greedy accuracy vs {label}\nmean over seeds, band: +-2 standard errors", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = folder / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
