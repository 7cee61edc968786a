"""Arms with a run that never trained, as the analysis's parts leave them out (:mod:`gradprobe.study.analysis`,
"Runs that never trained").

A run never trained when every update of its ``metrics.jsonl`` had every advantage 0 (every group flat, every
completion truncated, the rewards overflowed or none given: :mod:`gradprobe.training.untrained`); the analysis
records such runs per arm in ``analysis.json["arms"][ARM]["never_trained"]`` (``[{"seed", "cause", "why",
"updates", ...}]``). Its numbers measure a broken setup, not the arm, so the rankings, the hypotheses, the
learning-rate sweep and the detectable effect leave the arm out and say why with :func:`never_trained_why`, and so
does the power analysis of a pilot study (:func:`gradprobe.study.power.power_analysis`). :func:`never_trained_runs`
reads them from a study folder's run folders for both. This module sits below all of them (the sweep cannot import
the report, which imports the sweep's report; the analysis imports the power analysis).

``analysis.json`` keeps such an arm's numbers as read (calib builds its rows from the per-seed accuracies, and the
report reads the side effects' entries) but marks them: ``arms[ARM]["not_findings"]`` (:func:`not_findings`) lists the
fields that are no finding and why; so too the gains vs a control arm that never trained, in every arm.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..layout import CONFIG_JSON, METRICS_JSONL, run_dir
from ..training.untrained import never_trained

__all__ = ["never_trained_runs", "never_trained_records", "never_trained_text", "never_trained_why", "not_findings",
           "control_never_trained_why", "run_max_new_tokens", "untrained_arms", "GAIN_FIELDS", "AXIS_FINDINGS",
           "UNREADABLE_RECORDS"]

#: the fields of an axis entry of ``analysis.json["arms"][ARM]`` that are gains vs the control arm
GAIN_FIELDS = ("gain_vs_grpo", "gain_ci", "gain_vs_grpo_ci_two_way", "gain_sd", "gain_seeds", "disagreement")
#: every finding of an axis entry: the arm's accuracy, its gains and its side effects (the rest are the reads)
AXIS_FINDINGS = ("accuracy", "ci", "ci_unclipped", *GAIN_FIELDS, "gain_vs_initial", "gain_vs_initial_ci",
                 "gain_vs_initial_ci_two_way", "side_effects")
#: ``not_findings["reason"]``, after the arms that never trained (:func:`never_trained_why`)
NOT_A_FINDING = ("a run that never trained measures a broken setup: these numbers are kept as read, not as findings "
                 "(the report shows \"never trained\" in their place)")


def never_trained_runs(study_dir: str | Path, runs) -> dict[str, list[dict]]:
    """arm -> the runs of ``runs`` that never trained, ``[{"seed", "cause", "why", "updates", "max_abs_reward",
    "grad_norm_max"}]`` in seed order (:func:`gradprobe.training.untrained.never_trained` of each run folder's
    ``metrics.jsonl``, ``study_dir/runs/ARM/seedS``, read up to its first trained update; a run cut at
    ``max_new_tokens`` names it from the folder's ``config.json``, :func:`run_max_new_tokens`).

    ``runs``: (arm, seed) pairs, e.g. ``zip(df["arm"], df["seed"])`` of ``runs.csv`` (repeats are read once). A run
    without a folder, or whose metrics do not say (an older gradprobe), is not listed; nothing is raised."""
    out = {}
    for arm, seed in sorted({(str(a), int(s)) for a, s in runs}, key=lambda k: k[1]):
        folder = run_dir(study_dir, arm, seed)
        rec = never_trained(folder / METRICS_JSONL)
        if rec is not None and rec["cause"] == "truncated" and (tokens := run_max_new_tokens(folder)) is not None:
            rec = never_trained(folder / METRICS_JSONL, tokens)
        if rec is not None:
            out.setdefault(arm, []).append({"seed": seed, **rec})
    return out


def run_max_new_tokens(folder: str | Path) -> int | None:
    """``[sampling] max_new_tokens`` of the run in ``folder`` (its ``config.json``: ``run.sampling``); None when the
    file cannot be read or does not hold a whole number there."""
    try:
        v = json.loads((Path(folder) / CONFIG_JSON).read_text(encoding="utf-8"))["run"]["sampling"]["max_new_tokens"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


#: :func:`never_trained_text` of a ``never_trained`` value with no record to show (not a list of objects: a damaged
#: ``analysis.json``, which calib refuses, ``calib.noise_floor.check_never_trained``)
UNREADABLE_RECORDS = ("its records in analysis.json cannot be read: re-analyse the study with `gradprobe study "
                      "STUDY/plan.toml --analyze-only --overwrite-analysis --out STUDY` where it keeps its runs/ (the "
                      "records are read from the run folders), else restore analysis.json from a copy of the study")


def never_trained_records(value) -> list[dict]:
    """The records of an arm's ``never_trained`` ``value`` that are objects, in order: [] for None, a value that is no
    list (a damaged ``analysis.json``: ``3``, a text, a lone object) or a list of no objects; never raises."""
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def never_trained_text(runs) -> str:
    """``"seed 0: the rewards ... overflowed ... (11 updates)"``: an arm's ``never_trained`` records, joined; the
    records that are no object are not shown (:func:`never_trained_records`), and with none
    :data:`UNREADABLE_RECORDS` is (``runs`` is truthy, e.g. ``3``, where a caller asks: a damaged file)."""
    recs = never_trained_records(runs)
    if not recs:
        return UNREADABLE_RECORDS
    return "; ".join(f"seed {r.get('seed')}: {r.get('why')} ({_count(r.get('updates'))} updates)" for r in recs)


def _count(value) -> str:
    """A record's count of updates as a message prints it: an int with thousands separators (``1,500``), anything
    else (a damaged record's ``null`` or text) as ``str`` does."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def never_trained_why(arm: str, runs: list[dict]) -> str:
    """``"ARM never trained (seed 0: WHY (10 updates); ...)"``: the arm, its seeds that never trained and the cause
    (:func:`never_trained_text`), the reason a part of the analysis gives for leaving the arm out."""
    return f"{arm} never trained ({never_trained_text(runs)})"


def control_never_trained_why(control: str, runs: list[dict]) -> str:
    """``"the control arm CONTROL never trained (seed 0: WHY (10 updates); ...)"``: :func:`never_trained_why` of the
    control arm ``control`` (``runs``: its ``never_trained`` records), named as the control arm: the reason the
    other arms' gains vs it (their paired differences, detectable effects, ...) are left out."""
    return f"the control arm {never_trained_why(control, runs)}"


def untrained_arms(arms: dict) -> dict[str, list[dict]]:
    """arm -> its ``never_trained`` records, for the arms of ``analysis.json["arms"]`` with at least one (an entry
    without the key, from an analysis written before it, counts as trained); in ``arms`` order. Only the records
    that are objects are read (:func:`never_trained_records`: a value that is no list has none; calib refuses such a
    file first, ``calib.noise_floor.check_never_trained``); nothing is raised."""
    out = {a: never_trained_records(e.get("never_trained")) for a, e in arms.items() if isinstance(e, dict)}
    return {a: recs for a, recs in out.items() if recs}


def not_findings(arm: str, entry: dict, control: str, untrained: dict) -> dict | None:
    """``analysis.json["arms"][ARM]["not_findings"]``: the fields of the arm's ``entry`` that are kept as read but are
    no finding, ``{"fields": ["AXIS.FIELD", ..., "sigmoid"], "reason": "ARM never trained (seed S: WHY (N updates)):
    a run that never trained measures a broken setup ..."}``, or None when every one is a finding.

    An arm with a run that never trained (``untrained[arm]``): every finding of each axis entry
    (:data:`AXIS_FINDINGS`: accuracy, gains, side effects) and its ``sigmoid`` fits. Every arm but ``control`` when
    ``control`` has one: its gains vs the control arm (:data:`GAIN_FIELDS`); the reason then names "the control arm".
    ``untrained``: arm -> its ``never_trained`` records (:func:`never_trained_runs`); ``entry``: the arm's entry, its
    axis entries being the dict values holding ``side_effects``."""
    axes = [k for k, v in entry.items() if isinstance(v, dict) and "side_effects" in v]
    fields, why = [], []
    if untrained.get(arm):
        fields += [f"{a}.{k}" for a in axes for k in AXIS_FINDINGS if k in entry[a]] + ["sigmoid"]
        why.append(never_trained_why(arm, untrained[arm]))
    if arm != control and untrained.get(control):
        fields += [f"{a}.{k}" for a in axes for k in GAIN_FIELDS if k in entry[a] and f"{a}.{k}" not in fields]
        why.append(control_never_trained_why(control, untrained[control]))
    return {"fields": fields, "reason": f"{'; '.join(why)}: {NOT_A_FINDING}"} if why else None
