"""The accuracy values of a reference curve's evals, checked and put on one scale (accuracy points).

Every source of a curve (:mod:`gradprobe.forecast.curve_sources`: a study, ``metrics.jsonl``, a CSV, a TRL
``trainer_state.json``) reads its evals' accuracies and then passes them here, with where each sits in its file:

- :func:`to_points` reads fractions or points (``scale="auto"`` detects which), and refuses values that mix the
  two, a negative value and a non-finite one, naming the values' places; :func:`read_points`, what the file readers
  call, also refuses under ``auto`` values whose scale cannot be told (above 1, at most :data:`AMBIGUOUS_MAX`);
- :func:`one_value_per_eval` keeps each eval (seed, update) once: an exact repeat is read once and named, one
  eval with two different values is refused naming both places.

The note :func:`to_points` returns carries :data:`SCALE_NOTE_MARK` (``"runs.csv accuracy: accuracy read as fractions
in [0, 1] ..."``); readers find it with :func:`is_scale_note` (the forecast section and its CHECK THE CURVE note).
"""

from __future__ import annotations

import numpy as np

from .csv_cells import SKIPPED_MARK
from .curve_fit import CurveError

__all__ = ["to_points", "read_points", "one_value_per_eval", "SCALE_NOTE_MARK", "is_scale_note", "AMBIGUOUS_MAX"]

#: The words of every note :func:`to_points` returns, after the source's name (``"runs.csv accuracy: accuracy read as
#: fractions in [0, 1] (range 0.676-0.803) and converted to points; ..."``): the note saying how a curve's accuracies
#: were read. The notes are built from it and found by it (:func:`is_scale_note`); the notes saved in curve files
#: (``ReferenceCurve.save``, ``gradprobe/data/curves/*.json``) carry the same words, so keep them when rewording.
SCALE_NOTE_MARK = "accuracy read as"

_SHOWN = 5  # places named in a note or an error; the rest are counted
#: Under ``scale="auto"``, :func:`read_points` refuses values read as points (above 1, not mixing scales) whose largest
#: is at most this, whatever their smallest (:func:`read_points` says why).
AMBIGUOUS_MAX = 5.0


def to_points(values: np.ndarray, scale: str, what: str, where=None, *, updates=None, seeds=None,
              given=None) -> tuple[np.ndarray, str]:
    """Accuracy values -> accuracy points, with a note saying how they were read.

    Parameters
    ----------
    values : ndarray, shape (points,)
    scale : {"auto", "fraction", "points"}
        ``auto``: fractions when every value lies in [0, 1], else points when in [0, 100].
    what : str
        The source, named in the note and the errors.
    where : sequence of str, shape (points,), optional
        Where each value sits in its source (``"line 4"`` of a CSV, ``"metrics.jsonl:7"``), to name the values
        a refusal is about; default ``"value #i"``.
    updates, seeds : sequence, shape (points,), optional
        Each value's update and seed label: a value's neighbours are the evals of its seed just before and
        after it (default: the values in the order given, one seed).
    given : array_like of bool, shape (points,), optional
        The values that are no evals of the source (a TRL log's ``initial_accuracy``, given as its update-0
        point): they are read and checked as the others, but the note's range is the source's own evals', with
        ``+ the given initial accuracy X`` (default: none).

    Raises
    ------
    CurveError
        An unknown scale, a non-finite or negative value, values that are neither fractions nor points; and
        under ``scale="auto"`` values that mix scales, in either direction:

        - at least half the values in [0, 1] (fractions) and others above 1: read as points, the fractions
          would sit near 0 points (a typo like 1.65 for 0.65 turns a whole fraction curve into points); a curve
          truly in points that stays under 1 point for most evals is too flat to forecast from anyway;
        - a curve in points with a value v in (0, 1] that 100 v fits and v does not, judged against the evals
          around it (:func:`_fraction_evals` gives the rules): between two evals of its seed above 1 point, 100 v
          nearer their mean (one fraction logged among points, 0.68 between 64 and 71); a seed's first or last
          eval, as points a jump to the eval beside it over 3 x the seed's largest other step, as 100 v within a
          quarter of that jump (0.676 then 71, 73.7, ...; a hard task's steep start, 0.8 then 45, 55, 60, is read
          as points); a seed with at most one eval above 1 point beside seeds in points, judged so against their
          evals at its update (a whole run logged as fractions). A dip between evals under 1 point is not judged,
          nor a value that fits as points (1.5, 0.5, 2.0).

        The message names the first five such values (``where``) and the fix (correct them, or pass
        ``accuracy_scale='points'`` to read the values as given).

    A value written so close to 0 that a float holds it as 0 (``1e-400``, ``-1e-400``, ``-0``: every reader parses
    it so) is the accuracy 0, read as +0.0 whatever its sign: it is 0 to float precision, not a negative accuracy.
    """
    v = np.asarray(values, dtype=np.float64) + 0.0  # -0.0 (a cell "-0", "-1e-400") read as 0.0, as "1e-400" is
    if scale not in ("auto", "fraction", "points"):
        raise CurveError(f"accuracy_scale {scale!r} must be 'auto', 'fraction' (values in [0, 1]) or 'points' "
                         "(values in [0, 100])")
    if v.size and not np.all(np.isfinite(v)):
        raise CurveError(f"{what}: {int((~np.isfinite(v)).sum())} accuracy value(s) are not finite; drop those evals")
    if (v < 0).any():
        raise CurveError(f"{what}: an accuracy is a share of the held-out set, >= 0; got "
                         f"{_named_values(v, np.flatnonzero(v < 0), where)}; fix or delete those evals")
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
    if scale == "auto":
        if hi <= 1.0:
            return 100.0 * v, (f"{what}: {SCALE_NOTE_MARK} fractions in [0, 1] (range {_range(v, given)}) and "
                               "converted to points; if they already are points, pass accuracy_scale='points' "
                               "(--reference-curve-scale points)")
        _refuse_mixed_scales(v, what, where, updates, seeds)
        if hi <= 100.0:
            return v, f"{what}: {SCALE_NOTE_MARK} points in [0, 100] (range {_range(v, given)})"
        raise CurveError(f"{what}: accuracy values range {lo:.4g}-{hi:.4g}, neither fractions in [0, 1] nor points in "
                         "[0, 100]; name the right column or metric")
    out = 100.0 * v if scale == "fraction" else v
    if out.size and (out.min() < 0 or out.max() > 100):
        raise CurveError(f"{what}: accuracy_scale={scale!r} gives values {out.min():.4g}-{out.max():.4g} outside "
                         "[0, 100] points")
    read_as = "fractions" if scale == "fraction" else "points"
    return out, f"{what}: {SCALE_NOTE_MARK} {read_as} (accuracy_scale={scale!r})"


def read_points(values: np.ndarray, scale: str, what: str, where=None, **kw) -> tuple[np.ndarray, str]:
    """:func:`to_points` (its arguments, ``updates``, ``seeds`` and ``given`` among ``kw``) as the file readers read
    a curve's values (a CSV, a ``metrics.jsonl``, a TRL trainer state: :mod:`.curve_sources`), which under
    ``scale="auto"`` also refuses values read as points whose largest lies in (1, :data:`AMBIGUOUS_MAX`].

    The rule, and why: such values are no fractions, and whether they are accuracy points cannot be told from them.
    An accuracy that never passes 5 points is as plausible as a metric on another small scale, read by mistake from
    a log that holds many (``--reference-curve-metric eval_reward`` summing three 0/1 rewards, 1.2-2.31; a sum of
    the few reward functions a GRPO run logs; a 1-5 judge score; a loss), and read as points that metric gives a
    confident verdict on a curve that rises a point or two. The two mistakes cost unequally: the refusal costs one
    option (``accuracy_scale='points'``, ``--reference-curve-scale points``), a wrong scale a wrong verdict with
    only a note. Why 5, not higher: a hard task's curve in points rising from under 1 to a few points (0.4 to 6) is
    read as points, as it always was, and a metric on a small scale rarely passes 5. Values all in [0, 1] stay
    fractions (a curve truly under 1 point is too flat to forecast from), and ``fraction`` and ``points`` read the
    values as they say. The :class:`~.curves.ReferenceCurve` constructor's ``auto`` refuses them too (an array
    ``df["reward"]`` passed as accuracy is the same mistake); :func:`to_points` itself reads them as points.

    Raises
    ------
    CurveError
        What :func:`to_points` raises; and the refusal above, naming ``what``, the range, where the largest sits
        (``where``) and the fix: the scale stated, or the key or column that holds the held-out accuracy.
    """
    out, note = to_points(values, scale, what, where, **kw)
    v = np.asarray(values, dtype=np.float64)
    if scale == "auto" and v.size and 1.0 < float(v.max()) <= AMBIGUOUS_MAX:
        at = f" (the largest at {where[int(np.argmax(v))]})" if where is not None else ""
        raise CurveError(f"{what}: accuracy values range {float(v.min()):.4g}-{float(v.max()):.4g}{at}, above 1 (so no "
                         f"fractions) but no higher than {AMBIGUOUS_MAX:g}, so their scale cannot be told: accuracy "
                         f"points of a curve that never passes {AMBIGUOUS_MAX:g}%, or another metric on a small scale "
                         "(a sum of several 0/1 rewards, a 1-5 score, a loss), which read as points would give a "
                         "wrong verdict; if they are accuracy points, pass accuracy_scale='points' (on the command "
                         "line, --reference-curve-scale points); if not, read the key or column that holds the "
                         "held-out accuracy")
    return out, note


def is_scale_note(note: str) -> bool:
    """Whether ``note`` (one of a curve's ``notes``) is the note of :func:`to_points` saying how the accuracies were
    read (fractions or points): it carries :data:`SCALE_NOTE_MARK`. False for a non-string (a malformed saved note).
    """
    return isinstance(note, str) and SCALE_NOTE_MARK in note


def _range(v: np.ndarray, given) -> str:
    """``"0.7-0.84"``: the range of the values of ``v`` (shape (points,)) that are evals of the source, then
    ``", + the given initial accuracy 0.6"`` for a value ``given`` marks (:func:`to_points`)."""
    mask = np.zeros(v.size, dtype=bool) if given is None else np.asarray(given, dtype=bool)
    own = v[~mask] if (~mask).any() else v  # no value (0-0, as before) or the value given alone: all of them
    text = f"{float(own.min()):.4g}-{float(own.max()):.4g}" if own.size else "0-0"
    return text + (f", + the given initial accuracy {float(v[mask][0]):g}" if mask.any() else "")


def _named_values(v: np.ndarray, idx: np.ndarray, where) -> str:
    """``"line 4 (1.65), line 9 (2) and 3 more"``: the first five of ``v[idx]`` with where they sit."""
    named = ", ".join(f"{where[i] if where is not None else f'value #{i}'} ({v[i]:g})" for i in idx[:5])
    return named + (f" and {idx.size - 5} more" if idx.size > 5 else "")


def _refuse_mixed_scales(v: np.ndarray, what: str, where, updates, seeds) -> None:
    """:func:`to_points`' refusal of values that mix fractions and points (its docstring gives both rules)."""
    small = (v >= 0) & (v <= 1.0)
    fix = ("fix those evals, or pass accuracy_scale='points' if the values are points as they stand (on the command "
           "line, --reference-curve-scale points)")
    if v.size and small.mean() >= 0.5:
        raise CurveError(f"{what} mixes scales: {int(small.sum())} of {v.size} values are fractions in [0, 1], but "
                         f"{_named_values(v, np.flatnonzero(v > 1.0), where)} hold(s) values above 1 (read as "
                         "points, every fraction would be under 1 point, and a curve in points that stays under 1 "
                         f"point at most evals is too flat to forecast from); {fix}")
    parts = _fraction_evals(v, where, updates, seeds)
    if parts:
        raise CurveError(f"{what} mixes scales: the values are points, but {'; and '.join(parts)}; {fix}")


#: The endpoint and whole-seed rules of :func:`_fraction_evals`: as points, the value must lie more than ``_JUMP`` x
#: the spread of the evals around it from the eval it is compared with, and as a fraction (100 v) within ``1 / _NEAR``
#: of that distance, to be read as a fraction logged among points.
_JUMP, _NEAR = 3.0, 4.0


def _fraction_evals(v: np.ndarray, where, updates, seeds) -> list[str]:
    """The values in (0, 1] that :func:`to_points` reads as fractions logged among points (``v``: shape (points,),
    mostly points), as the clauses of its refusal (empty: none), by three rules, each judging a value against the
    evals around it (``updates``, ``seeds``: as :func:`to_points` takes them):

    - between two evals of its seed above 1 point (the evals just before and after it by update): ``100 v`` nearer
      their mean m than ``v``, ``|100 v - m| < |v - m|`` (0.68 between 64 and 71);
    - a seed's first or last eval, beside an eval n above 1 point, in a seed with two other evals or more above 1
      point, whose largest step between consecutive ones is S: as points it would step ``|v - n| > 3 S`` (a jump out
      of line with the seed's other steps), and ``|100 v - n| <= |v - n| / 4`` (0.676 then 71, 73.7, ... stepping
      under 3). A steep real start is read as points: 0.8 then 45, 55, 60 steps 44.2 where the seed steps 10 (not
      over 3 x 10), and 0.8 then 45, 46, 47 is no fraction either (80 lies 35 from 45, over a quarter of 44.2); a
      start that 100 x matches (0.45 then 45, 46, 47) cannot be told from a fraction and is refused;
    - in a seed with fewer than two evals above 1 point (a whole run logged as fractions beside runs in points):
      the other seeds' evals at its update above 1 point, median m and range r: ``|v - m| > 3 r`` and
      ``|100 v - m| <= |v - m| / 4``.

    A value beside an eval under 1 point (a dip, a collapse, a start 0, 0.5 then 60) is not judged by its seed,
    nor is a value that fits as points (1.5, 0.5, 2.0).
    """
    ups = np.arange(v.size, dtype=np.float64) if updates is None else np.asarray(updates, dtype=np.float64)
    labels = [0] * v.size if seeds is None else list(np.asarray(seeds, dtype=object).ravel())
    runs: dict = {}
    at: dict = {}  # update -> [(seed label, value)] of the evals above 1 point
    for i, label in enumerate(labels):
        runs.setdefault(label, []).append(i)
        if v[i] > 1.0:
            at.setdefault(float(ups[i]), []).append((label, v[i]))
    found: dict[str, list] = {"between": [], "end": [], "seed": []}
    for label, same in runs.items():
        same.sort(key=lambda j: (ups[j], j))
        big = [j for j in same if v[j] > 1.0]
        for k, i in enumerate(same):
            if not 0.0 < v[i] <= 1.0:
                continue
            if 0 < k < len(same) - 1:
                before, after = v[same[k - 1]], v[same[k + 1]]
                m = (before + after) / 2.0
                if before > 1.0 and after > 1.0 and abs(100.0 * v[i] - m) < abs(v[i] - m):
                    found["between"].append((i, None))
            elif len(big) >= 2:  # a first or last eval (k == 0 or the last), its seed's other evals mostly points
                n, step = v[same[1] if k == 0 else same[-2]], float(np.abs(np.diff(v[big])).max())
                if n > 1.0 and _out_of_line(v[i], n, step):
                    found["end"].append((i, (n, step)))
            if len(big) < 2:
                others = [x for other, x in at.get(float(ups[i]), []) if other != label]
                if others and _out_of_line(v[i], float(np.median(others)), float(np.ptp(others))):
                    found["seed"].append((i, (float(np.median(others)), label)))
    return _fraction_clauses(v, where, found)


def _out_of_line(x: float, n: float, spread: float) -> bool:
    """Whether ``x`` (in (0, 1]) read as points lies over ``_JUMP`` x ``spread`` from ``n`` (> 1 point), and
    ``100 x`` within ``1 / _NEAR`` of that distance from it (:func:`_fraction_evals`)."""
    jump = abs(x - n)
    return jump > _JUMP * spread and abs(100.0 * x - n) <= jump / _NEAR


def _fraction_clauses(v: np.ndarray, where, found: dict[str, list]) -> list[str]:
    """The clauses of :func:`_fraction_evals`' refusal, one per rule that found values (``found``: rule ->
    ``[(index, evidence)]``), each naming the values (:func:`_named_values`) and the first one's evidence."""
    parts = []
    if found["between"]:
        idx = np.array([i for i, _ in found["between"]])
        parts.append(f"{_named_values(v, idx, where)} read(s) as fractions: 100 x the value is closer to the evals "
                     "beside it than the value itself")
    if found["end"]:
        idx = np.array([i for i, _ in found["end"]])
        (n, step), x = found["end"][0][1], v[idx[0]]
        parts.append(f"{_named_values(v, idx, where)}, a seed's first or last eval, read(s) as fractions: as points "
                     f"{x:g} would step {abs(n - x):.3g} to the eval beside it ({n:g}), where the seed's other evals "
                     f"step at most {step:.3g}, and as {100 * x:.4g} it lies {abs(100 * x - n):.3g} from it; write "
                     "such an eval in points (100 x the value)")
    if found["seed"]:
        idx = np.array([i for i, _ in found["seed"]])
        (m, label), x = found["seed"][0][1], v[idx[0]]
        parts.append(f"{_named_values(v, idx, where)}, of a seed with no more than one eval above 1 point (seed "
                     f"{label}), read(s) as fractions: as {100 * x:.4g} it lies near the other seeds' evals at its "
                     f"update (median {m:.4g}), and as {x:g} far below them (a run logged as fractions beside runs in "
                     "points); write its evals in points (100 x the value)")
    return parts


def one_value_per_eval(updates, values, seeds, where, source: str,
                       hint: str = "fix or delete one of each pair") -> tuple[np.ndarray, str | None]:
    """Each eval (seed, update) once: the mask of the evals to keep and a note naming exact repeats (None: none).

    An eval recorded twice with the same value (a line copied, a log replayed) is read once and named; with
    different values, which is right cannot be told, and fitted both would pull the curve between them.

    Parameters
    ----------
    updates, values : sequence of float, shape (evals,)
    seeds : sequence, shape (evals,), or None (one seed)
    where : sequence of str, shape (evals,)
        Where each eval sits (``"line 4"``, ``"PATH:7"``), named in the note and the error.
    source : str
        The file(s), named in the note and the error.
    hint : str
        The fix the error ends with (a TRL log names the likely cause).

    Raises
    ------
    CurveError
        One eval with two different values, naming both places and values (the first five pairs).
    """
    values = np.asarray(values, dtype=np.float64)  # by position: a pandas Series would be read by its labels
    updates = np.asarray(updates, dtype=np.float64)
    seen, keep, copies, conflicts = {}, np.ones(len(values), dtype=bool), [], []
    for i, key in enumerate(zip(seeds if seeds is not None else [None] * len(values), updates.tolist())):
        j = seen.setdefault(key, i)
        if j == i:
            continue
        if float(values[i]) == float(values[j]):
            keep[i] = False
            copies.append(where[i])
        else:
            conflicts.append(f"{where[j]} ({float(values[j]):g}) and {where[i]} ({float(values[i]):g})")
    if conflicts:
        more = f" and {len(conflicts) - _SHOWN} more" if len(conflicts) > _SHOWN else ""
        raise CurveError(f"{source} records the same eval (seed, update) twice with different accuracies: "
                         f"{'; '.join(conflicts[:_SHOWN])}{more}; which is right cannot be told: {hint}")
    if not copies:
        return keep, None
    more = f" and {len(copies) - _SHOWN} more" if len(copies) > _SHOWN else ""
    return keep, (f"{len(copies)} eval(s) of {source}{SKIPPED_MARK}repeating an earlier eval exactly "
                  f"({', '.join(copies[:_SHOWN])}{more}): each eval is read once")
