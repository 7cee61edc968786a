"""Analysis of a study folder: accuracy per arm at matched updates, generated tokens, FLOPs and
device-seconds, with paired statistics over seeds and held-out items.

``analyze(study_dir) -> dict`` (``gradprobe study --analyze-only --out DIR``) reads ``DIR/runs.csv``,
the frozen ``DIR/plan.toml`` and, when present, the per-item eval results (``DIR/eval_items.jsonl.gz``
or ``DIR/runs/ARM/seedS/eval_items.jsonl``), and writes ``DIR/analysis.json`` and ``DIR/figures/``.

Definitions (DESIGN.md, "Matched-compute training"; the statistics: :mod:`gradprobe.study.stats`):

Axes
    :data:`~gradprobe.training.plan.AXES`: ``updates``, ``generated_tokens`` (charged),
    ``flops`` (generation + training), ``device_seconds`` (training). An axis ``runs.csv`` does
    not record (``flops`` in a study made before it was logged) is reported as not recorded.
Matched point of an axis
    The plan's budget of that kind when every run reached it: each run's FINAL eval (runs stop
    within one update of the budget; the overshoot is reported). Otherwise the largest promised
    eval point (:meth:`~gradprobe.training.plan.EvalSpec.promised_points`) > 0 not above the
    smallest final value over all runs, or that smallest final value if none is promised below.
Reading a run at a point
    At an eval: that eval. Between neighbouring evals x_lo < at < x_hi: linear in x, but only if
    x_hi - x_lo <= the promised gap + one update's cost on the axis ((x_hi - x_lo) / (u_hi - u_lo)),
    the promised gap being the width of the promised interval (p_(k-1), p_k] that holds ``at``
    (a run evaluates at the first update at or after each promised point; nothing promised:
    infinite). Wider: refused (``gap_exceeded``) and that seed is left out of every comparison
    at that point. Never extrapolated. An eval with a blank accuracy cell is left out (warned); a
    run whose eval at the point, or whose final eval where the point is read at the final evals,
    has a blank accuracy and no eval with one beyond it is not read there (``blank_accuracy``).
    A runs.csv whose generated_tokens, device_seconds or flops decreases along a run's evals is
    refused (:func:`~gradprobe.study.reading.load_runs`).
Per-seed statistics
    An arm's accuracy (and the initial policy's): mean over its read seeds with a Student-t 95% interval,
    clipped to [0, 100] points (:func:`~gradprobe.study.stats.accuracy_interval`; where a bound was moved,
    ``ci_unclipped`` keeps the t interval beside ``ci``). A gain (in [-100, 100]) is not clipped: paired over
    the seeds read in both arms (:func:`~gradprobe.study.stats.paired_t`), and with per-item
    results the two-way bootstrap over seeds x items
    (:func:`~gradprobe.study.stats.two_way_bootstrap`), items read with the same weights.
Hypotheses
    Estimate, Student-t interval at level 1 - 2 alpha (one-sided: its relevant bound tests at
    alpha) or 1 - alpha (two-sided), exact sign-flip p with its floor, two-way interval, and the
    Holm-adjusted p over the plan's testable hypotheses; ``passed``: adjusted p <= alpha.
    ``test = "sign_flip"``: testable with >= 2 paired seeds and a sign-flip floor <= alpha, else
    "not testable (n seeds)". ``test = "paired_t"``: the paired t p-value decides (>= 2 seeds),
    the exact sign-flip p is reported beside it (``p_exact``, ``p_exact_text``).
Sigmoid, side effects, detectable effect
    :func:`~gradprobe.study.stats.fit_sigmoid` of accuracy against updates, generated tokens and
    FLOPs (R0: the arm's mean accuracy at update 0); ``response_length`` (tokens),
    ``format_rate`` and ``kl_init`` (nats) per arm at each matched point, read like accuracy;
    :func:`~gradprobe.study.power.detectable_effects` at matched generated tokens.
Runs that never trained
    A run of ``runs.csv`` whose folder's ``metrics.jsonl`` (``runs/ARM/seedS/metrics.jsonl``) shows every advantage
    of every update 0 (``advantage_abs_mean`` 0: every group flat, every completion truncated, the rewards
    overflowed or none given; :mod:`gradprobe.training.untrained`) never trained: ``arms[ARM]["never_trained"]``
    lists its seed, cause and updates, and the arm is not ranked (a broken setup, not a finding). Nor is it used
    elsewhere as a finding: a hypothesis with that arm is not tested (status ``"not tested (never trained)"``,
    ``untestable_reason`` naming the arm, seeds and cause; out of the Holm family like an untestable one), its
    point of a learning-rate sweep is not used (no best lr_scale picked from it; a sweep whose lr_scale 1 arm never
    trained gives no differences to it), and no detectable effect is computed for it (nor for any arm when the
    control arm never trained); the report says "never trained" in place of their numbers
    (:mod:`gradprobe.study.never_trained_arms`). The arm's accuracy, gains, side effects and fits stay in
    ``analysis.json`` as read (calib's rows read the per-seed accuracies), marked: ``arms[ARM]["not_findings"]``
    lists those fields and why (null for an arm whose numbers are findings); so are every arm's gains vs a control
    arm that never trained. A study folder without run folders, or whose metrics lack
    ``advantage_abs_mean`` (an older gradprobe), flags nothing.
Rankings
    Per axis, the arms read on every seed with no run that never trained, best first; [] where fewer than two
    arms are (``not_ranked[axis]`` says why each other arm is not: :func:`~gradprobe.study.report.not_ranked`).
Learning-rate sweep
    Arms that differ only by the learning rate, per matched axis: accuracy and paired difference
    to lr_scale 1 per lr_scale, the best one and whether it lies at an edge of the sweep
    (:mod:`gradprobe.study.lr_sweep`).

All accuracies and gains are in accuracy points (0-100).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

from ..outputs import json_safe, write_json_atomic
from ..training.budget import reach_warned_once
from . import stats
from .comparisons import _by_seed, compare
from .coverage import missing_runs
from .folder import StudyError, check_frozen_plan, read_study_json
from .hypotheses import evaluate_hypotheses
from .lr_sweep import lr_sweep
from .never_trained_arms import never_trained_runs, not_findings
from .power import detectable_effects
from .reading import (AXIS_COLUMNS, EVAL_ITEMS, EVAL_ITEMS_GZ, SIDE_EFFECTS, AnalysisError, _combine, _item_index,
                      _item_lines, _promised, _runs, frozen_plan, initial_reads, interpolate, load_eval_items,
                      load_runs, matched_budgets, promised_gap, read_point, read_runs, recorded_axes)
from .report import control_missing, format_rankings, not_ranked, plot_figures, ranked_arms
from .stats import fit_sigmoid, paired_t, scalerl_sigmoid, sign_flip_test, two_way_bootstrap

__all__ = ["AnalysisError", "analyze", "compare", "evaluate_hypotheses", "fit_sigmoid", "format_rankings",
           "interpolate", "load_eval_items", "load_runs", "matched_budgets", "paired_t", "plot_figures",
           "promised_gap", "ranking", "read_point", "read_runs", "scalerl_sigmoid", "sign_flip_test",
           "two_way_bootstrap"]

N_RESAMPLES, BOOTSTRAP_SEED, CONTROL_ARM = stats.N_RESAMPLES, stats.BOOTSTRAP_SEED, "grpo"


# ----------------------------------------------------------------------------- the analysis

def _side_effects(reads: dict) -> dict:
    """Mean over read seeds of each side-effect column at the reads (None where not recorded)."""
    out = {}
    for col in SIDE_EFFECTS:
        vals = [_combine(r["frame"][col].to_numpy(np.float64), r) for r in reads.values() if r["value"] is not None]
        vals = [float(v) for v in vals if v is not None]
        out[col] = float(np.mean(vals)) if vals else None
    return out


def _unclipped(acc: dict | None) -> dict:
    """``{"ci_unclipped": [lo, hi]}`` (the t interval before :func:`~gradprobe.study.stats.accuracy_interval` clipped
    it to [0, 100]) where it was clipped, else {}: an accuracy interval inside the range is written as before."""
    return {"ci_unclipped": acc["ci_unclipped"]} if acc and acc.get("ci_unclipped") else {}


def _arm_axis(arm: str, reads: dict, init: dict, control: str, index, boot_kw: dict) -> dict:
    """One arm's entry on one axis: accuracy, reads, gains vs the control arm and vs initial."""
    mine = _by_seed(reads, arm)
    ok = {s: r["value"] for s, r in mine.items() if r["value"] is not None}
    acc = stats.accuracy_interval(list(ok.values())) if ok else None
    entry = {"accuracy": acc["estimate"] if acc else None, "ci": acc["ci"] if acc else None,
             **_unclipped(acc), "per_seed": {s: r["value"] for s, r in sorted(mine.items())}, "seeds": len(ok),
             "gap_exceeded": sorted(s for s, r in mine.items() if r["status"] == "gap_exceeded"),
             "read": {st: sum(r["status"] == st for r in mine.values())
                      for st in sorted({r["status"] for r in mine.values()})}}
    for key, ci_key, other, other_arm in (("gain_vs_grpo", "gain_ci", _by_seed(reads, control), control),
                                          ("gain_vs_initial", "gain_vs_initial_ci", _by_seed(init, arm), arm)):
        c = compare(mine, other, t_arm=arm, c_arm=other_arm, index=index, **boot_kw) if other else None
        t = c["t"] if c else None
        entry.update({key: t["estimate"] if t else None, ci_key: t["ci"] if t else None,
                      f"{key}_ci_two_way": c["two_way"]["ci"] if c and c["two_way"] else None})
        if key == "gain_vs_grpo":
            entry.update(gain_sd=t["sd"] if t else None, gain_seeds=t["seeds"] if t else 0,
                         disagreement=c["two_way"]["disagreement"] if c and c["two_way"] else None)
    entry["side_effects"] = _side_effects(mine)
    return entry


def _sigmoids(rows, r0: float, recorded: dict) -> dict:
    """axis -> :func:`~gradprobe.study.stats.fit_sigmoid` or {"error": why} (updates, tokens, FLOPs)."""
    out = {}
    for axis in ("updates", "generated_tokens", "flops"):
        if recorded[axis]:
            out[axis] = {"error": recorded[axis], "recorded": False}
            continue
        try:
            out[axis] = stats.fit_sigmoid(rows[AXIS_COLUMNS[axis]], 100.0 * rows["accuracy"], R0=r0, axis=axis)
        except ValueError as e:
            out[axis] = {"error": str(e)}
    return out


def _initial(init: dict, runs: dict) -> dict:
    """``analysis.json["initial"]``: accuracy at update 0 per seed (mean over arms), mean and t interval."""
    if not init:
        raise AnalysisError("no run has an eval at update 0 (the initial policy); gains vs initial need it")
    init_seed = {}
    for (a, s), r in init.items():
        init_seed.setdefault(s, []).append(r["value"])
    per_seed = {s: float(np.mean(v)) for s, v in sorted(init_seed.items())}
    t0 = stats.accuracy_interval(list(per_seed.values()))
    samp = {}
    for (a, s), r in initial_reads(runs, "sampled_accuracy").items():
        samp.setdefault(s, []).append(r["value"])
    samp = {s: float(np.mean(v)) for s, v in sorted(samp.items())}
    return {"accuracy": t0["estimate"], "ci": t0["ci"], **_unclipped(t0), "per_seed": per_seed,
            "accuracy_sampled": float(np.mean(list(samp.values()))) if samp else None,
            "accuracy_sampled_per_seed": samp}


def analyze(study_dir: str | Path, *, write: bool = True, figures: bool = True, n_resamples: int = N_RESAMPLES,
            seed: int = BOOTSTRAP_SEED, control: str = CONTROL_ARM, out_dir: str | Path | None = None) -> dict:
    """Analyse a study folder (see the module docstring for every definition); a frozen plan's token budget out of
    reach of its updates is warned about once per call (:func:`_runs_and_plan`).

    Parameters
    ----------
    study_dir : path
        Holds ``runs.csv``, the frozen ``plan.toml`` (budgets, eval schedule, hypotheses) and,
        optionally, per-item results.
    write, figures : bool
        Write ``analysis.json`` (atomically) and ``figures/accuracy_vs_{axis}.png`` (and
        ``figures/lr_sweep.png`` with a learning-rate sweep).
    n_resamples, seed : int
        Two-way bootstrap resamples (>= 2000) and the seed of its generator.
    out_dir : path, optional
        Where ``analysis.json`` and ``figures/`` go (default: ``study_dir``; ``gradprobe study
        --analyze-only`` passes ``study_dir/reanalysis`` so a re-analysis does not overwrite a shipped one).
    control : str
        Arm gains are measured against (``gain_vs_grpo``; null without such an arm).

    Returns
    -------
    dict
        The content of ``analysis.json`` (accuracy points): ``plan_sha256``, ``initial``, ``matched``, ``arms``
        (per axis: accuracy, reads, gains with t and two-way intervals, side effects; ``sigmoid`` per axis;
        ``never_trained``: the seeds whose runs never trained, and why; ``not_findings``: fields no finding, why),
        ``rankings`` ([] on an axis where fewer than two arms can be ranked), ``not_ranked`` (per axis: arm -> why it
        is not ranked), ``hypotheses``, ``lr_sweep`` (:func:`~gradprobe.study.lr_sweep.lr_sweep`: arms that differ
        only by lr_scale), ``detectable_effect`` (the three leave out an arm that never trained: module docstring),
        ``two_way`` (settings, or null with ``two_way_reason``), ``excluded_runs``, ``missing_runs``
        (:func:`~gradprobe.study.coverage.missing_runs`: the plan's arm x seed runs runs.csv holds no
        row of, each with its reason; the analysis reads the others), ``control_arm``, ``control_arm_missing``
        (why no gain vs the control arm is computed: the study has no such arm; else null).

    Raises
    ------
    AnalysisError
        No usable ``runs.csv``, no eval at update 0, no frozen ``plan.toml``
        (:func:`~gradprobe.study.reading.frozen_plan`: without it the budgets, promised eval gaps and hypotheses are
        lost), a ``plan.toml`` edited after the study froze it (its sha256 is not ``study.json``'s ``plan_sha256``:
        :func:`~gradprobe.study.folder.check_frozen_plan`) or a damaged ``study.json`` (the file and the fix are named).
    ValueError
        ``n_resamples`` < 2000.
    """
    if n_resamples < 2000:
        raise ValueError(f"n_resamples must be >= 2000 for stable 95% intervals, got {n_resamples}")
    study_dir = Path(study_dir)
    record = _study_record(study_dir)
    lines = _item_lines(study_dir)  # read once: runs.csv's lost-line check uses them too
    df, plan = _runs_and_plan(study_dir, record, lines)
    runs, recorded = _runs(df), recorded_axes(df)
    matched = matched_budgets(df, plan)
    index = _item_index(lines) if lines else None
    boot_kw = {"n_resamples": n_resamples, "seed": seed}
    init = initial_reads(runs)
    initial = _initial(init, runs)
    reads = _matched_reads(runs, plan, matched)
    untrained = _never_trained(study_dir, df)  # arm -> its runs that never trained: no finding comes from them
    arms = _arms(df, plan, reads, init, recorded, control, index, boot_kw, untrained)
    missing = missing_runs(study_dir, df, plan)
    result = {
        "plan_sha256": plan.sha256 if plan is not None else None, "initial": initial, "matched": matched,
        "arms": arms, "rankings": {axis: ranking(arms, axis) for axis in reads},
        "not_ranked": {axis: not_ranked(arms, axis, missing) for axis in reads},
        "hypotheses": evaluate_hypotheses(plan, runs, matched, index, **boot_kw, never_trained=untrained)
        if plan is not None else [],
        "lr_sweep": lr_sweep(plan, arms, matched, control=control, pair=lambda axis, t, c: compare(
            _by_seed(reads[axis], t), _by_seed(reads[axis], c), t_arm=t, c_arm=c, index=index, **boot_kw)),
        "detectable_effect": detectable_effects(arms, axis="generated_tokens", control=control),
        "two_way": {"n_resamples": n_resamples, "seed": seed, "level": 0.95, "method": "seeds x items, percentile",
                    "items": len(next(iter(index.values()))["greedy"]) if index else None} if index else None,
        "two_way_reason": None if index else _no_items_reason(study_dir),
        "control_arm": control, "control_arm_missing": control_missing(arms, control),
        "excluded_runs": _excluded_runs(record), "missing_runs": missing}
    if write:
        write_json_atomic(Path(out_dir or study_dir) / "analysis.json", json_safe(result))
    if figures:
        plot_figures(df, result, Path(out_dir or study_dir) / "figures")
    return result


def _runs_and_plan(study_dir: Path, record: dict, lines):
    """(``runs.csv`` as :func:`~gradprobe.study.reading.load_runs` reads it, given the per-item result ``lines``
    already read; the frozen plan, :func:`~gradprobe.study.reading.frozen_plan`, ``record``: ``study.json``'s
    content). Both read the frozen ``plan.toml`` (runs.csv's lost-line check reads its eval schedule), so within one
    :func:`~gradprobe.training.budget.reach_warned_once` block: a plan whose ``[budget] generated_tokens`` is out of
    reach of its ``[budget] updates`` (frozen before such budgets were refused) is warned about once per analysis, at
    the caller's line, whatever the warning filters (an enclosing block, a study command's: once for the whole block).
    Raises as :func:`analyze` says."""
    with reach_warned_once():
        return load_runs(study_dir, item_lines=lines or []), frozen_plan(study_dir, record)


def _no_items_reason(study_dir: Path) -> str:
    """Why the analysis has no two-way intervals: the study saved no per-item results, or (when the folder's
    ``analysis.json`` was made with them: its ``two_way`` names a number of items) they are missing now, which is
    also warned about, with the fix: a deleted ``eval_items.jsonl.gz`` was reported as never saved."""
    try:
        before = json.loads((study_dir / "analysis.json").read_text())
        items = (before.get("two_way") or {}).get("items") if isinstance(before, dict) else None
    except (OSError, ValueError, AttributeError):
        items = None
    if not (isinstance(items, int) and not isinstance(items, bool) and items > 0):
        return ("the study saved no per-item eval results (eval_items.jsonl); re-run it with this gradprobe for "
                "intervals over held-out items")
    why = (f"the study's per-item eval results are missing ({study_dir / EVAL_ITEMS_GZ}, or the run folders' "
           f"{EVAL_ITEMS}): its analysis.json was made with them (two-way intervals over {items} held-out items)")
    warnings.warn(f"{why}; this analysis has no intervals over held-out items: restore {EVAL_ITEMS_GZ} from a copy of "
                  "the study (`gradprobe study` writes it from the run folders)", stacklevel=3)
    return why


def _matched_reads(runs: dict, plan, matched: dict) -> dict:
    """axis -> every run's read at the axis's matched point (:func:`~gradprobe.study.reading.read_runs`),
    for the recorded axes; fills ``matched[axis]`` with the read statuses and the promised gap."""
    reads = {axis: read_runs(runs, axis, m["budget"], plan=plan, final=m["final_eval"])
             for axis, m in matched.items() if m["recorded"]}
    for axis, rd in reads.items():
        st = [r["status"] for r in rd.values()]
        matched[axis]["reads"] = {k: st.count(k) for k in sorted(set(st))}
        matched[axis]["promised_gap"] = promised_gap(_promised(plan, axis), matched[axis]["budget"])
    return reads


def _never_trained(study_dir: Path, df) -> dict:
    """arm -> the runs of ``runs.csv`` (``df``) that never trained, ``[{"seed", "cause", "why", "updates",
    "max_abs_reward", "grad_norm_max"}]`` in seed order (:func:`~gradprobe.study.never_trained_arms.never_trained_runs`
    of each run folder's ``metrics.jsonl``). A run without a folder, or whose metrics do not say, is not listed."""
    return never_trained_runs(study_dir, zip(df["arm"], df["seed"]))


def _arms(df, plan, reads: dict, init: dict, recorded: dict, control: str, index, boot_kw: dict,
          untrained: dict) -> dict:
    """``analysis.json["arms"]``: per arm (plan order, then runs.csv order) its reward, lr_scale, seeds,
    ``never_trained`` (``untrained[arm]``: :func:`_never_trained`; [] when every run trained or its folder does not
    say), one :func:`_arm_axis` entry per read axis, the sigmoid fits (:func:`_sigmoids`) and ``not_findings`` (the
    fields of a run that never trained, or gains vs a control arm that did: kept as read, not findings;
    :func:`~gradprobe.study.never_trained_arms.not_findings`)."""
    arm_order = list(plan.arms) if plan is not None else []
    arm_order += [a for a in dict.fromkeys(df["arm"]) if a not in arm_order and a in set(df["arm"])]
    arms = {}
    for arm in (a for a in arm_order if a in set(df["arm"])):
        rows = df[df["arm"] == arm]
        entry = {"reward": str(rows["reward"].iloc[0]), "lr_scale": float(rows["lr_scale"].iloc[0]),
                 "seeds": int(rows["seed"].nunique()), "never_trained": untrained.get(arm, [])}
        for axis, rd in reads.items():
            entry[axis] = _arm_axis(arm, rd, init, control, index, boot_kw)
        r0 = [r["value"] for (a, s), r in sorted(init.items()) if a == arm]
        entry["sigmoid"] = _sigmoids(rows, math.fsum(r0) / len(r0), recorded) if r0 else None
        entry["not_findings"] = not_findings(arm, entry, control, untrained)
        arms[arm] = entry
    return arms


def ranking(arms: dict, axis: str) -> list[str]:
    """Arm names by mean accuracy on ``axis``, best first (ties: by name); only arms read on every
    seed (a mean over fewer seeds is not comparable) with no run that never trained (``never_trained``: a broken
    setup, not a finding), :func:`~gradprobe.study.report.ranked_arms`; the others are left out. [] when fewer
    than two arms are left: one arm alone is no ranking (``not_ranked`` says why the others are left out)."""
    scored = ranked_arms(arms, axis)
    return [a for a, _ in sorted(scored, key=lambda t: (-t[1], t[0]))] if len(scored) >= 2 else []


def _study_record(study_dir: Path) -> dict:
    """``study_dir/study.json`` ({} when there is none); a damaged one is refused, not read as empty, and so is a
    ``plan.toml`` edited after the study froze it.

    Raises
    ------
    AnalysisError
        ``study.json`` cannot be read or holds no JSON object (:func:`~gradprobe.study.folder.read_study_json`:
        the file and the fix are named), or ``plan.toml``'s sha256 is not the ``plan_sha256`` it records
        (:func:`~gradprobe.study.folder.check_frozen_plan`: both named, with the fix).
    """
    try:
        record = read_study_json(study_dir) or {}
    except StudyError as e:
        raise AnalysisError(str(e)) from None
    check_frozen_plan(study_dir, record, error=AnalysisError)
    return record


def _excluded_runs(record: dict) -> list:
    """Runs of study.json (``record``) that are not complete (failed or unfinished): not in runs.csv."""
    runs = record.get("runs") if isinstance(record.get("runs"), list) else []
    return [{"arm": r.get("arm"), "seed": r.get("seed"), "status": r.get("status"), "error": r.get("error")}
            for r in runs if isinstance(r, dict) and r.get("status") != "done"]

