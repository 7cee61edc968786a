"""Does the reference curve start where the probe's own measurement says the policy is?

The forecast reads every arm off grpo's curve, which starts at R0 (greedy held-out accuracy at update 0,
accuracy points). The probe measures the same policy's held-out accuracy itself (the held-out reference's
rollouts, sampled at the probe's temperature: ``reference.heldout_accuracy``). The two differ by design (greedy
decoding vs sampling), but not by much: on the 20 studies shipped in ``data/`` R0 minus the probe's sampled
held-out accuracy is 2.0 to 23.2 points (16 prompts x 16 held-out rollouts each), and 21.5 on the default job
(8 x 16). A far larger gap means the curve does not describe this policy: an accuracy logged on another scale
(fractions read as points), a curve of another task or model, or a broken batch (every completion truncated).
:func:`start_notes` says so in a note when

    |R0 - 100 h| > max(:data:`MIN_GAP_POINTS`, :data:`GAP_SE` x se),

h the probe's held-out accuracy (fraction, pooled over its batches' own held-out draws, G groups) and se its
prompt-clustered standard error in points: the larger of 100 sd(group means) / sqrt(G) (groups are the
resampling unit, as in every probe interval) and the bound 100 sqrt(p (1 - p) / G), p = (G h + 1) / (G + 2).
Group means in [0, 1] with mean h have a variance of at most h (1 - h) (every prompt all right or all wrong), and
the add-one smoothing of p (Laplace's rule of succession) keeps the bound above 0 when every held-out rollout
scored 0 or 1: a few held-out prompts cannot raise the alarm (one prompt never can: its bar is over 100 points;
with 4 prompts it is 56-75; at the default 8 it is 32-53). Without per-group accuracies (a probe written
before they were kept) se is the bound alone, with G the reference's ``prompts``. The forecast is still made:
the note names the gap and the likely causes.

The bound is the most the prompt-clustered standard error can be, so it is nearly always the larger (the groups'
own sd exceeds it only by the ddof-1 factor sqrt(G / (G - 1))): the bar is set by G, not by the measured spread.
That is deliberate, and at the default G = 8 it is what the measured spread would give honestly. The groups' own
se there is 9-16 points (median 12: the shipped 16-prompt held-out groups of ``data/*replicate_heldout4k``
subsampled to 8), and estimated from 8 groups it needs Student's t with 7 degrees of freedom, 4.53 of them for
the two-sided tail of 3 normal sds (0.27%): 41-72 points, about the bound's 53. Three of the measured se instead
(a bar of about 36) would flag curves that do describe the policy 9-22% of the time when greedy R0 exceeds the
sampled accuracy by 15-23 points, as on the shipped studies (simulated: 8 of those groups, 16 binomial rollouts
each). So 8 held-out prompts check the curve's start only to within about 53 points; the bar reaches
:data:`MIN_GAP_POINTS` at 25 held-out prompts (3 x 100 sqrt(0.25 / 25) = 30; ``--heldout-prompts``).

A curve without an eval at update 0 (TRL evaluates at step 0 only with ``eval_on_start=True``) has an
extrapolated R0, and every gain is read relative to it: a note says so, whatever the gap, and names the fixes
(the initial policy evaluated, or, for a TRL trainer state, its accuracy given: ``gradprobe probe
--initial-accuracy X``). A curve whose update-0 point is that given accuracy says so instead (its note with
:data:`~gradprobe.forecast.curve_sources.GIVEN_R0_MARK`), and a CHECK THE CURVE note names it as the first suspect.

A probe batch whose completions were all truncated (``batch.truncation_rate`` 1) scores cut-off text only; its
gradients say nothing about a reward, and a note says so.
"""

from __future__ import annotations

import math

import numpy as np

from ..outputs import is_json_number
from .accuracy_values import is_scale_note
from .curve_sources import GIVEN_R0_MARK

__all__ = ["CHECK_MARK", "MIN_GAP_POINTS", "GAP_SE", "heldout_measurement", "standard_error_bound", "start_notes"]

#: How the note on a curve that does not describe the policy starts (printed above the verdicts).
CHECK_MARK = "CHECK THE CURVE"
#: The smallest gap (accuracy points) between the curve's R0 and the probe's held-out accuracy that is noted:
#: above the largest gap on the shipped studies (21.8) with room for a model whose greedy and sampled accuracies
#: differ more.
MIN_GAP_POINTS = 30.0
#: A gap is noted only beyond this many prompt-clustered standard errors of the probe's held-out accuracy.
GAP_SE = 3.0


def standard_error_bound(acc_points: float, groups: int) -> float:
    """The largest prompt-clustered standard error (points) of a held-out accuracy over ``groups`` prompts:
    100 sqrt(p (1 - p) / groups), p = (groups h + 1) / (groups + 2), h = ``acc_points`` / 100 (module docstring).

    Raises ValueError: ``groups`` < 1."""
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    p = (groups * acc_points / 100.0 + 1.0) / (groups + 2.0)
    return 100.0 * math.sqrt(p * (1.0 - p) / groups)


def heldout_measurement(batches: list[dict]) -> tuple[float, float | None, int] | None:
    """The probe's held-out accuracy, pooled over its batches' own held-out draws.

    Parameters
    ----------
    batches : list of dict
        Per-batch probe results (``probe.json`` or its ``batches``); each may have ``reference`` with
        ``heldout_accuracy`` (fraction) and ``heldout_group_accuracy`` (fractions, shape (groups,)).
        A reference reused from an earlier batch (``reused``) is counted once. A value that is no finite number
        by :func:`gradprobe.outputs.is_json_number` (true/false, which would read as 1 and 0, text, null, NaN,
        +-inf, an integer too large for a float) is passed over as not measured; so is a ``prompts`` that is no
        integer.

    Returns
    -------
    (accuracy, se, groups) or None
        Accuracy in points, its prompt-clustered standard error in points (the larger of the groups' own and
        :func:`standard_error_bound`; the bound alone without per-group accuracies, None when the number of
        groups is unknown too), the number of held-out groups; None when no batch measured a finite one.
    """
    accs, groups, counted = [], [], 0
    for b in batches:
        ref = b.get("reference") or {}
        h = ref.get("heldout_accuracy")
        if ref.get("reused") or not is_json_number(h, finite=True):  # true/false are no accuracy (nor 1/0)
            continue
        accs.append(float(h))
        g = ref.get("heldout_group_accuracy")
        if isinstance(g, list):
            groups += [float(x) for x in g if is_json_number(x, finite=True)]
        elif is_json_number(ref.get("prompts"), finite=True, integer=True) and ref["prompts"] > 0:
            counted += ref["prompts"]
    if not accs:
        return None
    if groups:
        y = np.asarray(groups, dtype=np.float64)
        acc = 100.0 * float(y.mean())
        own = 100.0 * float(y.std(ddof=1)) / math.sqrt(y.size) if y.size >= 2 else 0.0
        return acc, max(own, standard_error_bound(acc, y.size)), int(y.size)
    acc = 100.0 * float(np.mean(accs))
    return (acc, standard_error_bound(acc, counted), counted) if counted else (acc, None, 0)


def start_notes(curve, batches: list[dict]) -> list[str]:
    """Notes when the curve's R0 and the probe's held-out accuracy disagree, and when a batch was all truncated.

    Parameters
    ----------
    curve : ReferenceCurve
        grpo's curve (its ``params["R0"]``, accuracy points).
    batches : list of dict
        The probe's per-batch results.

    Returns
    -------
    list of str
        Up to three notes, the CHECK THE CURVE one first (module docstring for the rule and its source); when R0 is
        the ``initial_accuracy`` given (the curve's note with :data:`GIVEN_R0_MARK`), that note where the one on an
        extrapolated R0 would be, and the CHECK THE CURVE note names the value given as its first suspect.
    """
    notes = []
    n = curve.points["update"].to_numpy()
    no_start = not (n == 0).any()
    notes += [x for x in curve.notes if GIVEN_R0_MARK in x]  # R0 is the value given: said, not extrapolated
    if no_start:
        notes.append(f"the reference curve {curve.source or '(unnamed)'} has no eval at update 0, so its R0 "
                     f"({float(curve.params['R0']):.1f} points) is the fit's extrapolation and every gain is read "
                     "relative to it; evaluate the initial policy (TRL: eval_on_start=True; another source: an "
                     "eval at update 0 in its file) or, for a TRL trainer_state.json, give its accuracy (gradprobe "
                     "probe --initial-accuracy X; Python: load_reference_curve(..., initial_accuracy=X))")
    m = heldout_measurement(batches)
    if m is not None:
        acc, se, n_groups = m
        r0 = float(curve.params["R0"])
        gap = r0 - acc
        bar = max(MIN_GAP_POINTS, GAP_SE * se) if se is not None else MIN_GAP_POINTS
        if abs(gap) > bar:
            meas = f"{acc:.1f} points" + (f" (se {se:.1f}, {n_groups} groups)" if se is not None else "")
            scale = [x for x in curve.notes if is_scale_note(x)]
            given = getattr(curve, "given_r0", None)  # a curve without the attribute: R0 rests on no given value
            causes = ("no eval at update 0 (R0 extrapolated), " if no_start else "") + (
                "another scale (" + "; ".join(scale) + "), " if scale else "another scale (fractions read as points), ")
            notes.insert(0, f"{CHECK_MARK}: the reference curve {curve.source or '(unnamed)'} starts at R0 = "
                         f"{r0:.1f} points, but this probe's held-out rollouts score {meas}: a gap of {gap:+.1f} "
                         f"points, beyond {bar:.0f} (on the shipped studies greedy R0 exceeds the probe's sampled "
                         f"accuracy by 2-23 points).{_given_suspect(given)} The curve may "
                         f"{'also ' if given else ''}have {causes}be of another task or model, or the batch "
                         "be broken; every accuracy and gain of this forecast is read off it")
    trunc = [b.get("batch", {}).get("truncation_rate") for b in batches]
    if any(is_json_number(t, finite=True) and t >= 1.0 for t in trunc):
        notes.append("every completion of a probe batch hit --max-new-tokens (truncation 100%): its rewards score "
                     "cut-off text, so its gradients say nothing about them; raise --max-new-tokens and probe again")
    return notes


def _given_suspect(g: dict | None) -> str:
    """The CHECK THE CURVE note's first suspect when R0 rests on the ``initial_accuracy`` given (``g``: the curve's
    ``given_r0``, from a TRL log read with ``gradprobe probe --initial-accuracy``): that value, in the user's scale
    and in points (empty when ``g`` is None)."""
    if g is None:
        return ""
    return (f" First suspect: R0 is your --initial-accuracy {g['value']:g} (initial_accuracy; {g['points']:.1f} "
            "points), not an eval of the curve's file: check it (the initial policy's accuracy on the curve's eval, "
            "in the curve's scale).")
