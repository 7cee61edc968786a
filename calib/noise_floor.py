"""How small a forecast's error can be on given runs: the seed-noise floor, and errors on arm means.

A forecaster scored run by run (``calib report``'s MAE) is compared with one run's realized gain vs
grpo, which carries that run's own seed noise. Model each run of arm a as y = mu_a + e with
e ~ N(0, sigma_a^2) independent across seeds. Then even the ideal forecaster, which knows mu_a exactly,
has a run-level mean absolute error of

    E|y - mu_a| = sigma_a sqrt(2 / pi)                                   (half-normal mean)

so no forecaster's MAE on these runs can be expected below that. It is estimated without assuming
mu_a, from the seeds' pairwise differences (Gini's mean difference; David 1968, "Miscellanea: Gini's
mean difference rediscovered", Biometrika 55(3), E|y_i - y_j| = 2 sigma / sqrt(pi) under normality):

    floor_a = mean_{i<j} |y_i - y_j| / sqrt(2),                           an unbiased estimate of
                                                                           sigma_a sqrt(2/pi)

and the **run-level floor** is the mean of floor_a over the runs (each run carries its arm's value),
with the study-cluster bootstrap interval of :mod:`calib.bootstrap`. Arms with one seed have no
estimate and are counted apart. The floor is a lower bound on what is reachable: it leaves out the
noise of grpo's own mean (the same for every arm of a study) and any error of the forecaster.

On **arm means** (what a study reports: the mean over an arm's seeds), the error of forecaster f on
arm a is |mean_runs forecast - mean_runs realized|, and its floor is floor_a / sqrt(n_a) (the mean of
n_a seeds has standard deviation sigma_a / sqrt(n_a)). :func:`arm_level_errors` gives both, averaged
over arms (each arm once), with study-cluster bootstrap intervals.

**What a larger held-out set would leave** (:func:`heldout_floor`). Every seed of a study is evaluated
on the same N held-out items, so one run's paired gain is y_s = mean_i D_si with
D_si = mu + a_s + b_i + e_si (:mod:`gradprobe.study.power`: seed effect variance sa2, item effect sb2
shared by all seeds, interaction se2; moment estimates by
:func:`gradprobe.study.power.variance_components`, Searle, Casella & McCulloch 1992, ch. 4). The spread
of y_s across seeds is sa2 + se2 / N: training randomness plus the part of the held-out set's sampling
error that differs between seeds (b_i is the same for every seed: it moves the arm's mean on this set, not
its seeds apart). On N' items of the same task the floor of a run-level MAE becomes

    floor_a(N') = sqrt(2 / pi) sqrt(sa2 + se2 / N')                      (half-normal mean, as above)

and as N' grows it falls to sqrt(2 / pi) sqrt(sa2): training randomness alone, which no held-out set
removes. The run-level figure is the mean over runs, with the study-cluster interval; with 3-4 seeds
per arm sa2 is poorly determined (its moment estimate is clipped at 0), so the interval is the figure to
read. An arm with a run that never trained (every advantage 0: a broken setup, not a sample of the arm's seed
noise), and every arm of a study whose grpo has one, is not split; ``skipped`` names it, its seeds and the cause.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from gradprobe.forecast.study import read_study_json
from gradprobe.layout import ANALYSIS_JSON, EVAL_ITEMS_GZ, EVAL_ITEMS_JSONL, STUDY_JSON, keeps_runs
from gradprobe.outputs import is_json_number, shell_word
from gradprobe.study.never_trained_arms import control_never_trained_why, never_trained_why, untrained_arms
from gradprobe.study.power import paired_item_differences, variance_components
from gradprobe.study.reading import AnalysisError

from .bootstrap import cluster_mean_interval
from .domain import study_identity
from .integrity import StudyFormatError, analysis_error

__all__ = ["arm_seed_noise", "seed_noise_floor", "arm_level_errors", "heldout_floor", "pool_heldout_floors",
           "heldout_label", "study_never_trained", "check_never_trained", "NO_SEEDS",
           "NEVER_TRAINED_RECORD", "NEVER_TRAINED_LIST"]

METHOD = ("floor_a = mean over pairs of seeds |y_i - y_j| / sqrt(2) (Gini mean difference), an unbiased estimate "
          "of E|y - mu_a| = sigma_a sqrt(2/pi) for normal seed noise; run level: mean of floor_a over runs; arm "
          "means: floor_a / sqrt(n_a); intervals: study-cluster bootstrap (calib.bootstrap)")


NO_SEEDS = "no arm has 2 or more seeds with a realized gain: the seed noise cannot be estimated"
#: why an arm with a run that never trained (or paired with a control arm that has one) is not split, after its
#: "ARM never trained (seed S: WHY (N updates))" (:func:`gradprobe.study.power.paired_item_differences`)
NEVER_TRAINED = ("a run that never trained (every update had every advantage 0) samples a broken setup, not the "
                 "arm's seed noise")
# why an arm of a study without per-item files is not split (appended to "no per-item results at the evals read")
NO_ITEM_FILES = (f" (the study folder has no {EVAL_ITEMS_GZ} and no runs/ARM/seedS/{EVAL_ITEMS_JSONL}: its runs saved no "
                 "per-item results; a study run again with this version saves them)")


def arm_seed_noise(realized, arms, studies) -> pd.DataFrame:
    """Per arm: its seeds and floor_a = mean_{i<j} |y_i - y_j| / sqrt(2) (module docstring).

    Parameters
    ----------
    realized : array-like of float, shape (n_runs,)
        Realized gain vs grpo of each run (accuracy points).
    arms, studies : array-like of str, shape (n_runs,)
        Each run's arm and study; an arm is (study, arm).

    Returns
    -------
    DataFrame
        One row per arm: study, arm, seeds (runs with a finite gain), realized (their mean), floor (points;
        NaN for an arm with one seed).

    Raises
    ------
    ValueError
        Lengths differ (the message names the three inputs).
    """
    y = np.asarray(realized, np.float64).ravel()
    a, s = np.asarray(arms, dtype=object).ravel(), np.asarray(studies, dtype=object).ravel()
    if not (y.shape == a.shape == s.shape):
        raise ValueError(f"realized ({y.size}), arms ({a.size}) and studies ({s.size}) must have one entry per run")
    d = pd.DataFrame({"study": s, "arm": a, "y": y})
    d = d[np.isfinite(d["y"])]
    recs = []
    for (study, arm), g in d.groupby(["study", "arm"], sort=True):
        v = g["y"].to_numpy()
        i, j = np.triu_indices(v.size, k=1)
        floor = float(np.abs(v[i] - v[j]).mean() / math.sqrt(2.0)) if v.size >= 2 else math.nan
        recs.append({"study": study, "arm": arm, "seeds": int(v.size), "realized": float(v.mean()), "floor": floor})
    out = pd.DataFrame(recs, columns=["study", "arm", "seeds", "realized", "floor"])
    return out.astype({"seeds": np.int64, "realized": np.float64, "floor": np.float64})  # typed when empty too


def seed_noise_floor(realized, arms, studies, *, never_trained=None, reference_arm: str = "grpo",
                     **settings) -> dict:
    """The run-level seed-noise floor of the MAE on these runs, with its study-cluster interval.

    Parameters
    ----------
    realized, arms, studies
        As :func:`arm_seed_noise`.
    never_trained : dict, optional
        study -> arm -> its ``never_trained`` records (:func:`study_never_trained`): an arm with one, and every arm of
        a study whose ``reference_arm`` has one, is left out (its runs sample a broken setup, not seed noise).
    reference_arm : str
        The arm the gains are paired with (calib's ``grpo``).
    **settings
        ``resamples``, ``level``, ``seed``, ``min_studies`` of :func:`calib.bootstrap.cluster_mean_interval`.

    Returns
    -------
    dict
        ``estimate`` (points; NaN when no arm has 2 seeds), ``interval`` [lo, hi] or None, ``reason``,
        ``runs`` (in the mean), ``arms`` (with 2 or more seeds), ``single_seed_arms`` (left out),
        ``method``; and, only when an arm was left out for a run that never trained, ``never_trained``
        (:func:`_never_trained_left_out`: ``[{"study", "arm", "runs": [{"arm", "seed", "cause"}], "why"}]``).

    Raises
    ------
    ValueError
        Lengths differ (:func:`arm_seed_noise`).
    """
    keep, left = _never_trained_left_out(arms, studies, never_trained, reference_arm)
    y = np.asarray(realized, np.float64).ravel()
    per = arm_seed_noise(np.where(keep, y, np.nan) if keep.shape == y.shape else y, arms, studies)
    ok = per[np.isfinite(per["floor"])]
    values = np.repeat(ok["floor"].to_numpy(), ok["seeds"].to_numpy())
    clusters = np.repeat(ok["study"].to_numpy(), ok["seeds"].to_numpy())
    ci = cluster_mean_interval(values, clusters, **settings)
    reason = NO_SEEDS if values.size == 0 else ci.reason
    return {"estimate": ci.estimate, "interval": None if ci.interval is None else list(ci.interval),
            "reason": reason, "runs": int(values.size), "arms": int(len(ok)),
            "single_seed_arms": int((per["seeds"] == 1).sum()), "method": METHOD, **_left_record(left)}


def _left_record(left: list) -> dict:
    """``{"never_trained": left}`` when an arm was left out, else {} (a report without one is as before)."""
    return {"never_trained": left} if left else {}


def _never_trained_left_out(arms, studies, never_trained, reference_arm: str) -> tuple[np.ndarray, list[dict]]:
    """(keep, left): ``keep`` (bool, shape (n_runs,)) False for the runs of an arm with a run that never trained, or
    of a study whose ``reference_arm`` has one (``never_trained``: study -> arm -> records,
    :func:`study_never_trained`);
    ``left``: one ``{"study", "arm", "runs": [{"arm", "seed", "cause"}], "why"}`` per such arm, in (study, arm)
    order, ``why`` as :func:`gradprobe.study.power.paired_item_differences` gives it: ``"ARM never trained (seed S: WHY
    (N updates))"`` and/or ``"the control arm grpo never trained (...)"``, then ":" and :data:`NEVER_TRAINED`."""
    a, s = np.asarray(arms, dtype=object).ravel(), np.asarray(studies, dtype=object).ravel()
    keep = np.ones(a.shape, dtype=bool)
    if not never_trained or a.shape != s.shape:  # unequal lengths: arm_seed_noise says so
        return keep, []
    left = []
    for study, arm in sorted({(str(x), str(y)) for x, y in zip(s, a)}):
        untrained = never_trained.get(study) or {}
        broken = {x: untrained[x] for x in dict.fromkeys((arm, reference_arm)) if untrained.get(x)}
        if not broken:
            continue
        keep &= ~((s == study) & (a == arm))
        why = "; ".join((control_never_trained_why if x == reference_arm and x != arm else never_trained_why)(x, r)
                        for x, r in broken.items())
        left.append({"study": study, "arm": arm, "why": f"{why}: {NEVER_TRAINED}",
                     "runs": [{"arm": x, "seed": r.get("seed"), "cause": r.get("cause")}
                              for x, rs in broken.items() for r in rs]})
    return keep, left


def study_never_trained(study_dirs, *, _analyses=None) -> dict[str, dict[str, list[dict]]]:
    """study -> arm -> its ``never_trained`` records, the arms with a run that never trained of each study folder
    (its ``analysis.json`` ``arms[ARM].never_trained``: ``[{"seed", "cause", "why", "updates", ...}]``,
    :func:`gradprobe.study.never_trained_arms.untrained_arms`), the study named as calib's rows name it
    (``FOLDER@SHA12``, :func:`calib.domain.study_identity`); a study with none is left out of the mapping.

    Parameters
    ----------
    study_dirs : sequence of path
        Study folders (those the calibration rows were built from).
    _analyses : dict, optional
        Internal: folder (``pathlib.Path``) -> its ``analysis.json`` document as the caller already read it
        (``calib report``: :func:`calib.dataset.build_rows_many`), so it is not read again; a folder it lacks is read.

    Raises
    ------
    calib.integrity.StudyFormatError
        A folder's ``study.json`` or ``analysis.json`` is missing, not JSON, has no ``plan_sha256`` or no ``arms``
        object (the file and the fix are named); or an arm's ``never_trained`` is not absent, null or a list of
        records (:data:`NEVER_TRAINED_RECORD`; :func:`check_never_trained`): ``FILE field arms.ARM.never_trained[I]
        is VALUE, not ...; re-analyse the study with `gradprobe study ... --analyze-only --overwrite-analysis ...```
        (:func:`calib.integrity.rebuild_analysis`).
    """
    out = {}
    for d in map(Path, study_dirs):
        key = _study_key(d)
        doc = (_analyses[d] if _analyses and d in _analyses else
               read_study_json(d / ANALYSIS_JSON, "run `gradprobe study` (it writes analysis.json at the end)",
                               error=StudyFormatError))
        arms = doc.get("arms") if isinstance(doc, dict) else None
        if not isinstance(arms, dict):
            raise StudyFormatError(f"{d / ANALYSIS_JSON} has no 'arms' object; re-run `gradprobe study --analyze-only`")
        for arm, entry in arms.items():
            if isinstance(entry, dict):
                check_never_trained(d, arm, entry.get("never_trained"))
        if (untrained := untrained_arms(arms)):
            out[key] = untrained
    return out


#: What an arm's ``analysis.json`` ``never_trained`` holds (:func:`check_never_trained`; the analysis writes it:
#: :func:`gradprobe.study.never_trained_arms.never_trained_runs`)
NEVER_TRAINED_RECORD = ('a record of a run that never trained (an object with "seed": a whole number >= 0, "cause": '
                        'text, and, when present, "why": text, "updates": a number >= 0)')
NEVER_TRAINED_LIST = f"absent, null or a list (each item {NEVER_TRAINED_RECORD})"


def check_never_trained(study_dir: Path, arm: str, value) -> None:
    """Refuse ``study_dir/analysis.json``'s ``arms[arm].never_trained`` (``value``) unless it is absent or null (None),
    ``[]`` (every run trained) or a list of records :data:`NEVER_TRAINED_RECORD` describes, as the analysis writes
    them; other keys of a record (``max_abs_reward``, ``grad_norm_max``) are not read.

    Raises
    ------
    calib.integrity.StudyFormatError
        One line (:func:`calib.integrity.analysis_error`): the file, the field (``arms.ARM.never_trained`` for a value
        that is no list, ``arms.ARM.never_trained[I]`` for a record that is no object or lacks ``seed`` or ``cause``,
        ``arms.ARM.never_trained[I].KEY`` for a key of the wrong kind), the value as the file holds it, what is
        accepted, and the fix (:func:`_never_trained_fix`: re-analyse a study that keeps its ``runs/``, which reads
        the records from the run folders again; else restore ``analysis.json`` from a copy).
    """
    field, fix = f"arms.{arm}.never_trained", _never_trained_fix(study_dir)
    if value is None:
        return
    if not isinstance(value, list):
        raise analysis_error(study_dir, field, value, NEVER_TRAINED_LIST, fix=fix)
    for i, rec in enumerate(value):
        missing = [k for k in ("seed", "cause") if k not in rec] if isinstance(rec, dict) else []
        if not isinstance(rec, dict) or missing:
            lacks = "".join(f"{', no' if j else ': it has no'} \"{k}\"" for j, k in enumerate(missing))
            raise analysis_error(study_dir, f"{field}[{i}]", rec, NEVER_TRAINED_RECORD + lacks, fix=fix)
        rules = {"seed": (is_json_number(rec["seed"], integer=True) and rec["seed"] >= 0, "a whole number >= 0"),
                 "cause": (isinstance(rec["cause"], str), "text"),
                 "why": (isinstance(rec.get("why", ""), str), "text"),
                 "updates": (is_json_number(rec.get("updates", 0), finite=True) and rec.get("updates", 0) >= 0,
                             "a number >= 0")}
        for key, (ok, what) in rules.items():
            if not ok:
                raise analysis_error(study_dir, f"{field}[{i}].{key}", rec[key], f"{what} ({NEVER_TRAINED_RECORD})",
                                     number=key in ("seed", "updates"), fix=fix)


def _never_trained_fix(study_dir: Path) -> str:
    """How to get a damaged ``never_trained`` of ``study_dir/analysis.json`` back: the analysis reads the records from
    the run folders (``runs/ARM/seedS/metrics.jsonl``: :func:`gradprobe.study.never_trained_arms.never_trained_runs`),
    so re-analysing a study without ``runs/`` (a shipped study keeps only its tables) would write ``[]`` for every
    arm and put an arm that never trained back among the findings; there, only a copy of the file has them."""
    study_dir = Path(study_dir)
    if keeps_runs(study_dir):
        return (f"re-analyse the study with `gradprobe study {shell_word(study_dir / 'plan.toml')} --analyze-only "
                f"--overwrite-analysis --out {shell_word(study_dir)}` (it reads these records from the run folders "
                "again)")
    return (f"restore {study_dir}/{ANALYSIS_JSON} from a copy of the study ({study_dir} has no runs/: a re-analysis "
            "would read no run folder and record no run that never trained)")


def arm_level_errors(predicted, realized, arms, studies, *, never_trained=None, reference_arm: str = "grpo",
                     **settings) -> dict:
    """A forecaster's mean absolute error on arm means, beside the arm means' own noise floor.

    Parameters
    ----------
    predicted, realized : array-like of float, shape (n_runs,)
        Held-out forecast and realized gain vs grpo per run (points); runs where either is not finite
        are left out.
    arms, studies : array-like of str, shape (n_runs,)
    never_trained, reference_arm
        As :func:`seed_noise_floor`: an arm with a run that never trained (or of a study whose reference arm has one)
        is left out of both the MAE and the floor.
    **settings
        As :func:`seed_noise_floor`.

    Returns
    -------
    dict
        ``mae`` {estimate, interval, reason} over arms (each arm once: |mean forecast - mean realized|),
        ``floor`` {estimate, interval, reason} over the arms with 2 or more seeds (floor_a / sqrt(n_a)),
        ``arms``, ``floor_arms``, ``method``; ``never_trained`` as :func:`seed_noise_floor` (only when an arm was
        left out).

    Raises
    ------
    ValueError
        Lengths differ.
    """
    p, y = np.asarray(predicted, np.float64).ravel(), np.asarray(realized, np.float64).ravel()
    if p.shape != y.shape:
        raise ValueError(f"predicted ({p.size}) and realized ({y.size}) must have one entry per run")
    keep, left = _never_trained_left_out(arms, studies, never_trained, reference_arm)
    ok = np.isfinite(p) & np.isfinite(y) & (keep if keep.shape == p.shape else True)
    a, s = np.asarray(arms, dtype=object).ravel()[ok], np.asarray(studies, dtype=object).ravel()[ok]
    d = pd.DataFrame({"study": s, "arm": a, "p": p[ok], "y": y[ok]})
    means = d.groupby(["study", "arm"], sort=True).agg(p=("p", "mean"), y=("y", "mean")).reset_index()
    noise = arm_seed_noise(y[ok], a, s).set_index(["study", "arm"])
    err = cluster_mean_interval((means["p"] - means["y"]).abs().to_numpy(), means["study"].to_numpy(), **settings)
    fl = noise[np.isfinite(noise["floor"])]
    floor = cluster_mean_interval((fl["floor"] / np.sqrt(fl["seeds"])).to_numpy(),
                                  fl.index.get_level_values("study").to_numpy(), **settings)
    floor = _pack(floor) if len(fl) else {**_pack(floor), "reason": NO_SEEDS}
    return {"mae": _pack(err), "floor": floor, "arms": int(len(means)), "floor_arms": int(len(fl)),
            "method": METHOD, **_left_record(left)}


def _pack(c) -> dict:
    return {"estimate": c.estimate, "interval": None if c.interval is None else list(c.interval), "reason": c.reason}


HELDOUT_METHOD = ("floor_a(N') = sqrt(2/pi) sqrt(sa2 + se2 / N'), sa2 and se2 the seed and seed x item variance "
                  "components of the arm's per-item paired differences from grpo at the matched token budget "
                  "(gradprobe.study.power.variance_components); run level: mean of floor_a over runs; intervals: "
                  "study-cluster bootstrap (calib.bootstrap)")


def heldout_floor(study_dirs, *, multiples=(1.0, 4.0, math.inf), keep=None, reference_arm: str = "grpo",
                  **settings) -> dict:
    """The run-level seed-noise floor on N' = multiple x N held-out items (module docstring).

    Parameters
    ----------
    study_dirs : list of path
        Study folders with per-item eval results (``eval_items.jsonl.gz``). A study that cannot be read (a
        damaged per-item file too), or has no per-item results, an arm with fewer than 2 seeds paired with
        ``reference_arm``, and an arm with a run that never trained (every arm of a study whose ``reference_arm``
        has one; :func:`gradprobe.study.power.paired_item_differences`: the arm, its seeds and the cause) are listed
        in ``skipped`` with the reason; the others are still split.
    multiples : sequence of float
        Held-out sizes as multiples of each study's own N (``math.inf``: training randomness alone); each > 0.
    keep : set of (str, str), optional
        (study, arm) pairs to include, the study named as calib's rows name it (``FOLDER@SHA12``,
        :func:`calib.domain.study_identity`; e.g. the report's compared runs); default every arm.
    reference_arm : str
        The arm gains are paired with, seed by seed (calib's targets: :mod:`calib.dataset`).
    **settings
        ``resamples``, ``level``, ``seed``, ``min_studies`` of :func:`calib.bootstrap.cluster_mean_interval`.

    Returns
    -------
    dict
        ``floors``: one ``{"multiple", "estimate", "interval", "reason"}`` per multiple (points); ``arms``: per
        arm ``study`` (``FOLDER@SHA12``), ``arm``, ``seeds``, ``items``, ``seed_var`` (sa2) and
        ``interaction_var`` (se2, points^2), ``heldout_share`` (se2 / N over sa2 + se2 / N: the share of the
        seeds' variance that is held-out error) and ``floor`` (multiple -> points); ``runs``,
        ``heldout_share`` (mean over runs), ``skipped`` (["study/arm: why" or "study: why"]; an arm that never
        trained: ``"study/arm: left out, ARM never trained (seed S: WHY (N updates)): a run that never trained
        ... "``), ``method``.

    Raises
    ------
    ValueError
        A multiple that is not > 0 (named).
    """
    multiples = _checked_multiples(multiples)
    arms, skipped = [], []
    for d in study_dirs:
        try:
            key = _study_key(Path(d))
            pairs = paired_item_differences(d, control=reference_arm)
            no_items = "" if _has_item_files(Path(d)) else NO_ITEM_FILES
        except (AnalysisError, StudyFormatError) as e:
            skipped.append(f"{Path(d).resolve().name}: {str(e).splitlines()[0]}")
            continue
        except (OSError, EOFError, ValueError, KeyError, TypeError, zlib.error) as e:  # damaged per-item results
            skipped.append(f"{Path(d).resolve().name}: its per-item results cannot be read ({type(e).__name__}: "
                           f"{(str(e).splitlines() or [''])[0]}); restore eval_items.jsonl.gz from the study")
            continue
        for arm, pc in pairs.items():
            if keep is not None and (key, arm) not in keep:
                continue
            if pc is not None and pc.get("left_out"):
                skipped.append(f"{key}/{arm}: left out, {pc['left_out']}: {NEVER_TRAINED}")
                continue
            if pc is None or pc["D"] is None:
                skipped.append(f"{key}/{arm}: " + ("fewer than 2 seeds paired with " + reference_arm if pc is None
                                                    else "no per-item results at the evals read" + no_items))
                continue
            arms.append(_split(key, arm, pc, multiples))
    return _pooled_floors(arms, skipped, multiples, settings)


def pool_heldout_floors(results, *, multiples=(1.0, 4.0, math.inf), **settings) -> dict:
    """:func:`heldout_floor` of several studies together, from each study's own :func:`heldout_floor` result.

    No per-item file is read again: the arms' two-way splits are pooled as they stand and the floors' study-cluster
    intervals recomputed over all of them, so the result equals :func:`heldout_floor` over the studies' folders in
    the same order with the same ``keep`` (what a benchmark that prints each study and then the pool needs).

    Parameters
    ----------
    results : sequence of dict
        :func:`heldout_floor` results, one per study (or group of studies), each computed with every multiple of
        ``multiples``.
    multiples, **settings
        As :func:`heldout_floor`.

    Raises
    ------
    ValueError
        A multiple that is not > 0, or that a result was not computed with (named).
    """
    multiples = _checked_multiples(multiples)
    arms = [a for r in results for a in r["arms"]]
    missing = sorted({heldout_label(m) for a in arms for m in multiples if m not in a["floor"]})
    if missing:
        raise ValueError(f"the results hold no floor on {', '.join(missing)} held-out items; compute each study's "
                         f"heldout_floor with multiples={list(multiples)}")
    return _pooled_floors(arms, [w for r in results for w in r["skipped"]], multiples, settings)


def _checked_multiples(multiples) -> tuple:
    bad = [m for m in multiples if not (m > 0)]
    if bad or not len(multiples):
        raise ValueError(f"multiples must be held-out sizes as multiples of each study's N, each > 0 "
                         f"(e.g. [1, 4, math.inf]); got {list(multiples)}")
    return tuple(multiples)


def _pooled_floors(arms: list, skipped: list, multiples, settings: dict) -> dict:
    """:func:`heldout_floor`'s result from its arms' splits: the floors' means over runs with their intervals."""
    seeds = np.array([a["seeds"] for a in arms], dtype=int)
    clusters = np.repeat(np.array([a["study"] for a in arms], dtype=object), seeds)
    floors = []
    for m in multiples:
        ci = cluster_mean_interval(np.repeat(np.array([a["floor"][m] for a in arms], np.float64), seeds), clusters,
                                   **settings)
        floors.append({"multiple": m, **_pack(ci), **({"reason": NO_SEEDS} if not arms else {})})
    shares = [(a["heldout_share"], a["seeds"]) for a in arms if math.isfinite(a["heldout_share"])]
    share = sum(x * n for x, n in shares) / sum(n for _, n in shares) if shares else math.nan
    return {"floors": floors, "arms": arms, "runs": int(seeds.sum()), "heldout_share": share, "skipped": skipped,
            "method": HELDOUT_METHOD}


def _has_item_files(study_dir: Path) -> bool:
    """Whether a study folder holds per-item eval results: ``eval_items.jsonl.gz``, or a run's own
    ``runs/ARM/seedS/eval_items.jsonl`` (where :func:`gradprobe.study.reading.load_eval_items` reads them)."""
    return (study_dir / EVAL_ITEMS_GZ).exists() or any(study_dir.glob(f"runs/*/seed*/{EVAL_ITEMS_JSONL}"))


def heldout_label(multiple) -> str:
    """A held-out size as :func:`heldout_floor` names it: ``N`` (the study's own), ``4N``, ``infinitely many``
    (``math.inf``, or ``"inf"`` as ``metrics.json`` stores it)."""
    m = float(multiple)
    return "N" if m == 1 else ("infinitely many" if math.isinf(m) else f"{m:g}N")


def _study_key(d: Path) -> str:
    """``FOLDER@SHA12`` as calib's rows name the study (:func:`calib.domain.study_identity`)."""
    doc = read_study_json(d / STUDY_JSON, "`gradprobe study` writes it", error=StudyFormatError)
    sha = doc.get("plan_sha256") if isinstance(doc, dict) else None
    if not isinstance(sha, str) or not sha:
        raise StudyFormatError(f"{d / STUDY_JSON} has no plan_sha256; re-run the study with this gradprobe")
    return study_identity(d, sha)["key"]


def _split(key: str, arm: str, pc: dict, multiples) -> dict:
    """One arm's two-way split (:func:`heldout_floor`'s ``arms`` entry) from its paired differences."""
    c, n_items = variance_components(pc["D"]), pc["items"]
    per_seed = c["seed"] + c["interaction"] / n_items
    return {"study": key, "arm": arm, "seeds": int(len(pc["diffs"])), "items": n_items, "seed_var": c["seed"],
            "interaction_var": c["interaction"],
            "heldout_share": c["interaction"] / n_items / per_seed if per_seed > 0 else math.nan,
            "floor": {m: math.sqrt(2.0 / math.pi) * math.sqrt(c["seed"] + c["interaction"] / (m * n_items))
                      for m in multiples}}
